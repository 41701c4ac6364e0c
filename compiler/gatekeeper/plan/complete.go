package plan

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/lower"
)

// maxConditionalCompletions bounds the mutations reaching a new element that hold only for some
// requests: the element is computed for each subset of them.
const maxConditionalCompletions = 4

// Complete sets each mutation's Completions (ms in Gatekeeper's order), replacing any it had.
//
// A mutation f that creates a keyed list element when its key is missing (a sidecar container)
// writes it, in Gatekeeper, before the other mutators reach it: those sorted after f act on it in
// the same pass, those sorted before f in the next, and the passes go on until the object stops
// changing. The element is then written at once as Gatekeeper leaves it (lower.CompleteElement
// runs Gatekeeper's own mutators on it), so that every mutator finds in it what it would write
// (keepsLiteral): no second round for it, and no order between them.
//
// Every mutation that may reach the element (through the same list: a glob or f's key) and may
// apply along with f takes part, and must:
//   - apply to every request f's rules admit, but for its scope, namespaces, name, namespace
//     selector or label selector (which decide, per request, whether it takes part:
//     lower.CompletionGuard), the last only when no mutation writes a label it reads (else the
//     object's labels may change within the request);
//   - be something Gatekeeper's mutators can compute without the request (no fromMetadata).
//
// Otherwise, or when more than maxConditionalCompletions of them hold only for some requests,
// or when a mutation through no list writes the list or a parent of it, f is not completed. The
// element is computed for every subset of the conditional ones; f's Completions are the
// mutations that change it in some subset, in Gatekeeper's order.
//
// Only the mutations through one list are compared (and none when a list has more than
// maxCompleteList of them: completing is an optimisation, and its checks grow with the square).
func Complete(ms []*ir.Mutation) {
	byList := map[string][]int{}
	var flat []int // mutations through no list, which may write a list or its parents whole
	for i, m := range ms {
		m.Completions = nil
		through := false
		for j, st := range m.Path {
			if st.List {
				k := ir.PathKey(m.Path[:j])
				byList[k] = append(byList[k], i)
				through = true
				break
			}
		}
		if !through {
			flat = append(flat, i)
		}
	}
	written := writtenLabels(ms)
	for _, idx := range byList {
		if len(idx) > maxCompleteList {
			continue
		}
		completeList(ms, idx, flat, written)
	}
}

// maxCompleteList bounds the mutations through one list that Complete compares.
const maxCompleteList = 64

// completeList is Complete for the mutations idx (ascending) through one list; flat are the
// mutations through no list.
func completeList(ms []*ir.Mutation, idx, flat []int, written func(string) bool) {
	for _, fi := range idx {
		f := ms[fi]
		lit, e := literalOf(f)
		if lit == nil || e == 0 || !topLevel(f.Path, e) {
			continue
		}
		if writesAbove(ms, flat, f, e) {
			continue
		}
		ops, conds, ok := reaching(ms, idx, f, e, written)
		if !ok {
			continue
		}
		by, ok := completions(f, e, lit, ops, conds)
		if !ok {
			continue
		}
		for _, m := range ops {
			if by[m] {
				f.Completions = append(f.Completions, ir.Completion{By: m})
			}
		}
	}
}

// writesAbove: does a mutation through no list that may apply along with f write f's list or a
// parent of it (replacing the element with everything else)?
func writesAbove(ms []*ir.Mutation, flat []int, f *ir.Mutation, e int) bool {
	for _, i := range flat {
		p := ms[i].Path
		if len(p) > e || !overlap(ms[i].Match, f.Match) {
			continue
		}
		above := true
		for j := range p {
			if p[j] != f.Path[j] {
				above = false
				break
			}
		}
		if above {
			return true
		}
	}
	return false
}

// reaching lists the mutations of idx that may act on the element f creates at its list step e
// and apply along with f (f among them), in Gatekeeper's order, and those of them that apply only
// to some of f's requests; ok is false when one of them cannot take part (Complete).
func reaching(ms []*ir.Mutation, idx []int, f *ir.Mutation, e int, written func(string) bool) (ops, conds []*ir.Mutation, ok bool) {
	for _, gi := range idx {
		g := ms[gi]
		if g == f {
			ops = append(ops, g)
			continue
		}
		if !reachesElement(g, f, e) || !overlap(g.Match, f.Match) {
			continue
		}
		if readsWritten(g.Match.LabelSelector, written) || !coversRules(g.Match, f.Match) {
			return nil, nil, false
		}
		when, err := lower.CompletionGuardFor(g.Match, f.Match)
		if err != nil {
			return nil, nil, false
		}
		if when != cel.True {
			conds = append(conds, g)
		}
		ops = append(ops, g)
	}
	return ops, conds, len(conds) <= maxConditionalCompletions
}

// reachesElement: may g's walk act on the element f creates at its list step e (the same object
// fields to the list, then a glob or f's key, and on below it or at it)?
func reachesElement(g, f *ir.Mutation, e int) bool {
	if len(g.Path) <= e {
		return false
	}
	for i := 0; i < e; i++ {
		if g.Path[i] != f.Path[i] {
			return false
		}
	}
	st, fst := g.Path[e], f.Path[e]
	return st.List && st.KeyField == fst.KeyField && (st.Glob || st.KeyValue == fst.KeyValue)
}

// completions computes the element f creates for every subset of conds (the mutations of ops
// that apply to some of f's requests only), and returns the mutations that change it in some.
func completions(f *ir.Mutation, e int, lit map[string]any, ops, conds []*ir.Mutation) (map[*ir.Mutation]bool, bool) {
	by := map[*ir.Mutation]bool{}
	ok := lower.EachSubset(conds, func(off map[*ir.Mutation]bool) bool {
		_, changed, ok := lower.CompleteElement(f, e, lit, ops, func(m *ir.Mutation) bool { return !off[m] })
		for m := range changed {
			if m != f {
				by[m] = true
			}
		}
		return ok
	})
	return by, ok
}

// valueOrImageOf is the constant m writes at its location when it is missing: an Assign's
// value, or an AssignImage's reference built from nothing (nil when none).
func valueOrImageOf(m *ir.Mutation) any {
	switch op := m.Op.(type) {
	case ir.SetValue:
		if op.FromMetadata == "" {
			return op.Value
		}
	case ir.RewriteImage:
		return lower.RewriteImageString("", op)
	}
	return nil
}

// literalOf is the keyed list element m puts in place when it creates it, and the index of its
// step (createdElement; nil when none).
func literalOf(m *ir.Mutation) (map[string]any, int) {
	switch op := m.Op.(type) {
	case ir.SetValue:
		if op.FromMetadata == "" {
			return createdElement(m, op.Value)
		}
	case ir.RewriteImage:
		if lit, e := createdElement(m, valueOrImageOf(m)); e != len(m.Path)-1 {
			return lit, e
		}
	}
	return nil, 0
}

// topLevel: is the list step e the first list step of p?
func topLevel(p []ir.Step, e int) bool {
	for i := 0; i < e; i++ {
		if p[i].List {
			return false
		}
	}
	return p[e].List && !p[e].Glob
}

// coversRules: does every request f's rules admit also satisfy g's rules (same group and kind,
// every operation)?
func coversRules(g, f ir.Match) bool {
	return len(f.Rules) > 0 && len(g.Rules) > 0 && rulesCover(g.Rules, f.Rules)
}

// writtenLabels says whether some mutation of ms may write the object label key (any key when
// one writes metadata or metadata.labels whole).
func writtenLabels(ms []*ir.Mutation) func(string) bool {
	keys := map[string]bool{}
	all := false
	for _, m := range ms {
		p := m.Path
		if len(p) == 0 || p[0].Field != "metadata" || p[0].List {
			continue
		}
		switch {
		case len(p) == 1:
			all = true
		case p[1].Field != "labels" || p[1].List:
		case len(p) == 2:
			all = true
		default:
			keys[p[2].Field] = true
		}
	}
	return func(k string) bool { return all || keys[k] }
}

// readsWritten: does the selector read a label some mutation may write?
func readsWritten(sel *metav1.LabelSelector, written func(string) bool) bool {
	if sel == nil {
		return false
	}
	for k := range sel.MatchLabels {
		if written(k) {
			return true
		}
	}
	for _, r := range sel.MatchExpressions {
		if written(r.Key) {
			return true
		}
	}
	return false
}
