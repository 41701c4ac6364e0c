package diag

import (
	"errors"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/source"
)

func TestNoteString(t *testing.T) {
	for _, c := range []struct {
		n    Note
		want string
	}{
		{Note{Kind: Ignored, File: "a.yaml", Line: 3, Msg: "v1 ConfigMap/x is not a mutator; ignored"}, "a.yaml:3: v1 ConfigMap/x is not a mutator; ignored"},
		{Note{Kind: Redundant, File: "a.yaml", Line: 9, Object: "Assign/x", Msg: "no mutation emitted: why"}, "a.yaml:9: Assign/x: no mutation emitted: why"},
	} {
		if got := c.n.String(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

// TestNoteKinds: exactly the kinds that leave an input policy without a mutation are LeftOut,
// and of those, the ones without a policy NoPolicy.
func TestNoteKinds(t *testing.T) {
	for k, want := range map[NoteKind][2]bool{
		Ignored: {false, false}, Installation: {false, false}, NeverApplies: {true, true},
		OutsideSchema: {true, true}, NotAppliedTo: {false, false}, NeverWrites: {true, true},
		Redundant: {true, false}, Forwarded: {false, false}, CreateOnly: {false, false},
	} {
		if got := [2]bool{k.LeftOut(), k.NoPolicy()}; got != want {
			t.Errorf("kind %d: LeftOut, NoPolicy = %v, want %v", k, got, want)
		}
	}
}

func TestNoteAbout(t *testing.T) {
	n := Note{Kind: NeverApplies, File: "a.yaml", Line: 2, Object: "Assign/x", Msg: "m"}
	if !n.About("a.yaml", 2, "Assign/x") || n.About("a.yaml", 3, "Assign/x") || n.About("b.yaml", 2, "Assign/x") || n.About("a.yaml", 2, "Assign/y") {
		t.Error("About matches the wrong documents")
	}
	if (Note{Kind: Ignored, File: "a.yaml", Line: 2}).About("a.yaml", 2, "") {
		t.Error("a note about no object is about an object")
	}
}

// TestSort: problems by file and line, then text; other errors by text.
func TestSort(t *testing.T) {
	errs := []error{
		&Problem{File: "b.yaml", Line: 1, Object: "Assign/a", Msg: "x"},
		errors.New("namespace \"X\": bad"),
		&Problem{File: "a.yaml", Line: 10, Object: "Assign/b", Msg: "x"},
		&Problem{File: "a.yaml", Line: 2, Object: "Assign/c", Field: "spec", Msg: "y"},
	}
	Sort(errs)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{"a.yaml:2: Assign/c: spec: y", "a.yaml:10: Assign/b: x", "b.yaml:1: Assign/a: x", `namespace "X": bad`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestProblems(t *testing.T) {
	got := Problems([]error{
		&Problem{File: "a.yaml", Line: 2, Object: "Assign/c", Field: "spec", Msg: "y", Severity: Warning},
		&source.Error{File: "b.yaml", Line: 4, Msg: "bad YAML"},
		errors.New("plain"),
	})
	want := []Problem{
		{File: "a.yaml", Line: 2, Object: "Assign/c", Field: "spec", Msg: "y", Severity: Warning},
		{File: "b.yaml", Line: 4, Msg: "bad YAML"},
		{Msg: "plain"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if r := got[0].Reason(); r != "spec: y" {
		t.Errorf("reason %q", r)
	}
}
