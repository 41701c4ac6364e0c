package cel

import (
	"github.com/google/go-cmp/cmp"

	"github.com/mapc-dev/mapc/compiler/ir"
)

// MergePart is one ModifySet merge of a union (MergeUnion): its values, and When, the
// condition under which it applies (its match and label selector).
type MergePart struct {
	Values []any
	When   Expr
}

// unionValues names the list of values a union adds, bound once (let) when used more than once.
const unionValues = "merged"

// MergeUnion is the list(JSONPatch) of ModifySet merges into one list computed in one
// expression: parts in Gatekeeper's order, each with m's location and path tests (m is one of
// them; the label selectors are in the parts' When, m's own is not used), none with a value
// twice or without values.
//
// Gatekeeper runs the merges one after the other: where the list is missing, the first that
// applies sets it to its values; each later one appends, at the end, each of its values the list
// does not hold. So the list gets, after what it held, the values of the merges that apply, in
// their order, each unless the list held it or an earlier merge that applies added it. The
// expression builds that list of values once, as a list literal (a merge's value is an element
// where the merge's When holds and no earlier merge with an equal value applies), and then does
// what one merge of those values does: it appends each of them the list does not hold, or sets
// the list to them where it is missing, creating the missing nodes on the way as m does. shared
// is JSONPatchAssuming's.
func MergeUnion(m *ir.Mutation, parts []MergePart, f Features, shared int) (Expr, error) {
	var vals []any
	var conds, whens []Expr
	seen := map[string]bool{}
	for i, p := range parts {
		if k := String(p.When); !seen[k] {
			seen[k] = true
			whens = append(whens, p.When)
		}
		for _, v := range dedupe(p.Values) {
			var before []Expr
			for _, q := range parts[:i] {
				if holds(q.Values, v) {
					if String(q.When) == String(p.When) {
						before = append(before, True) // it applies wherever this one does
					} else {
						before = append(before, q.When)
					}
				}
			}
			when := And(p.When, not(Or(before...)))
			if when == False {
				continue // an earlier merge adds it wherever this one applies
			}
			vals, conds = append(vals, v), append(conds, when)
		}
	}
	list := optList{elems: make([]Expr, len(vals)), opt: make([]bool, len(vals))}
	mixed := !homogeneous(vals)
	for i, v := range vals {
		e, err := Value(v)
		if err != nil {
			return nil, err
		}
		if mixed {
			e = Call("dyn", e)
		}
		if conds[i] != True {
			e = Cond(conds[i], Method(Ident("optional"), "of", e), Method(Ident("optional"), "none"))
			list.opt[i] = true
		}
		list.elems[i] = e
	}
	u := *m
	u.Match.LabelSelector = nil
	u.Op = ir.MergeSet{Values: vals}
	u.Completions = nil
	g := &jpgen{m: &u, f: f, shared: shared, elem: -1, union: Ident(unionValues)}
	ops, err := g.walk(0, Ident("object"), ptr{})
	if err != nil {
		return nil, err
	}
	if uses(ops, unionValues) > 1 {
		ops = let(Ident(unionValues), list.plain(), ops)
	} else {
		ops = substitute(ops, unionValues, list.plain())
	}
	return condList(Or(whens...), ops, emptyList), nil
}

// holds: is a value of vals equal to v (as Gatekeeper compares them)?
func holds(vals []any, v any) bool {
	for _, u := range vals {
		if cmp.Equal(u, v) {
			return true
		}
	}
	return false
}

// not is !e, simplified for the literals.
func not(e Expr) Expr {
	switch e {
	case True:
		return False
	case False:
		return True
	}
	return Not(e)
}

// uses counts the references to the identifier name in e.
func uses(e Expr, name string) int {
	if id, ok := e.(ident); ok && id.name == name {
		return 1
	}
	n := 0
	eachChild(e, func(k Expr) bool {
		n += uses(k, name)
		return true
	})
	return n
}

// unionExisting is what the union does to the list child (at p) when it exists: one "add" of
// each of its values the list does not hold, at the end, in order; or, as singleOpSet says, one
// "replace" of the whole list.
func (g *jpgen) unionExisting(child Expr, p ptr) Expr {
	v := Ident("v")
	if g.singleOpSet() {
		return List(patchOp("replace", p, Bin("+", child, Method(g.union, "filter", v, Not(Bin("in", v, child))))))
	}
	return Method(g.union, "map", v, Not(Bin("in", v, child)), patchOp("add", p.child("-"), v))
}
