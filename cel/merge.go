package cel

// MergeLoops rewrites a concatenation of JSONPatch parts so that parts iterating over the same
// list share one comprehension: A ? L.transformList(i, e, a).flatten() : [] and
// B ? L.transformList(i, e, b).flatten() : [] become
// common ? L.transformList(i, e, (A' ? a : []) + (B' ? b : [])).flatten() : [], where common are
// the conditions both share (the walk down to L) and A', B' the rest. The parts must be
// independent (their operations may be reordered, element by element) except that a part's
// operations for one element still come after the earlier parts' operations for that element,
// so nodes created first (SharedCreation) are still created first. It needs lists.flatten.
func MergeLoops(parts []Expr, f Features) []Expr {
	if !f.Flatten {
		return parts
	}
	var atoms []Expr
	for _, p := range parts {
		atoms = append(atoms, flatten(p, "+")...)
	}
	type loop struct {
		pos    int // index in out
		conds  []Expr
		recv   Expr
		iv, ev Expr
		bodies []Expr
		rests  [][]Expr
	}
	var out []Expr
	var loops []*loop
	byRecv := map[string]*loop{}
	for _, a := range atoms {
		conds, recv, iv, ev, body, ok := spine(a)
		if !ok {
			out = append(out, a)
			continue
		}
		key := String(recv) + "\x00" + String(iv) + "\x00" + String(ev)
		l, seen := byRecv[key]
		if !seen {
			l = &loop{pos: len(out), conds: conds, recv: recv, iv: iv, ev: ev}
			byRecv[key] = l
			loops = append(loops, l)
			out = append(out, nil) // filled below
		}
		l.bodies = append(l.bodies, body)
		l.rests = append(l.rests, conds)
	}
	for _, l := range loops {
		// The conditions every part of the loop has stay outside it.
		var common []Expr
		for _, c := range l.conds {
			all := true
			for _, r := range l.rests {
				if !containsExpr(r, c) {
					all = false
					break
				}
			}
			if all {
				common = append(common, c)
			}
		}
		var body Expr
		for i, b := range l.bodies {
			var rest []Expr
			for _, c := range l.rests[i] {
				if !containsExpr(common, c) {
					rest = append(rest, c)
				}
			}
			if len(rest) > 0 {
				b = condList(And(rest...), b, emptyList)
			}
			if body == nil {
				body = b
			} else {
				body = Bin("+", body, b)
			}
		}
		e := Method(Method(l.recv, "transformList", l.iv, l.ev, body), "flatten")
		for i := len(common) - 1; i >= 0; i-- {
			e = condList(common[i], e, emptyList)
		}
		out[l.pos] = e
	}
	return out
}

// spine reads e as c1 ? (c2 ? (... L.transformList(i, e, body).flatten() ...) : []) : [].
func spine(e Expr) (conds []Expr, recv, iv, ev, body Expr, ok bool) {
	for {
		c, isCond := e.(cond)
		if !isCond {
			break
		}
		if !isEmpty(c.f) {
			return nil, nil, nil, nil, nil, false
		}
		conds = append(conds, c.c)
		e = c.t
	}
	fl, isCall := e.(call)
	if !isCall || fl.fn != "flatten" || len(fl.args) != 0 || fl.target == nil {
		return nil, nil, nil, nil, nil, false
	}
	tl, isCall := fl.target.(call)
	if !isCall || tl.fn != "transformList" || len(tl.args) != 3 || tl.target == nil {
		return nil, nil, nil, nil, nil, false
	}
	return conds, tl.target, tl.args[0], tl.args[1], tl.args[2], true
}

func containsExpr(xs []Expr, x Expr) bool {
	s := String(x)
	for _, y := range xs {
		if String(y) == s {
			return true
		}
	}
	return false
}
