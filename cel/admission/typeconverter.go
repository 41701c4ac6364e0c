package admission

import (
	"context"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// staticTypeConverterManager is the patch.TypeConverterManager handed to the
// real mutating.NewDispatcher. The API server's manager
// (patch.NewTypeConverterManager) fetches schemas from the server's
// /openapi/v3 endpoint; here the schemas are static:
//   - built-in kinds: applyconfigurations.NewTypeConverter over the
//     client-go scheme (the schema compiled into client-go);
//   - custom resources: the schema the apiextensions-apiserver publishes for
//     the CRD version (see crdTypeConverter), turned into a converter with
//     managedfields.NewTypeConverter like the API server's manager does.
//
// Built-in kinds that client-go has no apply schema for (a Binding, which
// nothing applies) are in the API server's /openapi/v3 all the same: they get
// a converter that the JSONPatch patcher never calls and that fails an
// ApplyConfiguration, which would need their schema (noSchema). Kinds that
// are none of these get no converter, and the dispatcher fails the request as
// the API server does for a kind whose schema is unknown.
type staticTypeConverterManager struct {
	scheme  *runtime.Scheme
	builtin managedfields.TypeConverter
	crds    map[schema.GroupVersionKind]managedfields.TypeConverter

	mu      sync.RWMutex
	isBuilt map[schema.GroupVersionKind]bool
}

var _ patch.TypeConverterManager = &staticTypeConverterManager{}

func newStaticTypeConverterManager(s *runtime.Scheme, crds []*apiextensionsv1.CustomResourceDefinition) (*staticTypeConverterManager, error) {
	m := &staticTypeConverterManager{
		scheme:  s,
		builtin: applyconfigurations.NewTypeConverter(s),
		crds:    map[schema.GroupVersionKind]managedfields.TypeConverter{},
		isBuilt: map[schema.GroupVersionKind]bool{},
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			tc, err := crdTypeConverter(crd, v.Name)
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: building type converter: %w", crd.Name, v.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			m.crds[gvk] = tc
		}
	}
	return m, nil
}

// GetTypeConverter implements patch.TypeConverterManager. Like the API
// server's manager it first asks the static (built-in) converter whether it
// knows the kind by converting an empty stub object.
func (m *staticTypeConverterManager) GetTypeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	m.mu.RLock()
	known, cached := m.isBuilt[gvk]
	m.mu.RUnlock()
	if !cached {
		stub := &unstructured.Unstructured{}
		stub.SetGroupVersionKind(gvk)
		_, err := m.builtin.ObjectToTyped(stub)
		known = err == nil
		m.mu.Lock()
		m.isBuilt[gvk] = known
		m.mu.Unlock()
	}
	if known {
		return m.builtin
	}
	if tc, ok := m.crds[gvk]; ok {
		return tc
	}
	if m.scheme.Recognizes(gvk) {
		return noSchema{gvk}
	}
	return nil
}

// noSchema is the converter of a built-in kind without an apply schema in
// client-go (see staticTypeConverterManager).
type noSchema struct{ gvk schema.GroupVersionKind }

func (n noSchema) ObjectToTyped(runtime.Object, ...typed.ValidationOptions) (*typed.TypedValue, error) {
	return nil, fmt.Errorf("admission: no schema for %s in process: an ApplyConfiguration on it cannot be evaluated here", n.gvk)
}

func (n noSchema) TypedToObject(*typed.TypedValue) (runtime.Object, error) {
	return nil, fmt.Errorf("admission: no schema for %s in process: an ApplyConfiguration on it cannot be evaluated here", n.gvk)
}

// Run implements patch.TypeConverterManager; static schemas need no refresh.
func (m *staticTypeConverterManager) Run(ctx context.Context) { <-ctx.Done() }
