package lower

import (
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/google/go-cmp/cmp"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// JSONPatch builds the expression of one JSONPatch mutation that does to the object exactly what
// Gatekeeper's engine does for m in one pass: it walks m.Path the way Gatekeeper's mutateInternal
// does (the same existence tests, the same creation of missing parents and keyed-list elements,
// globs never creating), and yields one patch operation per place Gatekeeper would write.
// Guards that depend on the object (label selector) are part of the expression, so that the
// result does not depend on when the API server runs the policy.
func JSONPatch(m *ir.Mutation, f cel.Features) (cel.Expr, error) {
	return JSONPatchAssuming(m, f, 0)
}

// JSONPatchAssuming is JSONPatch for a mutation fused with others that share the first `shared`
// steps of its path: those nodes are created (empty) by PreCreate's operations, which run first
// in the same patch, so a missing one is walked into as an empty object instead of being
// created here with the mutation's subtree (which would overwrite what the others add).
func JSONPatchAssuming(m *ir.Mutation, f cel.Features, shared int) (cel.Expr, error) {
	return JSONPatchAround(m, f, shared, nil)
}

// Replaced is a keyed list element that another mutation computed in the same expression
// replaces whole (the first element whose KeyField is KeyValue, in the list at the first Depth
// steps of the path, which are object fields), where When holds.
type Replaced struct {
	Depth              int
	KeyField, KeyValue string
	When               cel.Expr
}

// JSONPatchAround is JSONPatchAssuming for a mutation whose operations leave out the elements
// in around: computed from the same object, they would apply to what the other mutation
// removes (plan.Fuser.PrunedAround says when its result is then Gatekeeper's).
func JSONPatchAround(m *ir.Mutation, f cel.Features, shared int, around []Replaced) (cel.Expr, error) {
	g := &jpgen{m: m, f: f, shared: shared, elem: -1, around: around}
	for i, st := range m.Path {
		if st.List {
			g.elem = i
		}
	}
	ops, err := g.walk(0, cel.Ident("object"), cel.Pointer{})
	if err != nil {
		return nil, err
	}
	guard, err := cel.LabelsMatch(m.Match.LabelSelector)
	if err != nil {
		return nil, err
	}
	return cel.Guarded(guard, ops), nil
}

type jpgen struct {
	m      *ir.Mutation
	f      cel.Features
	shared int
	// elem is the index of the last list step (the element m's completions go into), created
	// the element sim or a walk created there last (nil once completed took it).
	elem    int
	created map[string]any
	around  []Replaced
	// union, when set, is the list of values a union of merges adds (MergeUnion), which the
	// merge's operations use instead of its own values.
	union cel.Expr
	// pruned, when set, is the list of values a union of prunes removes (PruneUnion), which the
	// prune's operations use instead of its own values.
	pruned cel.Expr
}

// negate is !e, as a != for an ==.
func negate(e cel.Expr) cel.Expr {
	if op, l, r, ok := cel.AsBinary(e); ok && op == "==" {
		return cel.Bin("!=", l, r)
	}
	return cel.Not(e)
}

// replacedHere is the condition under which the element at index iv of the list cur (at depth
// d) is one that another mutation replaces (false when none is).
func (g *jpgen) replacedHere(d int, cur, iv cel.Expr) cel.Expr {
	var any []cel.Expr
	for _, r := range g.around {
		if r.Depth != d {
			continue
		}
		x, j := cel.Ident(fmt.Sprintf("x%d", d)), cel.Ident(fmt.Sprintf("j%d", d))
		k := cel.Str(r.KeyField)
		match := cel.And(cel.Bin("in", k, x), cel.Bin("==", cel.Index(x, k), cel.Str(r.KeyValue)))
		// The index of the first element with the key, -1 when there is none (KeyLists makes
		// this an indexOf on the list's keys, computed once).
		first := cel.Cond(cel.Method(cur, "exists", x, match), cel.Index(cel.Method(cur, "transformList", j, x, match, j), cel.Int(0)), cel.Int(-1))
		any = append(any, cel.And(r.When, cel.Bin("==", iv, first)))
	}
	return cel.Or(any...)
}

var emptyList = cel.List()

// errElementNeedsAssign: only an Assign (of an object with the key) can end at a list element;
// Gatekeeper's validation refuses anything else before mapc compiles it.
var errElementNeedsAssign = errors.New("a location ending in a list element needs an Assign of an object with the key")

func (g *jpgen) last(d int) bool { return d == len(g.m.Path)-1 }

// walk returns the list(JSONPatch) expression for the path from depth d on, where cur is the
// value Gatekeeper's mutateInternal receives at depth d (the map holding Path[d].Field, or the
// list Path[d] selects from) and p is its JSON pointer.
func (g *jpgen) walk(d int, cur cel.Expr, p cel.Pointer) (cel.Expr, error) {
	st := g.m.Path[d]
	existsOK, missingOK := g.m.ExistsOK[d], g.m.MissingOK[d]
	if !st.List {
		key := cel.Str(st.Field)
		child := cel.Index(cur, key)
		cp := p.Child(st.Field)
		has := present(key, cur)
		var whenExists, whenMissing cel.Expr = emptyList, emptyList
		var err error
		if g.last(d) {
			if existsOK {
				if whenExists, err = g.leafExisting(child, cp); err != nil {
					return nil, err
				}
			}
			if missingOK {
				v, ok, err := g.leafMissing()
				if err != nil {
					return nil, err
				}
				if ok {
					if whenMissing, err = g.addValue(cp, v); err != nil {
						return nil, err
					}
				}
			}
			if sv, ok := g.m.Op.(ir.SetValue); ok && existsOK && missingOK {
				// Setting a value does not depend on what was there: one "add" does both.
				v, err := g.setValueExpr(sv)
				if err != nil {
					return nil, err
				}
				return cel.List(cel.PatchOp("add", cp, v)), nil
			}
			if op, ok := g.m.Op.(ir.RewriteImage); ok && existsOK && missingOK {
				if c, ok := ConstantImage(op); ok {
					return cel.List(cel.PatchOp("add", cp, cel.Str(c))), nil // the same
				}
			}
			return cel.CondList(has, whenExists, whenMissing), nil
		}
		if existsOK {
			if whenExists, err = g.walk(d+1, child, cp); err != nil {
				return nil, err
			}
		}
		if missingOK && d < g.shared {
			// Created empty by PreCreate before these operations run.
			if whenMissing, err = g.intoEmpty(d+1, cp); err != nil {
				return nil, err
			}
		} else if missingOK {
			next := g.fresh(d)
			g.created = nil
			mut, v, err := g.sim(d+1, next)
			if err != nil {
				return nil, err
			}
			if mut {
				if whenMissing, err = g.completed(func() (cel.Expr, error) { return g.addValue(cp, v) }); err != nil {
					return nil, err
				}
			}
		}
		return cel.CondList(has, whenExists, whenMissing), nil
	}

	// A list step: cur is the list.
	if !g.f.TwoVar {
		return nil, fmt.Errorf("the location selects list elements, which needs two-variable comprehensions (transformList): the API server accepts them in new expressions from Kubernetes 1.33 (use --kubernetes-version 1.33 or later)")
	}
	iv, ev := fmt.Sprintf("i%d", d), fmt.Sprintf("e%d", d)
	elem := cel.Ident(ev)
	ep := p.Index(cel.Ident(iv))
	var match cel.Expr
	if !st.Glob {
		k := cel.Str(st.KeyField)
		match = cel.And(cel.Bin("in", k, elem), cel.Bin("==", cel.Index(elem, k), cel.Str(st.KeyValue)))
	}
	replaced := g.replacedHere(d, cur, cel.Ident(iv))
	if g.last(d) {
		// Assign of a whole element to a keyed list: replace the first element with the key,
		// or append.
		sv, ok := g.m.Op.(ir.SetValue)
		if !ok || st.Glob {
			return nil, errElementNeedsAssign
		}
		ops := func(v cel.Expr) cel.Expr {
			var whenExists, whenMissing cel.Expr = emptyList, emptyList
			if existsOK {
				first := cel.Index(cel.Method(cur, "transformList", cel.Ident(iv), cel.Ident(ev), match, cel.Ident(iv)), cel.Int(0))
				whenExists = cel.List(cel.PatchOp("replace", p.Index(first), v))
			}
			if missingOK {
				whenMissing = cel.List(cel.PatchOp("add", p.Child("-"), v))
			}
			return cel.CondList(cel.Method(cur, "exists", cel.Ident(ev), match), whenExists, whenMissing)
		}
		return g.wholeElement(sv, ops)
	}
	if st.Glob && !existsOK {
		return emptyList, nil // Gatekeeper: MustNotExist on a glob can never hold
	}
	inner, err := g.walk(d+1, elem, ep)
	if err != nil {
		return nil, err
	}
	var each cel.Expr = emptyList
	if existsOK && !cel.IsEmpty(inner) && replaced != cel.False {
		// Leave out the elements another mutation replaces. With at most one operation per
		// element, its condition is tested first: the replaced element is looked for only
		// where there is something to do.
		if c, op, ok := cel.SingleOp(cel.Compact(inner)); ok {
			each = cel.Method(cur, "transformList", cel.Ident(iv), cel.Ident(ev), cel.And(match, c, negate(replaced)), op)
		} else if each, err = g.forEach(d, cur, cel.And(match, negate(replaced)), inner); err != nil {
			return nil, err
		}
	} else if existsOK && !cel.IsEmpty(inner) {
		if each, err = g.forEach(d, cur, match, inner); err != nil {
			return nil, err
		}
	}
	if st.Glob {
		return each, nil
	}
	var whenMissing cel.Expr = emptyList
	if missingOK {
		next := g.fresh(d)
		g.created = nil
		mut, _, err := g.sim(d+1, next)
		if err != nil {
			return nil, err
		}
		if d == g.elem {
			g.created = next.(map[string]any)
		}
		if mut {
			if whenMissing, err = g.completed(func() (cel.Expr, error) { return g.addValue(p.Child("-"), next) }); err != nil {
				return nil, err
			}
		}
	}
	return cel.CondList(cel.Method(cur, "exists", cel.Ident(ev), match), each, whenMissing), nil
}

// intoEmpty is the operations for the path from depth k on, walked in an empty object at p that
// PreCreate made (everything below it is missing, so this is static).
func (g *jpgen) intoEmpty(k int, p cel.Pointer) (cel.Expr, error) {
	st := g.m.Path[k]
	if st.List && !st.Glob && g.m.MissingOK[k] {
		// A keyed list PreCreate made (empty): the element is appended, as in walk.
		if g.last(k) {
			sv, ok := g.m.Op.(ir.SetValue)
			if !ok {
				return nil, errElementNeedsAssign
			}
			return g.wholeElement(sv, func(v cel.Expr) cel.Expr { return cel.List(cel.PatchOp("add", p.Child("-"), v)) })
		}
		next := g.fresh(k)
		g.created = nil
		mut, _, err := g.sim(k+1, next)
		if err != nil || !mut {
			return emptyList, err
		}
		if k == g.elem {
			g.created = next.(map[string]any)
		}
		return g.completed(func() (cel.Expr, error) { return g.addValue(p.Child("-"), next) })
	}
	if st.List || !g.m.MissingOK[k] {
		return emptyList, nil
	}
	cp := p.Child(st.Field)
	if g.last(k) {
		v, ok, err := g.leafMissing()
		if err != nil || !ok {
			return emptyList, err
		}
		return g.addValue(cp, v)
	}
	if k < g.shared {
		return g.intoEmpty(k+1, cp)
	}
	g.created = nil
	mut, v, err := g.sim(k+1, g.fresh(k))
	if err != nil || !mut {
		return emptyList, err
	}
	return g.completed(func() (cel.Expr, error) { return g.addValue(cp, v) })
}

// wholeElement is ops(v) for the element a whole-element Assign writes, v holding it with its
// completions (ir.Completion: what mutations sorted after it set in it, in the same pass).
func (g *jpgen) wholeElement(sv ir.SetValue, ops func(v cel.Expr) cel.Expr) (cel.Expr, error) {
	lit, ok := sv.Value.(map[string]any)
	if !ok || len(g.m.Completions) == 0 {
		v, err := g.setValueExpr(sv)
		if err != nil {
			return nil, err
		}
		return ops(v), nil
	}
	elem := CopyJSON(lit).(map[string]any)
	g.created = elem
	return g.completed(func() (cel.Expr, error) {
		v, err := cel.Value(elem)
		if err != nil {
			return nil, err
		}
		return ops(v), nil
	})
}

// completed is emit() for a value holding the list element this mutation created (g.created,
// taken), written as Gatekeeper leaves it (ir.Completion, CompleteElement): the mutations of the
// completions whose match holds for every request the mutation's kinds do take part at once,
// the others each under the condition of its match (two variants per such completion).
func (g *jpgen) completed(emit func() (cel.Expr, error)) (cel.Expr, error) {
	elem := g.created
	g.created = nil
	if elem == nil || len(g.m.Completions) == 0 {
		return emit()
	}
	base := CopyJSON(elem).(map[string]any)
	var conds []cel.Expr
	var cs []*ir.Mutation
	always := map[*ir.Mutation]bool{g.m: true}
	for _, c := range g.m.Completions {
		when, err := CompletionGuardFor(c.By.Match, g.m.Match)
		if err != nil {
			return nil, err
		}
		if !g.m.Match.MayMatchKind("", "Namespace") {
			// These operations run only for the mutation's own kinds.
			when = AssumeNotNamespace(when)
		}
		if when == cel.True {
			always[c.By] = true
		} else {
			conds, cs = append(conds, when), append(cs, c.By)
		}
	}
	ops := CompletionOps(g.m)
	reset := func(with []*ir.Mutation) error {
		on := maps.Clone(always)
		for _, m := range with {
			on[m] = true
		}
		done, _, ok := CompleteElement(g.m, g.elem, base, ops, func(m *ir.Mutation) bool { return on[m] })
		if !ok {
			return errNoElement
		}
		clear(elem)
		maps.Copy(elem, done)
		return nil
	}
	// known[i]: conds[i] is decided by the branches taken above it (1 true, -1 false): a
	// condition whose conjuncts all hold where an earlier one does holds there, and one that
	// holds only where an earlier one does fails where that one fails.
	terms := make([]map[string]bool, len(conds))
	for i, c := range conds {
		terms[i] = map[string]bool{}
		for _, t := range cel.Terms(c, "&&") {
			terms[i][cel.String(t)] = true
		}
	}
	within := func(a, b map[string]bool) bool { // every conjunct of a is one of b
		for t := range a {
			if !b[t] {
				return false
			}
		}
		return true
	}
	known := make([]int, len(conds))
	var build func(i int, with []*ir.Mutation) (cel.Expr, error)
	build = func(i int, with []*ir.Mutation) (cel.Expr, error) {
		if i == len(conds) {
			if err := reset(with); err != nil {
				return nil, err
			}
			return emit()
		}
		branch := func(holds bool) (cel.Expr, error) {
			saved := append([]int(nil), known...)
			defer copy(known, saved)
			for j := i + 1; j < len(conds); j++ {
				switch {
				case known[j] != 0:
				case holds && within(terms[j], terms[i]):
					known[j] = 1
				case !holds && within(terms[i], terms[j]):
					known[j] = -1
				}
			}
			if holds {
				return build(i+1, append(with[:len(with):len(with)], cs[i]))
			}
			return build(i+1, with)
		}
		switch known[i] {
		case 1:
			return branch(true)
		case -1:
			return branch(false)
		}
		t, err := branch(true)
		if err != nil {
			return nil, err
		}
		f, err := branch(false)
		if err != nil {
			return nil, err
		}
		return cel.CondList(conds[i], t, f), nil
	}
	return build(0, nil)
}

// SetPath sets the object fields path below m to v, creating the objects on the way.
func SetPath(m map[string]any, path []string, v any) {
	for _, f := range path[:len(path)-1] {
		next, ok := m[f].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[f] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// forEach concatenates inner (a list(JSONPatch) over i<d>, e<d>) over the elements of cur that
// match (all when match is nil).
func (g *jpgen) forEach(d int, cur, match, inner cel.Expr) (cel.Expr, error) {
	iv, ev := cel.Ident(fmt.Sprintf("i%d", d)), cel.Ident(fmt.Sprintf("e%d", d))
	var lists cel.Expr
	if match == nil {
		lists = cel.Method(cur, "transformList", iv, ev, inner)
	} else {
		lists = cel.Method(cur, "transformList", iv, ev, match, inner)
	}
	if g.f.Flatten {
		return cel.Method(lists, "flatten"), nil
	}
	if g.multi(d + 1) {
		return nil, fmt.Errorf("the location selects list elements and yields several operations for each (list elements inside list elements, or a ModifySet); that needs lists.flatten(), which the API server accepts in new expressions from Kubernetes 1.35 (use --kubernetes-version 1.35 or later)")
	}
	// Each element yields at most one operation.
	l := cel.Ident(fmt.Sprintf("l%d", d))
	return cel.Method(cel.Method(lists, "filter", l, cel.Bin(">", cel.Call("size", l), cel.Int(0))), "map", l, cel.Index(l, cel.Int(0))), nil
}

// singleOpSet: without lists.flatten, a ModifySet whose values are all scalars replaces the whole
// list in one operation, so that it can sit under a list step. (Lists of objects cannot be copied
// into a patch value: the API server may hand CEL their elements as typed objects, which do not
// marshal to JSON; those get one operation per value, which needs flatten under a list step.)
//
// A prune whose values are all scalars is one operation whatever the features: a "replace" of
// the list with the elements kept, only where it holds one of the values (so that a list of
// objects, which never holds a scalar, is never copied). That costs the API server's cost model
// less than one "remove" per element (about 214 against 275 for the docs examples' Pod).
func (g *jpgen) singleOpSet() bool {
	var vals []any
	switch op := g.m.Op.(type) {
	case ir.MergeSet:
		if g.f.Flatten {
			return false
		}
		vals = op.Values
	case ir.PruneSet:
		vals = op.Values
	default:
		return false
	}
	for _, v := range vals {
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

// multi reports whether the path from depth d on can yield more than one operation.
func (g *jpgen) multi(d int) bool {
	switch g.m.Op.(type) {
	case ir.MergeSet, ir.PruneSet:
		if !g.singleOpSet() {
			return true // one operation per value added or element removed
		}
	}
	for k := d; k < len(g.m.Path); k++ {
		if g.m.Path[k].List && !g.last(k) {
			return true
		}
	}
	return false
}

// fresh is what Gatekeeper's createMissingElement makes for the missing element at depth d.
func (g *jpgen) fresh(d int) any {
	var next any
	if g.m.Path[d+1].List {
		next = []any{}
	} else {
		next = map[string]any{}
	}
	if st := g.m.Path[d]; st.List {
		next = map[string]any{st.KeyField: st.KeyValue}
	}
	return next
}

// leaf is a value that is only known when the policy runs.
type leaf struct{ e cel.Expr }

// sim runs Gatekeeper's mutateInternal from depth d on a freshly created value, at compile time:
// it returns whether Gatekeeper would persist the creation and the value it builds.
func (g *jpgen) sim(d int, cur any) (bool, any, error) {
	st := g.m.Path[d]
	if !st.List {
		m, ok := cur.(map[string]any)
		if !ok {
			return false, nil, fmt.Errorf("two consecutive list steps in the location")
		}
		_, exists := m[st.Field]
		if exists && !g.m.ExistsOK[d] || !exists && !g.m.MissingOK[d] {
			return false, cur, nil
		}
		if g.last(d) {
			if exists {
				return false, nil, fmt.Errorf("the location ends at the key field %q of a list element", st.Field)
			}
			v, ok, err := g.leafMissing()
			if err != nil {
				return false, nil, err
			}
			if ok {
				m[st.Field] = v
			}
			return true, m, nil
		}
		next := m[st.Field]
		if !exists {
			next = g.fresh(d)
		}
		mut, next, err := g.sim(d+1, next)
		if err != nil {
			return false, nil, err
		}
		if mut {
			m[st.Field] = next
		}
		return mut, m, nil
	}
	l, _ := cur.([]any)
	if g.last(d) {
		if !g.m.MissingOK[d] {
			return false, cur, nil
		}
		sv, ok := g.m.Op.(ir.SetValue)
		if !ok {
			return false, nil, fmt.Errorf("a location ending in a list element needs an Assign")
		}
		if lit, ok := sv.Value.(map[string]any); ok && len(g.m.Completions) > 0 {
			elem := CopyJSON(lit).(map[string]any)
			g.created = elem // completed sets its completions in it
			return true, append(l, elem), nil
		}
		v, err := g.setValueExpr(sv)
		if err != nil {
			return false, nil, err
		}
		return true, append(l, leaf{v}), nil
	}
	if st.Glob {
		return false, l, nil // nothing to iterate, and globs never create
	}
	if !g.m.MissingOK[d] {
		return false, l, nil
	}
	next := g.fresh(d)
	l = append(l, next)
	mut, _, err := g.sim(d+1, next)
	if d == g.elem {
		g.created = next.(map[string]any)
	}
	return mut, l, err
}

// leafExisting is the operation list at the end of the path when the field exists.
func (g *jpgen) leafExisting(child cel.Expr, p cel.Pointer) (cel.Expr, error) {
	switch op := g.m.Op.(type) {
	case ir.SetValue:
		v, err := g.setValueExpr(op)
		if err != nil {
			return nil, err
		}
		return cel.List(cel.PatchOp("replace", p, v)), nil
	case ir.MergeSet:
		if g.union != nil {
			return g.unionExisting(child, p), nil
		}
		if g.singleOpSet() {
			// One "replace" of the whole list (a list of scalars marshals fine).
			vals, err := cel.Value(dedupe(op.Values))
			if err != nil {
				return nil, err
			}
			v := cel.Ident("v")
			return cel.List(cel.PatchOp("replace", p, cel.Bin("+", child, cel.Method(vals, "filter", v, cel.Not(cel.Bin("in", v, child)))))), nil
		}
		// One "add" per value not yet in the list, at its end, in order. The values are literals:
		// the list itself is never copied into a patch value (the API server may hand CEL its
		// elements as typed objects, which do not marshal to JSON). Each value is tested on its
		// own, (v in list) ? [] : [add v], rather than by filtering the values and mapping them to
		// operations: two comprehensions cost the API server's cost model about 70 for one value,
		// a test about 13 (and compaction joins the tests into one list of optional elements).
		var parts []cel.Expr
		for _, u := range dedupe(op.Values) {
			val, err := cel.Value(u)
			if err != nil {
				return nil, err
			}
			parts = append(parts, cel.Cond(cel.Bin("in", val, child), cel.List(), cel.List(cel.PatchOp("add", p.Child("-"), val))))
		}
		if len(parts) == 0 {
			return cel.List(), nil
		}
		out := parts[0]
		for _, x := range parts[1:] {
			out = cel.Bin("+", out, x)
		}
		return out, nil
	case ir.PruneSet:
		var vals cel.Expr = g.pruned
		if vals == nil {
			var err error
			if vals, err = cel.Value(op.Values); err != nil {
				return nil, err
			}
		}
		if g.singleOpSet() {
			v := cel.Ident("v")
			if one := dedupe(op.Values); len(one) == 1 && g.pruned == nil {
				// One value: a membership test and a comparison, where a list literal would be
				// built for each element (10 each in the cost model).
				val, err := cel.Value(one[0])
				if err != nil {
					return nil, err
				}
				return cel.Cond(cel.Bin("in", val, child),
					cel.List(cel.PatchOp("replace", p, cel.Method(child, "filter", v, cel.Bin("!=", v, val)))), cel.List()), nil
			}
			return cel.Cond(cel.Method(child, "exists", v, cel.Bin("in", v, vals)),
				cel.List(cel.PatchOp("replace", p, cel.Method(child, "filter", v, cel.Not(cel.Bin("in", v, vals))))), cel.List()), nil
		}
		if !g.f.TwoVar {
			return nil, fmt.Errorf("a prune removes elements by index, which needs two-variable comprehensions (transformList): the API server accepts them in new expressions from Kubernetes 1.33 (use --kubernetes-version 1.33 or later)")
		}
		// Remove every element equal to a value, by index; each removal shifts the later indices
		// down by one, so the k-th removal (in ascending order) is at index i - k.
		i, e, k := cel.Ident("pi"), cel.Ident("pe"), cel.Ident("pk")
		idx := cel.Method(child, "transformList", i, e, cel.Bin("in", e, vals), i)
		return cel.Method(idx, "transformList", k, i, cel.PatchOp("remove", p.Index(cel.Bin("-", i, k)), nil)), nil
	case ir.RewriteImage:
		return cel.List(cel.PatchOp("replace", p, RewriteImage(child, op))), nil
	}
	return nil, fmt.Errorf("unknown operation %T", g.m.Op)
}

// leafMissing is the value Gatekeeper sets when the field at the end of the path is missing, and
// whether it sets one at all.
func (g *jpgen) leafMissing() (any, bool, error) {
	switch op := g.m.Op.(type) {
	case ir.SetValue:
		if op.FromMetadata != "" {
			e, err := g.setValueExpr(op)
			return leaf{e}, true, err
		}
		return CopyJSON(op.Value), true, nil
	case ir.MergeSet:
		if g.union != nil {
			return leaf{g.union}, true, nil
		}
		return CopyJSON(op.Values), true, nil
	case ir.PruneSet:
		return nil, false, nil
	case ir.RewriteImage:
		return RewriteImageString("", op), true, nil
	}
	return nil, false, fmt.Errorf("unknown operation %T", g.m.Op)
}

func (g *jpgen) setValueExpr(sv ir.SetValue) (cel.Expr, error) {
	switch sv.FromMetadata {
	case "":
		return cel.Value(sv.Value)
	case "name":
		return cel.Cond(cel.Bin("in", cel.Str("name"), cel.Field(cel.Ident("object"), "metadata")), cel.Field(cel.Field(cel.Ident("object"), "metadata"), "name"), cel.Str("")), nil
	case "namespace":
		// Gatekeeper's webhook uses the request's namespace, cleared for Namespace objects.
		return cel.Cond(isNamespaceKind(), cel.Str(""), requestNamespace()), nil
	}
	return nil, fmt.Errorf("fromMetadata field %q is not name or namespace", sv.FromMetadata)
}

func (g *jpgen) addValue(p cel.Pointer, v any) (cel.Expr, error) {
	e, err := valueWithLeaves(v)
	if err != nil {
		return nil, err
	}
	return cel.List(cel.PatchOp("add", p, e)), nil
}

// valueWithLeaves is Value for trees that may hold leaves known only at run time.
func valueWithLeaves(v any) (cel.Expr, error) {
	if !hasLeaf(v) {
		return cel.Value(v)
	}
	switch x := v.(type) {
	case leaf:
		return x.e, nil
	case []any:
		elems := make([]cel.Expr, len(x))
		for i, e := range x {
			ee, err := valueWithLeaves(e)
			if err != nil {
				return nil, err
			}
			elems[i] = cel.Call("dyn", ee)
		}
		return cel.List(elems...), nil
	case map[string]any:
		keys := sortedKeys(x)
		ks := make([]cel.Expr, len(keys))
		vs := make([]cel.Expr, len(keys))
		for i, k := range keys {
			ks[i] = cel.Str(k)
			ve, err := valueWithLeaves(x[k])
			if err != nil {
				return nil, err
			}
			vs[i] = cel.Call("dyn", ve)
		}
		return cel.Map(ks, vs), nil
	}
	return cel.Value(v)
}

func hasLeaf(v any) bool {
	switch x := v.(type) {
	case leaf:
		return true
	case []any:
		for _, e := range x {
			if hasLeaf(e) {
				return true
			}
		}
	case map[string]any:
		for _, e := range x {
			if hasLeaf(e) {
				return true
			}
		}
	}
	return false
}

// dedupe keeps the first of equal values, as Gatekeeper's merge does when it appends one value
// after another to an existing list.
func dedupe(vals []any) []any {
	var out []any
outer:
	for _, v := range vals {
		for _, o := range out {
			if cmp.Equal(v, o) {
				continue outer
			}
		}
		out = append(out, v)
	}
	return out
}

// CopyJSON is a deep copy of a JSON-like value (maps, lists, scalars).
func CopyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = CopyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = CopyJSON(e)
		}
		return out
	}
	return v
}

func isNamespaceKind() cel.Expr {
	k := cel.Field(cel.Ident("request"), "kind")
	return cel.And(cel.Bin("==", cel.Field(k, "group"), cel.Str("")), cel.Bin("==", cel.Field(k, "kind"), cel.Str("Namespace")))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SharedNode is an object node on the paths of several fused mutations that each of them would
// create when missing: Path leads to it (object fields, globs, and keyed steps that never create),
// and When is true when at least one of those mutations applies to the request.
type SharedNode struct {
	Path []ir.Step
	When cel.Expr
	// List: the node is a list (keyed elements several mutations may append), created empty.
	List bool
}

// PreCreate is the list(JSONPatch) that creates every missing shared node as an empty object,
// parents first, for every list element the path selects, when the node's When holds.
func PreCreate(nodes []SharedNode, f cel.Features) (cel.Expr, error) {
	var out cel.Expr
	for _, n := range nodes {
		ops, err := preCreate(n, 0, cel.Ident("object"), cel.Pointer{}, f)
		if err != nil {
			return nil, err
		}
		ops = cel.CondList(n.When, ops, emptyList)
		if cel.IsEmpty(ops) {
			continue
		}
		if out == nil {
			out = ops
		} else {
			out = cel.Bin("+", out, ops)
		}
	}
	if out == nil {
		return emptyList, nil
	}
	return out, nil
}

func preCreate(n SharedNode, d int, cur cel.Expr, p cel.Pointer, f cel.Features) (cel.Expr, error) {
	st := n.Path[d]
	if !st.List {
		key := cel.Str(st.Field)
		has := present(key, cur)
		cp := p.Child(st.Field)
		if d == len(n.Path)-1 {
			return cel.CondList(has, emptyList, cel.List(cel.SharedCreation(cp, n.List))), nil
		}
		inner, err := preCreate(n, d+1, cel.Index(cur, key), cp, f)
		if err != nil {
			return nil, err
		}
		// A missing ancestor is itself a shared node (the mutations that create this node create
		// their ancestors too), created empty by an earlier operation whenever this node's When
		// holds: create this node below it. List steps below a missing node select nothing.
		var whenMissing cel.Expr = emptyList
		q := cp
		objectsOnly := true
		for k := d + 1; k < len(n.Path); k++ {
			if n.Path[k].List {
				objectsOnly = false
				break
			}
			q = q.Child(n.Path[k].Field)
		}
		if objectsOnly {
			whenMissing = cel.List(cel.SharedCreation(q, n.List))
		}
		return cel.CondList(has, inner, whenMissing), nil
	}
	if d == len(n.Path)-1 {
		return nil, fmt.Errorf("a shared node cannot be a list element")
	}
	iv, ev := cel.Ident(fmt.Sprintf("i%d", d)), cel.Ident(fmt.Sprintf("e%d", d))
	inner, err := preCreate(n, d+1, ev, p.Index(iv), f)
	if err != nil {
		return nil, err
	}
	if cel.IsEmpty(inner) {
		return emptyList, nil
	}
	var lists cel.Expr
	if st.Glob {
		lists = cel.Method(cur, "transformList", iv, ev, inner)
	} else {
		k := cel.Str(st.KeyField)
		lists = cel.Method(cur, "transformList", iv, ev, cel.And(cel.Bin("in", k, ev), cel.Bin("==", cel.Index(ev, k), cel.Str(st.KeyValue))), inner)
	}
	if !f.Flatten {
		return nil, fmt.Errorf("these mutations must be computed in one expression, and creating the node they share inside each list element needs lists.flatten(), which the API server accepts in new expressions from Kubernetes 1.35: compile with --kubernetes-version 1.35 or later")
	}
	return cel.Method(lists, "flatten"), nil
}

// PathExpr is the CEL value at path when every step on it exists (for guards).
var _ = PreCreate

// present is true when cur has the field key with a value other than null. The API server encodes
// a typed object's unset required fields as null (a Pod whose spec an Assign replaced has
// "containers": null) where Gatekeeper, which never re-encodes between mutators, has no field.
// Written cur[?key].orValue(null) != null: one lookup of cur and key instead of two (`key in cur
// && cur[key] != null`), which costs the API server's cost model 3 instead of 5, and 5 instead of 9
// two levels down.
func present(key, cur cel.Expr) cel.Expr {
	return cel.Bin("!=", cel.Method(cel.OptIndex(cur, key), "orValue", cel.Null()), cel.Null())
}
