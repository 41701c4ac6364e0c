package backend

import (
	"fmt"
	"slices"
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
		switch x := v.(type) {
		case []any:
			return slices.ContainsFunc(x, func(e any) bool { return holds(e, rest) })
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
		reads := cel.Reads(y.e, "object")
		if len(reads) == 0 {
			continue
		}
		for _, x := range rules[:j] {
			for _, k := range defaultedKinds(x.kinds, y.kinds) {
				for _, w := range writesOf(x) {
					for _, d := range apidefaults.After(k, w.at) {
						if !w.fills(d.Fields) {
							continue
						}
						for _, r := range reads {
							if !apidefaults.Prefix(r, d.Fields) && !apidefaults.Prefix(d.Fields, r) {
								continue
							}
							what := fmt.Sprintf("the rule %s", x.rule.Name)
							if x.rule == y.rule {
								what = fmt.Sprintf("its foreach[%d]", x.entry)
							}
							return problem(p, y.rule, "", fmt.Errorf("reads %s, which the API server can default after %s writes %s (%s), between the two mutations: Kyverno runs a policy's rules with no defaulting in between; not supported: write both in one rule's patch", apidefaults.String(d.Fields), what, apidefaults.String(w.at), d.Why))
						}
					}
				}
			}
		}
	}
	return nil
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
// list items left out (apidefaults' convention). A write that can create or replace list items
// (a keyed item the list may lack, an operation on an item's own path, an add through an index)
// is a write of the list; a strategic merge item with anchors patches items the list has, as
// does a foreach's item of its own element, so those write below them; an add also writes the
// maps it can create on the way.
func writesOf(m emitted) []write {
	if m.entry >= 0 {
		return entryWrites(m.rule.ForEach[m.entry], nil)
	}
	return append(smpWrites(m.rule.StrategicMerge, nil, nil), opsWrites(m.rule.JSON6902, nil)...)
}

// entryWrites are a foreach entry's writes; element is the path of the enclosing entry's list
// (its items are the elements), nil at the top.
func entryWrites(fe kyverno.ForEach, element []string) []write {
	list, err := lower.ListPath(fe.List)
	if element != nil {
		list, err = elementListPath(fe.List, element)
	}
	if err != nil {
		return []write{{at: []string{}}} // anything
	}
	out := smpWrites(fe.StrategicMerge, nil, list)
	out = append(out, opsWrites(fe.JSON6902, list)...)
	for _, sub := range fe.ForEach {
		out = append(out, entryWrites(sub, list)...)
	}
	return out
}

// elementListPath is a nested entry's list (element.<path>) below the enclosing list.
func elementListPath(list string, element []string) ([]string, error) {
	s := strings.TrimSuffix(strings.TrimSpace(list), "[]")
	_, rest, ok := strings.Cut(s, ".")
	if !ok {
		return nil, fmt.Errorf("not a path")
	}
	var out []string
	for _, f := range strings.Split(rest, ".") {
		if f == "" || strings.ContainsAny(f, `"[]|(){}`) {
			return nil, fmt.Errorf("not a path of names")
		}
		out = append(out, f)
	}
	return slices.Concat(element, out), nil
}

// smpWrites are the writes of a strategic merge patch at the path at; element is a foreach's
// list, whose item in the patch is the element (nil: none).
func smpWrites(m map[string]any, at, element []string) []write {
	var out []write
	for k, v := range m {
		if k == "$patch" || strings.Contains(k, "{{") {
			out = append(out, write{at: slices.Clone(at)})
			continue
		}
		name := k
		if strings.HasPrefix(k, "(") || strings.HasPrefix(k, "<(") {
			continue // a condition writes nothing
		}
		if strings.HasPrefix(k, "+(") && strings.HasSuffix(k, ")") {
			name = k[2 : len(k)-1]
		}
		path := append(slices.Clone(at), name)
		switch x := v.(type) {
		case map[string]any:
			if len(x) > 0 {
				out = append(out, smpWrites(x, path, element)...)
				continue
			}
		case []any:
			if len(x) == 1 {
				if item, ok := x[0].(map[string]any); ok && (slices.Equal(path, element) || lower.ItemAnchored(item)) {
					rest := map[string]any{}
					for ik, iv := range item {
						if ik != "name" {
							rest[ik] = iv
						}
					}
					out = append(out, smpWrites(rest, path, nil)...)
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

// opsWrites are the writes of JSON patch operations; element is a foreach's list, whose item
// {{elementIndex}} is the element (nil: none).
func opsWrites(ops []kyverno.Op, element []string) []write {
	var out []write
	for _, op := range ops {
		var chain []string
		item := false // the last token is a list item
		created := -1 // where an add can start creating maps (after the last item)
		for _, t := range strings.Split(strings.TrimPrefix(op.Path, "/"), "/") {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
			if t == "-" || isIndex(t) || strings.Contains(t, "{{") {
				if op.Op == "add" && !(slices.Equal(chain, element) && strings.Contains(t, "{{")) {
					out = append(out, write{at: slices.Clone(chain)}) // an add through an index can create the item
				}
				item, created = true, len(chain)
				continue
			}
			chain = append(chain, t)
			item = false
		}
		if item && !slices.Equal(chain, element) {
			out = append(out, write{at: chain}) // the item itself: the list
			continue
		}
		out = append(out, write{at: chain})
		if op.Op == "add" && created >= 0 {
			// The maps below the item (a container's securityContext, lifecycle, ...).
			for n := created + 1; n < len(chain); n++ {
				out = append(out, write{at: slices.Clone(chain[:n])})
			}
		}
	}
	return out
}

func isIndex(t string) bool {
	t = strings.TrimPrefix(t, "-")
	if t == "" {
		return false
	}
	for _, r := range t {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
