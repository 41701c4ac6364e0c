package cel

import (
	"testing"

	celgo "github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
)

// lookups builds the two lookups of the element with key == value in list, as walk does.
func lookups(list Expr, key, value string) (exists, first Expr) {
	x, i := Ident("e2"), Ident("i2")
	match := And(Bin("in", Str(key), x), Bin("==", Index(x, Str(key)), Str(value)))
	return Method(list, "exists", x, match), Index(Method(list, "transformList", i, x, match, i), Int(0))
}

func TestKeyListsHoist(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 33))
	containers := Index(Index(Ident("object"), Str("spec")), Str("containers"))
	hasFoo, fooAt := lookups(containers, "name", "foo")
	hasBar, _ := lookups(containers, "name", "bar")
	hasPort, _ := lookups(containers, "port", "80")
	inner, _ := lookups(Index(Ident("e1"), Str("env")), "name", "foo")
	cases := []struct {
		name string
		in   Expr
		want string
		vars []string
	}{
		{"two lookups of one list", Cond(hasFoo, List(fooAt), List(Bin("in", Str("x"), List()))),
			`("foo" in variables.keys_spec_containers_name) ? [variables.keys_spec_containers_name.indexOf("foo")] : ["x" in []]`,
			[]string{`keys_spec_containers_name = object["spec"]["containers"].map(e, ("name" in e) ? (e["name"]) : null)`}},
		{"one lookup stays", Cond(hasFoo, List(), List()), "", nil},
		{"lookups by another key are another list", Bin("&&", hasFoo, hasPort), "", nil},
		{"lookups of one list for different elements", Bin("||", hasFoo, hasBar),
			`"foo" in variables.keys_spec_containers_name || "bar" in variables.keys_spec_containers_name`,
			[]string{`keys_spec_containers_name = object["spec"]["containers"].map(e, ("name" in e) ? (e["name"]) : null)`}},
		{"a list inside an element stays", Bin("&&", inner, inner), "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := NewKeyLists(2, nil)
			got := k.Hoist(c.in)
			want := c.want
			if want == "" {
				want = mustPrint(t, env, c.in)
			}
			if s := mustPrint(t, env, got); s != want {
				t.Errorf("got  %s\nwant %s", s, want)
			}
			var vars []string
			for _, v := range k.Variables() {
				vars = append(vars, v.Name+" = "+mustPrint(t, env, v.Expr))
			}
			if len(vars) != len(c.vars) || len(vars) > 0 && vars[0] != c.vars[0] {
				t.Errorf("variables %q, want %q", vars, c.vars)
			}
		})
	}

	// The variable and the hoisted lookups type-check in every version that has
	// transformList (which the lookup of an element's index needs).
	for _, v := range []string{"1.33", "1.34", "1.37"} {
		env := NewEnv(version.MustParseGeneric(v))
		k := NewKeyLists(2, nil)
		e := k.Hoist(Cond(hasFoo, List(patchOp("remove", Pointer{[]Expr{strLit{"/spec/containers"}}}.Index(fooAt), nil)), List()))
		var vars []Variable
		for _, v := range k.Variables() {
			vars = append(vars, Variable{Name: v.Name, Expression: mustPrint(t, env, v.Expr)})
		}
		c, err := env.WithVariables(vars)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckJSONPatch(mustPrint(t, env, e)); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}

	// Names: the path's keys as identifier characters; one taken gets a number.
	k := NewKeyLists(2, []string{"keys_spec_containers_name"})
	odd := Index(Index(Ident("object"), Str("spec")), Str("init-containers.v1"))
	a, b := lookups(odd, "name", "x")
	k.Hoist(Bin("&&", a, b))
	a, b = lookups(containers, "name", "x")
	k.Hoist(Bin("&&", a, b))
	var names []string
	for _, v := range k.Variables() {
		names = append(names, v.Name)
	}
	if len(names) != 2 || names[0] != "keys_spec_init_containers_v1_name" || names[1] != "keys_spec_containers_name_2" {
		t.Errorf("names %q", names)
	}
}

func mustPrint(t *testing.T, env *Env, e Expr) string {
	t.Helper()
	s, err := env.Print(e)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKeyListsAgree: a hoisted lookup gives what the lookup gave, on lists with elements
// without the key, with a key of another type, with the key twice, and with nothing.
func TestKeyListsAgree(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 33))
	base, err := env.celEnv()
	if err != nil {
		t.Fatal(err)
	}
	ce, err := base.Extend(celgo.Variable("object", celgo.DynType))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(e Expr, obj any) any {
		t.Helper()
		s := mustPrint(t, env, e)
		ast, iss := ce.Compile(s)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", s, iss.Err())
		}
		prg, err := ce.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{"object": obj})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return out.Value()
	}
	list := Index(Ident("object"), Str("items"))
	lists := [][]any{
		{},
		{map[string]any{"name": "a"}},
		{map[string]any{"other": "foo"}, map[string]any{"name": int64(1)}, map[string]any{"name": "foo", "n": int64(1)}},
		{map[string]any{"name": "b"}, map[string]any{"name": "foo", "n": int64(1)}, map[string]any{"name": "foo", "n": int64(2)}},
		{map[string]any{"name": nil}, map[string]any{"name": map[string]any{"foo": "foo"}}},
	}
	for _, items := range lists {
		obj := map[string]any{"items": items}
		has, at := lookups(list, "name", "foo")
		whole := Cond(has, at, Int(-1))
		k := NewKeyLists(2, nil)
		hoisted := k.Hoist(whole)
		v := k.Variables()[0]
		inlined := transform(hoisted, func(x Expr) Expr {
			if f, ok := x.(field); ok && f.name == v.Name {
				return v.Expr
			}
			return x
		})
		if got, want := eval(inlined, obj), eval(whole, obj); got != want {
			t.Errorf("items %v: hoisted %v, lookup %v", items, got, want)
		}
	}
}
