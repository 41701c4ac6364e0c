package cel

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func printed(t *testing.T, e Expr) string {
	t.Helper()
	s, err := NewEnv(version.MajorMinor(1, 36)).Print(e)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// namespaceOf is the request's namespace read where it may be absent, as matches read it.
var namespaceOf = Cond(Call("has", Field(Ident("request"), "namespace")), Field(Ident("request"), "namespace"), Str(""))

func inNamespace(ns string) Expr { return Bin("==", namespaceOf, Str(ns)) }

var notSystem = Not(Or(inNamespace("kube-system"), inNamespace("kube-public"), inNamespace("gatekeeper-system")))

// expand is e with every reference to parts replaced by the part, recursively.
func expand(e Expr, parts []NamedExpr) Expr {
	for i := len(parts) - 1; i >= 0; i-- {
		e = inlineRef(e, parts[i])
	}
	return e
}

func checkShared(t *testing.T, es, got []Expr, parts []NamedExpr) {
	t.Helper()
	declared := map[string]bool{}
	for _, p := range parts {
		eachVarRef(p.Expr, func(name string) {
			if !declared[name] {
				t.Errorf("part %s refers to %s, not declared before it", p.Name, name)
			}
		})
		declared[p.Name] = true
	}
	for i := range es {
		if back := expand(got[i], parts); !reflect.DeepEqual(back, es[i]) {
			t.Errorf("expression %d: with its parts put back it is\n%s\nnot\n%s", i, String(back), String(es[i]))
		}
	}
}

func TestShareParts(t *testing.T) {
	var es []Expr
	for i := 0; i < 4; i++ {
		es = append(es, And(inNamespace(fmt.Sprintf("team-%d", i)), notSystem))
	}
	got, parts := ShareParts(es, "match_part", nil)
	checkShared(t, es, got, parts)
	var names []string
	for _, p := range parts {
		names = append(names, p.Name+": "+printed(t, p.Expr))
	}
	// The exclusion's ! is left in place: a reference to it would be as long.
	want := []string{
		`match_part_1: has(request.namespace) ? request.namespace : ""`,
		`match_part_2: variables.match_part_1 == "kube-system" || variables.match_part_1 == "kube-public" || variables.match_part_1 == "gatekeeper-system"`,
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("parts:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if s := printed(t, got[2]); s != `variables.match_part_1 == "team-2" && !variables.match_part_2` {
		t.Errorf("expression 2 is %s", s)
	}
	before, after := 0, 0
	for i := range es {
		before += Len(es[i])
		after += Len(got[i])
	}
	for _, p := range parts {
		after += Len(p.Expr) + len(p.Name)
	}
	if after >= before {
		t.Errorf("sharing made the text longer: %d characters, %d before", after, before)
	}
}

func TestSharePartsLeavesAlone(t *testing.T) {
	long := Bin("in", Field(Field(Ident("request"), "kind"), "group"), List(Str("apps"), Str("batch"), Str("networking.k8s.io"), Str("policy")))
	cases := []struct {
		name string
		es   []Expr
	}{{
		name: "a part in one expression only",
		es:   []Expr{And(long, Ident("x")), Bin("==", Field(Ident("request"), "operation"), Str("CREATE"))},
	}, {
		name: "a part too short to pay for its variable",
		es:   []Expr{And(Field(Ident("request"), "dryRun"), inNamespace("a")), And(Field(Ident("request"), "dryRun"), inNamespace("b"))},
	}, {
		name: "a part reading a comprehension's variable",
		es: []Expr{
			Method(Field(Ident("object"), "items"), "exists", Ident("x"), And(Bin("in", Str("aaaaaaaaaaaaaaaaaaaaaaaaaa"), Ident("x")), Bin("==", Index(Ident("x"), Str("aaaaaaaaaaaaaaaaaaaaaaaaaa")), Str("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")))),
			Method(Field(Ident("object"), "others"), "exists", Ident("x"), And(Bin("in", Str("aaaaaaaaaaaaaaaaaaaaaaaaaa"), Ident("x")), Bin("==", Index(Ident("x"), Str("aaaaaaaaaaaaaaaaaaaaaaaaaa")), Str("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")))),
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, parts := ShareParts(c.es, "p", nil)
			if len(parts) != 0 {
				t.Errorf("named %s", parts[0].Name+": "+String(parts[0].Expr))
			}
			if !reflect.DeepEqual(got, c.es) {
				t.Errorf("rewritten: %v", got)
			}
		})
	}
}

func TestSharePartsWholes(t *testing.T) {
	base := And(Bin("in", Field(Ident("request"), "operation"), List(Str("CREATE"), Str("UPDATE"))), notSystem)
	es := []Expr{And(base, inNamespace("team-a")), base, And(base, inNamespace("team-b"))}
	got, parts := ShareParts(es, "match_part", []string{"first", "second", "third"})
	checkShared(t, es, got, parts)
	if name, ok := AsVarRef(got[1]); !ok || name != "second" {
		t.Fatalf("the expression that is a shared part whole is %s, not a reference to its own name", String(got[1]))
	}
	for _, p := range parts {
		// Inside the part named after the whole, notSystem's references are not repeated.
		if p.Name == "match_part_1" || p.Name == "second" {
			continue
		}
		t.Errorf("unexpected part %s: %s", p.Name, String(p.Expr))
	}
}

func TestSharePartsInsideOneOther(t *testing.T) {
	// Each test occurs in every expression, but only inside the larger part they share: none
	// is a variable of its own.
	var tests []Expr
	for _, k := range []string{"alpha", "bravo", "charlie", "delta", "echo"} {
		tests = append(tests, Bin("in", Str(k+"-annotation-key"), Field(Field(Ident("object"), "metadata"), "annotations")))
	}
	big := And(tests...)
	es := []Expr{Or(big, inNamespace("a")), Or(big, inNamespace("b")), Or(big, inNamespace("c"))}
	got, parts := ShareParts(es, "p", nil)
	checkShared(t, es, got, parts)
	var names []string
	for _, p := range parts {
		names = append(names, p.Name+": "+printed(t, p.Expr))
	}
	if len(parts) != 2 || !reflect.DeepEqual(parts[1].Expr, big) {
		t.Fatalf("parts:\n%s", strings.Join(names, "\n"))
	}
}
