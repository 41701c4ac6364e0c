package cel

import "testing"

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
