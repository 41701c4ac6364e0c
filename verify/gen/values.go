package gen

import (
	"math/rand/v2"
	"reflect"
	"slices"
)

// rng is math/rand/v2 with the few helpers the generator needs.
type rng struct{ *rand.Rand }

func newRng(seed uint64) *rng {
	return &rng{rand.New(rand.NewPCG(seed, 0x6d617063 /* "mapc" */))}
}

func (r *rng) chance(p float64) bool { return r.Float64() < p }

func pick[T any](r *rng, s []T) T { return s[r.IntN(len(s))] }

// subset returns 0..max distinct elements of s, in s's order or shuffled.
func subset[T any](r *rng, s []T, max int) []T {
	n := r.IntN(max + 1)
	idx := r.Perm(len(s))
	if n > len(idx) {
		n = len(idx)
	}
	idx = idx[:n]
	if r.chance(0.5) {
		slices.Sort(idx)
	}
	out := make([]T, 0, n)
	for _, i := range idx {
		out = append(out, s[i])
	}
	return out
}

// scalar is a value of a scalar node.
func (r *rng) scalar(n *node) any {
	switch n.kind {
	case kString:
		if len(n.strs) == 0 || r.chance(0.05) {
			return pick(r, freeStrings)
		}
		return pick(r, n.strs)
	case kInt:
		return pick(r, n.ints)
	case kBool:
		return r.chance(0.5)
	case kQuantity:
		return pick(r, []any{"100m", "1", "2Gi", "500Mi", int64(1), int64(2), 0.5, 1.5, 0.25, "0.25"})
	case kImage:
		return pick(r, Images)
	}
	panic("scalar of a non-scalar node")
}

// keyValues is the pool of values a list's key field takes.
func keyValues(elem *node, keyField string) []string {
	k := elem.field(keyField)
	if k == nil {
		return []string{"x"}
	}
	switch k.kind {
	case kImage:
		return Images[:len(Images)-1] // not ""
	case kString:
		return k.strs
	}
	return []string{"x"}
}

// value generates a value of node n; fill is the probability that an optional object field is
// present; depth bounds nesting.
func (r *rng) value(n *node, fill float64, depth int) any {
	switch n.kind {
	case kObject:
		m := map[string]any{}
		for _, f := range n.fields {
			switch {
			case slices.Contains(n.required, f.name):
				m[f.name] = r.value(f.n, fill*0.7, depth-1)
			case depth > 0 && r.chance(fill):
				if r.chance(0.03) {
					m[f.name] = nil // JSON null: the typed object drops the field
				} else {
					m[f.name] = r.value(f.n, fill*0.7, depth-1)
				}
			}
		}
		return m
	case kMap:
		m := map[string]any{}
		for _, k := range subset(r, n.keys, 3) {
			m[k] = r.value(n.elem, fill, depth-1)
		}
		return m
	case kList:
		return r.elements(n, r.IntN(3)+boolInt(r.chance(fill)), fill, depth-1)
	case kScalarList:
		return r.setValues(n.elem, r.IntN(4), fill, depth-1)
	}
	return r.scalar(n)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// elements makes count elements of a keyed list, mostly with distinct natural keys (duplicates and
// missing keys sometimes, as admission sees before validation).
func (r *rng) elements(n *node, count int, fill float64, depth int) []any {
	out := []any{}
	key := n.keys[0]
	pool := keyValues(n.elem, key)
	used := map[any]bool{}
	for i := 0; i < count; i++ {
		e := r.value(n.elem, fill, max(depth, 1)).(map[string]any)
		if r.chance(0.04) {
			delete(e, key)
		} else {
			v := pick(r, pool)
			for j := 0; used[v] && j < 4 && !r.chance(0.05); j++ {
				v = pick(r, pool)
			}
			e[key] = v
			used[v] = true
		}
		out = append(out, e)
	}
	return out
}

// setValues makes count values for a set (ModifySet) of elem, with duplicates sometimes.
func (r *rng) setValues(elem *node, count int, fill float64, depth int) []any {
	out := []any{}
	for i := 0; i < count; i++ {
		if i > 0 && r.chance(0.06) {
			out = append(out, out[r.IntN(len(out))])
			continue
		}
		v := r.value(elem, fill, max(depth, 1))
		for j := 0; j < 4 && containsValue(out, v); j++ {
			v = r.value(elem, fill, max(depth, 1)) // distinct, but for the explicit duplicates above
		}
		out = append(out, v)
	}
	return out
}

func containsValue(l []any, v any) bool {
	for _, x := range l {
		if reflect.DeepEqual(x, v) {
			return true
		}
	}
	return false
}

// randomPath walks the schema from root to a random location. stop says where the walk may end:
// it is asked at every node (after at least minLen steps) whether ending there is wanted.
func (r *rng) randomPath(root *node, stop func(p path) float64) path {
	var p path
	n := root
	for {
		switch n.kind {
		case kObject:
			f := pick(r, n.fields)
			if len(p) > 0 && p.last().list && r.chance(0.3) {
				// Inside a list element, favour the lists it holds (nested lists).
				var lists []field
				for _, x := range n.fields {
					if x.n.kind == kList {
						lists = append(lists, x)
					}
				}
				if len(lists) > 0 {
					f = pick(r, lists)
				}
			}
			p = append(p, step{field: f.name, n: f.n})
		case kMap:
			k := pick(r, n.keys)
			p = append(p, step{field: k, n: n.elem})
		case kList:
			s := step{list: true, n: n.elem}
			s.keyField = n.keys[0]
			if len(n.keys) > 1 && r.chance(0.04) {
				s.keyField = n.keys[1+r.IntN(len(n.keys)-1)]
			}
			if r.chance(0.35) {
				s.glob = true
			} else {
				s.keyValue = pick(r, keyValues(n.elem, s.keyField))
			}
			p = append(p, s)
		default:
			return p
		}
		n = p.last().n
		if n.kind >= kString || r.chance(stop(p)) {
			// A location may not end at a list element's key field (Gatekeeper: "changing the
			// item key is not allowed"); walk on instead when the object has more.
			if len(p) >= 2 && p[len(p)-2].list && !p.last().list && p.last().field == p[len(p)-2].keyField {
				return p[:len(p)-1]
			}
			return p
		}
	}
}
