package lower

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestAddsThroughOneItem: adds through one list item follow each other (each finds the item as
// the earlier ones left it); another earlier operation through it or on its list (an append, an
// insert, another item, the whole list), or a second index in a path, is refused.
func TestAddsThroughOneItem(t *testing.T) {
	add := func(path string) kyverno.Op { return kyverno.Op{Op: "add", Path: path, Value: "v"} }
	for name, tc := range map[string]struct {
		ops     []kyverno.Op
		refused bool
	}{
		"appends to one list":     {[]kyverno.Op{add("/spec/containers/0/env/-"), add("/spec/containers/0/env/-")}, false},
		"adds to two of its maps": {[]kyverno.Op{add("/spec/containers/0/env/-"), add("/spec/containers/0/securityContext/runAsNonRoot")}, false},
		"after a replace":         {[]kyverno.Op{{Op: "replace", Path: "/spec/containers/0/image", Value: "v"}, add("/spec/containers/0/env/-")}, true},
		"a second index":          {[]kyverno.Op{add("/spec/containers/0/env/-"), add("/spec/containers/0/env/0/value")}, true},
		"another item":            {[]kyverno.Op{add("/spec/containers/0/env/-"), add("/spec/containers/1/env/-")}, true},
		"after an append":         {[]kyverno.Op{add("/spec/containers/-"), add("/spec/containers/1/env/-")}, true},
		"after an insert":         {[]kyverno.Op{add("/spec/containers/0"), add("/spec/containers/0/env/-")}, true},
		"after the whole list":    {[]kyverno.Op{add("/spec/initContainers"), add("/spec/initContainers/0/env/-")}, true},
		"after another list":      {[]kyverno.Op{add("/spec/volumes/-"), add("/spec/containers/0/volumeMounts/-")}, false},
	} {
		_, err := JSON6902("v1", "Pod", tc.ops)
		if refused := err != nil && strings.Contains(err.Error(), "on the same list"); refused != tc.refused || err != nil && !refused {
			t.Errorf("%s: %v, want refused %v", name, err, tc.refused)
		}
	}
}
