package backend

import (
	"slices"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestWriteFills: a new env item fills a fieldRef's apiVersion only where it has a fieldRef
// (or a variable that can be one) and no apiVersion.
func TestWriteFills(t *testing.T) {
	d := []string{"spec", "containers", "env", "valueFrom", "fieldRef", "apiVersion"}
	at := []string{"spec", "containers", "env"}
	for _, tc := range []struct {
		item any
		want bool
	}{
		{map[string]any{"name": "A", "value": "{{ element.name }}"}, false},
		{map[string]any{"name": "A", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}}, true},
		{map[string]any{"name": "A", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "x", "apiVersion": "v1"}}}, false},
		{map[string]any{"name": "A", "valueFrom": "{{ request.object.metadata.labels }}"}, true},
	} {
		if got := (write{at: at, value: []any{tc.item}}).fills(d); got != tc.want {
			t.Errorf("%v: fills = %v, want %v", tc.item, got, tc.want)
		}
	}
	if !(write{at: at}).fills(d) {
		t.Error("an unknown value must fill")
	}
}

// TestOpsWrites: an operation below a foreach's element writes below it; an add at a list's
// end or through an index writes the list (it can create the item), and the maps it can create
// below the item.
func TestOpsWrites(t *testing.T) {
	str := func(ws []write) []string {
		var out []string
		for _, w := range ws {
			out = append(out, strings.Join(w.at, "."))
		}
		slices.Sort(out)
		return out
	}
	el := []string{"spec", "containers"}
	for _, tc := range []struct {
		op      kyverno.Op
		element []string
		want    []string
	}{
		{kyverno.Op{Op: "add", Path: "/spec/containers/{{elementIndex}}/image"}, el, []string{"spec.containers.image"}},
		{kyverno.Op{Op: "add", Path: "/spec/containers/-"}, nil, []string{"spec.containers", "spec.containers"}},
		{kyverno.Op{Op: "add", Path: "/spec/containers/0/securityContext/runAsUser"}, nil, []string{"spec.containers", "spec.containers.securityContext", "spec.containers.securityContext.runAsUser"}},
		{kyverno.Op{Op: "replace", Path: "/spec/containers/0"}, nil, []string{"spec.containers"}},
		{kyverno.Op{Op: "add", Path: "/metadata/labels/a~1b"}, nil, []string{"metadata.labels.a/b"}},
	} {
		if got := str(opsWrites([]kyverno.Op{tc.op}, tc.element)); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.op.Op, tc.op.Path, got, tc.want)
		}
	}
}
