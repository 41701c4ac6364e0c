package cel

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// TestPrintMatchesParser: Print builds cel-go's tree directly; it must print exactly what
// parsing the expression's text and unparsing gives (precedence, macros, literals, wrapping).
// The compiler's and verify's tests check the same for everything they compile.
func TestPrintMatchesParser(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 37))
	obj := Ident("object")
	c := Index(Index(obj, Str("spec")), Str("containers"))
	e := Ident("e")
	long := And(Bin("in", Str("spec"), obj), Bin("!=", Index(obj, Str("spec")), Null()), Bin("==", Field(Ident("request"), "operation"), Str("CREATE")),
		Bin(">=", Method(c, "size"), Int(3)))
	cases := []Expr{
		Cond(Method(c, "exists", e, Bin("==", Index(e, Str("name")), Str("a"))), List(Int(1)), List()),
		Cond(Call("has", Field(obj, "spec")), Str("x\n\"y\""), Str("")),
		Bin("-", Bin("-", Int(1), Int(2)), Bin("-", Int(3), Int(math.MinInt64))),
		Bin("*", Bin("+", Int(1), Int(2)), Double(0.5)),
		Not(Bin("||", Bool(true), And(Bool(false), Method(c, "all", e, Call("has", Field(e, "image")))))),
		Method(Ident("cel"), "bind", Ident("v"), Method(c, "filter", e, True), Method(Ident("v"), "map", e, Index(e, Str("name")))),
		Method(c, "transformList", Ident("i"), e, True, List(Object("JSONPatch", []string{"op", "path", "value"},
			[]Expr{Str("add"), Bin("+", Str("/spec/containers/"), Call("string", Ident("i"))), Map([]Expr{Str("k")}, []Expr{Double(1e21)})}))),
		Cond(long, Cond(long, Int(1), Int(2)), Cond(Bool(true), Int(3), Int(4))),
		Index(Method(c, "map", e, Index(e, Str("name"))), Int(0)),
		Object("Object", []string{"metadata"}, []Expr{Object("Object.metadata", []string{"labels"}, []Expr{
			OptMap([]Expr{Str("a"), Str("b")}, []Expr{Cond(long, Method(Ident("optional"), "of", Str("x")), Method(Ident("optional"), "none")), Str("y")}, []bool{true, false})})}),
	}
	for _, x := range cases {
		got, err := env.Print(x)
		if err != nil {
			t.Fatal(err)
		}
		want, err := env.printParsed(x)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("Print:\n%s\nparsed and printed:\n%s", got, want)
		}
	}
}
