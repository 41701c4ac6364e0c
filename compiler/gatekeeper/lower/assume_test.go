package lower

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// TestAssumeNotNamespace: the Namespace-object cases of Gatekeeper's match fold away, and
// nothing else changes.
func TestAssumeNotNamespace(t *testing.T) {
	x := cel.Ident("x")
	cases := []struct {
		in   cel.Expr
		want string
	}{
		{cel.And(x, isNamespaceKind()), "false"},
		{cel.Or(isNamespaceKind(), x), "x"},
		{cel.Not(isNamespaceKind()), "true"},
		{cel.Cond(isNamespaceKind(), cel.Str("a"), x), "x"},
		{cel.And(x, cel.Not(cel.Or(isNamespaceKind(), cel.Bin("==", x, cel.Str("")))), cel.Bin("!=", x, cel.Str("b"))), `((x) && (!((x) == ("")))) && ((x) != ("b"))`},
	}
	for _, c := range cases {
		if got := cel.String(AssumeNotNamespace(c.in)); got != c.want {
			t.Errorf("%s: got %s, want %s", cel.String(c.in), got, c.want)
		}
	}
	ns := cel.String(AssumeNotNamespace(cel.And(NamespacesMatch([]string{"kube-*"}), ScopeMatch("Namespaced"))))
	if strings.Contains(ns, "Namespace\"") || strings.Contains(ns, "object.metadata.name") || !strings.Contains(ns, "request.namespace") {
		t.Errorf("namespaces match for other kinds: %s", ns)
	}
}

// TestAssumeRequest: tests of the request's kind and operation fold to the constant the
// policy's rules decide, and stay when the rules disagree.
func TestAssumeRequest(t *testing.T) {
	x := cel.Ident("x")
	pod := ir.Rule{Version: "v1", Kind: "Pod", Operations: []string{"CREATE", "UPDATE"}}
	deploy := ir.Rule{Group: "apps", Version: "v1", Kind: "Deployment", Operations: []string{"CREATE"}}
	crd := ir.Rule{Group: "example.com", Version: "v1", Kind: "Widget", Operations: []string{"CREATE"}}
	kinds := KindsMatch([][]string{{""}}, [][]string{{"Pod"}})
	cases := []struct {
		in    cel.Expr
		rules []ir.Rule
		want  string
	}{
		{cel.And(RulesMatch([]ir.Rule{pod}), x), []ir.Rule{pod}, "x"},
		{cel.And(kinds, x), []ir.Rule{pod}, "x"},
		{cel.And(kinds, x), []ir.Rule{deploy}, "false"},
		{cel.And(kinds, x), []ir.Rule{pod, deploy}, cel.String(cel.And(kinds, x))},
		{cel.And(OperationsMatch([]string{"CREATE"}), x), []ir.Rule{pod, deploy}, cel.String(cel.And(OperationsMatch([]string{"CREATE"}), x))},
		{cel.And(OperationsMatch([]string{"CREATE", "UPDATE"}), x), []ir.Rule{pod, deploy}, "x"},
		{cel.Or(isNamespaceKind(), x), []ir.Rule{pod}, "x"},
		{cel.And(kinds, x), nil, cel.String(cel.And(kinds, x))},
		// Pods and Deployments always come with a namespace; a custom kind may not.
		{cel.And(ScopeMatch("Namespaced"), x), []ir.Rule{pod, deploy}, "x"},
		{cel.And(ScopeMatch("Cluster"), x), []ir.Rule{pod}, "false"},
		{cel.Or(NamespacesMatch([]string{"prod"}), x), []ir.Rule{pod}, cel.String(cel.Or(cel.Bin("==", requestNamespace(), cel.Str("prod")), x))},
		{cel.And(ScopeMatch("Namespaced"), x), []ir.Rule{crd}, cel.String(cel.And(cel.Not(cel.Bin("==", requestNamespace(), cel.Str(""))), x))},
		{cel.And(ScopeMatch("Namespaced"), x), []ir.Rule{pod, crd}, cel.String(cel.And(cel.Not(cel.Bin("==", requestNamespace(), cel.Str(""))), x))},
		{cel.Bin("==", cel.Cond(isNamespaceKind(), cel.Field(cel.Ident("object"), "name"), requestNamespace()), cel.Str("")), []ir.Rule{pod}, "false"},
	}
	for _, c := range cases {
		if got := cel.String(AssumeRequest(c.in, c.rules)); got != c.want {
			t.Errorf("%s under %v: got %s, want %s", cel.String(c.in), c.rules, got, c.want)
		}
	}
}

// TestAbsorb: a disjunct whose negation is an earlier conjunct drops out, for tests of the
// request only (which cannot fail); the namespace match of a Namespaced mutator loses its
// "no namespace" case.
func TestAbsorb(t *testing.T) {
	ns := cel.Bin("==", requestNamespace(), cel.Str(""))
	bar := cel.Bin("==", requestNamespace(), cel.Str("bar"))
	obj := cel.Bin("==", cel.Field(cel.Ident("object"), "kind"), cel.Str(""))
	cases := []struct {
		in   cel.Expr
		want cel.Expr
	}{
		{cel.And(cel.Not(ns), cel.Or(ns, bar)), cel.And(cel.Not(ns), bar)},
		{cel.And(cel.Not(ns), cel.Ident("x"), cel.Or(bar, ns)), cel.And(cel.Not(ns), cel.Ident("x"), bar)},
		{cel.And(cel.Not(ns), cel.Or(ns, ns)), cel.False},
		{cel.And(cel.Not(obj), cel.Or(obj, bar)), cel.And(cel.Not(obj), cel.Or(obj, bar))}, // obj may fail
		{cel.And(cel.Or(ns, bar), cel.Not(ns)), cel.And(cel.Or(ns, bar), cel.Not(ns))},     // only earlier conjuncts
		{cel.And(cel.Not(ns), cel.Or(bar, cel.Ident("y"))), cel.And(cel.Not(ns), cel.Or(bar, cel.Ident("y")))},
	}
	for _, c := range cases {
		if got := cel.String(AssumeNotNamespace(c.in)); got != cel.String(c.want) {
			t.Errorf("%s: got %s, want %s", cel.String(c.in), got, cel.String(c.want))
		}
	}
	got := cel.String(AssumeNotNamespace(cel.And(ScopeMatch("Namespaced"), NamespacesMatch([]string{"bar"}))))
	if want := cel.String(cel.And(cel.Not(ns), bar)); got != want {
		t.Errorf("Namespaced in bar: got %s, want %s", got, want)
	}
}
