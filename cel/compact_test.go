package cel

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func addOp(path string, v Expr) Expr { return patchOp("add", Pointer{[]Expr{strLit{path}}}, v) }

// addOp2 is an "add" at list + string(i) + rest: an operation in the element i of a list.
func addOp2(list, rest string, v Expr) Expr {
	return patchOp("add", Pointer{[]Expr{strLit{list}}}.Index(Ident("i")).appendStatic(rest), v)
}

func opOf(op, path string) Expr { return patchOp(op, Pointer{[]Expr{strLit{path}}}, Str("x")) }

// TestCompact: the rewrites of Compact, each on the smallest expression that shows it, and the
// orders it must keep.
func TestCompact(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 37))
	x, y, c, d, e := Ident("x"), Ident("y"), Ident("c"), Ident("d"), Ident("e")
	pre := func(path string) Expr { return List(preOp(Pointer{[]Expr{strLit{path}}})) }
	cases := []struct {
		name string
		in   []Expr
		want string
	}{
		{"one test for parts under one condition",
			[]Expr{Cond(x, List(addOp("/a", Str("1"))), emptyList), Cond(x, emptyList, List(addOp("/b", Str("2"))))},
			`x ? [JSONPatch{op: "add", path: "/a", value: "1"}] : [JSONPatch{op: "add", path: "/b", value: "2"}]`},
		{"runs of at most one operation in one list literal",
			[]Expr{Cond(x, List(addOp("/a", Str("1"))), emptyList), List(addOp("/b", Str("2"))), Cond(y, emptyList, List(addOp("/c", Str("3"))))},
			`[?x ? optional.of(JSONPatch{op: "add", path: "/a", value: "1"}) : optional.none(), JSONPatch{op: "add", path: "/b", value: "2"}, ?y ? optional.none() : optional.of(JSONPatch{op: "add", path: "/c", value: "3"})]`},
		{"adds below an added object folded into it",
			[]Expr{List(addOp("/r", Map(nil, nil)), addOp("/r/a", Map(nil, nil)), addOp("/r/a/b~1c", Str("v")), addOp("/s", Str("w")))},
			`[JSONPatch{op: "add", path: "/r", value: {"a": dyn({"b/c": dyn("v")})}}, JSONPatch{op: "add", path: "/s", value: "w"}]`},
		{"no fold across an operation on the same node",
			[]Expr{List(addOp("/r", Map(nil, nil)), opOf("remove", "/r/a"), addOp("/r/a", Str("v")))},
			`[JSONPatch{op: "add", path: "/r", value: {}}, JSONPatch{op: "remove", path: "/r/a", value: "x"}, JSONPatch{op: "add", path: "/r/a", value: "v"}]`},
		{"a part stays after the shared creation it relies on",
			[]Expr{Cond(x, emptyList, pre("/r")), Cond(y, emptyList, pre("/s")), Cond(x, List(addOp("/s/k", Str("1"))), emptyList)},
			`[?x ? optional.none() : optional.of(JSONPatch{op: "add", path: "/r", value: {}}), ?y ? optional.none() : optional.of(JSONPatch{op: "add", path: "/s", value: {}}), ?x ? optional.of(JSONPatch{op: "add", path: "/s/k", value: "1"}) : optional.none()]`},
		{"a part moves before a shared creation it does not rely on",
			[]Expr{Cond(x, emptyList, pre("/r")), Cond(y, emptyList, pre("/s")), Cond(x, List(addOp("/t/k", Str("1"))), emptyList)},
			`[?x ? optional.of(JSONPatch{op: "add", path: "/t/k", value: "1"}) : optional.of(JSONPatch{op: "add", path: "/r", value: {}}), ?y ? optional.none() : optional.of(JSONPatch{op: "add", path: "/s", value: {}})]`},
		{"an unconditional write joins the branch that creates its node",
			[]Expr{Cond(x, List(addOp("/r/a", Str("1"))), List(addOp("/r", Map([]Expr{Str("a")}, []Expr{Str("1")})))), List(addOp("/r/b", Str("2")))},
			`x ? [JSONPatch{op: "add", path: "/r/a", value: "1"}, JSONPatch{op: "add", path: "/r/b", value: "2"}] : [JSONPatch{op: "add", path: "/r", value: {"a": dyn("1"), "b": dyn("2")}}]`},
		{"an append stays after an append to the same list",
			[]Expr{Cond(x, List(addOp("/l/-", Str("a"))), emptyList), Cond(y, List(addOp("/l/-", Str("b"))), emptyList), Cond(x, List(addOp("/l/-", Str("c"))), emptyList)},
			`[?x ? optional.of(JSONPatch{op: "add", path: "/l/-", value: "a"}) : optional.none(), ?y ? optional.of(JSONPatch{op: "add", path: "/l/-", value: "b"}) : optional.none(), ?x ? optional.of(JSONPatch{op: "add", path: "/l/-", value: "c"}) : optional.none()]`},
		{"an append in a list element stays after an append to that list in any element",
			[]Expr{Cond(x, List(addOp2("/l", "/m/-", Str("a"))), emptyList), Cond(y, List(addOp2("/l", "/m/-", Str("b"))), emptyList), Cond(x, List(addOp2("/l", "/m/-", Str("c"))), emptyList)},
			`[?x ? optional.of(JSONPatch{op: "add", path: "/l/" + string(i) + "/m/-", value: "a"}) : optional.none(), ?y ? optional.of(JSONPatch{op: "add", path: "/l/" + string(i) + "/m/-", value: "b"}) : optional.none(), ?x ? optional.of(JSONPatch{op: "add", path: "/l/" + string(i) + "/m/-", value: "c"}) : optional.none()]`},
		{"and moves past an append to another list in the element",
			[]Expr{Cond(x, List(addOp2("/l", "/m/-", Str("a"))), emptyList), Cond(y, List(addOp2("/l", "/n/-", Str("b"))), emptyList), Cond(x, List(addOp2("/l", "/m/-", Str("c"))), emptyList)},
			`(x ? [JSONPatch{op: "add", path: "/l/" + string(i) + "/m/-", value: "a"}, JSONPatch{op: "add", path: "/l/" + string(i) + "/m/-", value: "c"}] : []) + (y ? [JSONPatch{op: "add", path: "/l/" + string(i) + "/n/-", value: "b"}] : [])`},
		{"and moves past an append to another list",
			[]Expr{Cond(x, List(addOp("/l/-", Str("a"))), emptyList), Cond(y, List(addOp("/m/-", Str("b"))), emptyList), Cond(x, List(addOp("/l/-", Str("c"))), emptyList)},
			`(x ? [JSONPatch{op: "add", path: "/l/-", value: "a"}, JSONPatch{op: "add", path: "/l/-", value: "c"}] : []) + (y ? [JSONPatch{op: "add", path: "/m/-", value: "b"}] : [])`},
		{"a loop with at most one operation per element keeps and maps instead of flattening",
			[]Expr{Method(Method(Ident("l"), "transformList", Ident("i"), Ident("e"), Cond(x, Cond(y, List(addOp("/a", Str("1"))), emptyList), emptyList)), "flatten")},
			`l.transformList(i, e, x && y, JSONPatch{op: "add", path: "/a", value: "1"})`},
		{"one operation for every element",
			[]Expr{Method(Method(Ident("l"), "transformList", Ident("i"), Ident("e"), Cond(x, emptyList, List(addOp("/a", Str("1"))))), "flatten")},
			`l.transformList(i, e, !x, JSONPatch{op: "add", path: "/a", value: "1"})`},
		{"two operations for an element stay flattened",
			[]Expr{Method(Method(Ident("l"), "transformList", Ident("i"), Ident("e"), Cond(x, List(addOp("/a", Str("1"))), List(addOp("/b", Str("2"))))), "flatten")},
			`l.transformList(i, e, x ? [JSONPatch{op: "add", path: "/a", value: "1"}] : [JSONPatch{op: "add", path: "/b", value: "2"}]).flatten()`},
		{"not past an operation it does not commute with",
			[]Expr{Cond(x, emptyList, List(addOp("/r", Map(nil, nil)))), Cond(y, List(opOf("remove", "/r/b")), emptyList), List(addOp("/r/b", Str("2")))},
			`[?x ? optional.none() : optional.of(JSONPatch{op: "add", path: "/r", value: {}}), ?y ? optional.of(JSONPatch{op: "remove", path: "/r/b", value: "x"}) : optional.none(), JSONPatch{op: "add", path: "/r/b", value: "2"}]`},
		{"a creation moves past what it does not touch to the first write below its node, under the same condition, and the write joins it",
			[]Expr{Cond(x, Cond(c, emptyList, pre("/r")), emptyList), Cond(y, List(addOp("/s", Str("1"))), emptyList), Cond(x, Cond(c, List(addOp("/r/a", Str("2"))), List(addOp("/r/a", Str("2")))), emptyList)},
			`[?y ? optional.of(JSONPatch{op: "add", path: "/s", value: "1"}) : optional.none(), ?x ? (c ? optional.of(JSONPatch{op: "add", path: "/r/a", value: "2"}) : optional.of(JSONPatch{op: "add", path: "/r", value: {"a": dyn("2")}})) : optional.none()]`},
		{"a creation whose first write below it is under another condition stays",
			[]Expr{Cond(x, Cond(c, emptyList, pre("/r")), emptyList), Cond(y, List(addOp("/s", Str("1"))), emptyList), Cond(y, Cond(c, List(addOp("/r/a", Str("2"))), List(addOp("/r/a", Str("2")))), emptyList)},
			`(x ? (c ? [] : [JSONPatch{op: "add", path: "/r", value: {}}]) : []) + (y ? [JSONPatch{op: "add", path: "/s", value: "1"}, JSONPatch{op: "add", path: "/r/a", value: "2"}] : [])`},
		{"creations one below the other each go to their first write, the upper one following the lower",
			[]Expr{Cond(x, Cond(c, emptyList, pre("/r")), emptyList), Cond(x, Cond(c, Cond(d, emptyList, pre("/r/m")), pre("/r/m")), emptyList), Cond(y, List(addOp("/s", Str("1"))), emptyList), Cond(x, Cond(c, Cond(d, Cond(e, emptyList, List(addOp("/r/m/a", Str("2")))), List(addOp("/r/m/a", Str("2")))), List(addOp("/r/m/a", Str("2")))), emptyList)},
			`[?y ? optional.of(JSONPatch{op: "add", path: "/s", value: "1"}) : optional.none(), ?x ? (c ? (d ? (e ? optional.none() : optional.of(JSONPatch{op: "add", path: "/r/m/a", value: "2"})) : optional.of(JSONPatch{op: "add", path: "/r/m", value: {"a": dyn("2")}})) : optional.of(JSONPatch{op: "add", path: "/r", value: {"m": dyn({"a": dyn("2")})}})) : optional.none()]`},
	}
	for _, c := range cases {
		got, err := env.Print(join(CompactTerms(c.in)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got = strings.Join(strings.Fields(got), " "); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestSinkCreations: a creation moves only past terms that do not touch its node, and only into
// a term under the same first condition.
func TestSinkCreations(t *testing.T) {
	x, y, c := Ident("x"), Ident("y"), Ident("c")
	creation := Cond(x, Cond(c, emptyList, List(preOp(Pointer{[]Expr{strLit{"/r"}}}))), emptyList)
	write := Cond(x, Cond(c, List(addOp("/r/a", Str("2"))), emptyList), emptyList)
	cases := []struct {
		name string
		in   []Expr
		want []string // the terms' first operation paths, in order
	}{
		{"past an unrelated term into the write", []Expr{creation, Cond(y, List(addOp("/s", Str("1"))), emptyList), write}, []string{"/s", "/r"}},
		{"not past an operation below its node", []Expr{creation, Cond(y, List(addOp("/r/b", Str("1"))), emptyList), write}, []string{"/r", "/r/b", "/r/a"}},
		{"not past an append to a list below its node", []Expr{creation, Cond(y, List(addOp("/r/l/-", Str("1"))), emptyList), write}, []string{"/r", "/r/l/-", "/r/a"}},
		{"not into a write under another condition", []Expr{creation, Cond(y, List(addOp("/s", Str("1"))), emptyList), Cond(y, List(addOp("/r/a", Str("2"))), emptyList)}, []string{"/r", "/s", "/r/a"}},
	}
	for _, tc := range cases {
		var got []string
		for _, term := range sinkCreations(tc.in) {
			ps, _ := opPaths(term, nil)
			got = append(got, ps[0].rel)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: terms %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDisjoint: operations commute when their paths are in different subtrees, also when a
// path holds a run-time index (decided by the static beginnings) or ends in one.
func TestDisjoint(t *testing.T) {
	i := Ident("i2")
	elem := Pointer{[]Expr{strLit{"/spec/containers"}}}.Index(i)
	first := Pointer{[]Expr{strLit{"/spec/containers"}}}.Index(Method(Ident("keys"), "indexOf", Str("x")))
	cases := []struct {
		name string
		a, b Expr
		want bool
	}{
		{"static, apart", addOp("/metadata/labels/a", Str("1")), addOp("/spec/x", Str("2")), true},
		{"static, one above the other", addOp("/metadata", Map(nil, nil)), addOp("/metadata/labels", Map(nil, nil)), false},
		{"an element's field and another subtree", List(patchOp("add", elem.Child("image"), Str("x"))), addOp("/metadata", Map(nil, nil)), true},
		{"an element found at run time and another subtree", List(patchOp("replace", first, Map(nil, nil))), addOp("/metadata/labels", Map(nil, nil)), true},
		{"an element and its list", List(patchOp("replace", first, Map(nil, nil))), addOp("/spec/containers", List()), false},
		{"an element and a sibling field of the list", List(patchOp("replace", first, Map(nil, nil))), addOp("/spec/containersX", List()), true},
		{"two fields of one element", List(patchOp("add", elem.Child("image"), Str("x"))), List(patchOp("add", elem.Child("args"), List())), true},
		{"an element found at run time and a field of an element", List(patchOp("replace", first, Map(nil, nil))), List(patchOp("add", elem.Child("image"), Str("x"))), false},
		{"fields of an element and of an element of its list", List(patchOp("add", elem.Child("resources"), Map(nil, nil))), List(patchOp("add", elem.Child("env").Index(Ident("i4")).Child("value"), Str("x"))), true},
		{"a field of an element and an element of that field's list", List(patchOp("add", elem.Child("env"), List())), List(patchOp("add", elem.Child("env").Index(Ident("i4")).Child("value"), Str("x"))), false},
		{"an element found at run time and a static index", List(patchOp("add", elem.Child("a"), Str("x"))), addOp("/spec/containers/0/b", Str("y")), false},
		{"an append and a field of an element of the list", List(patchOp("add", elem.Child("a"), Str("x"))), addOp("/spec/containers/-", Map(nil, nil)), false},
	}
	for _, c := range cases {
		if got := disjoint(c.a, c.b); got != c.want {
			t.Errorf("%s: disjoint = %v, want %v", c.name, got, c.want)
		}
		if got := disjoint(c.b, c.a); got != c.want {
			t.Errorf("%s (swapped): disjoint = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFoldAppends: the appends to a list where it is missing go into the list a creation adds
// there, under their own conditions and in order; not an append under a condition the
// creation's does not cover, one past a term that touches the list, one under another test, nor
// one to another list.
func TestFoldAppends(t *testing.T) {
	g1, g2, g3, y := VarRef("g1"), VarRef("g2"), VarRef("g3"), Ident("y")
	env := Pointer{[]Expr{strLit{"/spec/containers"}}}.Index(Ident("i")).appendStatic("/env")
	present := Bin("!=", OptIndex(Ident("e"), Str("env")), Null())
	creation := Cond(Or(g1, g2), Cond(present, emptyList, List(preOpOf(env, true))), emptyList)
	appendOf := func(g Expr, list Pointer, name string) Expr {
		a := List(patchOp("add", list.appendStatic("/-"), Map([]Expr{Str("name")}, []Expr{Str(name)})))
		return Cond(g, Cond(present, List(patchOp("add", list.appendStatic("/0/value"), Str("v"))), a), emptyList)
	}
	other := Pointer{[]Expr{strLit{"/spec/containers"}}}.Index(Ident("i")).appendStatic("/args")
	cases := []struct {
		name string
		in   []Expr
		want []string // the terms, printed
	}{
		{"two appends, in order, past an unrelated term", []Expr{creation, appendOf(g2, env, "A"), Cond(y, List(addOp("/metadata/x", Str("1"))), emptyList), appendOf(g1, env, "B")}, []string{
			`((variables.g1) || (variables.g2)) ? (((e[?"env"]) != (null)) ? ([]) : ([JSONPatch{op: "add", path: (("/spec/containers/") + (string(i))) + ("/env"), value: [?(variables.g2) ? (optional.of(dyn({"name": "A"}))) : (optional.none()), ?(variables.g1) ? (optional.of(dyn({"name": "B"}))) : (optional.none())]}])) : ([])`,
			`(variables.g2) ? (((e[?"env"]) != (null)) ? ([JSONPatch{op: "add", path: (("/spec/containers/") + (string(i))) + ("/env/0/value"), value: "v"}]) : ([])) : ([])`,
			`(y) ? ([JSONPatch{op: "add", path: "/metadata/x", value: "1"}]) : ([])`,
			`(variables.g1) ? (((e[?"env"]) != (null)) ? ([JSONPatch{op: "add", path: (("/spec/containers/") + (string(i))) + ("/env/0/value"), value: "v"}]) : ([])) : ([])`,
		}},
		{"not under a condition the creation does not cover", []Expr{creation, appendOf(g3, env, "A")}, nil},
		{"not past a term that touches the list", []Expr{creation, Cond(y, List(patchOp("add", env.appendStatic("/-"), Str("x"))), emptyList), appendOf(g1, env, "A")}, nil},
		{"not under another test", []Expr{creation, Cond(g1, Cond(y, emptyList, List(patchOp("add", env.appendStatic("/-"), Str("x")))), emptyList)}, nil},
		{"not to another list", []Expr{creation, appendOf(g1, other, "A")}, nil},
	}
	for _, tc := range cases {
		got := foldAppends(tc.in)
		want := tc.want
		if want == nil { // unchanged
			for _, x := range tc.in {
				want = append(want, String(x))
			}
		}
		var printed []string
		for _, x := range got {
			printed = append(printed, String(x))
		}
		if strings.Join(printed, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, strings.Join(printed, "\n     "), strings.Join(want, "\n     "))
		}
	}
}

func TestPointerKey(t *testing.T) {
	p := Pointer{}.Child("metadata").Child("a/b").Key(Ident("k"))
	got := String(PatchOp("add", p, Str("v")))
	want := `JSONPatch{op: "add", path: ("/metadata/a~1b/") + (jsonpatch.escapeKey(k)), value: "v"}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A run-time key is not a list index: the path is not read as tokens.
	if pathTokens(p.Expr()) != nil {
		t.Errorf("pathTokens(%s) is not nil", String(p.Expr()))
	}
}
