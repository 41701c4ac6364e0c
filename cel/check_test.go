package cel

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// TestWithVariablesRemembersBooleans: a boolean variable that reads no other one is compiled
// once per environment; compiled again (under another name, in another checker) it keeps its
// type, and expressions using it check as before. A variable that reads others, or is not a
// boolean, or does not compile, is not remembered.
func TestWithVariablesRemembersBooleans(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 36))
	guard := `object.metadata.name == "remembered-guard"`
	reads := `variables.a && object.metadata.name == "reads-another"`
	list := `[object.metadata.name + "-remembered"]`
	for round := 0; round < 2; round++ {
		c, err := env.WithVariables([]Variable{{Name: "a", Expression: guard}, {Name: "b", Expression: reads}, {Name: "c", Expression: list}})
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"a": "bool", "b": "bool", "c": "list(string)"} {
			if got := c.VariableType(name); got != want {
				t.Errorf("round %d: variable %s is %s, want %s", round, name, got, want)
			}
		}
		if err := c.CheckJSONPatch(`variables.a && variables.b ? [JSONPatch{op: "add", path: "/x", value: variables.c}] : []`); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
		if err := c.CheckJSONPatch(`variables.a + 1`); err == nil {
			t.Errorf("round %d: a boolean variable added to an integer compiled", round)
		}
	}
	if !env.bools.has(guard) || env.bools.has(reads) || env.bools.has(list) {
		t.Errorf("remembered: guard %v, one reading another %v, a list %v; want only the guard",
			env.bools.has(guard), env.bools.has(reads), env.bools.has(list))
	}
	bad := `object.metadata.name + 1 == "bad-guard"`
	for round := 0; round < 2; round++ {
		if _, err := env.WithVariables([]Variable{{Name: "a", Expression: bad}}); err == nil || !strings.Contains(err.Error(), "rejects") {
			t.Errorf("round %d: a variable that does not compile: %v", round, err)
		}
	}
}

func TestIdentifiers(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 36))
	got, err := env.Identifiers(`object.metadata.name == "x" && request.userInfo.groups.exists(g, g == "a") || authorizer.group("").resource("pods").check("get").allowed()`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"object", "request", "g", "authorizer"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := env.Identifiers(`object.(`); err == nil {
		t.Error("an expression that does not parse gave no error")
	}
}

// TestListPieces: sums and conditionals on a boolean are divided for checking, nothing else.
func TestListPieces(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 36))
	c, err := env.WithVariables([]Variable{{Name: "b", Expression: "true"}, {Name: "s", Expression: `"x"`}})
	if err != nil {
		t.Fatal(err)
	}
	a, z := List(Ident("a")), List(Ident("z"))
	b, s := VarRef("b"), VarRef("s")
	cases := []struct {
		in   Expr
		want []string
	}{
		{Bin("+", a, Bin("+", z, a)), []string{"[a]", "[z]", "[a]"}},
		{Cond(b, Bin("+", a, z), List()), []string{"[a]", "[z]", "[]"}},
		{Cond(Bin("||", Not(b), Bool(true)), a, z), []string{"[a]", "[z]"}},
		// Not boolean whatever the object: the condition is checked with its branches.
		{Cond(s, a, z), []string{String(Cond(s, a, z))}},
		{Cond(Bin("&&", b, s), a, z), []string{String(Cond(Bin("&&", b, s), a, z))}},
		{Cond(Field(Ident("object"), "f"), a, z), []string{String(Cond(Field(Ident("object"), "f"), a, z))}},
		{Bin("-", a, z), []string{String(Bin("-", a, z))}},
	}
	for _, tc := range cases {
		var got []string
		for _, p := range c.ListPieces(tc.in) {
			got = append(got, String(p))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ListPieces(%s) = %q, want %q", String(tc.in), got, tc.want)
		}
	}
}
