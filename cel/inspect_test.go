package cel

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestAsVarRef: only variables.name reads as a variable reference.
func TestAsVarRef(t *testing.T) {
	for _, c := range []struct {
		e    Expr
		name string
		ok   bool
	}{
		{VarRef("match_a"), "match_a", true},
		{Field(Ident("object"), "spec"), "", false},
		{Ident("variables"), "", false},
		{True, "", false},
	} {
		name, ok := AsVarRef(c.e)
		if name != c.name || ok != c.ok {
			t.Errorf("AsVarRef(%s) = %q, %v; want %q, %v", String(c.e), name, ok, c.name, c.ok)
		}
	}
}

// TestOutcome: a test decided on a set of requests only when it holds on all or on none.
func TestOutcome(t *testing.T) {
	for _, c := range []struct {
		holds []bool
		want  Expr
	}{
		{[]bool{true, true}, True},
		{[]bool{false}, False},
		{[]bool{true, false}, nil},
		{nil, nil},
	} {
		if got := Outcome(c.holds); got != c.want {
			t.Errorf("Outcome(%v) = %v, want %v", c.holds, got, c.want)
		}
	}
}

// TestReads: the chains of constant names below an identifier, cut at other steps.
func TestReads(t *testing.T) {
	obj := Ident("object")
	spec := Index(obj, Str("spec"))
	for _, c := range []struct {
		e    Expr
		want [][]string
	}{
		{Field(Field(obj, "metadata"), "labels"), [][]string{{"metadata", "labels"}}},
		{Bin("==", Index(Index(spec, Str("containers")), Int(0)), OptIndex(spec, Str("x"))), [][]string{{"spec", "containers"}, {"spec", "x"}}},
		{Call("size", obj), [][]string{{}}},
		{Index(spec, Index(Ident("request"), Str("name"))), [][]string{{"spec"}}},
		{Index(Ident("request"), Str("name")), nil},
	} {
		if got := Reads(c.e, "object"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Reads(%s) = %q; want %q", String(c.e), got, c.want)
		}
	}
}

// TestReadsDeep: comprehensions read their places' items through their element variable, a
// binding reads its place, presence tests and sizes are shallow, a bare use reads all.
func TestReadsDeep(t *testing.T) {
	obj := Ident("object")
	containers := Index(Index(obj, Str("spec")), Str("containers"))
	x := Ident("x")
	e := Method(containers, "transformList", Ident("i"), x,
		Cond(Bin("!=", Method(OptIndex(x, Str("name")), "orValue", Null()), Null()),
			List(Index(Index(x, Str("resources")), Str("limits"))),
			List(Let("v", Index(obj, Str("metadata")), Index(Ident("v"), Str("labels"))))))
	e = Bin("+", e, List(Call("size", Index(Index(obj, Str("spec")), Str("volumes"))), Call("string", Ident("object")),
		Bin("==", Call("type", Index(obj, Str("status"))), Ident("list"))))
	var got []string
	for _, r := range ReadsDeep(e, "object") {
		s := strings.ReplaceAll(strings.Join(r.Chain, "."), AnyStep, "*")
		if r.Shallow {
			s += " (shallow)"
		}
		got = append(got, s)
	}
	want := []string{"spec.containers.* (shallow)", "spec.containers.*.name (shallow)", "spec.containers.*.resources.limits", "metadata.labels", "spec.volumes.* (shallow)", "", "status (shallow)"}
	if !slices.Equal(got, want) {
		t.Errorf("ReadsDeep = %q, want %q", got, want)
	}
}
