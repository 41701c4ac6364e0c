package plan

import (
	"fmt"
	"reflect"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// Redundancy is a mutation that never changes an object in Gatekeeper's run of the whole set,
// because of another one (By), and why.
type Redundancy struct {
	M, By *ir.Mutation
	Why   string
}

// maxRedundantBucket bounds the mutations of one path shape that Redundant, Forward and
// CreateOnly compare pairwise.
const maxRedundantBucket = 64

// Redundant lists the mutations of ms (in Gatekeeper's order) that change nothing in any pass
// of Gatekeeper, whatever the object: leaving them out gives Gatekeeper's result exactly, in
// every pass, so the compiler emits nothing for them. m is redundant because of a mutation b
// that applies to every request m applies to (matchesAll), walks its path with no test, creates
// what m would create on the way, and sets a constant at every node m writes (covers), when:
//   - b runs before m and sets m's value there, and nothing sorted between them writes that
//     node otherwise, replaces a node above it or adds list elements on the way (m would then
//     write the same value where it already is, or find nothing new); or
//   - m only adds its value where the node is missing (add-only: AssignMetadata, a MustNotExist
//     test of the node), and b writes the node (before m: it exists when m runs; after m, with
//     m's very value and add-only too, where nothing sorted between them looks at or near the
//     node: then b adds what m would have added, where m would have).
//
// Each holds in every subset of ms that keeps m and b (the conditions only forbid what lies
// between them), so every By is a mutation that is kept: leaving out all of them at once is
// leaving them out one at a time.
func Redundant(ms []*ir.Mutation) []Redundancy {
	buckets := byShape(ms, func(m *ir.Mutation) bool {
		_, ok := m.Op.(ir.SetValue)
		return ok
	})
	fps := lazyFootprints(ms)
	fp := fps.get
	var out []Redundancy
	dropped, kept := map[int]bool{}, map[int]bool{}
	for _, idx := range buckets {
		for _, j := range idx {
			if kept[j] {
				continue
			}
			for _, i := range idx {
				if i == j || dropped[i] {
					continue
				}
				if why := redundantBecause(ms, fp, j, i); why != "" {
					out = append(out, Redundancy{M: ms[j], By: ms[i], Why: why})
					dropped[j], kept[i] = true, true
					break
				}
			}
		}
	}
	return out
}

// byShape groups the indexes of the mutations of ms that keep accepts by shapeKey (only
// mutations of one shape can cover each other), the shapes in the order first seen, and returns
// the groups worth comparing pairwise: those of 2 to maxRedundantBucket mutations.
func byShape(ms []*ir.Mutation, keep func(*ir.Mutation) bool) [][]int {
	buckets := map[string][]int{}
	var order []string
	for i, m := range ms {
		if !keep(m) {
			continue
		}
		k := shapeKey(m.Path)
		if _, ok := buckets[k]; !ok {
			order = append(order, k)
		}
		buckets[k] = append(buckets[k], i)
	}
	var out [][]int
	for _, k := range order {
		if idx := buckets[k]; len(idx) >= 2 && len(idx) <= maxRedundantBucket {
			out = append(out, idx)
		}
	}
	return out
}

// footprintCache computes the footprint of ms[i] when first asked for it.
type footprintCache struct {
	ms  []*ir.Mutation
	fps map[int]*footprint
}

func lazyFootprints(ms []*ir.Mutation) *footprintCache {
	return &footprintCache{ms: ms, fps: map[int]*footprint{}}
}

func (c *footprintCache) get(i int) *footprint {
	if c.fps[i] == nil {
		c.fps[i] = footprintOf(c.ms[i])
	}
	return c.fps[i]
}

// forget drops ms[i]'s footprint after ms[i] changed.
func (c *footprintCache) forget(i int) { delete(c.fps, i) }

// shapeKey is p with list keys left out: mutations of one shape may name the same nodes.
func shapeKey(p []ir.Step) string {
	s := ""
	for _, st := range p {
		if st.List {
			s += "[" + st.KeyField + "]"
		} else {
			s += "." + st.Field
		}
	}
	return s
}

// addOnly: does m write its location only where it is missing?
func addOnly(m *ir.Mutation) bool { return !m.ExistsOK[len(m.Path)-1] }

// redundantBecause says why ms[j] changes nothing because of ms[bi] ("" when that does not hold).
func redundantBecause(ms []*ir.Mutation, fp func(int) *footprint, j, bi int) string {
	m, b := ms[j], ms[bi]
	sv, ok := m.Op.(ir.SetValue)
	bv, ok2 := b.Op.(ir.SetValue)
	if !ok || !ok2 || sv.FromMetadata != "" || bv.FromMetadata != "" || bv.Value == nil {
		return ""
	}
	last := len(b.Path) - 1
	for i := range b.Path {
		if !b.MissingOK[i] || !b.ExistsOK[i] && i != last {
			return "" // a test on the way: b may write nothing
		}
	}
	fm, fb := fp(j), fp(bi)
	if len(fm.full) != len(fb.full) || !covers(fb.full, fm.full) || !matchesAll(b.Match, m.Match) {
		return ""
	}
	// What m creates on the way (a keyed element, a parent object), b creates too.
	made := append(append(append([]path(nil), fb.appends...), fb.creates...), fb.writes...)
	for _, p := range append(append([]path(nil), fm.appends...), fm.creates...) {
		found := false
		for _, q := range made {
			if reflect.DeepEqual(p, q) {
				found = true
				break
			}
		}
		if !found {
			return ""
		}
	}
	lo, hi := bi, j
	before := bi < j
	if !before {
		lo, hi = j, bi
		// After m: b must add what m adds, in the same way, and nothing between may see the
		// difference.
		if !addOnly(m) || !addOnly(b) || !reflect.DeepEqual(sv.Value, bv.Value) {
			return ""
		}
	} else if !addOnly(m) && (addOnly(b) || !reflect.DeepEqual(sv.Value, bv.Value)) {
		return "" // m overwrites: only with b's value, which b always leaves there
	}
	n := fm.full
	if !before {
		if !untouched(ms, fp, lo, hi, m.Match, n, false) {
			return ""
		}
		return fmt.Sprintf("%s, sorted after it, adds the same value at %s wherever it could, and nothing between them looks there", b.Source, ir.PathString(m.Path))
	}
	if !unchangedBetween(ms, fp, lo, hi, n) {
		return ""
	}
	if addOnly(m) {
		return fmt.Sprintf("%s, sorted before it, writes %s wherever it could, and it only adds a value there where none is", b.Source, ir.PathString(m.Path))
	}
	return fmt.Sprintf("%s, sorted before it, sets %s to the same value wherever it could", b.Source, ir.PathString(m.Path))
}

// untouched: does no mutation sorted strictly between ms[lo] and ms[hi] that may apply to a
// request match admits look at, write or create anything at, above or below n? (Object fields
// created above n are fine: where one was missing, the walk that creates it puts only its own
// path in it, which the other tests see.) With sameNodes (the nodes on n's path are there
// whether or not the mutation in question ran), the key fields other mutations compare are no
// concern, but for a key on n's own path below its element.
func untouched(ms []*ir.Mutation, fp func(int) *footprint, lo, hi int, match ir.Match, n path, sameNodes bool) bool {
	near := func(p path) bool { return prefixOf(p, n) || prefixOf(n, p) }
	for k := lo + 1; k < hi; k++ {
		if !overlap(ms[k].Match, match) {
			continue
		}
		f := fp(k)
		for _, p := range f.creates {
			if near(p) && len(p) >= len(n) {
				return false
			}
		}
		for _, group := range [][]path{f.writes, f.appends, f.exists, f.values, {f.full}} {
			for _, p := range group {
				if near(p) {
					return false
				}
			}
		}
		for _, p := range f.keys {
			if near(p) && !(sameNodes && keyOffPath(p, n)) {
				return false
			}
		}
	}
	return true
}

// keyOffPath: is p (the key field of a list's elements, list[*].key) a field that n, which runs
// through an element of that list, does not run through (n is the element, or below a field of
// it other than the key)? Then writing at n leaves every key as it was.
func keyOffPath(p, n path) bool {
	e := len(p) - 2
	if e < 0 || len(n) <= e || !n[e].list {
		return false
	}
	return len(n) == e+1 || n[e+1].field != p[e+1].field
}
