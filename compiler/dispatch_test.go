package compiler

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

// fakeRoute claims the documents of one kind, and gives a policy, a note and a status for each.
type fakeRoute struct {
	kind string
	got  *[]string // the documents it was given, as Kind/name
}

func (r fakeRoute) Input() string        { return r.kind + " policy" }
func (r fakeRoute) Kinds() []string      { return []string{r.kind} }
func (r fakeRoute) ShortestName() string { return strings.ToLower(r.kind) + "-x" }
func (r fakeRoute) Claims(d *source.Document) bool {
	return d.Object.GetKind() == r.kind
}

func (r fakeRoute) Related(d *source.Document) bool { return false }

func (r fakeRoute) Compile(docs []*source.Document, opts route.Options) *route.Output {
	out := &route.Output{Notes: []diag.Note{{Kind: diag.Installation, File: "install", Line: 1, Msg: r.kind + " installation"}}}
	for _, d := range docs {
		name := d.Object.GetKind() + "/" + d.Object.GetName()
		*r.got = append(*r.got, name)
		p, err := emit.NewPolicy(emit.Spec{Name: strings.ToLower(r.kind) + "-" + d.Object.GetName()}, emit.Options{NamePrefix: opts.NamePrefix})
		if err != nil {
			out.Problems = append(out.Problems, &diag.Problem{File: d.File, Line: d.Line, Object: name, Msg: err.Error()})
			continue
		}
		out.Policies = append(out.Policies, p)
		out.Notes = append(out.Notes, diag.Note{Kind: diag.Forwarded, File: d.File, Line: d.Line, Object: name, Msg: "planned"},
			diag.Note{Kind: diag.NeverApplies, File: d.File, Line: d.Line, Object: name, Msg: "never"})
		out.Mutators = append(out.Mutators, route.MutatorStatus{Mutator: name, File: d.File, Line: d.Line, Status: route.Compiled})
	}
	return out
}

func doc(line int, kind, name string) *source.Document {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind(kind)
	u.SetName(name)
	return &source.Document{File: "in.yaml", Line: line, Object: u}
}

// TestDispatch: each route gets the documents it claims (the first route that claims one), a
// document none claims is noted, and the routes' results are joined: policies by name, notes in
// phases, the report by position.
func TestDispatch(t *testing.T) {
	var gotA, gotB []string
	saved := routes
	defer func() { routes = saved }()
	routes = []route.Route{fakeRoute{"Alpha", &gotA}, fakeRoute{"Beta", &gotB}}

	docs := []*source.Document{doc(1, "Beta", "z"), doc(5, "Other", "o"), doc(9, "Alpha", "a"), doc(13, "Beta", "b")}
	out := Compile(docs, Options{})
	if strings.Join(gotA, ",") != "Alpha/a" || strings.Join(gotB, ",") != "Beta/z,Beta/b" {
		t.Errorf("routes got %v and %v", gotA, gotB)
	}
	var names []string
	for _, p := range out.Policies {
		names = append(names, p.Policy.Name)
	}
	if want := "alpha-a,beta-b,beta-z"; strings.Join(names, ",") != want {
		t.Errorf("policies %v, want %s", names, want)
	}
	var notes []string
	for _, n := range out.Notes {
		notes = append(notes, n.String())
	}
	want := []string{
		"install:1: Alpha installation",
		"install:1: Beta installation",
		"in.yaml:1: Beta/z: never",
		"in.yaml:5: example.com/v1 Other/o is not a Alpha policy or Beta policy; ignored",
		"in.yaml:9: Alpha/a: never",
		"in.yaml:13: Beta/b: never",
		"in.yaml:9: Alpha/a: planned",
		"in.yaml:1: Beta/z: planned",
		"in.yaml:13: Beta/b: planned",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
	var lines []int
	for _, m := range out.Mutators {
		lines = append(lines, m.Line)
	}
	if len(lines) != 3 || lines[0] != 1 || lines[1] != 9 || lines[2] != 13 {
		t.Errorf("report lines %v, want [1 9 13]", lines)
	}

	// A name prefix is checked against every route's names before anything is compiled.
	gotA, gotB = nil, nil
	out = Compile(docs, Options{NamePrefix: "Bad-"})
	if len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Error(), "--name-prefix") || len(gotA)+len(gotB) != 0 {
		t.Errorf("a bad prefix: problems %v, routes given %v %v", out.Problems, gotA, gotB)
	}
}
