package lower

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/assign"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/assignimage"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/modifyset"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/parser"
	patht "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/tester"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// What Gatekeeper's mutators do to one keyed list element alone (a sidecar container a mutation
// creates) is computed here, at compile time: each mutator is Gatekeeper's own
// (pkg/mutation/mutators), built from the IR as it stands (a rule may have changed its tests or
// its value), run on an object that holds that element only. What a mutator does inside one
// element of a list depends on that element only, so this is what it does to the element in
// any object.

// Engine is Gatekeeper's own mutator for m's location, tests and operation (not its match): nil
// and false when m's operation is not a constant Gatekeeper can apply without the request (a
// value from metadata) or the IR has no Gatekeeper form.
func Engine(m *ir.Mutation) (types.Mutator, bool) {
	var nodes []parser.Node
	for _, s := range m.Path {
		if s.List {
			l := parser.List{KeyField: s.KeyField, Glob: s.Glob}
			if !s.Glob {
				l.KeyValue = s.KeyValue
			}
			nodes = append(nodes, l)
		} else {
			nodes = append(nodes, parser.Object{Reference: s.Field})
		}
	}
	var tests []unversioned.PathTest
	for i := range m.Path {
		var c patht.Condition
		switch e, miss := m.ExistsOK[i], m.MissingOK[i]; {
		case e && miss:
			continue
		case e:
			c = patht.MustExist
		case miss:
			c = patht.MustNotExist
		default:
			return nil, false
		}
		tests = append(tests, unversioned.PathTest{SubPath: parser.Path{Nodes: nodes[:i+1]}.String(), Condition: c})
	}
	location := parser.Path{Nodes: nodes}.String()
	meta := metav1.ObjectMeta{Name: "element"}
	// The kind only has to be one Gatekeeper accepts for the location: no schema is consulted.
	applyTo := []match.MutationApplyTo{{ApplyTo: match.ApplyTo{Groups: []string{""}, Kinds: []string{"Pod"}, Versions: []string{"v1"}}}}
	var mut types.Mutator
	var err error
	switch op := m.Op.(type) {
	case ir.SetValue:
		if op.FromMetadata != "" {
			return nil, false
		}
		mut, err = assign.MutatorForAssign(&unversioned.Assign{ObjectMeta: meta, Spec: unversioned.AssignSpec{
			ApplyTo: applyTo, Location: location,
			Parameters: unversioned.Parameters{PathTests: tests, Assign: unversioned.AssignField{Value: &types.Anything{Value: jsonValue(op.Value)}}},
		}})
	case ir.MergeSet, ir.PruneSet:
		operation, values := unversioned.MergeOp, []any(nil)
		if p, ok := op.(ir.PruneSet); ok {
			operation, values = unversioned.PruneOp, p.Values
		} else {
			values = op.(ir.MergeSet).Values
		}
		mut, err = modifyset.MutatorForModifySet(&unversioned.ModifySet{ObjectMeta: meta, Spec: unversioned.ModifySetSpec{
			ApplyTo: applyTo, Location: location,
			Parameters: unversioned.ModifySetParameters{PathTests: tests, Operation: operation, Values: unversioned.Values{FromList: jsonValue(values).([]any)}},
		}})
	case ir.RewriteImage:
		mut, err = assignimage.MutatorForAssignImage(&unversioned.AssignImage{ObjectMeta: meta, Spec: unversioned.AssignImageSpec{
			ApplyTo: applyTo, Location: location,
			Parameters: unversioned.AssignImageParameters{PathTests: tests, AssignDomain: op.Domain, AssignPath: op.Path, AssignTag: op.Tag},
		}})
	default:
		return nil, false
	}
	if err != nil {
		return nil, false
	}
	return mut, true
}

// jsonValue is v as decoded JSON (int64 and float64 numbers, as Gatekeeper's objects hold them).
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// InElement runs mut (Engine of a mutation whose path reaches the element through the list step
// e of path: the same object fields before it, and that list) on elem, a keyed element of that
// list, alone. It returns the element after it and whether it changed; ok is false when the
// result is not one element of the list with elem's key (the mutator replaced or removed it),
// or Gatekeeper failed.
func InElement(mut types.Mutator, path []ir.Step, e int, elem map[string]any) (out map[string]any, changed, ok bool) {
	for _, s := range path[:e] {
		if s.List {
			return nil, false, false
		}
	}
	in := jsonValue(elem).(map[string]any)
	obj := map[string]any{}
	cur := obj
	for _, s := range path[:e-1] {
		next := map[string]any{}
		cur[s.Field] = next
		cur = next
	}
	cur[path[e-1].Field] = []any{jsonValue(in)}
	if _, err := mut.Mutate(&types.Mutable{Object: &unstructured.Unstructured{Object: obj}}); err != nil {
		return nil, false, false
	}
	cur = obj
	for _, s := range path[:e-1] {
		next, isMap := cur[s.Field].(map[string]any)
		if !isMap {
			return nil, false, false
		}
		cur = next
	}
	l, isList := cur[path[e-1].Field].([]any)
	if !isList || len(l) != 1 {
		return nil, false, false
	}
	out, isMap := l[0].(map[string]any)
	key := path[e].KeyField
	if !isMap || !reflect.DeepEqual(out[key], in[key]) {
		return nil, false, false
	}
	return out, !reflect.DeepEqual(in, out), true
}

// CompleteElement is the element f creates (lit, at f's list step e) as Gatekeeper leaves it:
// ops are the mutations that may reach that element (f among them), in Gatekeeper's order, and
// active says which of them apply to the request. In the pass that creates it, the element gets
// what the mutations sorted after f do; then passes of all of them run until one leaves it as it
// found it (Gatekeeper's own test, on the whole object, cannot stop earlier). A whole-element
// Assign that may find its element (no MustNotExist on it) puts it back in every pass, so there
// the element is what one run of the mutations sorted after f leaves.
//
// The element is then written at once, and the mutations sorted after f run on it in that same
// round: so the element is accepted only when their run leaves it as it is, and, in later
// rounds, a pass of all of them does too (as their settling says). It also returns which
// mutations changed the element on the way; ok is false when that does not hold, the passes do
// not settle or a mutation cannot be run.
func CompleteElement(f *ir.Mutation, e int, lit map[string]any, ops []*ir.Mutation, active func(*ir.Mutation) bool) (elem map[string]any, changedBy map[*ir.Mutation]bool, ok bool) {
	pos := -1
	for i, m := range ops {
		if m == f {
			pos = i
		}
	}
	if pos < 0 {
		return nil, nil, false
	}
	engines := make([]types.Mutator, len(ops))
	for i, m := range ops {
		if m != f && !active(m) {
			continue
		}
		mut, ok := Engine(m)
		if !ok {
			return nil, nil, false
		}
		engines[i] = mut
	}
	changedBy = map[*ir.Mutation]bool{}
	// run runs ops[from:] (f too unless replacing) on state, and reports whether it ended as it
	// began; record notes who changed it.
	replacing := e == len(f.Path)-1 && f.ExistsOK[e]
	run := func(state map[string]any, from int, record bool) (map[string]any, bool, bool) {
		start := state
		for i := from; i < len(ops); i++ {
			if engines[i] == nil || replacing && ops[i] == f {
				continue
			}
			next, ch, ok := InElement(engines[i], ops[i].Path, e, state)
			if !ok {
				return nil, false, false
			}
			if ch {
				if record {
					changedBy[ops[i]] = true
				}
				state = next
			}
		}
		return state, reflect.DeepEqual(start, state), true
	}
	state, _, ok := run(jsonValue(lit).(map[string]any), pos+1, true)
	if !ok {
		return nil, nil, false
	}
	if !replacing {
		settled := false
		for pass := 0; pass <= len(ops)+1 && !settled; pass++ {
			if state, settled, ok = run(state, 0, true); !ok {
				return nil, nil, false
			}
		}
		if !settled {
			return nil, nil, false
		}
	}
	if _, same, ok := run(state, pos+1, false); !ok || !same {
		return nil, nil, false
	}
	return state, changedBy, true
}

// CompletionOps is f and the mutations of its completions (ir.Completion), in Gatekeeper's
// order: the ops CompleteElement computes f's element from.
func CompletionOps(f *ir.Mutation) []*ir.Mutation {
	ops := []*ir.Mutation{f}
	for _, c := range f.Completions {
		ops = append(ops, c.By)
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].SortKey < ops[j].SortKey })
	return ops
}

// EachSubset calls fn with each subset of conds (the mutations that apply to some requests
// only) as the set of those that do not apply, until fn returns false; it reports whether fn
// never did.
func EachSubset(conds []*ir.Mutation, fn func(off map[*ir.Mutation]bool) bool) bool {
	for mask := 0; mask < 1<<len(conds); mask++ {
		off := map[*ir.Mutation]bool{}
		for i, c := range conds {
			if mask&(1<<i) == 0 {
				off[c] = true
			}
		}
		if !fn(off) {
			return false
		}
	}
	return true
}

// errNoElement is returned by the lowering when a completed element cannot be computed again.
var errNoElement = fmt.Errorf("the completed list element could not be computed with Gatekeeper's mutators")
