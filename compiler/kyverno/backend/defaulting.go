package backend

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/apidefaults"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/kyverno/lower"
)

// Kyverno runs every rule of a policy on the object before the API server defaults the result;
// the compiled policy's rules are mutations of their own, after each of which the API server
// defaults the object (see apidefaults). Where a rule writes what defaulting fills another field
// from (a container's memory limit, then its missing request) and a later rule for the same
// objects reads that field, the later rule sees a value Kyverno's never saw: the policy is
// refused, naming both rules and the field.

// write is a place a rule can write (a chain of field names, list items left out) and, where
// known, the value it writes there (for a list, the items it can add; nil: unknown).
type write struct {
	at    []string
	value any
}

// fills: can defaulting fill d (a chain below w.at or above it) after w? Not where w's value is
// known and holds no node d could be filled in, or holds d already (apidefaults' rules fill
// fields of nodes a mutation creates only where they are missing).
func (w write) fills(d []string) bool {
	if w.value == nil || len(d) <= len(w.at) || !apidefaults.Prefix(w.at, d) {
		return true
	}
	var holds func(v any, rest []string) bool // can v hold a missing rest?
	holds = func(v any, rest []string) bool {
		if len(rest) == 0 {
			return false // d is written itself
		}
		switch x := v.(type) {
		case []any:
			if rest[0] != apidefaults.AnyField {
				return true // not a list where the schema has one: anything
			}
			// Items with anchors patch the list's items, and add none.
			return slices.ContainsFunc(x, func(e any) bool { return !lower.ItemAnchored(e) && holds(e, rest[1:]) })
		case string:
			return strings.Contains(x, "{{") // a variable's value can be a map holding it
		case map[string]any:
			for k := range x {
				if strings.Contains(k, "{{") {
					return true
				}
			}
			if len(rest) == 1 {
				e, set := x[rest[0]]
				s, isStr := e.(string)
				return !set || isStr && strings.Contains(s, "{{") // a variable can be null, which removes it
			}
			if rest[0] == apidefaults.AnyField {
				for _, e := range x {
					if holds(e, rest[1:]) {
						return true
					}
				}
				return false
			}
			e, ok := x[rest[0]]
			return ok && holds(e, rest[1:])
		}
		return false
	}
	return holds(w.value, d[len(w.at):])
}

// defaultingBetween refuses the policy where a rule (or foreach entry) reads a field the API
// server can default after an earlier one's mutation.
func defaultingBetween(p *kyverno.Policy, rules []emitted) error {
	for j, y := range rules {
		for _, x := range rules[:j] {
			if c, ok := coupled(x, y); ok {
				what := fmt.Sprintf("the rule %s", x.rule.Name)
				if x.rule == y.rule {
					what = fmt.Sprintf("its foreach[%d]", x.entry)
				}
				return problem(p, y.rule, "", fmt.Errorf("reads %s, which the API server can default after %s writes %s (%s), between the two mutations: Kyverno runs a policy's rules with no defaulting in between; not supported: write both in one rule's patch", apidefaults.String(c.read), what, apidefaults.String(c.write), c.why))
			}
		}
	}
	return nil
}

// defaultingAcross is, for each compiled policy (by index) with a rule that reads a field the
// API server can default after a rule of another compiled policy for the same objects writes,
// why it is refused: Kyverno's webhook runs every policy before the result is defaulted, the
// API server defaults after each mutation of each policy, and can run that policy first. rules
// are each policy's (nil: not compiled).
func defaultingAcross(ps []*kyverno.Policy, rules [][]emitted) map[int]error {
	out := map[int]error{}
	for j, ys := range rules {
		for i, xs := range rules {
			if i == j || out[j] != nil {
				continue
			}
			for _, y := range ys {
				for _, x := range xs {
					if c, ok := coupled(x, y); ok && out[j] == nil {
						out[j] = problem(ps[j], y.rule, "", fmt.Errorf("reads %s, which the API server can default after the rule %s of %s writes %s (%s): Kyverno's webhook runs every policy before the result is defaulted, while the API server defaults after each policy's mutations and can run that policy first; not supported: write both in one rule's patch", apidefaults.String(c.read), x.rule.Name, ps[i].Object(), apidefaults.String(c.write), c.why))
					}
				}
			}
		}
	}
	return out
}

// coupling is a field x writes, one the API server can default after it, and what y reads of it.
type coupling struct {
	write, read []string
	why         string
}

// coupled says whether y reads a field the API server can default after x's mutation, where
// they run for the same objects.
func coupled(x, y emitted) (coupling, bool) {
	// A presence test of a map y writes into only chooses between merging into it and
	// creating it with what y writes: either gives the same object, defaulted or not.
	yw := writesOf(y)
	reads := slices.DeleteFunc(cel.ReadsDeep(y.plain, "object"), func(r cel.Read) bool {
		return r.Shallow && slices.ContainsFunc(yw, func(w write) bool { return len(w.at) > len(r.Chain) && apidefaults.Prefix(r.Chain, w.at) })
	})
	if len(reads) == 0 {
		return coupling{}, false
	}
	for _, k := range defaultedKinds(x.kinds, y.kinds) {
		for _, w := range writesOf(x) {
			for _, d := range apidefaults.After(k, w.at) {
				if !w.fills(d.Fields) {
					continue
				}
				for _, r := range reads {
					// Filling d changes a value read at, above or below it, and the presence
					// of what it fills (of a map holding one key, that key only).
					n := len(d.Fields)
					if d.Only != "" && len(r.Chain) > n && r.Chain[n] != d.Only && r.Chain[n] != apidefaults.AnyField {
						continue
					}
					if apidefaults.Prefix(d.Fields, r.Chain) || !r.Shallow && apidefaults.Prefix(r.Chain, d.Fields) {
						return coupling{write: w.at, read: d.Fields, why: d.Why}, true
					}
				}
			}
		}
	}
	return coupling{}, false
}

// defaultedKinds are the kinds ("group/Kind") both rules run for, as apidefaults names them (a
// subresource's request mutates its parent's object; every kind stands for all it knows).
func defaultedKinds(a, b []gk) []string {
	var out []string
	add := func(k string) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for _, x := range a {
		for _, y := range b {
			switch {
			case x == anyKind || y == anyKind:
				for k := range apidefaults.PodSpecRoots {
					add(k)
				}
				for _, r := range apidefaults.AbsoluteRules {
					for _, k := range r.Kinds {
						add(k)
					}
				}
			case x.Group == y.Group && x.Kind == y.Kind:
				add(x.Group + "/" + x.Kind)
			}
		}
	}
	slices.Sort(out)
	return out
}

// writesOf are the places a rule (or foreach entry) can write, as chains of field names with
// AnyField for list items (apidefaults' convention). A keyed strategic merge item the list may
// lack writes the list (with the items, for write.fills); an item with anchors patches items the
// list has, as does a foreach's item of its own element, so those write below the items; an
// add at a list's end creates the item and the maps below it.
func writesOf(m emitted) []write {
	if m.entry >= 0 {
		return entryWrites(m.rule.ForEach[m.entry], nil)
	}
	return append(smpWrites(m.rule.StrategicMerge, nil, nil), opsWrites(m.rule.JSON6902, nil)...)
}

// entryWrites are a foreach entry's writes; elements are the lists of the enclosing entries
// (their items are the elements), none at the top.
func entryWrites(fe kyverno.ForEach, elements [][]string) []write {
	list, err := lower.ListPath(fe.List)
	if d := len(elements); d > 0 {
		var below []string
		below, err = lower.ElementListPath(fe.List, d)
		list = slices.Concat(elements[d-1], []string{apidefaults.AnyField}, below)
	}
	if err != nil {
		return []write{{at: []string{}}} // anything
	}
	elements = append(slices.Clone(elements), list)
	out := smpWrites(fe.StrategicMerge, nil, elements)
	out = append(out, opsWrites(fe.JSON6902, elements)...)
	for _, sub := range fe.ForEach {
		out = append(out, entryWrites(sub, elements)...)
	}
	return out
}

// smpWrites are the writes of a strategic merge patch at the path at; elements are the lists of
// a foreach and the entries it is in, whose items in the patch are their elements.
func smpWrites(m map[string]any, at []string, elements [][]string) []write {
	var out []write
	for k, v := range m {
		if k == "$patch" || strings.Contains(k, "{{") {
			out = append(out, write{at: slices.Clone(at)})
			continue
		}
		name := k
		switch kind, n := lower.Anchor(k); kind {
		case "(", "<":
			continue // a condition writes nothing
		case "+":
			name = n
		}
		path := append(slices.Clone(at), name)
		switch x := v.(type) {
		case map[string]any:
			if len(x) > 0 {
				out = append(out, smpWrites(x, path, elements)...)
				continue
			}
		case []any:
			if len(x) == 1 {
				if item, ok := x[0].(map[string]any); ok && (slices.ContainsFunc(elements, func(e []string) bool { return slices.Equal(e, path) }) || lower.ItemAnchored(item)) {
					rest := map[string]any{}
					for ik, iv := range item {
						if ik != "name" {
							rest[ik] = iv
						}
					}
					out = append(out, smpWrites(rest, append(path, apidefaults.AnyField), elements)...)
					continue
				}
			}
			out = append(out, write{at: path, value: x})
			continue
		}
		out = append(out, write{at: path})
	}
	return out
}

// literalValue is v, a JSON patch operation's value, as write.value: nil (unknown) where
// write.fills would read it as a strategic merge patch's, an item of it with an anchor, or where
// a variable's text in a plain scalar makes it.
func literalValue(v any) any {
	var plain func(v any) bool
	plain = func(v any) bool {
		switch x := v.(type) {
		case kyverno.PlainText:
			return false
		case []any:
			return !slices.ContainsFunc(x, func(e any) bool { return !plain(e) })
		case map[string]any:
			for _, e := range x {
				if !plain(e) {
					return false
				}
			}
		}
		return true
	}
	if lower.ItemAnchored(v) || !plain(v) {
		return nil
	}
	return v
}

// opsWrites are the writes of JSON patch operations; elements are the lists of a foreach and
// the entries it is in, whose items a variable index ({{elementIndex}}) names. A list item is an
// AnyField step: an operation on an item's own path writes the item; an add at a list's end
// creates the item, and the maps below it on the way.
func opsWrites(ops []kyverno.Op, elements [][]string) []write {
	var out []write
	for _, op := range ops {
		var chain []string
		created := -1 // where an add can start creating nodes
		for _, t := range lower.PathTokens(op.Path) {
			if _, err := strconv.Atoi(t); err == nil || t == "-" || strings.Contains(t, "{{") {
				// An add at a list's end creates the item. One through an index past the end
				// makes null items and an item of the rest of the path, which lacks what the
				// lists of a Pod spec require (a name, a port): the API server refuses such an
				// object whatever it is defaulted with, so only "-" counts.
				if created < 0 && t == "-" {
					created = len(chain) + 1 // the item itself
				}
				chain = append(chain, apidefaults.AnyField)
				continue
			}
			chain = append(chain, t)
		}
		w := write{at: chain}
		if op.Op == "add" || op.Op == "replace" {
			w.value = literalValue(op.Value)
		}
		out = append(out, w)
		if op.Op == "add" && created > 0 {
			for n := created; n < len(chain); n++ {
				out = append(out, write{at: slices.Clone(chain[:n])})
			}
		}
	}
	return out
}
