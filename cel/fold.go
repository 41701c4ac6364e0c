package cel

import "slices"

// Fold is e with every binary operator node for which decide gives an expression (a constant,
// true or false) replaced by it, and the constants that result folded: && and || decided by a
// constant operand, ! of a constant, a conditional whose condition is constant. Callers use it
// to simplify guards under what they know of the request (a policy's resource rules, say).
//
// In a conjunction, a later conjunct's disjuncts that an earlier conjunct negates drop out
// (absorb): l && (d || y) is l && y when l holds !d, for disjuncts that read nothing but the
// request.
func Fold(e Expr, decide func(Expr) Expr) Expr {
	return rewrite(e, func(x binary) Expr { return decide(x) })
}

// Terms lists the operands of a tree of op (&&, || or +), left to right: e itself when it is
// not such a tree.
func Terms(e Expr, op string) []Expr { return flatten(e, op) }

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
	case optMap:
		return optMap{rewriteAll(x.keys, atom), rewriteAll(x.vals, atom), x.opt}
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
