package admission

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/cel"
)

// TestNamespacedKindsAgree: the kinds whose requests the compiler assumes always carry a
// namespace (cel.NamespacedKinds) are built-in kinds this package's REST mapper, and so verify
// and eval, take as namespaced.
func TestNamespacedKindsAgree(t *testing.T) {
	s, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	m := newRESTMapper(s, nil)
	for _, gk := range cel.NamespacedKinds() {
		k := schema.GroupKind{Group: gk[0], Kind: gk[1]}
		var versions []string
		for _, gv := range s.VersionsForGroupKind(k) {
			if gv.Version != "__internal" {
				versions = append(versions, gv.Version)
			}
		}
		mappings, err := m.RESTMappings(k, versions...)
		if err != nil || len(mappings) == 0 {
			t.Errorf("%s/%s: not a built-in kind: %v", gk[0], gk[1], err)
			continue
		}
		for _, mapping := range mappings {
			if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
				t.Errorf("%s/%s %s: scope %s, want namespaced", gk[0], gk[1], mapping.GroupVersionKind.Version, mapping.Scope.Name())
			}
		}
	}
}
