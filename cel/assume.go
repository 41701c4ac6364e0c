package cel

import (
	"slices"

	"github.com/mapc-dev/mapc/compiler/ir"
)

// AssumeNotNamespace is e for requests that are not for a Namespace: every test of "is this a
// Namespace" (Gatekeeper's match treats Namespace objects apart: their own name and labels stand
// for the namespace's) becomes false, and the conditions it decided are simplified away. The
// compiler uses it for guards whose own kinds exclude Namespaces, which are either false for a
// Namespace anyway or never evaluated for one.
func AssumeNotNamespace(e Expr) Expr {
	return rewrite(e, func(x binary) Expr {
		if isNamespaceTest(x) {
			return False
		}
		return nil
	})
}

// isNamespaceTest: is x isNamespaceKind()'s test (request.kind.group == "" &&
// request.kind.kind == "Namespace")? Matched on the tree: guards are rewritten for every mutator.
func isNamespaceTest(x binary) bool {
	if x.op != "&&" {
		return false
	}
	eq := func(e Expr, name, value string) bool {
		b, ok := e.(binary)
		if !ok || b.op != "==" {
			return false
		}
		f, ok := b.l.(field)
		return ok && isRequestField(f, "kind", name) && isLit(b.r, quote(value))
	}
	return eq(x.l, "group", "") && eq(x.r, "kind", "Namespace")
}

// AssumeRequest is e for requests that match one of rules (a policy's resource rules, with
// matchPolicy Exact): every test of the request's kind (group, version, kind) or operation that
// has the same outcome for all of them becomes that constant, and the conditions it decided are
// simplified away. Gatekeeper's match clauses restate what the policy's rules already select.
//
// For rules of namespaced kinds only (namespacedKinds), a test that the request's namespace is
// empty is false: the API server always sends one for them.
func AssumeRequest(e Expr, rules []ir.Rule) Expr {
	if len(rules) == 0 {
		return e
	}
	namespaced := namespacedOnly(rules)
	return rewrite(e, func(x binary) Expr {
		if namespaced && isEmptyNamespaceTest(x) {
			return False
		}
		f, ok := x.l.(field)
		if !ok || x.op != "==" && x.op != "in" {
			return nil
		}
		var values []string // the literal, or the list's literals
		switch r := x.r.(type) {
		case lit:
			if x.op != "==" {
				return nil
			}
			values = []string{r.text}
		case listExpr:
			if x.op != "in" {
				return nil
			}
			for _, el := range r.elems {
				l, ok := el.(lit)
				if !ok {
					return nil
				}
				values = append(values, l.text)
			}
		default:
			return nil
		}
		// of gives, for a rule, the quoted values the tested field may have.
		var of func(ir.Rule) []string
		switch {
		case isRequestField(f, "kind", "group"):
			of = func(r ir.Rule) []string { return []string{quote(r.Group)} }
		case isRequestField(f, "kind", "version"):
			of = func(r ir.Rule) []string { return []string{quote(r.Version)} }
		case isRequestField(f, "kind", "kind"):
			of = func(r ir.Rule) []string { return []string{quote(r.Kind)} }
		case isRequestField(f, "operation"):
			of = func(r ir.Rule) []string {
				var q []string
				for _, op := range r.Operations {
					q = append(q, quote(op))
				}
				return q
			}
		default:
			return nil
		}
		seenTrue, seenFalse := false, false
		for _, r := range rules {
			vs := of(r)
			if len(vs) == 0 {
				return nil
			}
			for _, v := range vs {
				if slices.Contains(values, v) {
					seenTrue = true
				} else {
					seenFalse = true
				}
			}
		}
		switch {
		case seenTrue && !seenFalse:
			return True
		case seenFalse && !seenTrue:
			return False
		}
		return nil
	})
}

// isRequestField: is f request.<names...>?
func isRequestField(f field, names ...string) bool {
	var e Expr = f
	for i := len(names) - 1; i >= 0; i-- {
		x, ok := e.(field)
		if !ok || x.name != names[i] {
			return false
		}
		e = x.operand
	}
	id, ok := e.(ident)
	return ok && id.name == "request"
}

func isLit(e Expr, text string) bool {
	l, ok := e.(lit)
	return ok && l.text == text
}

// boolFold gives, for && and ||, the constant that decides the result and the one that leaves
// the other side.
var boolFold = map[string]struct{ absorb, identity string }{
	"&&": {"false", "true"},
	"||": {"true", "false"},
}

// rewrite replaces the operator subtrees for which atom gives an expression (a constant) by it,
// and folds the constants that result.
func rewrite(e Expr, atom func(binary) Expr) Expr {
	switch x := e.(type) {
	case binary:
		if c := atom(x); c != nil {
			return c
		}
		l, r := rewrite(x.l, atom), rewrite(x.r, atom)
		if x.op == "&&" {
			r = absorb(l, r)
		}
		// && and || fold alike: a constant that decides the result (false for &&, true for ||)
		// absorbs the other side, the other constant leaves it.
		if c, ok := boolFold[x.op]; ok {
			switch {
			case isLit(l, c.absorb) || isLit(r, c.absorb):
				return lit{c.absorb}
			case isLit(l, c.identity):
				return r
			case isLit(r, c.identity):
				return l
			}
		}
		return binary{x.op, l, r}
	case unary:
		y := rewrite(x.x, atom)
		if x.op == "!" && isLit(y, "true") {
			return False
		}
		if x.op == "!" && isLit(y, "false") {
			return True
		}
		return unary{x.op, y}
	case cond:
		c := rewrite(x.c, atom)
		switch {
		case isLit(c, "true"):
			return rewrite(x.t, atom)
		case isLit(c, "false"):
			return rewrite(x.f, atom)
		}
		return cond{c, rewrite(x.t, atom), rewrite(x.f, atom)}
	case index:
		return index{rewrite(x.operand, atom), rewrite(x.key, atom), x.opt}
	case field:
		return field{rewrite(x.operand, atom), x.name}
	case call:
		var t Expr
		if x.target != nil {
			t = rewrite(x.target, atom)
		}
		return call{t, x.fn, rewriteAll(x.args, atom)}
	case listExpr:
		return listExpr{rewriteAll(x.elems, atom)}
	case optList:
		return optList{rewriteAll(x.elems, atom), x.opt}
	case mapExpr:
		return mapExpr{rewriteAll(x.keys, atom), rewriteAll(x.vals, atom)}
	case object:
		return object{typeName: x.typeName, fields: x.fields, vals: rewriteAll(x.vals, atom), pre: x.pre}
	}
	return e
}

func rewriteAll(xs []Expr, atom func(binary) Expr) []Expr {
	out := make([]Expr, len(xs))
	for i, x := range xs {
		out[i] = rewrite(x, atom)
	}
	return out
}

// absorb is r, a conjunct after the conjuncts l, without its disjuncts d for which l has the
// conjunct !d: l && (d || y) is l && y when l holds !d. Only for disjuncts that read nothing
// but the request (the namespace and kind tests of match clauses), which never fail: with a
// d that fails, the two could differ.
func absorb(l, r Expr) Expr {
	if or, ok := r.(binary); !ok || or.op != "||" {
		return r
	}
	var negated []string
	for _, c := range flatten(l, "&&") {
		if u, ok := c.(unary); ok && u.op == "!" && requestOnly(u.x) {
			negated = append(negated, String(u.x))
		}
	}
	if len(negated) == 0 {
		return r
	}
	var keep []Expr
	for _, d := range flatten(r, "||") {
		if !requestOnly(d) || !slices.Contains(negated, String(d)) {
			keep = append(keep, d)
		}
	}
	return Or(keep...)
}

// flatten lists the operands of a tree of op (&&, || or +), left to right.
func flatten(e Expr, op string) []Expr {
	if b, ok := e.(binary); ok && b.op == op {
		return append(flatten(b.l, op), flatten(b.r, op)...)
	}
	return []Expr{e}
}

// requestOnly: does e read nothing but request (and literals), with has() or a comparison
// around every field it reads, so that it cannot fail?
func requestOnly(e Expr) bool {
	switch x := e.(type) {
	case lit:
		return true
	case ident:
		return x.name == "request"
	case field:
		return requestOnly(x.operand)
	case binary:
		switch x.op {
		case "==", "!=", "&&", "||", "in":
			return requestOnly(x.l) && requestOnly(x.r)
		}
		return false
	case unary:
		return x.op == "!" && requestOnly(x.x)
	case cond:
		return requestOnly(x.c) && requestOnly(x.t) && requestOnly(x.f)
	case call:
		if x.target == nil && x.fn == "has" && len(x.args) == 1 {
			return requestOnly(x.args[0])
		}
		return false
	case listExpr:
		for _, el := range x.elems {
			if !requestOnly(el) {
				return false
			}
		}
		return true
	}
	return false
}
