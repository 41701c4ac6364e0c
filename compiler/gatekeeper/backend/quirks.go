package backend

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/internal/typed"
)

// quirks finds pairs of mutations in one group whose combined result in Gatekeeper depends on how
// Gatekeeper holds values in memory during one admission request, which the API server (it
// re-encodes the object after every mutation) cannot reproduce. Each problem names both.
func (sc schemaCache) quirks(g *plan.Group) map[*ir.Mutation]string {
	out := map[*ir.Mutation]string{}
	for _, a := range g.Mutations {
		for _, b := range g.Mutations {
			if a == b || !overlap(a.Path, b.Path) {
				continue
			}
			if sv, ok := a.Op.(ir.SetValue); ok && sv.FromMetadata == "" && hasNumber(sv.Value) {
				if vs := setValues(b); vs != nil && hasNumber(vs) {
					msg := fmt.Sprintf("%s writes numbers where %s compares numbers: within one request Gatekeeper holds an Assign's numbers as floating point and a ModifySet's as integers, so they never compare equal, while the API server compares them as equal; no policy can reproduce that", a.Source, b.Source)
					out[a], out[b] = msg, msg
				}
			}
			if ms, ok := b.Op.(ir.MergeSet); ok && hasDuplicates(ms.Values) {
				if _, isMerge := a.Op.(ir.MergeSet); !isMerge || a != b {
					msg := fmt.Sprintf("%s merges duplicate values into a list %s also writes: Gatekeeper sets the duplicates when the list is missing but not when it is empty, and the API server cannot tell an empty list from a missing one between mutations; remove the duplicates", b.Source, a.Source)
					out[a], out[b] = msg, msg
				}
			}
			if sv, ok := a.Op.(ir.SetValue); ok && sv.FromMetadata == "" && hasNull(sv.Value) && (testsExistence(b, a.Path) || len(b.Path) > len(a.Path)) {
				msg := fmt.Sprintf("%s assigns a value holding null, which Gatekeeper keeps as a present field within the request while the API server drops it, and %s looks below it: no policy can reproduce that; leave the field out of the value", a.Source, b.Source)
				out[a], out[b] = msg, msg
			}
			if sv, ok := a.Op.(ir.SetValue); ok && sv.FromMetadata != "" && testsExistence(b, a.Path) && sc.dropsEmptyString(a) {
				when := "an object created with generateName (a controller's Pods)"
				if sv.FromMetadata == "namespace" {
					when = "a cluster-scoped object"
				}
				msg := fmt.Sprintf("%s writes the object's %s, which is empty for %s: Gatekeeper holds the empty string as present within the request, the API server drops it (the field is omitempty), and %s tests whether it exists; no policy can reproduce that", a.Source, sv.FromMetadata, when, b.Source)
				out[a], out[b] = msg, msg
			}
			if sv, ok := a.Op.(ir.SetValue); ok && sv.FromMetadata == "" && isComposite(sv.Value) && hasGlob(a.Path) && len(b.Path) > len(a.Path) {
				msg := fmt.Sprintf("%s assigns one object or list to every element its glob selects, and %s writes inside it: within one request Gatekeeper puts the very same value into each element, so a write inside one element's copy shows in all of them, while the API server keeps separate copies; no policy can reproduce that (write the inner field in %s's value, or give %s a location without a glob)", a.Source, b.Source, a.Source, a.Source)
				out[a], out[b] = msg, msg
			}
			if _, ok := a.Op.(ir.PruneSet); ok && testsExistence(b, a.Path) {
				msg := fmt.Sprintf("%s may prune a list to empty and %s tests whether it exists: Gatekeeper sees the empty list, the API server drops it between mutations; no policy can reproduce that", a.Source, b.Source)
				out[a], out[b] = msg, msg
			}
		}
	}
	return out
}

// setValues is the values of a ModifySet, merged or pruned (nil for another operation).
func setValues(m *ir.Mutation) []any {
	switch op := m.Op.(type) {
	case ir.MergeSet:
		return op.Values
	case ir.PruneSet:
		return op.Values
	}
	return nil
}

// hasLeaf: does v, or a value anywhere inside its lists and maps, satisfy leaf?
func hasLeaf(v any, leaf func(any) bool) bool {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if hasLeaf(e, leaf) {
				return true
			}
		}
		return false
	case map[string]any:
		for _, e := range x {
			if hasLeaf(e, leaf) {
				return true
			}
		}
		return false
	}
	return leaf(v)
}

func hasNumber(v any) bool {
	return hasLeaf(v, func(x any) bool {
		switch x.(type) {
		case int, int32, int64, float64:
			return true
		}
		return false
	})
}

// isComposite: is v an object or a list (a value Gatekeeper shares by reference)?
func isComposite(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

// hasGlob: does the path select list elements with a glob?
func hasGlob(p []ir.Step) bool {
	for _, st := range p {
		if st.List && st.Glob {
			return true
		}
	}
	return false
}

func hasNull(v any) bool { return hasLeaf(v, func(x any) bool { return x == nil }) }

func hasDuplicates(vs []any) bool {
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			if cmp.Equal(vs[i], vs[j]) {
				return true
			}
		}
	}
	return false
}

// overlap: is one path a prefix of (a path compatible with) the other?
func overlap(a, b []ir.Step) bool {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		x, y := a[i], b[i]
		if x.List != y.List {
			return false
		}
		if !x.List && x.Field != y.Field {
			return false
		}
		if x.List && !x.Glob && !y.Glob && x.KeyField == y.KeyField && x.KeyValue != y.KeyValue {
			return false
		}
	}
	return true
}

// testsExistence: does m test whether a node at or below p exists?
func testsExistence(m *ir.Mutation, p []ir.Step) bool {
	for i := range m.Path {
		if m.ExistsOK[i] != m.MissingOK[i] && i+1 >= len(p) && overlap(m.Path[:i+1], p) {
			return true
		}
	}
	return false
}

// units splits a group into its mutation expressions, in execution order: every mutation alone,
// except the mutations coupled by the API server's defaulting (plan.Coupling), which must be
// computed together in one expression, placed where the first of them runs in Gatekeeper's
// order. problems names the mutations that cannot be placed so: coupled mutations that also
// depend on each other, a coupled mutation that does not commute with one it would be moved
// before, or coupled mutations in a group that needs more than one round (the defaulting
// between rounds would still show them what Gatekeeper's mutators never see).
func units(g *plan.Group) ([][]*ir.Mutation, map[*ir.Mutation]string) {
	problems := map[*ir.Mutation]string{}
	comp := map[*ir.Mutation]*ir.Mutation{}
	var find func(m *ir.Mutation) *ir.Mutation
	find = func(m *ir.Mutation) *ir.Mutation {
		r, ok := comp[m]
		if !ok || r == m {
			return m
		}
		r = find(r)
		comp[m] = r
		return r
	}
	for _, c := range g.Couplings {
		if a, b := find(c.A), find(c.B); a != b {
			comp[a] = b
		}
	}
	// Pairs that cannot share an expression first: refusing them changes the group, and with it
	// the rounds the rest need.
	for _, c := range g.Couplings {
		if !plan.Fusable(c.A, c.B) {
			msg := fmt.Sprintf("%s; and %s also depends on what %s writes, so they cannot be computed in one mutation expression either: no policy can reproduce Gatekeeper's result (to translate them, have %s write the field itself, e.g. in its value, or drop %s's test of it)", c.Why, c.B.Source, c.A.Source, c.A.Source, c.B.Source)
			problems[c.A], problems[c.B] = msg, msg
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	for _, c := range g.Couplings {
		if g.Rounds > 1 && !c.Stable {
			msg := fmt.Sprintf("%s; and their group needs %d rounds, between which the API server would default it again: no policy can reproduce Gatekeeper's result", c.Why, g.Rounds)
			problems[c.A], problems[c.B] = msg, msg
		}
	}
	pos := map[*ir.Mutation]int{}
	for i, m := range g.Mutations {
		pos[m] = i
	}
	var out [][]*ir.Mutation
	done := map[*ir.Mutation]bool{}
	for i, m := range g.Mutations {
		if done[m] {
			continue
		}
		unit := []*ir.Mutation{m}
		done[m] = true
		for _, o := range g.Mutations[i+1:] {
			if !done[o] && find(o) == find(m) {
				unit = append(unit, o)
				done[o] = true
			}
		}
		for _, o := range unit[1:] {
			for _, x := range unit {
				if x != o && !plan.Fusable(x, o) && problems[o] == "" {
					msg := fmt.Sprintf("%s and %s must run in one mutation expression (the API server defaults the object between mutations), and they interact, so they cannot: no policy can reproduce Gatekeeper's result", x.Source, o.Source)
					problems[x], problems[o] = msg, msg
				}
			}
			for _, x := range g.Mutations[i+1 : pos[o]] {
				if find(x) != find(m) && !plan.Fusable(x, o) && problems[o] == "" {
					msg := fmt.Sprintf("%s must run in one mutation expression with %s (the API server defaults the object between mutations), which would move it before %s, with which it interacts: no policy can reproduce Gatekeeper's result", o.Source, m.Source, x.Source)
					problems[o], problems[x] = msg, msg
				}
			}
		}
		out = append(out, unit)
	}
	return out, problems
}

// dropsEmptyString: would the API server drop an empty string written at m's location (an
// omitempty field of a built-in kind)? Unknown kinds keep it.
func (sc schemaCache) dropsEmptyString(m *ir.Mutation) bool {
	for _, r := range m.Match.Rules {
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		if !typed.Known(gvk) {
			continue
		}
		if stored, err := sc.roundTrip(gvk, m.Path, ""); err == nil && stored == nil {
			return true
		}
	}
	return false
}
