package plan

import (
	"reflect"
	"strings"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/lower"
)

// maxConditionalCompletions bounds the completions of one mutation that hold only for some
// requests: each doubles the variants of the new element its expression writes.
const maxConditionalCompletions = 2

// Complete sets each mutation's Completions (ms in Gatekeeper's order), replacing any it had.
//
// A mutation f that creates a list element when its key is missing (the element is new; when
// it exists f only writes its own field in it) gets there, in Gatekeeper, the constants that
// mutations sorted before f set in every element (or that element): not in the pass that
// created it, but in the next; and those that mutations sorted after f set there, in the same
// pass. The element is then written with those values at once, and those mutations find in it
// what they write (keepsLiteral): no second round for it, and no order between them. A value
// (a constant: an Assign's, or an AssignImage's that sets every part) g sets at S below the
// element becomes a completion when:
//   - g applies to every request f does, but for its scope, namespaces, name or namespace
//     selector (which decide the completion, lower.CompletionGuard), and has no label selector
//     (the object's labels may change within the request); and some request is matched by
//     both (overlap);
//   - g would write it in the new element: its tests pass there, it creates no list element, S
//     holds object fields only, and the element f creates has no field on S;
//   - nothing else reads or writes at, above or below S in such elements, but for writers of
//     the same value there (whichever writes it, it is that value), and f's own field is not on
//     S: what g then sets stays as it is, and no decision depends on when it was set.
//
// A whole-element Assign f replaces the element in every pass, after what was sorted before it:
// only mutations sorted after it complete it, and its element is completed where it replaces
// one as well as where it adds one.
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
				k := ir.PathString(m.Path[:j])
				byList[k] = append(byList[k], i)
				through = true
				break
			}
		}
		if !through {
			flat = append(flat, i)
		}
	}
	fps := lazyFootprints(ms)
	fp := fps.get
	for list, idx := range byList {
		if len(idx) > maxCompleteList {
			continue
		}
		var above []int // the flat ones on the way to the list
		for _, i := range flat {
			if p := ir.PathString(ms[i].Path); list == p || strings.HasPrefix(list, p+".") {
				above = append(above, i)
			}
		}
		completeList(ms, idx, above, fp)
	}
}

// maxCompleteList bounds the mutations through one list that Complete compares.
const maxCompleteList = 64

// completeList is Complete for the mutations idx (ascending) through one list; flat are the
// mutations through no list.
func completeList(ms []*ir.Mutation, idx, flat []int, fp func(int) *footprint) {
	for n, fi := range idx {
		f := ms[fi]
		lit, e := createdElement(f, fp(fi).valueOrImage())
		if lit == nil || !topLevel(f.Path, e) {
			continue
		}
		whole := e == len(f.Path)-1
		var slots [][]string
		conditional := 0
	candidates:
		for pos, gi := range idx {
			if pos == n || pos < n && whole {
				continue // an earlier g's write is undone by f's whole element in every pass
			}
			g := ms[gi]
			value, ok := constantOf(g)
			if !ok || g.Match.LabelSelector != nil || !coversRules(g.Match, f.Match) || !overlap(g.Match, f.Match) {
				continue // (a g that never applies along with f would only cost a test)
			}
			s, ok := completionSlot(g, f, e, lit)
			if !ok {
				continue
			}
			for _, done := range slots {
				if reflect.DeepEqual(done, s) {
					continue candidates // an earlier writer of the same value completes it
				}
			}
			if !exclusive(ms, idx, fp, fi, gi, e, s) || !exclusive(ms, flat, fp, fi, gi, e, s) {
				continue
			}
			when, err := lower.CompletionGuard(g.Match)
			if err != nil {
				continue
			}
			if when != cel.True {
				if conditional == maxConditionalCompletions {
					continue
				}
				conditional++
			}
			slots = append(slots, s)
			f.Completions = append(f.Completions, ir.Completion{Path: s, Value: lower.CopyJSON(value), By: g})
		}
	}
}

// valueOrImage is the constant the mutation writes at its location when it is missing: an
// Assign's value, or an AssignImage's reference built from nothing (nil when none).
func (f *footprint) valueOrImage() any {
	switch op := f.m.Op.(type) {
	case ir.SetValue:
		if op.FromMetadata == "" {
			return op.Value
		}
	case ir.RewriteImage:
		return lower.RewriteImageString("", op)
	}
	return nil
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

// completionSlot is S, the fields below the element where g writes in the element f creates
// (literal lit, list step e), when g would write there: g's path runs through the same list to
// that element (a glob, or its key without creating it) and then through object fields only,
// none of them on lit, with every test of g passing on the new element.
func completionSlot(g, f *ir.Mutation, e int, lit map[string]any) ([]string, bool) {
	if len(g.Path) <= e+1 {
		return nil, false
	}
	for i := 0; i < e; i++ {
		if g.Path[i] != f.Path[i] || !g.ExistsOK[i] {
			return nil, false // another list, or a test the list's existence fails
		}
	}
	st, fst := g.Path[e], f.Path[e]
	if !st.List || st.KeyField != fst.KeyField || !st.Glob && (st.KeyValue != fst.KeyValue || g.MissingOK[e]) || !g.ExistsOK[e] {
		return nil, false
	}
	var s []string
	var cur any = lit
	for i := e + 1; i < len(g.Path); i++ {
		step := g.Path[i]
		if step.List || i == e+1 && step.Field == st.KeyField {
			return nil, false
		}
		if cur != nil {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if _, has := m[step.Field]; has {
				return nil, false // f's element has a field on the way: S is not new there
			}
			cur = nil // below a missing field, everything is new
		}
		if !g.MissingOK[i] {
			return nil, false // g writes nothing where the field is missing
		}
		s = append(s, step.Field)
	}
	return s, true
}

// exclusive: does no mutation of idx other than f and g (and writers of g's value at exactly
// that place) read or write at, above or below the slot S of f's element, within such elements
// (or write the list or a parent whole)?
func exclusive(ms []*ir.Mutation, idx []int, fp func(int) *footprint, fi, gi, e int, s []string) bool {
	f, g := fp(fi), fp(gi)
	slot := append(path(nil), f.full[:e+1]...)
	for _, field := range s {
		slot = append(slot, seg{field: field})
	}
	// touches: does p reach into elements at, above or below the slot (a member selection alone
	// does not look inside them), or, when whole is set (p is written or read as a value), is
	// it the list or a parent?
	touches := func(p path, whole bool) bool {
		if whole && len(p) <= e && prefixOf(p, slot) {
			return true
		}
		return len(p) > e+1 && (prefixOf(p, slot) || prefixOf(slot, p))
	}
	if touches(f.full, false) {
		return false
	}
	for _, hi := range idx {
		if hi == fi || hi == gi || !overlap(ms[hi].Match, ms[fi].Match) {
			continue
		}
		h := fp(hi)
		same := h.setValue != "" && h.setValue == g.setValue && len(h.full) == len(slot) && prefixOf(h.full, slot) && len(h.appends) == 0
		for gi, group := range [][]path{h.writes, h.values, {h.full}, h.creates, h.exists, h.keys, h.appends} {
			for _, p := range group {
				if !touches(p, gi < 3) {
					continue
				}
				if same && len(p) == len(slot) {
					continue // its write of the value, or its test of that very field
				}
				return false
			}
		}
	}
	return true
}
