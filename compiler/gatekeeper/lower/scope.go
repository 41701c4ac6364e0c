package lower

import (
	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// namespacedOnly: are rules (a policy's) all for kinds of cel.NamespacedKinds?
func namespacedOnly(rules []ir.Rule) bool {
	for _, r := range rules {
		if !cel.NamespacedKind(r.Group, r.Kind) {
			return false
		}
	}
	return len(rules) > 0
}

// isEmptyNamespaceTest: is x a test that the request's namespace is empty
// ((has(request.namespace) ? request.namespace : "") == ""), or Gatekeeper's namespace of the
// object, which is the object's name for Namespaces, empty ((Namespace test ? name : request
// namespace) == "")? For a namespaced kind (not Namespace) both are false.
func isEmptyNamespaceTest(x cel.Expr) bool {
	op, l, r, ok := cel.AsBinary(x)
	if !ok || op != "==" || !isEmptyString(r) {
		return false
	}
	if c, _, f, ok := cel.AsCond(l); ok && isNamespaceTest(c) {
		l = f
	}
	c, t, f, ok := cel.AsCond(l)
	if !ok || !isEmptyString(f) {
		return false
	}
	if _, _, ok := cel.AsField(t); !ok || !isRequestField(t, "namespace") {
		return false
	}
	_, fn, args, ok := cel.AsCall(c)
	return ok && fn == "has" && len(args) == 1 && isRequestField(args[0], "namespace")
}

// isEmptyString: is e the literal ""?
func isEmptyString(e cel.Expr) bool {
	s, ok := cel.StrValue(e)
	return ok && s == ""
}
