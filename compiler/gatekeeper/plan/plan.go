// Package plan decides how mutations become policies so that the API server, which applies
// separate policies in an arbitrary order, gives Gatekeeper's result in every order.
//
// Gatekeeper runs all mutators in one sorted sequence and repeats it until the object stops
// changing. Mutations whose footprints (what they read, what they write) do not interact commute,
// so each can be its own policy; so do mutations whose matches no object meets both of at one
// point of the run, by what admission does not change (kind, operation, name, namespace, the
// namespace's labels; disjoint.go). Interacting mutations are grouped into one policy whose
// mutations run in Gatekeeper's order, repeated as many rounds as the group's backward
// dependencies need to reach Gatekeeper's fixed point; extra rounds are no-ops because every
// mutation is guarded exactly as Gatekeeper guards it.
//
// ModifySet merges into one list only add values, each unless the list holds it: none changes
// what the others leave in the list, and another pass adds nothing, so they need no round for
// each other; only their order decides the order of the new elements. Merges with the same
// location and path tests (UnionKey) are computed, in that order, in one expression
// (lower.MergeUnion), so that n such merges cost one mutation, not n mutations in n+1 rounds.
//
// The analysis is conservative: when unsure whether two mutations interact, it groups them.
//
// It is part of Gatekeeper's route (compiler/gatekeeper/backend runs it): it reasons in
// Gatekeeper's terms (its sorted fixed point, its walk of a location) and must not import another
// language's packages.
package plan

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/google/go-cmp/cmp"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/lower"
	"github.com/mapc-dev/mapc/internal/par"
)

// Group is a set of mutations emitted together, in Gatekeeper's order, Rounds times.
type Group struct {
	Mutations []*ir.Mutation
	// Rounds is how many times the group's mutations run; every mutation runs in every round,
	// as in Gatekeeper's passes (skipping one whose inputs did not change is wrong when a later
	// writer of the same place stops overwriting it: differential tests found both directions).
	Rounds int
	// Why lists the interactions that joined the group, for explain and comments.
	Why []string
	// Couplings are the pairs that must run within one mutation expression, since the API
	// server defaults the object between mutations (see defaults.go).
	Couplings []Coupling
}

// Plan groups interacting mutations. ms must be in Gatekeeper's order (sorted by SortKey).
func Plan(ms []*ir.Mutation) []*Group { return NewFuser().Plan(ms) }

// Plan is the package's Plan, keeping the footprints for the Fuser's later questions. It must not
// run beside another of the Fuser's methods.
func (z *Fuser) Plan(ms []*ir.Mutation) []*Group {
	fps := make([]*footprint, len(ms))
	planned := make(map[*ir.Mutation]*footprint, len(ms)+len(z.planned))
	for m, f := range z.planned {
		planned[m] = f
	}
	for i, m := range ms {
		fps[i] = z.footprint(m)
		planned[m] = fps[i]
	}
	z.planned = planned
	return plan(ms, fps, candidates(fps))
}

// plan groups ms, testing each mutation i against the mutations cand[i] only (ascending).
func plan(ms []*ir.Mutation, fps []*footprint, cand [][]int) []*Group {
	n := len(ms)
	// feeds[i][j]: j reads what i writes (j must run after i, maybe in a later round).
	feeds := make([]map[int]bool, n)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	why := map[int][]string{}
	couplings := map[int][]Coupling{}
	unions := map[string]map[int]bool{} // merges into one list (UnionKey) whose order matters
	var unionOrder []string
	orders := map[string]map[int]bool{} // by reason, the mutators whose order decides the result
	var orderReasons []string
	// The pairs are tested on every core (the tests only read the footprints), then joined in
	// their order.
	type tested struct {
		j            int
		coupling     string // why i and j are coupled by defaulting ("" when not)
		stable       bool   // the coupling's Stable
		interaction  string // interacts(i, j)
		read, unites bool
	}
	results := make([][]tested, n)
	par.Do(n, func(i int) {
		for _, j := range cand[i] {
			if i == j || !fps[i].overlaps(fps[j]) {
				continue
			}
			t := tested{j: j}
			if reason, r := fps[i].coupling(fps[j]); reason != "" && !shadowed(ms, fps, j, r) {
				t.coupling, t.stable = reason, setsIfUnset(ms[j], fps[j], r) && len(fps[i].appends) == 0
			}
			if !fps[i].apart(fps[j]) { // apart: never both on one object, neither sees the other's writes
				t.interaction, t.read = interacts(fps[i], fps[j])
				t.unites = t.interaction != "" && !t.read && fps[i].unites(fps[j])
			}
			if t.coupling != "" || t.interaction != "" {
				results[i] = append(results[i], t)
			}
		}
	})
	for i := 0; i < n; i++ {
		for _, t := range results[i] {
			j := t.j
			if reason := t.coupling; reason != "" {
				a, b := find(i), find(j)
				if a != b {
					parent[a] = b
				}
				couplings[i] = append(couplings[i], Coupling{A: ms[i], B: ms[j], Why: reason, Stable: t.stable})
				why[i] = append(why[i], reason)
			}
			if reason, read := t.interaction, t.read; reason != "" {
				if read {
					if feeds[i] == nil {
						feeds[i] = map[int]bool{}
					}
					feeds[i][j] = true
				}
				a, b := find(i), find(j)
				if a != b {
					parent[a] = b
				}
				if k := fps[i].union; t.unites {
					// One line for all the merges into the list, not one for each pair.
					if unions[k] == nil {
						unionOrder = append(unionOrder, k)
						unions[k] = map[int]bool{}
					}
					unions[k][i], unions[k][j] = true, true
				} else if read {
					why[i] = append(why[i], fmt.Sprintf("%s → %s: %s", ms[i].Source, ms[j].Source, reason))
				} else {
					// One line for all the mutators with the same reason (appends to one list,
					// writers of one field), not one for each pair.
					if orders[reason] == nil {
						orderReasons = append(orderReasons, reason)
						orders[reason] = map[int]bool{}
					}
					orders[reason][i], orders[reason][j] = true, true
				}
			}
		}
	}
	for _, k := range unionOrder {
		var idx []int
		for i := range unions[k] {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		names := make([]string, len(idx))
		for n, i := range idx {
			names[n] = ms[i].Source.String()
		}
		why[idx[0]] = append(why[idx[0]], fmt.Sprintf("%s: each merges values into %s (their order decides the order of the new elements)",
			strings.Join(names, ", "), ir.PathString(ms[idx[0]].Path)))
	}
	for _, reason := range orderReasons {
		// Mutators with one reason in different groups (matches apart) get a line each group.
		byGroup := map[int][]int{}
		for i := range orders[reason] {
			byGroup[find(i)] = append(byGroup[find(i)], i)
		}
		for _, idx := range byGroup {
			sort.Ints(idx)
			names := make([]string, len(idx))
			for n, i := range idx {
				names[n] = ms[i].Source.String()
			}
			r := reason
			if len(idx) > 2 {
				if rest, ok := strings.CutPrefix(r, "both "); ok {
					r = "all " + rest
				}
			}
			why[idx[0]] = append(why[idx[0]], fmt.Sprintf("%s: %s (their order decides the result)", strings.Join(names, ", "), r))
		}
	}
	byRoot := map[int][]int{}
	var roots []int
	for i := 0; i < n; i++ {
		r := find(i)
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], i)
	}
	indexOf := make(map[*ir.Mutation]int, n)
	for i, m := range ms {
		indexOf[m] = i
	}
	for i := range couplings {
		for c := range couplings[i] {
			cp := &couplings[i][c]
			j := indexOf[cp.B]
			for _, k := range byRoot[find(i)] {
				if !cp.Stable {
					break
				}
				if k != i && k != j && fps[k].overlaps(fps[j]) && fps[k].feedsBeyondMembers(fps[j]) {
					cp.Stable = false
				}
			}
		}
	}
	var out []*Group
	for _, r := range roots {
		idx := byRoot[r]
		g := &Group{}
		g.Rounds = rounds(idx, func(a, b int) bool { return feeds[a][b] })
		for _, i := range idx {
			g.Mutations = append(g.Mutations, ms[i])
			g.Why = append(g.Why, why[i]...)
			g.Couplings = append(g.Couplings, couplings[i]...)
		}
		sort.Strings(g.Why)
		out = append(out, g)
	}
	return out
}

// rounds simulates which mutations of a group can change anything in each of Gatekeeper's
// passes (every mutation is active in the first), and returns how many passes the group needs.
//
// In pass r a mutation is active when something it reads was changed after it ran: by a
// mutation sorted after it in pass r-1, or sorted before it in pass r. A mutation that writes
// where an earlier-sorted active mutation writes is active too, so that it still has the last
// word, as in Gatekeeper. Dependencies inside a cycle (a strongly connected set of s mutations)
// keep each other active for s passes, an assumption of convergence of the same kind as
// Gatekeeper's own bound (it gives up after one pass more than there are mutators); extra passes
// are harmless since a mutation whose inputs did not change changes nothing.
func rounds(idx []int, feeds func(a, b int) bool) int {
	k := len(idx)
	comp := scc(idx, feeds)
	size := map[int]int{}
	for _, c := range comp {
		size[c]++
	}
	// chg: may end the pass with a different output than it had at the end of the pass before.
	// (Writers of one place only need their order, which every pass keeps.)
	prev := make([]bool, k)
	for a := range prev {
		prev[a] = true
	}
	passes := 1
	for r := 2; r <= k+1; r++ {
		chg := make([]bool, k)
		anyChg := false
		for b := 0; b < k; b++ { // idx is in Gatekeeper's order
			for a := 0; a < k; a++ {
				if a == b || !feeds(idx[a], idx[b]) {
					continue
				}
				if comp[a] == comp[b] && size[comp[a]] > 1 && r > 1+size[comp[a]] {
					continue
				}
				if a > b && prev[a] || a < b && chg[a] {
					chg[b] = true
					break
				}
			}
			anyChg = anyChg || chg[b]
		}
		if !anyChg {
			break
		}
		passes = r
		prev = chg
	}
	return passes
}

// scc labels each of idx with its strongly connected component in feeds (Tarjan).
func scc(idx []int, feeds func(a, b int) bool) []int {
	k := len(idx)
	index, low, comp := make([]int, k), make([]int, k), make([]int, k)
	onStack := make([]bool, k)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	var stack []int
	next, ncomp := 0, 0
	var visit func(a int)
	visit = func(a int) {
		index[a], low[a] = next, next
		next++
		stack = append(stack, a)
		onStack[a] = true
		for b := 0; b < k; b++ {
			if a == b || !feeds(idx[a], idx[b]) {
				continue
			}
			if index[b] < 0 {
				visit(b)
				low[a] = min(low[a], low[b])
			} else if onStack[b] {
				low[a] = min(low[a], index[b])
			}
		}
		if low[a] == index[a] {
			for {
				b := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[b] = false
				comp[b] = ncomp
				if b == a {
					break
				}
			}
			ncomp++
		}
	}
	for a := 0; a < k; a++ {
		if index[a] < 0 {
			visit(a)
		}
	}
	return comp
}

// seg is one path segment; list elements keep their key so that different keys stay apart.
type seg struct {
	field    string
	list     bool
	keyField string
	keyValue string
	glob     bool
}

type path []seg

func (p path) String() string {
	steps := make([]ir.Step, len(p))
	for i, s := range p {
		steps[i] = ir.Step{Field: s.field, List: s.list, KeyField: s.keyField, KeyValue: s.keyValue, Glob: s.glob}
		if s.field == anyField {
			steps[i].Field = "*"
		}
	}
	return ir.PathString(steps)
}

// segCompatible: could a and b name the same node?
func segCompatible(a, b seg) bool {
	if a.list != b.list {
		return false
	}
	if !a.list {
		return a.field == b.field || a.field == anyField || b.field == anyField
	}
	if a.glob || b.glob || a.keyField != b.keyField {
		return true
	}
	return a.keyValue == b.keyValue
}

// prefixOf: is a a prefix (or the whole) of a path compatible with b?
func prefixOf(a, b path) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if !segCompatible(a[i], b[i]) {
			return false
		}
	}
	return true
}

// footprint is what a mutation reads and writes.
type footprint struct {
	m *ir.Mutation
	// classes are the classes of objects its match can match (see classes).
	classes int
	// full is the location.
	full path
	// writes: the location (value written), and list elements it may create.
	writes []path
	// creates: object fields along the path it may create when missing.
	creates []path
	// exists: nodes whose existence decides what it does (pathTests, add-only).
	exists []path
	// members: the list steps it selects elements with (the list's path plus the selector).
	members []path
	// values: nodes whose value (and everything below) it reads.
	values []path
	// keys: the key fields of list elements it compares (list[*].key).
	keys []path
	// appends: keyed list elements it may append.
	appends []path
	// setValue is the constant it sets, for commuting identical writers.
	setValue string
	// value is that constant itself.
	value any
	// literal is the keyed list element it puts in place when it creates it (or, assigning the
	// whole element, always), elemAt the index of that element's step in full; nil when none.
	literal map[string]any
	elemAt  int
	// cache holds what is computed once per footprint, when first asked; the copies toward
	// makes share it.
	cache *computedOnce
	// union is UnionKey(m).
	union string
}

func footprintOf(m *ir.Mutation) *footprint {
	f := &footprint{m: m, union: UnionKey(m), classes: classes(m.Match)}
	f.cache = &computedOnce{of: f}
	for i, st := range m.Path {
		s := seg{field: st.Field, list: st.List, keyField: st.KeyField, keyValue: st.KeyValue, glob: st.Glob}
		f.full = append(f.full, s)
		p := append(path(nil), f.full...)
		if m.ExistsOK[i] != m.MissingOK[i] {
			f.exists = append(f.exists, p)
		}
		if st.List {
			list := append(path(nil), f.full[:i]...)
			f.members = append(f.members, p) // the list and which elements it selects
			// The key field of every element is read to find matches.
			f.keys = append(f.keys, append(append(path(nil), list...), seg{list: true, glob: true, keyField: st.KeyField}, seg{field: st.KeyField}))
			if !st.Glob && m.MissingOK[i] && persists(m, i) {
				f.appends = append(f.appends, p)
				if i < len(m.Path)-1 {
					f.writes = append(f.writes, p) // creates a new element on the way
				}
			}
		} else if m.MissingOK[i] && i < len(m.Path)-1 && persists(m, i) {
			f.creates = append(f.creates, p)
		}
	}
	f.writes = append(f.writes, f.full)
	switch op := m.Op.(type) {
	case ir.RewriteImage:
		if c, ok := lower.ConstantImage(op); ok {
			// It writes that constant whatever the image was: an Assign of it.
			f.setValue, f.value = fmt.Sprintf("%#v", c), c
		} else {
			f.values = append(f.values, f.full)
		}
	case ir.MergeSet, ir.PruneSet:
		f.values = append(f.values, f.full)
	case ir.SetValue:
		if op.FromMetadata == "" {
			f.setValue = fmt.Sprintf("%#v", op.Value)
			f.value = op.Value
		}
	}
	f.literal, f.elemAt = literalOf(m)
	for _, k := range selectorKeys(m.Match) {
		f.values = append(f.values, path{{field: "metadata"}, {field: "labels"}, {field: k}})
	}
	return f
}

func selectorKeys(m ir.Match) []string {
	var keys []string
	if s := m.LabelSelector; s != nil {
		for k := range s.MatchLabels {
			keys = append(keys, k)
		}
		for _, e := range s.MatchExpressions {
			keys = append(keys, e.Key)
		}
	}
	if s := m.NamespaceSelector; s != nil {
		// For Namespace objects Gatekeeper reads the object's own labels.
		for k := range s.MatchLabels {
			keys = append(keys, k)
		}
		for _, e := range s.MatchExpressions {
			keys = append(keys, e.Key)
		}
	}
	sort.Strings(keys)
	return keys
}

// createdElement is the keyed list element a constant Assign puts in place, and the index of
// its step: the whole value when the location is the element itself (Assign replaces it, or
// appends it), or, when the last list step on the location is a key that Gatekeeper creates when
// missing (persists), the new element {key: value, the rest of the path: the value}.
func createdElement(m *ir.Mutation, v any) (map[string]any, int) {
	last := -1
	for i, st := range m.Path {
		if st.List {
			last = i
		}
	}
	if last < 0 || m.Path[last].Glob {
		return nil, 0
	}
	if last == len(m.Path)-1 {
		lit, _ := v.(map[string]any)
		return lit, last
	}
	if !m.MissingOK[last] || !persists(m, last) {
		return nil, 0
	}
	st := m.Path[last]
	for i := len(m.Path) - 1; i > last; i-- {
		v = map[string]any{m.Path[i].Field: v}
	}
	lit := v.(map[string]any)
	if _, clash := lit[st.KeyField]; clash {
		return nil, 0
	}
	lit[st.KeyField] = st.KeyValue
	return lit, last
}

// keepsLiteral: is g's effect on the element f creates (f.literal) no change at all? So when g
// sets a constant (creating no list element) at a field of elements that may be f's, and f's
// element already holds exactly that value there: g writes the value where it is, whatever its
// tests decide, and where f replaces the element after g, g's writes there are gone. And when
// g prunes a list below such elements (object fields only) that f's element lacks (though it
// has every parent of the list: Gatekeeper creates missing ones), or that holds none of g's
// values: g removes nothing there, and where f replaces the element after g, what g
// removed from the one before is gone with it. (One expression computing both from the same
// object must then leave that element out of g's operations: prunedAround.) Where f's element
// is completed (plan.Complete), the element f writes is Gatekeeper's final one, and any g that
// Gatekeeper's own mutator shows changes nothing in it keeps it (keepsCompleted).
func (g *footprint) keepsLiteral(f *footprint) bool {
	prune, isPrune := g.m.Op.(ir.PruneSet)
	if f.literal == nil || len(g.full) <= f.elemAt+1 {
		return false
	}
	for j := 0; j <= f.elemAt; j++ {
		if !segCompatible(f.full[j], g.full[j]) {
			return false
		}
	}
	if isPrune && f.elemAt == len(f.full)-1 {
		// f replaces elements: only of a list at a fixed path, whose first element with the
		// key one expression can find (lower.Replaced), and not by the key g reaches below.
		for _, s := range f.full[:f.elemAt] {
			if s.list {
				return false
			}
		}
		if g.full[f.elemAt+1].field == f.full[f.elemAt].keyField {
			return false
		}
	}
	if len(f.m.Completions) > 0 {
		return g.keepsCompleted(f)
	}
	if g.setValue == "" && !isPrune || len(g.appends) > 0 {
		return false
	}
	var v any = f.literal
	for k, s := range g.full[f.elemAt+1:] {
		obj, ok := v.(map[string]any)
		if s.list || s.field == anyField || !ok {
			return false
		}
		if v, ok = obj[s.field]; !ok {
			// Where the list itself is missing there is nothing to prune; a missing parent of
			// it, Gatekeeper's walk creates (empty) before it finds nothing to prune, which
			// changes the element.
			return isPrune && f.elemAt+1+k == len(g.full)-1
		}
	}
	if isPrune {
		return prunesNothing(v, prune.Values)
	}
	return reflect.DeepEqual(v, g.value)
}

// keepsCompleted is keepsLiteral for an f whose element is completed (ir.Completion): does
// Gatekeeper's own mutator for g change nothing in the element f writes, whichever of f's
// conditional completions hold (those of g itself only where g applies)?
func (g *footprint) keepsCompleted(f *footprint) bool {
	mut, ok := lower.Engine(g.m)
	if !ok {
		return false
	}
	for _, v := range f.completedVariants() {
		if v.off[g.m] {
			continue // g does not apply there
		}
		if v.elem == nil {
			return false
		}
		if _, changed, ok := lower.InElement(mut, g.m.Path, f.elemAt, v.elem); !ok || changed {
			return false
		}
	}
	return true
}

// completedVariant is the element f writes (nil when it could not be computed) when the
// conditional completions in off do not hold and the others do.
type completedVariant struct {
	off  map[*ir.Mutation]bool
	elem map[string]any
}

// completedVariants is the element f writes for every subset of its conditional completions,
// computed once.
func (f *footprint) completedVariants() []completedVariant {
	c := f.cache
	c.variantsOnce.Do(func() { c.variants = c.of.computeVariants() })
	return c.variants
}

// computedOnce holds what a footprint computes once, when first asked: fusing asks on every
// core. It is computed from the footprint as footprintOf made it (of), whichever copy asks.
type computedOnce struct {
	of           *footprint
	defsOnce     sync.Once
	defs         []defaulted // defaultsAfter
	variantsOnce sync.Once
	variants     []completedVariant // completedVariants
}

func (f *footprint) computeVariants() []completedVariant {
	var variants []completedVariant
	var conds []*ir.Mutation
	for _, c := range f.m.Completions {
		if when, err := lower.CompletionGuardFor(c.By.Match, f.m.Match); err != nil || when != cel.True {
			conds = append(conds, c.By)
		}
	}
	ops := lower.CompletionOps(f.m)
	lower.EachSubset(conds, func(off map[*ir.Mutation]bool) bool {
		elem, _, ok := lower.CompleteElement(f.m, f.elemAt, f.literal, ops, func(m *ir.Mutation) bool { return !off[m] })
		if !ok {
			elem = nil
		}
		variants = append(variants, completedVariant{off: off, elem: elem})
		return true
	})
	return variants
}

// prunesNothing: is v a list none of whose elements may equal one of vals? Compared as JSON,
// so that numbers of different Go types that denote the same value count as equal.
func prunesNothing(v any, vals []any) bool {
	l, ok := v.([]any)
	if !ok {
		return false
	}
	for _, x := range l {
		xj, err := json.Marshal(x)
		if err != nil {
			return false
		}
		for _, val := range vals {
			vj, err := json.Marshal(val)
			if err != nil || string(xj) == string(vj) {
				return false
			}
		}
	}
	return true
}

// addsAround: does f write in a keyed list element only where it creates it (a MustNotExist on
// the element), and g reach the elements of that list through a glob, keeping f's element
// (keepsLiteral: f writes it completed)? From one object, g's operations reach the elements that
// are there, never the one f appends, which already holds what g would do there.
func (f *footprint) addsAround(g *footprint) bool {
	if f.literal == nil || f.m.ExistsOK[f.elemAt] || len(g.full) <= f.elemAt+1 || !g.full[f.elemAt].glob {
		return false
	}
	return g.keepsLiteral(f)
}

// prunedAround: does f assign whole elements of a list that g prunes below (keepsLiteral)?
// Computed from the same object in one expression, g's operations on the element f replaces
// would apply to the element f removes; leaving that element out (lower.Replaced), g's
// operations are those it does on the other elements in Gatekeeper's run, in either order.
func (f *footprint) prunedAround(g *footprint) bool {
	_, isPrune := g.m.Op.(ir.PruneSet)
	return isPrune && f.elemAt == len(f.full)-1 && g.keepsLiteral(f)
}

// PrunedAround is prunedAround for mutations: must g's operations leave out the element f
// replaces, when the two are computed in one expression?
func (z *Fuser) PrunedAround(f, g *ir.Mutation) bool {
	return z.footprint(f).prunedAround(z.footprint(g))
}

// toward is f as g sees it: when g keeps the element f creates (keepsLiteral), creating or
// replacing that element (and the nodes on the way to it) neither changes what g does nor
// undoes it, so those writes drop out.
func (f *footprint) toward(g *footprint) *footprint {
	if !g.keepsLiteral(f) {
		return f
	}
	elem := f.full[:f.elemAt+1]
	c := *f
	c.writes, c.appends = nil, nil
	for _, w := range f.writes {
		if !reflect.DeepEqual(w, elem) {
			c.writes = append(c.writes, w)
		}
	}
	for _, a := range f.appends {
		if !reflect.DeepEqual(a, elem) {
			c.appends = append(c.appends, a)
		}
	}
	// Nodes created on the way (the list, its parents) are created only along with the element
	// and hold nothing else.
	c.creates = nil
	for _, n := range f.creates {
		if len(n) > len(elem) {
			c.creates = append(c.creates, n)
		}
	}
	return &c
}

// interacts is affects for a pair, each footprint as the other sees it (toward).
func interacts(f, g *footprint) (string, bool) { return interactsIf(f, g, false) }

// interactsIf is interacts, with overwritesIf's inOrder (affectsIf for the pair).
func interactsIf(f, g *footprint, inOrder bool) (string, bool) {
	return f.toward(g).affectsIf(g.toward(f), inOrder)
}

// affectsIf says why running f can change what g does ("" when it cannot), and whether g reads
// what f writes (a dependency that may need another round) rather than both writing one place
// (which only needs the order); inOrder is overwritesIf's.
func (f *footprint) affectsIf(g *footprint, inOrder bool) (string, bool) {
	if r := f.feeds(g); r != "" {
		return r, true
	}
	return f.overwritesIf(g, inOrder), false
}

// sameValueSamePath: do f and g set the same constant at the same field, in list elements that
// may be the same (the same object fields; a glob and a key, or the same key, on each list) and
// neither creating a list element? Then a test of that field by either cannot tell the other's
// write from its own: whichever runs first, the field ends up holding the value wherever one of
// them writes it, and each decision about the field gives the same result. (g's other tests
// still count.)
func (f *footprint) sameValueSamePath(g *footprint) bool {
	if f.setValue == "" || f.setValue != g.setValue || len(f.full) != len(g.full) || len(f.appends) > 0 || len(g.appends) > 0 {
		return false
	}
	for i, a := range f.full {
		b := g.full[i]
		if a.list != b.list || !a.list && a != b || a.list && !segCompatible(a, b) {
			return false
		}
	}
	return true
}

// sameConstantLeaf: do f and g set the same constant at one object field, through list
// elements that may be the same, without tests, with at most one of them appending an element
// on the way? Computed from one object, they then give the same operations for every element
// both reach (an "add" of the constant, or of the same parent holding it), and the appended
// element is added once.
func (f *footprint) sameConstantLeaf(g *footprint) bool {
	if f.setValue == "" || f.setValue != g.setValue || len(f.full) != len(g.full) || len(f.appends) > 0 && len(g.appends) > 0 {
		return false
	}
	for i, a := range f.full {
		b := g.full[i]
		if a.list != b.list || !a.list && a != b || a.list && !segCompatible(a, b) {
			return false
		}
	}
	if f.full[len(f.full)-1].list {
		return false
	}
	for _, m := range []*ir.Mutation{f.m, g.m} {
		for i := range m.Path {
			if !m.ExistsOK[i] || !m.MissingOK[i] {
				return false
			}
		}
	}
	return true
}

// fillsElement: does g set, with one "add" of a constant whatever is there (no test), a field
// right below the list elements f writes or creates whole (keyed), where f's element already
// holds that constant (keepsLiteral, completions included)? Computed from one object, g's
// operation on an element f replaces writes what f's element holds, before or after f's, and
// an element f appends is not among those g's operations reach.
func (f *footprint) fillsElement(g *footprint) bool {
	if g.setValue == "" || !g.keepsLiteral(f) || f.elemAt != len(f.full)-1 || len(g.full) != f.elemAt+2 || len(g.appends) > 0 {
		return false
	}
	for i := range g.m.Path {
		if !g.m.ExistsOK[i] || !g.m.MissingOK[i] {
			return false
		}
	}
	return true
}

// replacesElement: is sel g's whole location, one keyed element (no glob) that g assigns whole,
// and does the path of f (which writes or creates nodes on it) run through that very element?
// Then what f does there cannot change what g does: g puts its value in the element's place,
// which is where the element was, or the end of the list, where f would have appended it.
func (g *footprint) replacesElement(sel, f path) bool {
	if len(sel) != len(g.full) || g.setValue == "" || sel[len(sel)-1].glob || len(f) < len(sel) {
		return false
	}
	for i := range sel {
		if f[i] != sel[i] || f[i].glob {
			return false
		}
	}
	return true
}

// fixesImage: are f and g AssignImages, f setting every part of the reference (so that it
// writes one constant, whatever the image was) and g leaving that constant as it is? Then what
// g reads from f's write changes nothing g does: g writes nothing there.
func (f *footprint) fixesImage(g *footprint) bool {
	fo, ok := f.m.Op.(ir.RewriteImage)
	gop, ok2 := g.m.Op.(ir.RewriteImage)
	if !ok || !ok2 {
		return false
	}
	c, ok := lower.ConstantImage(fo)
	return ok && lower.RewriteImageString(c, gop) == c
}

// imagesCommute: are f and g AssignImages of images that may be one (compatible paths of one
// length) setting different parts of the reference (say a registry mirror's domain and a tag
// pin's tag)? Gatekeeper's AssignImage splits the image into domain, path and tag, replaces the
// parts it sets and joins them again (a missing image is ""). Joining and splitting again gives
// the same parts back: the tag starts at the first ":" or "@" after the path, which has neither,
// and a path is read as holding a domain only where the domain is empty, which Gatekeeper refuses
// for a mutator setting a path without a domain (a domain-like path "leaks", its validation
// says) and which a parsed path cannot be. So each keeps the part the other set: either order
// gives the same image, and neither changes it again in another pass.
func (f *footprint) imagesCommute(g *footprint) bool {
	fo, ok := f.m.Op.(ir.RewriteImage)
	gop, ok2 := g.m.Op.(ir.RewriteImage)
	if !ok || !ok2 || len(f.full) != len(g.full) || !prefixOf(f.full, g.full) {
		return false
	}
	return (fo.Domain == "" || gop.Domain == "") && (fo.Path == "" || gop.Path == "") && (fo.Tag == "" || gop.Tag == "")
}

// feeds says why g reads something f writes.
func (f *footprint) feeds(g *footprint) string {
	same := f.sameValueSamePath(g)
	// Merges of one union walk the same path with the same tests: what f creates on the way (a
	// keyed element, objects) g creates alike where f has not, and the list in it g only adds to
	// (mergesInto). Their existence tests still count.
	uni := f.unites(g)
	for _, w := range f.writes {
		for _, e := range g.exists {
			if same && len(e) == len(g.full) {
				continue // the test of the very field both set alike (sameValueSamePath)
			}
			// Replacing or creating the tested node or an ancestor (nodes f creates on the way
			// are in f.writes and f.creates too).
			if prefixOf(w, e) {
				return fmt.Sprintf("writes %s, whose existence %s tests", w, g.m.Source)
			}
		}
		for _, sel := range g.members {
			// Replacing the list (or an ancestor), or adding or replacing an element it selects.
			l := sel[:len(sel)-1]
			if g.replacesElement(sel, f.full) || uni {
				continue
			}
			if prefixOf(w, l) || len(w) == len(sel) && prefixOf(sel, w) && w[len(w)-1].list {
				return fmt.Sprintf("changes the elements of %s, which %s selects from", l, g.m.Source)
			}
		}
		for _, v := range g.values {
			if len(w) == len(f.full) && (f.fixesImage(g) || f.imagesCommute(g)) {
				continue
			}
			if len(w) == len(f.full) && (f.mergesInto(g, v) || f.setsCommute(g)) || uni && prefixOf(v, f.full) {
				continue
			}
			if prefixOf(w, v) || prefixOf(v, w) {
				return fmt.Sprintf("writes %s, which %s reads", w, g.m.Source)
			}
		}
		for _, k := range g.keys {
			// Changing a key field, or replacing the list; adding elements is a membership change.
			if len(w) == len(k) && prefixOf(w, k) || len(w) <= len(k)-2 && prefixOf(w, k) {
				return fmt.Sprintf("writes %s, a key %s compares", w, g.m.Source)
			}
		}
	}
	for _, c := range f.creates {
		for _, e := range g.exists {
			if prefixOf(c, e) && len(c) == len(e) {
				return fmt.Sprintf("may create %s, whose existence %s tests", c, g.m.Source)
			}
		}
		for _, sel := range g.members {
			// The new list holds only f's element: it matters to g's selector if that selects it.
			if g.replacesElement(sel, f.full) || uni {
				continue
			}
			if l := sel[:len(sel)-1]; prefixOf(c, l) && len(c) == len(l) && len(f.full) > len(c) && segCompatible(sel[len(sel)-1], f.full[len(c)]) {
				return fmt.Sprintf("may create the list %s, which %s selects from", c, g.m.Source)
			}
		}
		for _, v := range g.values {
			if f.mergesInto(g, v) || uni && prefixOf(v, f.full) || f.setsCommute(g) && prefixOf(c, v) {
				continue // created only along with the list f merges into (or prunes: its parents)
			}
			if prefixOf(v, c) || prefixOf(c, v) && len(v) <= len(f.full) && prefixOf(v, f.full) {
				return fmt.Sprintf("may create %s, which %s reads", c, g.m.Source)
			}
		}
	}
	return ""
}

// overwritesIf says why f and g write the same place (order decides the result); with inOrder,
// f's operations come before g's in one expression, which keeps the order of elements both
// append (orderedAppends).
func (f *footprint) overwritesIf(g *footprint, inOrder bool) string {
	if inOrder && f.unites(g) {
		return "" // one expression computes both, in this order (lower.MergeUnion)
	}
	for _, w := range f.writes {
		for _, w2 := range g.writes {
			if !prefixOf(w, w2) && !prefixOf(w2, w) {
				continue
			}
			if len(w) == len(w2) && f.setValue != "" && f.setValue == g.setValue && len(w) == len(f.full) && len(w2) == len(g.full) {
				continue // the same value at the same place: order cannot matter
			}
			if len(w) == len(w2) && len(w) < len(f.full) && len(w2) < len(g.full) {
				continue // both may create the same keyed element on the way: creation merges
			}
			if len(w) == len(f.full) && len(w2) == len(g.full) && (f.setsCommute(g) || f.imagesCommute(g)) {
				continue // a prune and a merge of other values, two prunes, or two AssignImages of different parts: either order
			}
			return fmt.Sprintf("both write %s", w)
		}
	}
	for _, a := range f.appends {
		for _, b := range g.appends {
			if inOrder && orderedAppends(a, b) {
				continue
			}
			if prefixOf(a[:len(a)-1], b[:len(b)-1]) && len(a) == len(b) && !prefixOf(a, b) {
				return fmt.Sprintf("both append to %s, so the order of the new elements depends on which runs first", a[:len(a)-1])
			}
		}
	}
	return ""
}

// orderedAppends: do a and b append elements of different keys (one key field) to one list,
// outside other lists or in every element of them (globs: the same list in each element, and
// neither may create an element of the lists above)? Computed from one object in one
// expression, each appends its element when its key is missing, and the "add .../-" operations
// put them in the order of the operations, in each element alike; the list itself, when
// missing, is created once for both (SharedCreations), in each element.
func orderedAppends(a, b path) bool {
	l := len(a) - 1
	if len(b) != len(a) || l < 1 || a[l].glob || b[l].glob || !a[l].list || !b[l].list || a[l].keyField != b[l].keyField || a[l].keyValue == b[l].keyValue {
		return false
	}
	for i := 0; i < l; i++ {
		if a[i] != b[i] || a[i].list && !a[i].glob {
			return false
		}
	}
	return true
}

// mergesInto: are f and g ModifySet merges into lists that may be one (compatible paths), and v
// the list g reads? Then what f writes there, or creates on the way to it, changes nothing g's
// merge leaves in the list: f only adds values (each unless present), never removes one, so g's
// values end up in the list once each whichever runs first, and another pass adds nothing. Only
// the order of the new elements depends on which runs first, which overwritesIf says; merges
// into one list never need another round for each other. (What else g reads, and writes on the
// way, such as a keyed element f may append, is compared as usual.)
func (f *footprint) mergesInto(g *footprint, v path) bool {
	_, fm := f.m.Op.(ir.MergeSet)
	_, gm := g.m.Op.(ir.MergeSet)
	return fm && gm && len(v) == len(g.full) && len(f.full) == len(g.full) && prefixOf(f.full, v)
}

// setsCommute: are f and g ModifySets of lists that may be one (compatible paths of one length),
// two prunes, or a prune and a merge none of whose values (strings, compared as Gatekeeper
// compares them) the prune removes, the merge's values each once? A prune removes its values
// wherever they are and a merge appends the values the list lacks at its end, so either order
// leaves the same list; neither needs another pass for the other. (An empty list the API server
// drops between mutations is missing to the merge, which then sets its values: the same list,
// since they are distinct. A prune creates the list's missing parents, as a merge does on the
// way: their creations are compared as usual.)
func (f *footprint) setsCommute(g *footprint) bool {
	if len(f.full) != len(g.full) || !prefixOf(f.full, g.full) {
		return false
	}
	fp, fPrune := f.m.Op.(ir.PruneSet)
	gp, gPrune := g.m.Op.(ir.PruneSet)
	fmg, fMerge := f.m.Op.(ir.MergeSet)
	gmg, gMerge := g.m.Op.(ir.MergeSet)
	switch {
	case fPrune && gPrune:
		return true
	case fPrune && gMerge:
		return disjointStrings(fp.Values, gmg.Values)
	case fMerge && gPrune:
		return disjointStrings(gp.Values, fmg.Values)
	}
	return false
}

// disjointStrings: are all of pruned and merged strings, merged distinct, and none of merged
// one of pruned?
func disjointStrings(pruned, merged []any) bool {
	seen := map[string]bool{}
	for _, v := range pruned {
		s, ok := v.(string)
		if !ok {
			return false
		}
		seen[s] = true
	}
	mine := map[string]bool{}
	for _, v := range merged {
		s, ok := v.(string)
		if !ok || seen[s] || mine[s] {
			return false
		}
		mine[s] = true
	}
	return true
}

// unites: are f and g merges that one expression computes together (UnionKey), f's values
// first?
func (f *footprint) unites(g *footprint) bool {
	return f.union != "" && f.union == g.union
}

// UnionKey is, for a ModifySet merge that can be computed with others in one expression
// (lower.MergeUnion), or a prune (lower.PruneUnion), what must be the same for them: the
// operation, its location and its path tests; else "".
// Merges with the same key, computed from one object in Gatekeeper's order, give what they give
// one after the other: each value is added unless the list holds it or an earlier merge of the
// union that applies adds it. Left out are merges without values (Gatekeeper sets an empty list
// where it is missing), with a value twice (Gatekeeper sets the duplicates where the list is
// missing) and with completions (their new element is written with others' values).
func UnionKey(m *ir.Mutation) string {
	if op, ok := m.Op.(ir.PruneSet); ok {
		// Prunes of one list likewise (lower.PruneUnion): removals of values commute, so each
		// removes its values whichever runs first (setsCommute) and one expression removes them
		// all. Keyed apart from merges, which a prune of one list does not join.
		if len(op.Values) == 0 || len(m.Completions) > 0 {
			return ""
		}
		return fmt.Sprintf("prune %s %v %v", ir.PathKey(m.Path), m.ExistsOK, m.MissingOK)
	}
	op, ok := m.Op.(ir.MergeSet)
	if !ok || len(op.Values) == 0 || len(m.Completions) > 0 {
		return ""
	}
	for i, v := range op.Values {
		for _, u := range op.Values[:i] {
			if cmp.Equal(u, v) {
				return ""
			}
		}
	}
	return fmt.Sprintf("%s %v %v", ir.PathKey(m.Path), m.ExistsOK, m.MissingOK)
}

// UnionKey is the package's UnionKey, computed once per mutation.
func (z *Fuser) UnionKey(m *ir.Mutation) string { return z.footprint(m).union }

// kindsOverlap: could one request be matched by both, by its kind and operation?
func kindsOverlap(a, b ir.Match) bool {
	if len(a.Rules) == 0 || len(b.Rules) == 0 {
		var r []ir.Rule
		var other ir.Match
		switch {
		case len(a.Rules) == 0 && len(b.Rules) == 0:
			return anyInBoth(a.Operations, b.Operations) && groupKindsOverlap(a.Kinds, b.Kinds)
		case len(a.Rules) == 0:
			r, other = b.Rules, a
		default:
			r, other = a.Rules, b
		}
		for _, x := range r {
			if kindAllowed(other, x.Group, x.Kind) && anyInBoth(x.Operations, other.Operations) {
				return true
			}
		}
		return false
	}
	for _, x := range a.Rules {
		for _, y := range b.Rules {
			if x.Group == y.Group && x.Version == y.Version && x.Kind == y.Kind && anyInBoth(x.Operations, y.Operations) {
				return true
			}
		}
	}
	return false
}

// anyInBoth: may one name (an operation, a group, a kind) be in both a and b, where an empty
// list or "*" means any?
func anyInBoth(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 || has(a, "*") || has(b, "*") {
		return true
	}
	for _, x := range a {
		if has(b, x) {
			return true
		}
	}
	return false
}

// groupKindsOverlap: may one (group, kind) be allowed by both match.kinds lists (empty: any)?
func groupKindsOverlap(a, b []ir.GroupKinds) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		for _, y := range b {
			if anyInBoth(x.Groups, y.Groups) && anyInBoth(x.Kinds, y.Kinds) {
				return true
			}
		}
	}
	return false
}

func kindAllowed(m ir.Match, group, kind string) bool {
	if len(m.Kinds) == 0 {
		return true
	}
	for _, k := range m.Kinds {
		km := len(k.Kinds) == 0 || has(k.Kinds, "*") || has(k.Kinds, kind)
		gm := len(k.Groups) == 0 || has(k.Groups, "*") || has(k.Groups, group)
		if km && gm {
			return true
		}
	}
	return false
}

func has(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// persists reports whether Gatekeeper keeps what it creates for a missing element at depth i:
// only when the rest of the path can be walked on fresh, empty values down to the end (a glob
// over a new, empty list writes nothing, and a MustExist below stops the walk).
func persists(m *ir.Mutation, i int) bool {
	for j := i + 1; j < len(m.Path); j++ {
		if !m.MissingOK[j] || m.Path[j].List && m.Path[j].Glob {
			return false
		}
	}
	return true
}

// Fusable reports whether a and b can be computed from the same object and their patches
// applied together: neither reads or overwrites what the other writes. Object nodes both may
// create on the part of their paths they share are allowed (SharedCreations lists them; they are
// created once, first), other shared creations (keyed list elements) are not.
func Fusable(a, b *ir.Mutation) bool { return NewFuser().Fusable(a, b) }

// Fuser answers Fusable for many pairs of one set of mutations, computing each footprint once.
// The mutations must not change while it is in use.
type Fuser struct {
	// planned holds the footprints of the mutations given to Plan: written by Plan alone, which
	// must not run beside another method, then only read, without a lock. more holds the
	// others (policies are built in parallel).
	planned map[*ir.Mutation]*footprint
	more    sync.Map // *ir.Mutation → *footprint
	// shares holds the pairs {M, By} of CreateOnly that may share the creation of their
	// element (ShareCreation).
	shares map[[2]*ir.Mutation]bool
}

// ShareCreation lets o.M and o.By be fused though both write and may append the same element:
// the expression must then compute o.By's append only where o.M's match does not hold (see
// OnlyCreating.SharesCreation, which must hold).
func (z *Fuser) ShareCreation(o OnlyCreating) {
	if z.shares == nil {
		z.shares = map[[2]*ir.Mutation]bool{}
	}
	z.shares[[2]*ir.Mutation{o.M, o.By}] = true
}

// SharesCreation: were a and b, in either order, given to ShareCreation?
func (z *Fuser) SharesCreation(a, b *ir.Mutation) bool {
	return z.shares[[2]*ir.Mutation{a, b}] || z.shares[[2]*ir.Mutation{b, a}]
}

// NewFuser returns an empty Fuser.
func NewFuser() *Fuser { return &Fuser{} }

// footprint is m's footprint, computed once: it is read for every pair a plan compares, on
// every core, so the read takes no lock (two cores may both compute a new one; one is kept).
func (z *Fuser) footprint(m *ir.Mutation) *footprint {
	if f, ok := z.planned[m]; ok {
		return f
	}
	if f, ok := z.more.Load(m); ok {
		return f.(*footprint)
	}
	f, _ := z.more.LoadOrStore(m, footprintOf(m))
	return f.(*footprint)
}

// Commute reports whether a and b neither interact nor are coupled by defaulting (plan.Plan
// puts them in different groups): either order gives the same object. Fusable pairs commute; some commuting pairs cannot be
// fused (one writes a node the other replaces).
func (z *Fuser) Commute(a, b *ir.Mutation) bool {
	if a == b {
		return false
	}
	fa, fb := z.footprint(a), z.footprint(b)
	if !fa.overlaps(fb) {
		return true
	}
	c1, _ := fa.coupling(fb)
	c2, _ := fb.coupling(fa)
	if fa.apart(fb) {
		return c1 == "" && c2 == ""
	}
	r1, _ := interacts(fa, fb)
	r2, _ := interacts(fb, fa)
	return r1 == "" && r2 == "" && c1 == "" && c2 == ""
}

// Fusable is the package's Fusable.
func (z *Fuser) Fusable(a, b *ir.Mutation) bool { return z.WhyNot(a, b) == "" }

// WhyNot says why a and b cannot be fused ("" when they can).
func (z *Fuser) WhyNot(a, b *ir.Mutation) string { return z.whyNot(a, b, false) }

// FusableInOrder reports whether b can be fused with a when a's operations come first: as
// Fusable, and also when they only append elements of different keys to one list
// (orderedAppends), whose order the operations' order keeps. Such a pair does not commute: a
// schedule must not move b before a.
func (z *Fuser) FusableInOrder(a, b *ir.Mutation) bool { return z.WhyNotInOrder(a, b) == "" }

// WhyNotInOrder says why b cannot be fused with a when a's operations come first.
func (z *Fuser) WhyNotInOrder(a, b *ir.Mutation) string { return z.whyNot(a, b, true) }

// AppendKey is, for a mutation that may append an element to a keyed list outside other lists
// or in every element of them (globs), the list's path (the same for every such mutation of
// that list), else "": fused operations sorted by it keep the order of appends to one list.
func AppendKey(m *ir.Mutation) string {
	for i, st := range m.Path {
		if st.List {
			if st.Glob {
				continue
			}
			if !m.MissingOK[i] {
				return ""
			}
			return ir.PathString(m.Path[:i]) + "[+]"
		}
	}
	return ""
}

func (z *Fuser) whyNot(a, b *ir.Mutation, inOrder bool) string {
	if !kindsOverlap(a.Match, b.Match) {
		return ""
	}
	fa, fb := z.footprint(a), z.footprint(b)
	if a == b {
		return fmt.Sprintf("%s runs again (a later round)", a.Source)
	}
	// Apart, at most one of them applies to the object the expression computes from: neither
	// sees the other's operations, and no node gets operations from both. Only the nodes they
	// share are created for both (SharedCreations).
	apart := fa.apart(fb)
	sentence := func(x, y *ir.Mutation, r string) string {
		if strings.HasPrefix(r, "both ") {
			return fmt.Sprintf("%s and %s %s", x.Source, y.Source, r)
		}
		return fmt.Sprintf("%s %s", x.Source, r)
	}
	if !apart {
		if r, _ := interactsIf(fa, fb, inOrder); r != "" {
			return sentence(a, b, r)
		}
		if r, _ := interactsIf(fb, fa, inOrder); r != "" {
			return sentence(b, a, r)
		}
	}
	shared := 0
	for shared < len(fa.full) && shared < len(fb.full) && segCompatible(fa.full[shared], fb.full[shared]) {
		shared++
	}
	// Writes of one constant at one field, of which one may append the element on the way,
	// give the same operations wherever both write, from the same object.
	alike := apart || fa.sameConstantLeaf(fb) || fa.fillsElement(fb) || fb.fillsElement(fa) || z.SharesCreation(a, b) ||
		fa.prunedAround(fb) || fb.prunedAround(fa) || fa.addsAround(fb) || fb.addsAround(fa) || inOrder && fa.unites(fb)
	if (len(fa.full) <= shared || len(fb.full) <= shared) && !fa.sameValueSamePath(fb) && !alike {
		return fmt.Sprintf("%s writes %s and %s writes %s, which may be the same node (one expression does not write a node twice)", a.Source, fa.full, b.Source, fb.full)
	}
	for _, pair := range [][2]*footprint{{fa, fb}, {fb, fa}} {
		f, o := pair[0], pair[1]
		for _, c := range f.appends {
			if len(c) > shared || alike {
				continue
			}
			// Two "add .../-" of one element would add it twice; where only f may append it,
			// o's operations reach the elements that were there (what o then does to f's new
			// element is an interaction, decided above).
			for _, d := range o.appends {
				if len(d) == len(c) && prefixOf(c, d) {
					return fmt.Sprintf("%s and %s may both create the list element %s", a.Source, b.Source, c)
				}
			}
		}
		for _, c := range f.creates {
			if len(c) <= shared && !samePrefix(a.Path, b.Path, len(c)) {
				return fmt.Sprintf("%s and %s may both create %s, on paths that differ", a.Source, b.Source, c)
			}
			if j := f.mustNotExistAbove(len(c)); j >= 0 && o.createsAt(len(c)) && samePrefix(a.Path, b.Path, len(c)) {
				// Created once for both where either applies and the node's parent is there
				// (SharedCreations), though f creates it only along with that ancestor.
				return fmt.Sprintf("%s and %s may both create %s, which %s creates only where %s is missing", a.Source, b.Source, c, f.m.Source, f.full[:j+1])
			}
		}
	}
	return ""
}

// mustNotExistAbove is the index of the first step above depth (a strict ancestor of the node
// f.full[:depth]) that f's walk goes on from only when it is missing (MustNotExist), or -1.
func (f *footprint) mustNotExistAbove(depth int) int {
	for j := 0; j < depth-1; j++ {
		if !f.m.ExistsOK[j] {
			return j
		}
	}
	return -1
}

// createsAt: may f create the object node at depth (f.full[:depth])?
func (f *footprint) createsAt(depth int) bool {
	for _, c := range f.creates {
		if len(c) == depth {
			return true
		}
	}
	return false
}

// samePrefix: are the first n steps of a and b the same steps (not just compatible)?
func samePrefix(a, b []ir.Step, n int) bool {
	if len(a) < n || len(b) < n {
		return false
	}
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Shared is an object node that several mutations of a fused batch may create: Path leads to it,
// Creators are the mutations that create it when it is missing and they apply.
type Shared struct {
	Path     []ir.Step
	Creators []*ir.Mutation
}

// SharedCreations lists, parents first, the object nodes on the common part of the paths of
// two or more mutations of batch that at least one of them may create, and for each mutation
// the depth up to which its path runs through such nodes. Merges of batch into one list
// (UnionKey) count as one: each creates what the first creates.
func SharedCreations(batch []*ir.Mutation) ([]Shared, map[*ir.Mutation]int) {
	return NewFuser().SharedCreations(batch)
}

// SharedCreations is the package's SharedCreations, with the Fuser's footprints.
func (z *Fuser) SharedCreations(batch []*ir.Mutation) ([]Shared, map[*ir.Mutation]int) {
	type node struct {
		path     []ir.Step
		creators map[*ir.Mutation]bool
		through  int
	}
	nodes := map[string]*node{}
	var keys []string
	key := ir.PathKey
	first := map[string]*ir.Mutation{} // by UnionKey
	for _, m := range batch {
		// Merges into one list are computed as one (lower.MergeUnion): the first stands for all.
		if k := z.footprint(m).union; k != "" {
			if first[k] != nil {
				continue
			}
			first[k] = m
		}
		f := z.footprint(m)
		creates := map[int]bool{}
		for _, c := range f.creates {
			creates[len(c)] = true
		}
		for d := 1; d < len(m.Path); d++ {
			if m.Path[d-1].List {
				continue
			}
			k := key(m.Path[:d])
			n, ok := nodes[k]
			if !ok {
				n = &node{path: m.Path[:d], creators: map[*ir.Mutation]bool{}}
				nodes[k] = n
				keys = append(keys, k)
			}
			n.through++
			if creates[d] {
				n.creators[m] = true
			}
		}
	}
	var out []Shared
	assume := map[*ir.Mutation]int{}
	for _, k := range keys {
		n := nodes[k]
		if n.through < 2 || len(n.creators) < 2 {
			continue
		}
		s := Shared{Path: n.path}
		for _, m := range batch {
			if n.creators[m] || n.creators[first[z.footprint(m).union]] {
				s.Creators = append(s.Creators, m)
			}
			if samePrefix(m.Path, n.path, len(n.path)) && len(m.Path) > len(n.path) {
				assume[m] = max(assume[m], len(n.path))
			}
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Path) < len(out[j].Path) })
	return out, assume
}
