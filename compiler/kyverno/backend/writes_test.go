package backend

import (
	"slices"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestForeachWrites: an entry writes its list, its strategic merge's leaves and lists (fields
// beside the list included), its JSON patches' paths up to a variable, and its nested entries'.
func TestForeachWrites(t *testing.T) {
	fe := kyverno.ForEach{
		List: "request.object.spec.containers",
		StrategicMerge: map[string]any{"spec": map[string]any{
			"containers":     []any{map[string]any{"name": "{{ element.name }}"}},
			"volumes":        []any{map[string]any{"name": "tmp"}},
			"+(hostNetwork)": false,
		}},
		JSON6902: []kyverno.Op{{Op: "add", Path: "/spec/initContainers/{{elementIndex}}/image"}, {Op: "add", Path: "/metadata/labels/a~1b"}},
		ForEach:  []kyverno.ForEach{{List: "element.env", StrategicMerge: map[string]any{"metadata": map[string]any{"$patch": "replace"}}}},
	}
	var got []string
	for _, w := range foreachWrites(fe) {
		got = append(got, strings.Join(w, "."))
	}
	slices.Sort(got)
	want := []string{"metadata", "metadata.labels.a/b", "spec.containers", "spec.containers", "spec.hostNetwork", "spec.initContainers", "spec.volumes"}
	if !slices.Equal(got, want) {
		t.Errorf("foreachWrites = %q, want %q", got, want)
	}
}

// TestEntriesApartBeside: fields written beside an entry's list count as its writes.
func TestEntriesApartBeside(t *testing.T) {
	first := kyverno.ForEach{List: "request.object.spec.containers", StrategicMerge: map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": "{{ element.name }}"}},
		"volumes":    []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}},
	}}}
	r := &kyverno.Rule{ForEach: []kyverno.ForEach{first, {List: "request.object.spec.initContainers"}}}
	reads := [][]string{{"spec", "volumes"}}
	var err error
	for _, w := range foreachWrites(r.ForEach[0]) {
		if err == nil {
			err = readsWritten(reads, w, 0)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "changes spec.volumes") {
		t.Errorf("a read of the volumes written beside the list: %v, want a refusal", err)
	}
}
