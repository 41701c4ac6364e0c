package cel

import (
	"strings"
	"testing"
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
