package cel

import (
	"strings"
	"testing"
)

func TestMergeLoops(t *testing.T) {
	list := Index(Index(Ident("object"), Str("spec")), Str("containers"))
	has := Bin("in", Str("containers"), Index(Ident("object"), Str("spec")))
	loop := func(guard Expr, body Expr) Expr {
		return Cond(guard, Cond(has, Method(Method(list, "transformList", Ident("i2"), Ident("e2"), body), "flatten"), emptyList), emptyList)
	}
	a := loop(VarRef("a"), List(Str("A")))
	b := loop(VarRef("b"), List(Str("B")))
	other := Cond(VarRef("c"), List(Str("C")), emptyList)
	f := Features{Flatten: true, TwoVar: true}

	got := MergeLoops([]Expr{Bin("+", a, other), b}, f)
	if len(got) != 2 {
		t.Fatalf("want the loop and the other part, got %d parts: %v", len(got), got)
	}
	s := String(got[0])
	if strings.Count(s, "transformList") != 1 || !strings.Contains(s, `((variables.a) ? (["A"]) : ([]))`) || !strings.Contains(s, `((variables.b) ? (["B"]) : ([]))`) ||
		strings.Index(s, `"A"`) > strings.Index(s, `"B"`) {
		t.Errorf("merged loop: %s", s)
	}
	if !strings.HasPrefix(s, `(("containers") in (object["spec"])) ? (object["spec"]["containers"].transformList(`) {
		t.Errorf("the shared condition should stay outside the loop: %s", s)
	}
	if String(got[1]) != String(other) {
		t.Errorf("the other part changed: %s", String(got[1]))
	}

	// Without lists.flatten nothing is merged.
	if got := MergeLoops([]Expr{a, b}, Features{TwoVar: true}); len(got) != 2 || String(got[0]) != String(a) {
		t.Errorf("merged without flatten: %v", got)
	}
	// Different lists stay apart.
	initList := Index(Index(Ident("object"), Str("spec")), Str("initContainers"))
	c := Cond(VarRef("c"), Method(Method(initList, "transformList", Ident("i2"), Ident("e2"), List(Str("C"))), "flatten"), emptyList)
	if got := MergeLoops([]Expr{a, c}, f); len(got) != 2 {
		t.Errorf("loops over different lists merged: %v", got)
	}
}
