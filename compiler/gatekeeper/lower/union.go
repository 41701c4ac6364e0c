package lower

import (
	"github.com/google/go-cmp/cmp"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// MergePart is one ModifySet merge of a union (MergeUnion): its values, and When, the
// condition under which it applies (its match and label selector).
type MergePart struct {
	Values []any
	When   cel.Expr
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
func MergeUnion(m *ir.Mutation, parts []MergePart, f cel.Features, shared int) (cel.Expr, error) {
	var vals []any
	var conds, whens []cel.Expr
	seen := map[string]bool{}
	terms := 0 // the conditions of earlier merges written for the values
	for i, p := range parts {
		if k := cel.String(p.When); !seen[k] {
			seen[k] = true
			whens = append(whens, p.When)
		}
		for _, v := range dedupe(p.Values) {
			var before []cel.Expr
			for _, q := range parts[:i] {
				if holds(q.Values, v) {
					if cel.String(q.When) == cel.String(p.When) {
						before = append(before, cel.True) // it applies wherever this one does
					} else {
						before = append(before, q.When)
					}
				}
			}
			terms += len(before)
			when := cel.And(p.When, cel.Negate(cel.Or(before...)))
			if when == cel.False {
				continue // an earlier merge adds it wherever this one applies
			}
			vals, conds = append(vals, v), append(conds, when)
		}
	}
	var list cel.Expr
	if terms > maxUnionTerms && f.TwoVar {
		// Each value under the conditions of every earlier merge holding it grows with the
		// square of the merges (70 merges of one value: 424,152 code points, past what the API
		// server's CEL parses). Instead each merge's values are listed under its own condition
		// alone, and the first of equal values is kept at run time.
		var err error
		if list, vals, err = firstOfEqual(parts); err != nil {
			return nil, err
		}
	} else {
		var err error
		if list, err = optionalValues(vals, conds); err != nil {
			return nil, err
		}
	}
	g := &jpgen{f: f, shared: shared, elem: -1, union: cel.Ident(unionValues)}
	return unionOps(g, m, ir.MergeSet{Values: vals}, unionValues, list, whens)
}

// unionOps is the operations of a union of ModifySets at m's location and with its path tests,
// where one of whens holds: what one ModifySet of op does, g reading its values from the list
// named name (list, bound once where used more than once).
func unionOps(g *jpgen, m *ir.Mutation, op ir.Op, name string, list cel.Expr, whens []cel.Expr) (cel.Expr, error) {
	u := *m
	u.Match.LabelSelector = nil
	u.Op = op
	u.Completions = nil
	g.m = &u
	ops, err := g.walk(0, cel.Ident("object"), cel.Pointer{})
	if err != nil {
		return nil, err
	}
	if cel.Uses(ops, name) > 1 {
		ops = cel.Let(name, list, ops)
	} else {
		ops = cel.Substitute(ops, name, list)
	}
	return cel.Guarded(cel.Or(whens...), ops), nil
}

// unionPruned names the list of values a union of prunes removes, bound once (let) when used
// more than once.
const unionPruned = "pruned"

// PruneUnion is the list(JSONPatch) of ModifySet prunes of one list computed in one expression:
// parts with m's location and path tests (m is one of them; the label selectors are in the
// parts' When, m's own is not used), none without values.
//
// Gatekeeper runs the prunes one after the other, each removing every element equal to one of
// its values and creating the list's missing parents (not the list). Removals of values commute,
// so the prunes that apply remove, together, every element equal to a value of one of them, in
// any order; the parents are created where one of them applies. The expression builds the list
// of those values once, as a list literal (a value is an element where the When of a prune
// holding it holds), and then does what one prune of those values does. shared is
// JSONPatchAssuming's.
func PruneUnion(m *ir.Mutation, parts []MergePart, f cel.Features, shared int) (cel.Expr, error) {
	var vals []any
	var conds, whens []cel.Expr
	seen := map[string]bool{}
	for _, p := range parts {
		if k := cel.String(p.When); !seen[k] {
			seen[k] = true
			whens = append(whens, p.When)
		}
	}
	for _, p := range parts {
		for _, v := range dedupe(p.Values) {
			if holds(vals, v) {
				continue
			}
			var in []cel.Expr
			for _, q := range parts {
				if holds(q.Values, v) {
					in = append(in, q.When)
				}
			}
			vals, conds = append(vals, v), append(conds, cel.Or(in...))
		}
	}
	list, err := optionalValues(vals, conds)
	if err != nil {
		return nil, err
	}
	g := &jpgen{f: f, shared: shared, elem: -1, pruned: cel.Ident(unionPruned)}
	return unionOps(g, m, ir.PruneSet{Values: vals}, unionPruned, list, whens)
}

// maxUnionTerms bounds the conditions of earlier merges a union writes for its values before
// it lists them once per merge instead (firstOfEqual).
const maxUnionTerms = 256

// firstOfEqual is the list of the values the merges add, in their order, each where its merge
// applies, with only the first of equal values kept:
// all.transformList(i, x, !all.exists(j, y, j < i && y == x), x) over all the merges' values;
// and those values, each once.
func firstOfEqual(parts []MergePart) (cel.Expr, []any, error) {
	var vals, distinct []any
	var conds []cel.Expr
	for _, p := range parts {
		for _, v := range dedupe(p.Values) {
			vals, conds = append(vals, v), append(conds, p.When)
			if !holds(distinct, v) {
				distinct = append(distinct, v)
			}
		}
	}
	all, err := optionalValues(vals, conds)
	if err != nil {
		return nil, nil, err
	}
	const allName = "listed"
	i, x, j, y := cel.Ident("i"), cel.Ident("x"), cel.Ident("j"), cel.Ident("y")
	earlier := cel.Method(cel.Ident(allName), "exists", j, y, cel.And(cel.Bin("<", j, i), cel.Bin("==", y, x)))
	keep := cel.Method(cel.Ident(allName), "transformList", i, x, cel.Not(earlier), x)
	return cel.Let(allName, all, keep), distinct, nil
}

// optionalValues is the list literal of vals, each an element where its condition holds.
func optionalValues(vals []any, conds []cel.Expr) (cel.Expr, error) {
	elems, opt := make([]cel.Expr, len(vals)), make([]bool, len(vals))
	mixed := !cel.Homogeneous(vals)
	for i, v := range vals {
		e, err := cel.Value(v)
		if err != nil {
			return nil, err
		}
		if mixed {
			e = cel.Call("dyn", e)
		}
		if conds[i] != cel.True {
			e = cel.Cond(conds[i], cel.Method(cel.Ident("optional"), "of", e), cel.Method(cel.Ident("optional"), "none"))
			opt[i] = true
		}
		elems[i] = e
	}
	return cel.OptionalList(elems, opt), nil
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

// unionExisting is what the union does to the list child (at p) when it exists: one "add" of
// each of its values the list does not hold, at the end, in order; or, as singleOpSet says, one
// "replace" of the whole list.
func (g *jpgen) unionExisting(child cel.Expr, p cel.Pointer) cel.Expr {
	v := cel.Ident("v")
	if g.singleOpSet() {
		return cel.List(cel.PatchOp("replace", p, cel.Bin("+", child, cel.Method(g.union, "filter", v, cel.Not(cel.Bin("in", v, child))))))
	}
	return cel.Method(g.union, "map", v, cel.Not(cel.Bin("in", v, child)), cel.PatchOp("add", p.Child("-"), v))
}
