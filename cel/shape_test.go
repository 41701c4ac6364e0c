package cel

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// TestShape: expressions that differ only in strings share a shape, except strings passed to a
// function (validated by the API server's environment), and equal strings stay equal.
func TestShape(t *testing.T) {
	name := func(s string) Expr {
		return Method(Index(Ident("object"), Str("spec")), "exists", Ident("e"), Bin("==", Index(Ident("e"), Str("name")), Str(s)))
	}
	if Shape(name("a")) != Shape(name("b")) {
		t.Errorf("names a and b: shapes differ:\n%s\n%s", Shape(name("a")), Shape(name("b")))
	}
	if Shape(name("a")) == Shape(name("spec")) {
		t.Errorf("a literal equal to another must not share a shape with one that differs: %s", Shape(name("spec")))
	}
	re := func(s string) Expr { return Method(Str("x"), "matches", Str(s)) }
	if Shape(re("^a")) == Shape(re("^b")) {
		t.Errorf("regular expressions must stay in the shape: %s", Shape(re("^a")))
	}
	env := NewEnv(version.MajorMinor(1, 37))
	if err := env.CheckConditionExpr(re("^a")); err != nil {
		t.Fatal(err)
	}
	if err := env.CheckConditionExpr(re("[")); err == nil || !strings.Contains(err.Error(), "rejects") {
		t.Errorf("an invalid regular expression was accepted: %v", err)
	}
	if err := env.CheckConditionExpr(Bin("==", Str("a"), Str("b"))); err != nil {
		t.Fatal(err)
	}
	// Same shape as the accepted one above but not a bool: still rejected (type, not value).
	if err := env.CheckConditionExpr(Bin("+", Str("a"), Str("b"))); err == nil {
		t.Error("a string condition was accepted")
	}
}

// TestLen: Len counts exactly what String prints, shapes aside.
func TestLen(t *testing.T) {
	for _, e := range []Expr{
		Bin("+", Str("a\"b"), Str("ü")),
		Cond(Not(Bin("==", Field(Ident("object"), "x"), Int(-3))), List(Map([]Expr{Str("k")}, []Expr{Double(1.5)})), Method(Str("s"), "size")),
	} {
		if got, want := Len(e), len(String(e)); got != want {
			t.Errorf("Len(%s) = %d, want %d", String(e), got, want)
		}
	}
}

// TestShapeFreeArguments: literals passed to functions that no validator reads (dyn,
// startsWith, ...) are abstracted, so that expressions differing only there share a shape;
// those passed to others stay verbatim, as a target or as an argument.
func TestShapeFreeArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		of   func(s string) Expr
		same bool
	}{
		{"dyn", func(s string) Expr { return Call("dyn", Str(s)) }, true},
		{"startsWith", func(s string) Expr { return Method(Ident("x"), "startsWith", Str(s)) }, true},
		{"endsWith", func(s string) Expr { return Method(Ident("x"), "endsWith", Str(s)) }, true},
		{"matches argument", func(s string) Expr { return Method(Ident("x"), "matches", Str(s)) }, false},
		{"find argument", func(s string) Expr { return Method(Ident("x"), "find", Str(s)) }, false},
		{"format target", func(s string) Expr { return Method(Str(s), "format", List(Ident("x"))) }, false},
		{"duration", func(s string) Expr { return Call("duration", Str(s)) }, false},
	} {
		a, b := Shape(tc.of("1s")), Shape(tc.of("2s"))
		if (a == b) != tc.same {
			t.Errorf("%s: shapes %s and %s: same = %v, want %v", tc.name, a, b, a == b, tc.same)
		}
	}
}
