package cel

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/ir"
)

// TestAssumeNotNamespace: the Namespace-object cases of Gatekeeper's match fold away, and
// nothing else changes.
func TestAssumeNotNamespace(t *testing.T) {
	x := Ident("x")
	cases := []struct {
		in   Expr
		want string
	}{
		{And(x, isNamespaceKind()), "false"},
		{Or(isNamespaceKind(), x), "x"},
		{Not(isNamespaceKind()), "true"},
		{Cond(isNamespaceKind(), Str("a"), x), "x"},
		{And(x, Not(Or(isNamespaceKind(), Bin("==", x, Str("")))), Bin("!=", x, Str("b"))), `((x) && (!((x) == ("")))) && ((x) != ("b"))`},
	}
	for _, c := range cases {
		if got := String(AssumeNotNamespace(c.in)); got != c.want {
			t.Errorf("%s: got %s, want %s", String(c.in), got, c.want)
		}
	}
	ns := String(AssumeNotNamespace(And(NamespacesMatch([]string{"kube-*"}), ScopeMatch("Namespaced"))))
	if strings.Contains(ns, "Namespace\"") || strings.Contains(ns, "object.metadata.name") || !strings.Contains(ns, "request.namespace") {
		t.Errorf("namespaces match for other kinds: %s", ns)
	}
}

// TestAssumeRequest: tests of the request's kind and operation fold to the constant the
// policy's rules decide, and stay when the rules disagree.
func TestAssumeRequest(t *testing.T) {
	x := Ident("x")
	pod := ir.Rule{Version: "v1", Kind: "Pod", Operations: []string{"CREATE", "UPDATE"}}
	deploy := ir.Rule{Group: "apps", Version: "v1", Kind: "Deployment", Operations: []string{"CREATE"}}
	crd := ir.Rule{Group: "example.com", Version: "v1", Kind: "Widget", Operations: []string{"CREATE"}}
	kinds := KindsMatch([][]string{{""}}, [][]string{{"Pod"}})
	cases := []struct {
		in    Expr
		rules []ir.Rule
		want  string
	}{
		{And(RulesMatch([]ir.Rule{pod}), x), []ir.Rule{pod}, "x"},
		{And(kinds, x), []ir.Rule{pod}, "x"},
		{And(kinds, x), []ir.Rule{deploy}, "false"},
		{And(kinds, x), []ir.Rule{pod, deploy}, String(And(kinds, x))},
		{And(OperationsMatch([]string{"CREATE"}), x), []ir.Rule{pod, deploy}, String(And(OperationsMatch([]string{"CREATE"}), x))},
		{And(OperationsMatch([]string{"CREATE", "UPDATE"}), x), []ir.Rule{pod, deploy}, "x"},
		{Or(isNamespaceKind(), x), []ir.Rule{pod}, "x"},
		{And(kinds, x), nil, String(And(kinds, x))},
		// Pods and Deployments always come with a namespace; a custom kind may not.
		{And(ScopeMatch("Namespaced"), x), []ir.Rule{pod, deploy}, "x"},
		{And(ScopeMatch("Cluster"), x), []ir.Rule{pod}, "false"},
		{Or(NamespacesMatch([]string{"prod"}), x), []ir.Rule{pod}, String(Or(Bin("==", requestNamespace(), Str("prod")), x))},
		{And(ScopeMatch("Namespaced"), x), []ir.Rule{crd}, String(And(Not(Bin("==", requestNamespace(), Str(""))), x))},
		{And(ScopeMatch("Namespaced"), x), []ir.Rule{pod, crd}, String(And(Not(Bin("==", requestNamespace(), Str(""))), x))},
		{Bin("==", Cond(isNamespaceKind(), Field(Ident("object"), "name"), requestNamespace()), Str("")), []ir.Rule{pod}, "false"},
	}
	for _, c := range cases {
		if got := String(AssumeRequest(c.in, c.rules)); got != c.want {
			t.Errorf("%s under %v: got %s, want %s", String(c.in), c.rules, got, c.want)
		}
	}
}

// TestAbsorb: a disjunct whose negation is an earlier conjunct drops out, for tests of the
// request only (which cannot fail); the namespace match of a Namespaced mutator loses its
// "no namespace" case.
func TestAbsorb(t *testing.T) {
	ns := Bin("==", requestNamespace(), Str(""))
	bar := Bin("==", requestNamespace(), Str("bar"))
	obj := Bin("==", Field(Ident("object"), "kind"), Str(""))
	cases := []struct {
		in   Expr
		want Expr
	}{
		{And(Not(ns), Or(ns, bar)), And(Not(ns), bar)},
		{And(Not(ns), Ident("x"), Or(bar, ns)), And(Not(ns), Ident("x"), bar)},
		{And(Not(ns), Or(ns, ns)), False},
		{And(Not(obj), Or(obj, bar)), And(Not(obj), Or(obj, bar))}, // obj may fail
		{And(Or(ns, bar), Not(ns)), And(Or(ns, bar), Not(ns))},     // only earlier conjuncts
		{And(Not(ns), Or(bar, Ident("y"))), And(Not(ns), Or(bar, Ident("y")))},
	}
	for _, c := range cases {
		if got := String(AssumeNotNamespace(c.in)); got != String(c.want) {
			t.Errorf("%s: got %s, want %s", String(c.in), got, String(c.want))
		}
	}
	got := String(AssumeNotNamespace(And(ScopeMatch("Namespaced"), NamespacesMatch([]string{"bar"}))))
	if want := String(And(Not(ns), bar)); got != want {
		t.Errorf("Namespaced in bar: got %s, want %s", got, want)
	}
}
