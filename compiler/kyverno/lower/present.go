package lower

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// alwaysMaps is the set of places (paths of field names joined by pathSep) where every object of
// the built-in kind apiVersion/kind holds an object at admission, nil for a kind the client
// libraries do not know (a custom resource, which the API server keeps as it is sent).
//
// The API server decodes a built-in object into its Go type before admission, and both the
// object a MutatingAdmissionPolicy's CEL reads and the JSON a webhook such as Kyverno's receives
// are made from that Go value (runtime.DefaultUnstructuredConverter, encoding/json): a field of
// struct type (not a pointer) is always written, as an object, even when it is empty (omitempty
// leaves structs in). A Deployment always has spec, spec.template and spec.template.metadata; a
// Pod always has metadata and spec. They are exactly the objects the converter writes for the
// type's zero value: every other field is a pointer, a map, a list or a scalar, which may be
// absent or null.
func alwaysMaps(apiVersion, kind string) map[string]bool {
	key := apiVersion + "/" + kind
	if v, ok := alwaysCache.Load(key); ok {
		return v.(map[string]bool)
	}
	var out map[string]bool
	if gv, err := schema.ParseGroupVersion(apiVersion); err == nil {
		if obj, err := clientgoscheme.Scheme.New(gv.WithKind(kind)); err == nil {
			if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil {
				out = map[string]bool{}
				var walk func(m map[string]any, at string)
				walk = func(m map[string]any, at string) {
					for k, v := range m {
						if sub, ok := v.(map[string]any); ok {
							p := join2(at, k)
							out[p] = true
							walk(sub, p)
						}
					}
				}
				walk(u, "")
			}
		}
	}
	alwaysCache.Store(key, out)
	return out
}

// rootMaps is alwaysMaps with metadata, which every object admission sees has (a name or
// generateName), built-in or not.
func rootMaps(apiVersion, kind string) map[string]bool {
	out := map[string]bool{"metadata": true}
	for k := range alwaysMaps(apiVersion, kind) {
		out[k] = true
	}
	return out
}

var alwaysCache sync.Map // apiVersion/kind → map[string]bool

// pathSep joins field names in alwaysMaps' keys (a field name may hold "/" or ".").
const pathSep = "\x00"

func join2(at, name string) string {
	if at == "" {
		return name
	}
	return at + pathSep + name
}

// pathKey is alwaysMaps' key of the field names.
func pathKey(names []string) string { return strings.Join(names, pathSep) }
