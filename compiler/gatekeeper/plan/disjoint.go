package plan

import (
	"maps"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// Disjoint matches. Two mutators that no admission request is matched by both of never meet:
// whatever one writes, the other never sees it, and their writes to one place are never both
// made. What tells them apart must stay as it is for the whole of Gatekeeper's run: the request's
// kind, operation, name, namespace and, for a namespaced object, the labels of its namespace
// (Gatekeeper reads them from its cache). A Namespace object is matched by namespaceSelector on
// its own labels, which mutators may change: there a selector tells two mutators apart only
// where the pair is concerned (apart), when neither writes the label key their selectors
// disagree on; then neither can make the other's selector hold on an object that its own
// holds on, so they never both apply to the object as it is at one point of the run, and they
// commute (a third mutator that changes the label runs with both, reading it). A label selector
// on the object's own labels is never used: mutators change those labels.
//
// Gatekeeper's match (pkg/mutation/match) treats three classes of requests differently:
//   - a Namespace: namespaces and excludedNamespaces look at its name, namespaceSelector at its
//     own labels;
//   - a namespaced object: they look at its namespace's name and (cached) labels;
//   - any other cluster-scoped object: namespaces, excludedNamespaces and namespaceSelector
//     match it whatever they say; only kinds, scope and name can keep it from a mutator.
const (
	classNamespace = 1 << iota
	classNamespaced
	classCluster
)

// namespacedKind holds cel's well-known namespaced built-in kinds (group, kind).
var namespacedKind = func() map[[2]string]bool {
	out := map[[2]string]bool{}
	for _, k := range cel.NamespacedKinds() {
		out[k] = true
	}
	return out
}()

// classes are the classes of requests m may match, by its kinds and scope (Gatekeeper's scope:
// Namespaced excludes Namespaces, Cluster includes them).
func classes(m ir.Match) int {
	c := 0
	if m.MayMatchKind("", "Namespace") {
		c |= classNamespace
	}
	kind := func(group, kind string) {
		switch {
		case group == "" && kind == "Namespace":
		case namespacedKind[[2]string{group, kind}]:
			c |= classNamespaced
		default: // a kind of unknown scope (a custom resource, say)
			c |= classNamespaced | classCluster
		}
	}
	switch {
	case len(m.Rules) > 0:
		for _, r := range m.Rules {
			kind(r.Group, r.Kind)
		}
	case len(m.Kinds) == 0:
		c |= classNamespaced | classCluster
	default:
		for _, k := range m.Kinds {
			if len(k.Groups) == 0 || has(k.Groups, "*") || len(k.Kinds) == 0 || has(k.Kinds, "*") {
				c |= classNamespaced | classCluster
				continue
			}
			for _, g := range k.Groups {
				for _, kk := range k.Kinds {
					kind(g, kk)
				}
			}
		}
	}
	switch m.Scope {
	case "Namespaced":
		c &^= classNamespace | classCluster
	case "Cluster":
		c &^= classNamespaced
	}
	return c
}

// overlap: may one admission request be matched by both a and b, at some point of
// Gatekeeper's run (not necessarily the same one)?
func overlap(a, b ir.Match) bool { return !disjoint(a, b, classes(a), classes(b), nil) }

// overlaps is overlap of f's and g's matches, with the classes their footprints hold.
func (f *footprint) overlaps(g *footprint) bool {
	return !disjoint(f.m.Match, g.m.Match, f.classes, g.classes, nil)
}

// apart: do f and g never both apply to an object as it is at one point of Gatekeeper's run,
// neither able to change that (they may still both apply to one request, at different points,
// when a third mutator changes the labels of a Namespace object in between)?
func (f *footprint) apart(g *footprint) bool {
	return disjoint(f.m.Match, g.m.Match, f.classes, g.classes, func(key string) bool { return !f.writesLabel(key) && !g.writesLabel(key) })
}

// writesLabel: may f write the label key (or all labels, or metadata, whole)? The nodes it
// creates on the way to its location (the labels map, say) hold only that path.
func (f *footprint) writesLabel(key string) bool {
	l := path{{field: "metadata"}, {field: "labels"}, {field: key}}
	for _, set := range [][]path{f.writes, f.appends} {
		for _, p := range set {
			if prefixOf(p, l) || prefixOf(l, p) {
				return true
			}
		}
	}
	for _, p := range f.creates {
		if prefixOf(l, p) {
			return true
		}
	}
	return false
}

// disjoint: is no request matched by both a and b, of the classes ca and cb (classes(a),
// classes(b))? fixed says which label keys of a Namespace object keep their value (nil: none).
func disjoint(a, b ir.Match, ca, cb int, fixed func(key string) bool) bool {
	if !kindsOverlap(a, b) || namesDisjoint(a.Name, b.Name) {
		return true
	}
	both := ca & cb
	if both == 0 {
		return true
	}
	if both&classCluster != 0 {
		return false
	}
	if namespacesDisjoint(a, b) {
		return true
	}
	for _, k := range selectorConflicts(a.NamespaceSelector, b.NamespaceSelector) {
		if both&classNamespace == 0 || fixed != nil && fixed(k) {
			return true
		}
	}
	return false
}

// glob is a Gatekeeper wildcard (pkg/wildcard): an exact string, a prefix ("x*"), a suffix
// ("*x") or a substring ("*x*", and "*", which matches everything).
type glob struct {
	op byte // '=', '<' (prefix), '>' (suffix), '~' (substring)
	s  string
}

func globOf(w string) glob {
	switch {
	case strings.HasPrefix(w, "*") && strings.HasSuffix(w, "*"):
		return glob{'~', strings.TrimSuffix(strings.TrimPrefix(w, "*"), "*")}
	case strings.HasPrefix(w, "*"):
		return glob{'>', strings.TrimPrefix(w, "*")}
	case strings.HasSuffix(w, "*"):
		return glob{'<', strings.TrimSuffix(w, "*")}
	}
	return glob{'=', w}
}

func (g glob) matches(s string) bool {
	switch g.op {
	case '~':
		return strings.Contains(s, g.s)
	case '>':
		return strings.HasSuffix(s, g.s)
	case '<':
		return strings.HasPrefix(s, g.s)
	}
	return s == g.s
}

// globsDisjoint: does no string match both a and b? (A prefix and a suffix, or a substring and
// anything but an exact string, always share one.)
func globsDisjoint(a, b glob) bool {
	switch {
	case a.op == '=':
		return !b.matches(a.s)
	case b.op == '=':
		return !a.matches(b.s)
	case a.op == '<' && b.op == '<':
		return !strings.HasPrefix(a.s, b.s) && !strings.HasPrefix(b.s, a.s)
	case a.op == '>' && b.op == '>':
		return !strings.HasSuffix(a.s, b.s) && !strings.HasSuffix(b.s, a.s)
	}
	return false
}

// covers: does every string that matches p match e?
func (e glob) covers(p glob) bool {
	if p.op == '=' {
		return e.matches(p.s)
	}
	switch e.op {
	case '<':
		return p.op == '<' && strings.HasPrefix(p.s, e.s)
	case '>':
		return p.op == '>' && strings.HasSuffix(p.s, e.s)
	case '~':
		return strings.Contains(p.s, e.s)
	}
	return false
}

// namesDisjoint: can no object be matched by both name wildcards? Gatekeeper matches a name
// wildcard against metadata.name, and a prefix or substring one also against
// metadata.generateName, which an object may have along with any name: such a wildcard meets
// every other.
func namesDisjoint(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ga, gb := globOf(a), globOf(b)
	if ga.op == '<' || ga.op == '~' || gb.op == '<' || gb.op == '~' {
		return false
	}
	return globsDisjoint(ga, gb)
}

// namespacesDisjoint: is no namespace name admitted by both a's and b's namespaces and
// excludedNamespaces? Every pair of their namespaces wildcards (an empty list: "*") must match
// no name in common, or what they match in common must be excluded by one of them (a wildcard
// of either's excludedNamespaces covers one of the pair).
func namespacesDisjoint(a, b ir.Match) bool {
	if len(a.Namespaces) == 0 && len(b.Namespaces) == 0 {
		return false
	}
	// Without allocating: this runs for every pair of mutators of a large set.
	covered := func(p glob) bool {
		for _, ex := range [2][]string{a.ExcludedNamespaces, b.ExcludedNamespaces} {
			for _, w := range ex {
				if globOf(w).covers(p) {
					return true
				}
			}
		}
		return false
	}
	everywhere := glob{'~', ""}
	for i := 0; i < max(len(a.Namespaces), 1); i++ {
		p := everywhere
		if len(a.Namespaces) > 0 {
			p = globOf(a.Namespaces[i])
		}
		for j := 0; j < max(len(b.Namespaces), 1); j++ {
			q := everywhere
			if len(b.Namespaces) > 0 {
				q = globOf(b.Namespaces[j])
			}
			if !globsDisjoint(p, q) && !covered(p) && !covered(q) {
				return false
			}
		}
	}
	return true
}

// selectorConflicts lists the label keys on which no set of labels meets both selectors (one
// requires the key with values the other excludes, or requires it absent), sorted; a nil or
// empty selector has none, and neither has a selector Gatekeeper cannot read.
func selectorConflicts(a, b *metav1.LabelSelector) []string {
	if a == nil || b == nil {
		return nil
	}
	type allowed struct {
		absent bool
		// only, when set, lists the values allowed; otherwise every value but those in except.
		only   map[string]bool
		except map[string]bool
	}
	keys := map[string]*allowed{}
	var order []string
	at := func(k string) *allowed {
		x := keys[k]
		if x == nil {
			x = &allowed{absent: true, except: map[string]bool{}}
			keys[k] = x
			order = append(order, k)
		}
		return x
	}
	in := func(k string, vs []string) {
		x := at(k)
		x.absent = false
		set := map[string]bool{}
		for _, v := range vs {
			if x.only == nil && !x.except[v] || x.only != nil && x.only[v] {
				set[v] = true
			}
		}
		x.only = set
	}
	for _, s := range []*metav1.LabelSelector{a, b} {
		for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
			in(k, []string{s.MatchLabels[k]})
		}
		for _, e := range s.MatchExpressions {
			switch e.Operator {
			case metav1.LabelSelectorOpIn:
				if len(e.Values) == 0 {
					return nil
				}
				in(e.Key, e.Values)
			case metav1.LabelSelectorOpNotIn:
				if len(e.Values) == 0 {
					return nil
				}
				x := at(e.Key)
				for _, v := range e.Values {
					x.except[v] = true
					delete(x.only, v)
				}
			case metav1.LabelSelectorOpExists:
				at(e.Key).absent = false
			case metav1.LabelSelectorOpDoesNotExist:
				at(e.Key).only = map[string]bool{}
			default:
				return nil
			}
		}
	}
	var out []string
	for _, k := range order {
		if x := keys[k]; !x.absent && x.only != nil && len(x.only) == 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
