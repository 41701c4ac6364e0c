package lower

import (
	"slices"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// AssumeNotNamespace is e for requests that are not for a Namespace: every test of "is this a
// Namespace" (Gatekeeper's match treats Namespace objects apart: their own name and labels stand
// for the namespace's) becomes false, and the conditions it decided are simplified away. The
// compiler uses it for guards whose own kinds exclude Namespaces, which are either false for a
// Namespace anyway or never evaluated for one.
func AssumeNotNamespace(e cel.Expr) cel.Expr {
	return cel.Fold(e, func(x cel.Expr) cel.Expr {
		if isNamespaceTest(x) {
			return cel.False
		}
		return nil
	})
}

// isNamespaceTest: is x isNamespaceKind()'s test (request.kind.group == "" &&
// request.kind.kind == "Namespace")? Matched on the tree: guards are rewritten for every mutator.
func isNamespaceTest(x cel.Expr) bool {
	op, l, r, ok := cel.AsBinary(x)
	if !ok || op != "&&" {
		return false
	}
	eq := func(e cel.Expr, name, value string) bool {
		op, l, r, ok := cel.AsBinary(e)
		if !ok || op != "==" {
			return false
		}
		s, isStr := cel.StrValue(r)
		return isRequestField(l, "kind", name) && isStr && s == value
	}
	return eq(l, "group", "") && eq(r, "kind", "Namespace")
}

// AssumeRequest is e for requests that match one of rules (a policy's resource rules, with
// matchPolicy Exact): every test of the request's kind (group, version, kind) or operation that
// has the same outcome for all of them becomes that constant, and the conditions it decided are
// simplified away. Gatekeeper's match clauses restate what the policy's rules already select.
//
// For rules of namespaced kinds only (cel.NamespacedKind), a test that the request's namespace
// is empty is false: the API server always sends one for them.
func AssumeRequest(e cel.Expr, rules []ir.Rule) cel.Expr {
	if len(rules) == 0 {
		return e
	}
	namespaced := namespacedOnly(rules)
	return cel.Fold(e, func(x cel.Expr) cel.Expr {
		if namespaced && isEmptyNamespaceTest(x) {
			return cel.False
		}
		op, l, r, _ := cel.AsBinary(x)
		if _, _, ok := cel.AsField(l); !ok || op != "==" && op != "in" {
			return nil
		}
		// The string literal compared with, or the list's string literals (other literals
		// equal no kind or operation).
		var values []string
		if elems, isList := cel.AsList(r); isList {
			if op != "in" {
				return nil
			}
			for _, el := range elems {
				if !cel.IsLiteral(el) {
					return nil
				}
				if s, ok := cel.StrValue(el); ok {
					values = append(values, s)
				}
			}
		} else if cel.IsLiteral(r) {
			if op != "==" {
				return nil
			}
			if s, ok := cel.StrValue(r); ok {
				values = []string{s}
			}
		} else {
			return nil
		}
		// of gives, for a rule, the values the tested field may have.
		var of func(ir.Rule) []string
		switch {
		case isRequestField(l, "kind", "group"):
			of = func(r ir.Rule) []string { return []string{r.Group} }
		case isRequestField(l, "kind", "version"):
			of = func(r ir.Rule) []string { return []string{r.Version} }
		case isRequestField(l, "kind", "kind"):
			of = func(r ir.Rule) []string { return []string{r.Kind} }
		case isRequestField(l, "operation"):
			of = func(r ir.Rule) []string { return r.Operations }
		default:
			return nil
		}
		var holds []bool
		for _, r := range rules {
			vs := of(r)
			if len(vs) == 0 {
				return nil
			}
			for _, v := range vs {
				holds = append(holds, slices.Contains(values, v))
			}
		}
		return cel.Outcome(holds)
	})
}

// isRequestField: is e request.<names...>?
func isRequestField(e cel.Expr, names ...string) bool {
	for i := len(names) - 1; i >= 0; i-- {
		operand, name, ok := cel.AsField(e)
		if !ok || name != names[i] {
			return false
		}
		e = operand
	}
	name, ok := cel.AsIdent(e)
	return ok && name == "request"
}
