package plan

import (
	"encoding/json"
	"fmt"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/lower"
)

// Forward gives each mutation f of ms (in Gatekeeper's order) whose write a later mutation g
// always overwrites with a constant before anything looks at it that constant (an Assign of
// it, f's location, tests and match kept), and lists them (M took By's value). That holds
// when g, sorted after f:
//   - applies to every request f applies to (matchesAll), and writes one constant (an Assign,
//     or an AssignImage that sets every part) at every node f writes (covers: the same fields,
//     a glob or the same key on each list), with no test that can stop it where f's nodes are;
//   - reads nothing at or below those nodes (no selector on them, no key on the way but the
//     list's own);
//
// and nothing sorted between them looks at, writes or creates anything at, above or below
// them. Then in every pass of Gatekeeper, what f writes there is replaced by g's constant
// before anyone sees it: only where the node is (f may create it, and a new list element takes
// its place at the end of the list as f puts it there) and g's constant count, and both stay.
// With that value, f and g no longer interact (the same constant at the same place).
//
// f is an Assign of a constant or an AssignImage; g's value must differ from f's (else there
// is nothing to do).
func Forward(ms []*ir.Mutation) []Redundancy {
	buckets := byShape(ms, func(m *ir.Mutation) bool {
		switch op := m.Op.(type) {
		case ir.SetValue:
			return op.FromMetadata == ""
		case ir.RewriteImage:
			return true
		}
		return false
	})
	fps := lazyFootprints(ms)
	fp := fps.get
	var out []Redundancy
	for _, idx := range buckets {
		// From the last: a constant forwarded to g may then go on to an earlier f.
		for x := len(idx) - 2; x >= 0; x-- {
			fi := idx[x]
			for _, gi := range idx[x+1:] {
				c, ok := constantOf(ms[gi])
				if !ok || fp(fi).setValue == fmt.Sprintf("%#v", c) || !forwardable(ms, fp, fi, gi) {
					continue
				}
				f := ms[fi]
				f.Op = ir.SetValue{Value: lower.CopyJSON(c)}
				fps.forget(fi)
				v, _ := json.Marshal(c) // a value decoded from JSON or YAML
				out = append(out, Redundancy{M: f, By: ms[gi], Why: fmt.Sprintf("%s, sorted after it, always writes %s at %s before anything looks there",
					ms[gi].Source, v, ir.PathString(f.Path))})
				break
			}
		}
	}
	return out
}

// constantOf is the constant m writes at its location whatever was there: an Assign's value,
// or the reference of an AssignImage that sets every part.
func constantOf(m *ir.Mutation) (any, bool) {
	switch op := m.Op.(type) {
	case ir.SetValue:
		return op.Value, op.FromMetadata == "" && op.Value != nil
	case ir.RewriteImage:
		return lower.ConstantImage(op)
	}
	return nil, false
}

// forwardable: may ms[fi] take the constant of ms[gi] (Forward)?
func forwardable(ms []*ir.Mutation, fp func(int) *footprint, fi, gi int) bool {
	f, g := ms[fi], ms[gi]
	for i := range g.Path {
		if !g.ExistsOK[i] {
			return false // g may leave the node f wrote alone
		}
	}
	ff, gf := fp(fi), fp(gi)
	if len(ff.full) != len(gf.full) || !covers(gf.full, ff.full) || !matchesAll(g.Match, f.Match) {
		return false
	}
	n := ff.full
	for _, p := range gf.values {
		if prefixOf(p, n) || prefixOf(n, p) {
			return false // g's own decision may depend on what f wrote
		}
	}
	for _, p := range gf.keys {
		if (prefixOf(p, n) || prefixOf(n, p)) && !keyOffPath(p, n) {
			return false
		}
	}
	return untouched(ms, fp, fi, gi, f.Match, n, true)
}
