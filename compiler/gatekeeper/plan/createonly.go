package plan

import (
	"fmt"
	"reflect"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// CreateOnly finds the mutations of ms (in Gatekeeper's order) that write through a keyed list
// element they create when it is missing, and whose write changes nothing where the element
// exists, because of another mutation By:
//   - By, sorted before, sets the same constant at every node the mutation writes wherever the
//     element exists (no test that can stop it there: every ExistsOK, and MissingOK below the
//     element), applies to every request the mutation applies to (matchesAll), and nothing
//     sorted between them writes at, above or below the node otherwise (the value By left is
//     still there; the element was there for By too, since nothing between appends it); or
//   - By, sorted after, always overwrites what the mutation writes there before anything looks
//     at it (forwardable, Forward's conditions), and also writes there where the mutation wrote
//     nothing (no MustExist test below the element: without the mutation's write, the node may
//     be missing).
//
// Such a mutation may be computed with a MustNotExist test on that element (OnlyCreating.Test):
// it then only creates it, which gives Gatekeeper's result in every pass (in later passes the
// element exists, and By keeps the node as before). Its operations shrink to the creation. The
// plan is made without the test: it writes less, and nothing else reads what it no longer writes
// (the conditions above), so the groups and the order stand, and where the element exists the
// test does what the write did, nothing. A mutation that is the By of another keeps its writes,
// and one listed is no one's By; neither is one of skip (the By of Redundant or Forward, whose
// reasons rely on its writes). ms is not changed.
func CreateOnly(ms []*ir.Mutation, skip map[*ir.Mutation]bool) []OnlyCreating {
	buckets := byShape(ms, func(m *ir.Mutation) bool {
		switch m.Op.(type) {
		case ir.SetValue, ir.RewriteImage:
			return true
		}
		return false
	})
	fp := lazyFootprints(ms).get
	var out []OnlyCreating
	changed, by := map[int]bool{}, map[int]bool{}
	for _, idx := range buckets {
		for _, mi := range idx {
			m := ms[mi]
			e := createdStep(m)
			if e < 0 || skip[m] || by[mi] {
				continue
			}
			for _, bi := range idx {
				if bi == mi || changed[bi] {
					continue
				}
				why := ""
				if bi < mi {
					why = setBefore(ms, fp, mi, bi, e)
				} else if writesBelow(ms[bi], e) && forwardable(ms, fp, mi, bi) {
					why = fmt.Sprintf("%s, sorted after it, always replaces what it writes there before anything looks", ms[bi].Source)
				}
				if why == "" {
					continue
				}
				changed[mi], by[bi] = true, true
				out = append(out, OnlyCreating{Elem: e, Redundancy: Redundancy{M: m, By: ms[bi], Why: fmt.Sprintf("it writes %s only where %s is missing: where it is, %s",
					ir.PathString(m.Path), ir.PathString(m.Path[:e+1]), why)}})
				break
			}
		}
	}
	return out
}

// OnlyCreating is a mutation (M) whose write changes nothing where the list element at its
// path's step Elem exists, because of By (CreateOnly).
type OnlyCreating struct {
	Redundancy
	Elem int
}

// Test is M with a MustNotExist test on that element: it writes only where it creates it.
func (o OnlyCreating) Test() *ir.Mutation { return o.M.WithTest(o.Elem, false, true) }

// createdStep is the index of m's one keyed list step, when m creates that element where it
// is missing and writes through it where it exists (no test on it); -1 otherwise.
func createdStep(m *ir.Mutation) int {
	e := -1
	for i, st := range m.Path {
		if !st.List {
			continue
		}
		if st.Glob || e >= 0 {
			return -1
		}
		e = i
	}
	if e < 0 || !m.MissingOK[e] || !m.ExistsOK[e] || !persists(m, e) {
		return -1
	}
	return e
}

// writesBelow: does b write wherever the element at step e of its path exists, whether or not
// the nodes below it do (no test from there on that a missing node fails)?
func writesBelow(b *ir.Mutation, e int) bool {
	for i := e + 1; i < len(b.Path); i++ {
		if !b.MissingOK[i] {
			return false
		}
	}
	return true
}

// setBefore says why ms[mi]'s write where its element (step e) exists changes nothing because
// ms[bi], sorted before it, set the same constant there ("" when that does not hold).
func setBefore(ms []*ir.Mutation, fp func(int) *footprint, mi, bi, e int) string {
	m, b := ms[mi], ms[bi]
	c, ok := constantOf(b)
	v, ok2 := constantOf(m)
	if !ok || !ok2 || !reflect.DeepEqual(c, v) {
		return ""
	}
	for i := range b.Path {
		if !b.ExistsOK[i] {
			return "" // a test that may stop b where the element exists
		}
	}
	if !writesBelow(b, e) {
		return ""
	}
	fm, fb := fp(mi), fp(bi)
	if len(fm.full) != len(fb.full) || !covers(fb.full, fm.full) || !matchesAll(b.Match, m.Match) {
		return ""
	}
	if !unchangedBetween(ms, fp, bi, mi, fm.full) {
		return ""
	}
	return fmt.Sprintf("%s, sorted before it, has set the same value there", b.Source)
}

// unchangedBetween: does no mutation sorted strictly between ms[lo] and ms[hi] that may apply to
// a request m = ms[hi] applies to change node n (m's location), an element on its path or anything
// above or below it, other than by adding or writing m's very value there? Object fields
// created above n are fine: where one was missing, the walk that creates it puts only its own
// path in it (checked as writes).
func unchangedBetween(ms []*ir.Mutation, fp func(int) *footprint, lo, hi int, n path) bool {
	m, fm := ms[hi], fp(hi)
	near := func(p path) bool { return prefixOf(p, n) || prefixOf(n, p) }
	for k := lo + 1; k < hi; k++ {
		if !overlap(ms[k].Match, m.Match) {
			continue
		}
		f := fp(k)
		for _, p := range f.creates {
			if near(p) && len(p) >= len(n) {
				return false
			}
		}
		for _, group := range [][]path{f.writes, f.appends} {
			for _, p := range group {
				switch {
				case !near(p):
				case len(p) == len(n) && (addOnly(m) || f.sameValueSamePath(fm)):
					// The node still exists (add-only m), or holds m's value.
				case len(p) > len(n) && addOnly(m):
					// Below the node, which exists.
				default:
					return false
				}
			}
		}
	}
	return true
}

// SharesCreation: may o.M and o.By be computed from one object in one expression, o.By
// appending the element only where o.M does not? That holds when both assign one constant at
// the very same keyed path (o.By sorted after o.M, which o.By's constant was forwarded to or
// equalled already), neither has a test (o.M's is the one CreateOnly adds), and both create the
// element alike (the same completions). From one object: where the element is, o.M writes
// nothing and o.By replaces it (as in Gatekeeper: it was there for both); where it is missing,
// o.M appends it where its match holds, in its place among the appends, and Gatekeeper's o.By
// then finds it holding its very value; where o.M's match does not hold, o.By appends it, in
// its own place. (CreateOnly's conditions: nothing between them touches the element.)
func (o OnlyCreating) SharesCreation() bool {
	m, g := o.M, o.By
	if g.SortKey < m.SortKey || len(m.Path) != len(g.Path) || createdStep(g) != o.Elem {
		return false
	}
	for i := range m.Path {
		if m.Path[i] != g.Path[i] || !m.ExistsOK[i] || !m.MissingOK[i] || !g.ExistsOK[i] || !g.MissingOK[i] {
			return false
		}
	}
	mv, ok := m.Op.(ir.SetValue)
	gv, ok2 := g.Op.(ir.SetValue)
	if !ok || !ok2 || mv.FromMetadata != "" || gv.FromMetadata != "" || !reflect.DeepEqual(mv.Value, gv.Value) || len(m.Completions) != len(g.Completions) {
		return false
	}
	for i, c := range m.Completions {
		d := g.Completions[i]
		if c.By != d.By {
			return false
		}
	}
	return true
}
