package cel

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func selector(t *testing.T, labels map[string]string) Expr {
	t.Helper()
	e, err := LabelsMatch(&metav1.LabelSelector{MatchLabels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNamed(t *testing.T) {
	tier := selector(t, map[string]string{"tier": "t1"})
	both := selector(t, map[string]string{"tier": "t1", "app": "web"})
	n := NewNamed([]string{"labels_1"})
	name := func(base string, e Expr) string {
		t.Helper()
		got, err := n.Add(base, e)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := name("labels_1", tier); got != "labels_1_2" {
		t.Errorf("a taken name: got %q, want labels_1_2", got)
	}
	if got := name("other", tier); got != "labels_1_2" {
		t.Errorf("an expression named again: got %q, want its first name", got)
	}
	if got := name("labels_2", both); got != "labels_2" {
		t.Errorf("got %q, want labels_2", got)
	}
	if got := name("lit", True); got != "" || n.Len() != 2 {
		t.Errorf("a literal is not named: got %q, %d named", got, n.Len())
	}
	loop := Method(Field(Field(Ident("object"), "spec"), "containers"), "all", Ident("c"), Bin("==", Field(Ident("c"), "name"), Str("x")))
	if _, err := n.Add("loop", loop); err != nil {
		t.Errorf("a comprehension over the object can be named: %v", err)
	}
	if _, err := n.Add("element", Bin("==", Field(Ident("c"), "name"), Str("x"))); err == nil || !strings.Contains(err.Error(), "[c]") {
		t.Errorf("an expression reading a comprehension's variable is named (%v)", err)
	}

	ops := List(Str("op"))
	// The larger test, which holds the smaller one's requirement, is replaced whole (top down).
	in := Bin("+", Cond(both, ops, List()), Method(Field(Field(Ident("object"), "spec"), "containers"), "map", Ident("c"), Cond(tier, ops, List())))
	got := n.Replace(in)
	want := `((variables.labels_2) ? (["op"]) : ([])) + (object.spec.containers.map(c, (variables.labels_1_2) ? (["op"]) : ([])))`
	if s := String(got); s != want {
		t.Errorf("Replace:\n got %s\nwant %s", s, want)
	}
	if s := String(n.Replace(Bin("&&", tier, Ident("x")))); s != "(variables.labels_1_2) && (x)" {
		t.Errorf("Replace inside a conjunction: %s", s)
	}
	// Where nothing is replaced, the tree is the same: an empty list stays one that Guarded
	// drops (a new, empty but non-nil, slice of elements once made it a part of its own).
	if g := Guarded(VarRef("m"), n.Replace(List())); !IsEmpty(g) {
		t.Errorf("a guarded empty list, after Replace: %s", String(g))
	}
	if x := Bin("+", List(), Cond(Ident("x"), List(), List(Str("op")))); !reflect.DeepEqual(n.Replace(x), x) {
		t.Errorf("Replace changed an expression without named parts: %s", String(n.Replace(x)))
	}
	var nilNamed *Named
	if String(nilNamed.Replace(in)) != String(in) {
		t.Error("a nil Named replaces nothing")
	}
	used := n.Used(Cond(both, ops, List()), List())
	if len(used) != 0 {
		t.Errorf("Used of expressions that reference no variable: %v", used)
	}
	used = n.Used(List(VarRef("labels_2")), got)
	var names []string
	for _, u := range used {
		names = append(names, u.Name)
	}
	if !reflect.DeepEqual(names, []string{"labels_1_2", "labels_2"}) {
		t.Errorf("Used: %v, want both in the order they were named", names)
	}
	if all := n.All(); len(all) != 3 || String(all[0].Expr) != String(tier) {
		t.Errorf("All: %v", all)
	}
}

func TestFreeIdents(t *testing.T) {
	obj := Ident("object")
	cases := []struct {
		e    Expr
		want []string
	}{
		{Field(obj, "metadata"), nil},
		{Bin("&&", VarRef("a"), Field(Ident("request"), "operation")), nil},
		{Method(obj, "map", Ident("x"), Ident("x")), nil},
		{Method(obj, "map", Ident("x"), Ident("y")), []string{"y"}},
		{Method(obj, "transformList", Ident("i"), Ident("x"), Bin("==", Ident("x"), Ident("z")), Ident("i")), []string{"z"}},
		{Bin("+", Method(obj, "map", Ident("x"), Ident("x")), Ident("x")), []string{"x"}},
	}
	for _, c := range cases {
		if got := freeIdents(c.e); !reflect.DeepEqual(got, c.want) {
			t.Errorf("freeIdents(%s) = %v, want %v", String(c.e), got, c.want)
		}
	}
}
