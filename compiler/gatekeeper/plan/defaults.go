package plan

import (
	"fmt"

	"github.com/mapc-dev/mapc/compiler/apidefaults"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// The API server defaults the object after every mutation of every mutating admission policy
// (k8s.io/apiserver's MAP dispatcher calls the object defaulter after each patch), while
// Gatekeeper runs all its mutators on one object with no defaulting in between; the API server
// defaults only the webhook's final result. So when one mutation writes what defaulting derives
// another field from, and another mutation reads that field (tests whether it exists, or reads
// its value), separate mutations see a field Gatekeeper's mutators never saw. Example: a memory
// limit is set where none is, then a memory request where none is. Gatekeeper sets both; the API
// server copies the new limit to the missing request right after the first mutation, so the
// second finds a request and does nothing.
//
// Such pairs are coupled: they must run inside one mutation expression (where no defaulting
// happens), or be refused. Which fields defaulting fills is package apidefaults' table.

// anyField is a path segment matching every object field (a ResourceList's keys, a label).
const anyField = apidefaults.AnyField

// defaultRule is an apidefaults.Rule (its flags and why) with its paths as this package's.
type defaultRule struct {
	apidefaults.Rule
	source  path
	derived []path
}

// The rules, shared with the other front ends, are apidefaults'; their paths become this
// package's.
var (
	podSpecRules  = rulesOf(apidefaults.PodSpecRules)
	absoluteRules = rulesOf(apidefaults.AbsoluteRules)
	podSpecRoots  = func() map[string]path {
		out := map[string]path{}
		for k, p := range apidefaults.PodSpecRoots {
			out[k] = pathOf(p)
		}
		return out
	}()
)

func rulesOf(rs []apidefaults.Rule) []defaultRule {
	out := make([]defaultRule, len(rs))
	for i, r := range rs {
		out[i] = defaultRule{Rule: r, source: pathOf(r.Source)}
		for _, d := range r.Derived {
			out[i].derived = append(out[i].derived, pathOf(d))
		}
	}
	return out
}

func pathOf(p apidefaults.Path) path {
	out := make(path, len(p))
	for i, s := range p {
		switch {
		case s.Item:
			out[i] = seg{list: true, glob: true, keyField: s.Key}
		case s.Field == apidefaults.AnyField:
			out[i] = seg{field: anyField}
		default:
			out[i] = seg{field: s.Field}
		}
	}
	return out
}

// podSpecSources[kind][i] is podSpecRules[i].source below the kind's pod spec, joined once.
var podSpecSources = func() map[string][]path {
	out := map[string][]path{}
	for k, root := range podSpecRoots {
		for _, r := range podSpecRules {
			out[k] = append(out[k], join(root, r.source))
		}
	}
	return out
}()

// defaulted is a field the API server may fill after a mutation, and why.
type defaulted struct {
	at  path
	why string
}

// mutationKinds lists the "group/Kind"s a mutation may apply to; nil means any.
func mutationKinds(m ir.Match) []string {
	if len(m.Rules) == 0 {
		return nil
	}
	var out []string
	for _, r := range m.Rules {
		out = append(out, r.Group+"/"+r.Kind)
	}
	return out
}

// defaultsAfter lists the fields the API server's defaulting may fill once f's mutation ran.
func (fp *footprint) defaultsAfter() []defaulted {
	// What f writes (a value, a list element) is new or replaced as a whole; the object nodes it
	// creates on the way hold nothing but the rest of its path, so only their own defaults apply.
	written := append(append([]path(nil), fp.writes...), fp.appends...)
	kinds := mutationKinds(fp.m.Match)
	applies := func(k string) bool {
		if kinds == nil {
			return true
		}
		return has(kinds, k)
	}
	var out []defaulted
	seen := map[string]bool{}
	add := func(d path, why string) {
		k := d.String() + "\x00" + why
		if !seen[k] {
			seen[k] = true
			out = append(out, defaulted{d, why})
		}
	}
	try := func(r defaultRule, root, src path) {
		for _, w := range written {
			if prefixOf(w, src) || r.Below && prefixOf(src, w) {
				for _, d := range r.derived {
					d = specialize(join(root, d), w)
					if fp.valueKeeps(w, d) || fp.valueKeeps(fp.full, d) || fp.writesItself(d) {
						continue
					}
					add(d, r.Why)
				}
			}
		}
		for _, c := range fp.creates {
			if len(c) == len(src) && prefixOf(c, src) {
				for _, d := range r.derived {
					add(specialize(join(root, d), c), r.Why)
				}
			}
		}
	}
	for k, root := range podSpecRoots {
		if !applies(k) {
			continue
		}
		for i, r := range podSpecRules {
			if r.PodOnly && k != "/Pod" {
				continue
			}
			try(r, root, podSpecSources[k][i])
		}
	}
	for _, r := range absoluteRules {
		for _, k := range r.Kinds {
			if applies(k) {
				try(r, nil, r.source)
				break
			}
		}
	}
	return out
}

func join(a, b path) path { return append(append(path(nil), a...), b...) }

// specialize narrows d's leading segments to w's where they name the same nodes, so that a
// write to one keyed container derives fields of that container only.
func specialize(d, w path) path {
	out := append(path(nil), d...)
	for i := 0; i < len(w) && i < len(d); i++ {
		if !segCompatible(w[i], d[i]) {
			break
		}
		if d[i].list && d[i].glob && w[i].list {
			out[i] = w[i]
		}
	}
	return out
}

// coupling says why g's outcome may depend on fields the API server defaults after f's
// mutation ("" when it cannot).
func (fp *footprint) coupling(g *footprint) (string, path) {
	if len(g.exists)+len(g.values)+len(g.keys) == 0 {
		return "", nil
	}
	for _, d := range fp.defaulted() {
		// Defaulting fills one field in a node that exists: it matters to a test of that very
		// field's existence, a key comparison on it, or a read of a value that holds it.
		var hit path
		for _, r := range append(append([]path(nil), g.exists...), g.keys...) {
			if hit == nil && len(r) == len(d.at) && prefixOf(r, d.at) {
				hit = r
			}
		}
		for _, r := range g.values {
			if hit == nil && prefixOf(r, d.at) {
				hit = r
			}
		}
		if hit != nil {
			return fmt.Sprintf("%s writes where the API server then defaults %s, which %s reads (%s after every mutation; Gatekeeper runs its mutators with no defaulting in between)", fp.m.Source, d.at, g.m.Source, d.why), hit
		}
	}
	return "", nil
}

// defaulted is defaultsAfter, computed once.
func (fp *footprint) defaulted() []defaulted {
	c := fp.cache
	c.defsOnce.Do(func() { c.defs = c.of.defaultsAfter() })
	return c.defs
}

// setsIfUnset: does m write r, and only where r is missing (its one test of r is MustNotExist)?
// Once it ran on a node, r exists there in both worlds, so defaulting r later changes nothing.
func setsIfUnset(m *ir.Mutation, fp *footprint, r path) bool {
	if len(fp.full) != len(r) || !prefixOf(fp.full, r) {
		return false
	}
	if _, ok := m.Op.(ir.SetValue); !ok {
		return false
	}
	i := len(r) - 1
	return !m.ExistsOK[i] && m.MissingOK[i]
}

// feedsBeyondMembers: does f feed g other than by adding or replacing list elements g may
// select (whole new nodes, the same to both worlds but for their defaults, which are checked
// as couplings of their writer)?
func (fp *footprint) feedsBeyondMembers(g *footprint) bool {
	h := *g
	h.members = nil
	f := *fp
	f.writes = nil
	for _, w := range fp.writes {
		if !w[len(w)-1].list {
			f.writes = append(f.writes, w)
		}
	}
	return f.feeds(&h) != ""
}

// Coupling is a pair of mutations that must run within one mutation expression because the
// API server's defaulting between two mutations would change what B reads after A wrote.
type Coupling struct {
	A, B *ir.Mutation
	Why  string
	// Stable: the coupling survives later rounds too: B sets the field only where it is unset,
	// A creates no list element, and nothing else in the group changes what B decides on, so
	// whatever defaulting fills between rounds B has already set (or never would).
	Stable bool
}

// valueKeeps reports whether f writes, at w, a constant value that already holds the defaulted
// field d (or has no node d could be filled in), so that defaulting cannot fill it.
func (fp *footprint) valueKeeps(w, d path) bool {
	sv, ok := fp.m.Op.(ir.SetValue)
	if !ok || sv.FromMetadata != "" || len(w) != len(fp.full) || !prefixOf(w, d) || len(d) <= len(w) {
		return false
	}
	return !mayFill(sv.Value, d[len(w):])
}

// writesItself: is d the very field f sets (to a value defaulting keeps)?
func (fp *footprint) writesItself(d path) bool {
	sv, ok := fp.m.Op.(ir.SetValue)
	if !ok || len(d) != len(fp.full) || !prefixOf(fp.full, d) || !prefixOf(d, fp.full) {
		return false
	}
	return sv.FromMetadata != "" || sv.Value != nil && sv.Value != ""
}

// mayFill: could defaulting fill the field at rel inside v? Only in nodes that exist: a
// missing field at the end can be filled, a missing node on the way cannot (except the
// requests of a ResourceList whose limits have keys it lacks, which mayFillRequests handles).
func mayFill(v any, rel path) bool {
	if len(rel) == 0 {
		return false // present
	}
	s := rel[0]
	if s.list {
		l, ok := v.([]any)
		if !ok {
			return false // no list, no element to fill
		}
		for _, e := range l {
			if mayFill(e, rel[1:]) {
				return true
			}
		}
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if s.field == "resources" && len(rel) >= 2 && rel[1].field == "requests" {
		return mayFillRequests(m["resources"])
	}
	if s.field == "requests" && len(rel) <= 2 {
		// rel is requests or requests.* inside a resources value
		return mayFillRequests(m)
	}
	if s.field == anyField {
		return true
	}
	c, present := m[s.field]
	if !present {
		return len(rel) == 1
	}
	return mayFill(c, rel[1:])
}

// mayFillRequests: does a resources value have a limit whose request it lacks?
func mayFillRequests(v any) bool {
	res, ok := v.(map[string]any)
	if !ok {
		return false
	}
	lim, _ := res["limits"].(map[string]any)
	req, _ := res["requests"].(map[string]any)
	for k := range lim {
		if _, ok := req[k]; !ok {
			return true
		}
	}
	return false
}

// shadowed: does a mutation sorted before ms[j] set r, unconditionally, everywhere ms[j] could
// test it? Then in every pass, and in every round, r exists by the time ms[j] runs, in
// Gatekeeper and on the API server alike, whatever defaulting filled in between.
func shadowed(ms []*ir.Mutation, fps []*footprint, j int, r path) bool {
	b := ms[j]
	for k := 0; k < j; k++ {
		w := ms[k]
		sv, ok := w.Op.(ir.SetValue)
		if !ok || sv.FromMetadata == "" && (sv.Value == nil || sv.Value == "") || len(fps[k].full) != len(r) || !covers(fps[k].full, r) {
			continue
		}
		unconditional := true
		for i := range w.Path {
			if !w.ExistsOK[i] || !w.MissingOK[i] {
				unconditional = false
			}
		}
		if unconditional && matchesAll(w.Match, b.Match) {
			return true
		}
	}
	return false
}

// covers: does every node r can name lie on path p (p's list steps are globs or the same key)?
func covers(p, r path) bool {
	for i := range p {
		a, b := p[i], r[i]
		switch {
		case a.list != b.list:
			return false
		case !a.list && (a.field != b.field || a.field == anyField):
			return false
		case a.list && !a.glob && (b.glob || a.keyField != b.keyField || a.keyValue != b.keyValue):
			return false
		case a.list && a.glob && a.keyField != b.keyField:
			return false
		}
	}
	return true
}

// matchesAll: does a match every request b matches? (Only the plain case: a restricts nothing
// but kinds, and has every kind b has; match.kinds that admit every kind of a's rules restrict
// nothing.)
func matchesAll(a, b ir.Match) bool {
	if len(a.Namespaces)+len(a.ExcludedNamespaces) > 0 || a.Name != "" || a.LabelSelector != nil || a.NamespaceSelector != nil || a.Scope != "" && a.Scope != b.Scope {
		return false
	}
	if len(a.Kinds) > 0 {
		if len(a.Rules) == 0 {
			return false
		}
		for _, r := range a.Rules {
			if !kindAllowed(a, r.Group, r.Kind) {
				return false
			}
		}
	}
	if len(a.Rules) == 0 {
		return len(a.Operations) == 0 || len(b.Rules) == 0 && len(b.Operations) > 0 && subset(b.Operations, a.Operations)
	}
	return len(b.Rules) > 0 && rulesCover(a.Rules, b.Rules)
}

// rulesCover: does every rule of b (group, version, kind, operations) have one in a with the
// same kind and every operation?
func rulesCover(a, b []ir.Rule) bool {
	for _, rb := range b {
		found := false
		for _, ra := range a {
			if ra.Group == rb.Group && ra.Version == rb.Version && ra.Kind == rb.Kind && subset(rb.Operations, ra.Operations) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !has(b, x) {
			return false
		}
	}
	return true
}
