package cel

import (
	"reflect"
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
