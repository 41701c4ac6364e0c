package lower

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// ForEach lowers one foreach entry of a mutate rule (pkg/engine/handlers/mutation forEachMutator)
// for objects of apiVersion/kind. Kyverno evaluates the list once, then patches the object
// element by element, each patch on the previous one's result. Supported are the entries whose
// elements' patches each touch only their own element of the list, so that the order of the
// patches changes nothing but where Kyverno's merge puts the items:
//
//   - a list below request.object (a path of names), and
//   - patchStrategicMerge down to that list with one item keyed by the element's merge key
//     ({{element.name}} for containers), merged into the element (Kyverno's merge moves each
//     patched item first: patched in reverse order, the default, they end up first in their
//     order; in ascending order, first in reverse order), or
//   - patchesJson6902 operations below /<the list's path>/{{elementIndex}}/.
//
// Per-element preconditions are supported; nested foreach and context are not.
func ForEach(apiVersion, kind string, fe kyverno.ForEach, field string) (cel.Expr, error) {
	listPath, err := listPathOf(fe.List)
	if err != nil {
		return nil, errorf(field+".list", "%v", err)
	}
	iv, xv := "i", "e"
	i, x := cel.Ident(iv), cel.Ident(xv)
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	obj := ObjectShape(Kind{Group: group, Version: version, Kind: kind})
	elem := obj
	for _, s := range listPath {
		elem = elem.field(s)
	}
	sc := Scope{Elements: []cel.Expr{x}, Indexes: []cel.Expr{i}, Object: obj, ElementShapes: []Shape{elem.item()}}
	pre, err := Preconditions(fe.Preconditions, sc, field+".preconditions")
	if err != nil {
		return nil, err
	}
	// The list, read as Kyverno reads it: a missing one fails the rule.
	list := cel.Expr(object)
	var p cel.Pointer
	for _, s := range listPath {
		list = cel.Index(list, cel.Str(s))
		p = p.Child(s)
	}
	var body cel.Expr // the operations for element x at index i
	var vars []cel.Expr
	reverse := fe.StrategicMerge != nil
	switch fe.Order {
	case "Ascending":
		reverse = false
	case "Descending":
		reverse = true
	}
	var moveTo cel.Expr
	switch {
	case fe.StrategicMerge != nil:
		sub, vs, err := Substitute(fe.StrategicMerge, sc, "")
		if err != nil {
			return nil, errorf(field+".patchStrategicMerge", "%v", err)
		}
		vars = vs
		item, err := itemOf(sub, listPath)
		if err != nil {
			return nil, errorf(field+".patchStrategicMerge", "%v", err)
		}
		s := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind})
		if s != nil {
			s = s.Lookup(listPath...)
		}
		keys := mergeKeys(s)
		if len(keys) != 1 || keys[0] == "" {
			return nil, errorf(field+".patchStrategicMerge", "the list %s is not merged on one key in Kyverno's schema: not supported yet", strings.Join(listPath, "."))
		}
		key := keys[0]
		kv, ok := item[key].(expr)
		if !ok || cel.String(kv.e) != cel.String(cel.Index(x, cel.Str(key))) {
			return nil, errorf(field+".patchStrategicMerge", "the patched item's %s must be {{element.%s}}: patches of other items are not supported yet", key, key)
		}
		rest := map[string]any{}
		for k, v := range item {
			if k != key {
				rest[k] = v
			}
		}
		g := &smp{reach: cel.True}
		body, err = g.mapOps(p.Index(i), x, rest, s.Elements(), field+".patchStrategicMerge", false)
		if err != nil {
			return nil, err
		}
		if len(g.conds) > 0 {
			return nil, errorf(field+".patchStrategicMerge", "condition anchors in a foreach patch are not supported yet")
		}
		// Where Kyverno's merge leaves the item: first, among the items patched so far.
		if reverse {
			jv, yv := "j", "y"
			moveTo = cel.Call("size", cel.Method(list, "transformList", cel.Ident(jv), cel.Ident(yv),
				cel.And(cel.Bin("<", cel.Ident(jv), i), cel.Bin("!=", cel.Ident(yv), cel.Null()),
					cel.Substitute(cel.Substitute(pre, xv, cel.Ident(yv)), iv, cel.Ident(jv))), cel.True))
		} else {
			moveTo = cel.Int(0)
		}
	case fe.JSON6902 != nil:
		var ops []kyverno.Op
		for n, op := range fe.JSON6902 {
			toks, err := pointer(op.Path)
			if err != nil {
				return nil, errorf(fmt.Sprintf("%s.patchesJson6902[%d]", field, n), "%v", err)
			}
			if len(toks) <= len(listPath)+1 || !prefixed(toks, listPath) || strings.ReplaceAll(toks[len(listPath)], " ", "") != "{{elementIndex}}" {
				return nil, errorf(fmt.Sprintf("%s.patchesJson6902[%d]", field, n), "the path must be below /%s/{{elementIndex}}/: operations elsewhere are not supported yet", strings.Join(listPath, "/"))
			}
			rel := toks[len(listPath)+1:]
			for _, t := range rel {
				if strings.Contains(t, "{{") {
					return nil, errorf(fmt.Sprintf("%s.patchesJson6902[%d]", field, n), "variables in paths are not supported here")
				}
			}
			v, vs, err := Substitute(op.Value, sc, "")
			if err != nil {
				return nil, errorf(fmt.Sprintf("%s.patchesJson6902[%d].value", field, n), "%v", err)
			}
			vars = append(vars, vs...)
			ops = append(ops, kyverno.Op{Op: op.Op, Path: "/" + strings.Join(escapeAll(rel), "/"), Value: v})
		}
		body, err = json6902At(p.Index(i), x, nil, ops)
		if err != nil {
			return nil, errorf(field+".patchesJson6902", "%v", err)
		}
	default:
		return nil, errorf(field, "has no patch: give patchStrategicMerge or patchesJson6902")
	}
	if cel.IsEmpty(body) {
		return cel.List(), nil
	}
	if moveTo != nil {
		body = concat([]cel.Expr{body, cel.List(moveOp(p.Index(i), p.Index(moveTo)))})
	}
	body = cel.Guarded(Resolved(vars), body)
	if pre != cel.True {
		body = cel.Guarded(pre, body)
	}
	// Null elements are skipped.
	body = cel.Guarded(cel.Bin("!=", x, cel.Null()), body)
	// Operations on distinct elements: besides the moves, their order changes nothing.
	return cel.Method(cel.Method(list, "transformList", i, x, body), "flatten"), nil
}

// itemOf follows the patch down path to a list of one item and returns the item.
func itemOf(patch any, path []string) (map[string]any, error) {
	cur := patch
	for _, s := range path {
		m, ok := cur.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf("the patch must lead to the list %s and patch nothing else: not supported yet", strings.Join(path, "."))
		}
		if cur, ok = m[s]; !ok {
			return nil, fmt.Errorf("the patch must lead to the list %s, the foreach's list: patches of other fields are not supported yet", strings.Join(path, "."))
		}
	}
	l, ok := cur.([]any)
	if !ok || len(l) != 1 {
		return nil, fmt.Errorf("the patch must hold one item of the list %s", strings.Join(path, "."))
	}
	item, ok := l[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the patched item must be an object")
	}
	return item, nil
}

// listPathOf reads a foreach list: a path of names below request.object.
func listPathOf(list string) ([]string, error) {
	segs, err := pathOf(strings.TrimSpace(list))
	if err != nil {
		return nil, fmt.Errorf("%q: %v (a path below request.object is supported)", list, err)
	}
	if len(segs) < 3 || segs[0] != "request" || segs[1] != "object" {
		return nil, fmt.Errorf("%q: only a list below request.object is supported yet", list)
	}
	var out []string
	for _, s := range segs[2:] {
		name, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("%q: list indices in the path are not supported yet", list)
		}
		out = append(out, name)
	}
	return out, nil
}

func prefixed(toks, prefix []string) bool {
	for i, p := range prefix {
		if toks[i] != p {
			return false
		}
	}
	return true
}

func escapeAll(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
	}
	return out
}
