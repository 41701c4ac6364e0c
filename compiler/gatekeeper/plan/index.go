package plan

import (
	"sort"

	"github.com/mapc-dev/mapc/internal/par"
)

// The planner asks, for every ordered pair of mutations, whether one affects the other. Most
// pairs of a large set touch unrelated paths, so instead of testing all n² pairs it indexes the
// footprints' paths in a trie and tests only the pairs whose paths can meet. The index must
// never miss a pair the full tests would find: every test in feeds, overwrites and coupling
// compares a path of f with a path of g where one is a prefix of the other (see candidates),
// and TestIndexFindsEveryInteraction compares the result with the test of every pair.

// trie holds paths, segment by segment, with the owners of the paths ending at or below a node.
type trie struct {
	root tnode
}

type tnode struct {
	fields map[string]*tnode            // object fields by name (anyField under its own name)
	lists  map[string]map[string]*tnode // keyed list elements: key field, then key value
	globs  map[string]*tnode            // every element of a list, by key field
	ends   []int                        // owners of paths ending here
	below  []int                        // owners of paths ending here or deeper
}

func (t *trie) add(p path, owner int) {
	n := &t.root
	n.below = appendOwner(n.below, owner)
	for _, s := range p {
		n = n.child(s)
		n.below = appendOwner(n.below, owner)
	}
	n.ends = appendOwner(n.ends, owner)
}

// appendOwner adds owner unless it was the last one added (paths are added owner by owner).
func appendOwner(s []int, owner int) []int {
	if len(s) > 0 && s[len(s)-1] == owner {
		return s
	}
	return append(s, owner)
}

func (n *tnode) child(s seg) *tnode {
	var m map[string]*tnode
	key := s.field
	switch {
	case !s.list:
		if n.fields == nil {
			n.fields = map[string]*tnode{}
		}
		m = n.fields
	case s.glob:
		if n.globs == nil {
			n.globs = map[string]*tnode{}
		}
		m, key = n.globs, s.keyField
	default:
		if n.lists == nil {
			n.lists = map[string]map[string]*tnode{}
		}
		if n.lists[s.keyField] == nil {
			n.lists[s.keyField] = map[string]*tnode{}
		}
		m, key = n.lists[s.keyField], s.keyValue
	}
	c := m[key]
	if c == nil {
		c = &tnode{}
		m[key] = c
	}
	return c
}

// matching calls fn for every child whose segment is compatible with s (segCompatible).
func (n *tnode) matching(s seg, fn func(*tnode)) {
	if !s.list {
		if s.field == anyField {
			for _, c := range n.fields {
				fn(c)
			}
			return
		}
		if c := n.fields[s.field]; c != nil {
			fn(c)
		}
		if c := n.fields[anyField]; c != nil {
			fn(c)
		}
		return
	}
	for _, c := range n.globs {
		fn(c)
	}
	for kf, byValue := range n.lists {
		switch {
		case s.glob || kf != s.keyField:
			for _, c := range byValue {
				fn(c)
			}
		default:
			if c := byValue[s.keyValue]; c != nil {
				fn(c)
			}
		}
	}
}

// down calls fn with the owners of every path b such that prefixOf(a, b).
func (t *trie) down(a path, fn func(owners []int)) {
	var walk func(n *tnode, i int)
	walk = func(n *tnode, i int) {
		if i == len(a) {
			fn(n.below)
			return
		}
		n.matching(a[i], func(c *tnode) { walk(c, i+1) })
	}
	walk(&t.root, 0)
}

// up calls fn with the owners of every path b such that prefixOf(b, a).
func (t *trie) up(a path, fn func(owners []int)) {
	var walk func(n *tnode, i int)
	walk = func(n *tnode, i int) {
		fn(n.ends)
		if i < len(a) {
			n.matching(a[i], func(c *tnode) { walk(c, i+1) })
		}
	}
	walk(&t.root, 0)
}

// candidates returns, for each mutation f, the mutations g (ascending) for which interacts(f, g)
// or f.coupling(g) may find something. Those tests compare:
//   - a path w that f writes with g's exists, members, values, keys or writes below it
//     (prefixOf(w, x)): down(w) for every w;
//   - g's exists, members, values or writes above f's location, which is where f's writes and
//     creations lie (prefixOf(x, c) with c a prefix of f.full): up(f.full);
//   - the lists f appends to with the lists g appends to (same depth, compatible): down(w) for
//     the element f appends, which meets the key fields g compares (a glob over the list);
//   - fields defaulted after f with g's exists, keys and values at or above them: up(d).
func candidates(fps []*footprint) [][]int {
	var reads trie
	for j, g := range fps {
		for _, set := range [][]path{g.exists, g.members, g.values, g.keys, g.writes} {
			for _, p := range set {
				reads.add(p, j)
			}
		}
	}
	// The trie is only read from here: the mutations are looked up on every core, in blocks
	// that each keep their own record of what they found.
	out := make([][]int, len(fps))
	const block = 256
	par.Do((len(fps)+block-1)/block, func(b int) {
		seen := make([]int, len(fps)) // seen[j] == i+1: j is already a candidate of i
		for i := b * block; i < min((b+1)*block, len(fps)); i++ {
			f := fps[i]
			var c []int
			collect := func(owners []int) {
				for _, j := range owners {
					if j != i && seen[j] != i+1 {
						seen[j] = i + 1
						c = append(c, j)
					}
				}
			}
			for _, w := range f.writes {
				reads.down(w, collect)
			}
			reads.up(f.full, collect)
			for _, d := range f.defaulted() {
				reads.up(d.at, collect)
			}
			sort.Ints(c)
			out[i] = c
		}
	})
	return out
}
