package cel

// AssumeNotNamespace is e for requests that are not for a Namespace: every test of "is this a
// Namespace" (Gatekeeper's match treats Namespace objects apart: their own name and labels stand
// for the namespace's) becomes false, and the conditions it decided are simplified away. The
// compiler uses it for guards whose own kinds exclude Namespaces, which are either false for a
// Namespace anyway or never evaluated for one.
func AssumeNotNamespace(e Expr) Expr {
	return rewrite(e, String(isNamespaceKind()))
}

func isLit(e Expr, text string) bool {
	l, ok := e.(lit)
	return ok && l.text == text
}

// rewrite replaces the subtrees printed as target by false and folds the constants that result.
func rewrite(e Expr, target string) Expr {
	switch x := e.(type) {
	case binary:
		if x.op == "&&" && Len(x) == len(target) && String(x) == target {
			return False
		}
		l, r := rewrite(x.l, target), rewrite(x.r, target)
		switch x.op {
		case "&&":
			switch {
			case isLit(l, "false") || isLit(r, "false"):
				return False
			case isLit(l, "true"):
				return r
			case isLit(r, "true"):
				return l
			}
		case "||":
			switch {
			case isLit(l, "true") || isLit(r, "true"):
				return True
			case isLit(l, "false"):
				return r
			case isLit(r, "false"):
				return l
			}
		}
		return binary{x.op, l, r}
	case unary:
		y := rewrite(x.x, target)
		if x.op == "!" && isLit(y, "true") {
			return False
		}
		if x.op == "!" && isLit(y, "false") {
			return True
		}
		return unary{x.op, y}
	case cond:
		c := rewrite(x.c, target)
		switch {
		case isLit(c, "true"):
			return rewrite(x.t, target)
		case isLit(c, "false"):
			return rewrite(x.f, target)
		}
		return cond{c, rewrite(x.t, target), rewrite(x.f, target)}
	case index:
		return index{rewrite(x.operand, target), rewrite(x.key, target), x.opt}
	case field:
		return field{rewrite(x.operand, target), x.name}
	case call:
		var t Expr
		if x.target != nil {
			t = rewrite(x.target, target)
		}
		return call{t, x.fn, rewriteAll(x.args, target)}
	case listExpr:
		return listExpr{rewriteAll(x.elems, target)}
	case optList:
		return optList{rewriteAll(x.elems, target), x.opt}
	case mapExpr:
		return mapExpr{rewriteAll(x.keys, target), rewriteAll(x.vals, target)}
	case object:
		return object{typeName: x.typeName, fields: x.fields, vals: rewriteAll(x.vals, target), pre: x.pre}
	}
	return e
}

func rewriteAll(xs []Expr, target string) []Expr {
	out := make([]Expr, len(xs))
	for i, x := range xs {
		out[i] = rewrite(x, target)
	}
	return out
}
