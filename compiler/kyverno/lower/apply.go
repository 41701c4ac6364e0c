package lower

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// Apply is the ApplyConfiguration that gives Kyverno's merge of patch (a patchStrategicMerge,
// its variables substituted) into objects of the built-in kind apiVersion/kind, when the API
// server's apply merge is known to give exactly Kyverno's result; otherwise nil and why not.
//
// That is so for labels and annotations: string maps of ObjectMeta, which Kyverno's merge and
// an apply both merge key by key (a key the patch names set to its value, the others kept, the
// map created where missing), at the object's metadata and at the Pod template's of the Pod
// controllers and CronJobs (where Kyverno's autogen puts a Pod rule's patch), through structs
// both merge field by field. An add anchor +(key) is an entry only where the object lacks the
// key. Values must be strings: Kyverno writes any other value into the map, which the API server
// then fails to decode, while an apply fails the mutation (under Ignore, skipped). Anything else
// — other fields, lists, conditions, removals, directives — is left to the JSONPatch lowering.
func Apply(apiVersion, kind string, patch map[string]any) (cel.Expr, string) {
	structs := map[string]bool{"metadata": true}
	if gv, err := schema.ParseGroupVersion(apiVersion); err == nil {
		if t := kyverno.PodTemplate(gv.Group, kind); t != nil {
			p := append(t, "metadata")
			for i := range p {
				structs[strings.Join(p[:i+1], ".")] = true
			}
		}
	}
	dropped, err := dropEquality(patch, openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind}), "")
	if err != nil {
		return nil, err.Error()
	}
	a := &applier{structs: structs}
	obj, ok := a.object(nil, object, dropped.(map[string]any))
	if !ok {
		return nil, a.why
	}
	if obj == nil {
		return nil, "the patch changes nothing"
	}
	return obj, ""
}

type applier struct {
	structs map[string]bool // the dotted paths of the structs the patch may go through
	why     string
}

func (a *applier) refuse(field, format string) bool {
	a.why = field + ": " + format
	return false
}

// object is the Object{...} for the struct at path (cur: the object's value there), nil when
// the patch sets nothing in it.
func (a *applier) object(path []string, cur cel.Expr, patch map[string]any) (cel.Expr, bool) {
	var fields []string
	var vals []cel.Expr
	for _, key := range slices.Sorted(maps.Keys(patch)) {
		v := patch[key]
		p := append(path[:len(path):len(path)], key)
		field := strings.Join(p, ".")
		if k, _ := anchor(key); k != "" || strings.HasPrefix(key, "$") {
			return nil, a.refuse(field, "an anchor or directive outside labels and annotations")
		}
		if prunable(v) {
			continue // Kyverno drops empty maps from the patch
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, a.refuse(field, "not a map of labels or annotations")
		}
		var val cel.Expr
		switch {
		case a.structs[field]:
			e, ok := a.object(p, cel.OptIndex(cur, cel.Str(key)), m)
			if !ok {
				return nil, false
			}
			val = e
		case a.structs[strings.Join(path, ".")] && path[len(path)-1] == "metadata" && (key == "labels" || key == "annotations"):
			e, ok := a.strings(field, cel.OptIndex(cur, cel.Str(key)), m)
			if !ok {
				return nil, false
			}
			val = e
		default:
			return nil, a.refuse(field, "not labels or annotations")
		}
		if val != nil {
			fields = append(fields, key)
			vals = append(vals, val)
		}
	}
	if len(fields) == 0 {
		return nil, true
	}
	return cel.Object(typeName(path), fields, vals), true
}

// typeName is the ApplyConfiguration's type of the struct at path: Object, Object.spec, ...
func typeName(path []string) string {
	return strings.Join(append([]string{"Object"}, path...), ".")
}

// strings is the map literal for the string map at field (cur: the object's map, an optional).
func (a *applier) strings(field string, cur cel.Expr, patch map[string]any) (cel.Expr, bool) {
	var keys, vals []cel.Expr
	var opt []bool
	for _, key := range slices.Sorted(maps.Keys(patch)) {
		v := patch[key]
		f := join(field, key)
		kind, name := anchor(key)
		if kind != "" && kind != "+" || strings.HasPrefix(name, "$") {
			return nil, a.refuse(f, "a condition, anchor or directive")
		}
		if kind == "" && prunable(v) {
			continue
		}
		var val cel.Expr
		switch x := v.(type) {
		case string:
			val = cel.Str(x)
		case expr:
			if !x.t.only(tStr) {
				return nil, a.refuse(f, "a value that can be other than a string")
			}
			// The API server's CEL wants a map literal's values of one type.
			val = cel.Call("string", x.e)
		default:
			return nil, a.refuse(f, "a value other than a string")
		}
		keys = append(keys, cel.Str(name))
		if kind == "+" {
			// An entry only where the object's map lacks the key (or holds null there).
			missing := cel.Bin("==", cel.Method(cel.OptIndex(cur, cel.Str(name)), "orValue", cel.Null()), cel.Null())
			val = cel.Cond(missing, cel.Method(cel.Ident("optional"), "of", val), cel.Method(cel.Ident("optional"), "none"))
		}
		vals = append(vals, val)
		opt = append(opt, kind == "+")
	}
	if len(keys) == 0 {
		return nil, true
	}
	return cel.OptMap(keys, vals, opt), true
}
