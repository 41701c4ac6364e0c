package lower

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestForEachNeedsFlatten: a foreach is lowered where the target's CEL has flatten and
// transformList (Kubernetes 1.35), and refused with the version to compile for elsewhere.
func TestForEachNeedsFlatten(t *testing.T) {
	fe := kyverno.ForEach{List: "request.object.spec.containers", StrategicMerge: map[string]any{
		"spec": map[string]any{"containers": []any{map[string]any{"name": "{{ element.name }}", "imagePullPolicy": "Always"}}},
	}}
	if _, err := ForEach("v1", "Pod", fe, "foreach[0]", Scope{Features: cel.Features{TwoVar: true, Semver: true}}); err == nil || !strings.Contains(err.Error(), "Kubernetes 1.35") {
		t.Errorf("for 1.34: %v, want a refusal naming 1.35", err)
	}
	e, err := ForEach("v1", "Pod", fe, "foreach[0]", Scope{Features: cel.Features{Flatten: true, Lists: true, TwoVar: true, Semver: true}})
	if err != nil || !strings.Contains(cel.String(e), "flatten") {
		t.Errorf("for 1.35: %v, %v", err, e)
	}
}

// TestListPathDefaultEmpty: a foreach list ending in || `[]` reads as the path with a final []
// (its items, none where it has no value); another default, or one that is not an empty JSON
// list, is not a path.
func TestListPathDefaultEmpty(t *testing.T) {
	for list, want := range map[string]bool{
		"request.object.spec.initContainers || `[]`":      true,
		"request.object.spec.initContainers[] || ` [ ] `": true,
		"request.object.spec.initContainers[]":            true,
		"request.object.spec.initContainers":              false,
		"request.object.spec.initContainers || '[]'":      false,
		"request.object.spec.initContainers || `[1]`":     false,
		"request.object.spec.initContainers || `null`":    false,
		"request.object.spec.initContainers || `{}`":      false,
	} {
		s, spread := cutSpread(list)
		path, err := ListPath(list)
		ok := err == nil && slices.Equal(path, []string{"spec", "initContainers"})
		if spread != want || want && (!ok || s != "request.object.spec.initContainers") {
			t.Errorf("%q: spread %v (%q), path %q (%v); want spread %v", list, spread, s, path, err, want)
		}
	}
}

// TestForEachAnchoredItem: an entry patching its containers with an item that holds anchors is
// the item's patch once; where each element's patch can differ (a variable in the item,
// per-element preconditions) or the list is not one of containers, it is refused.
func TestForEachAnchoredItem(t *testing.T) {
	item := func(list string, extra map[string]any) kyverno.ForEach {
		m := map[string]any{"name": "{{ element.name }}", "securityContext": map[string]any{"+(runAsNonRoot)": true}}
		maps.Copy(m, extra)
		return kyverno.ForEach{List: "request.object.spec." + list, StrategicMerge: map[string]any{"spec": map[string]any{list: []any{m}}}}
	}
	sc := Scope{Features: cel.Features{Flatten: true, Lists: true, TwoVar: true, Semver: true}}
	if _, err := ForEach("v1", "Pod", item("containers", nil), "foreach[0]", sc); err != nil {
		t.Errorf("anchored item: %v", err)
	}
	withPre := item("initContainers", nil)
	withPre.Preconditions = &kyverno.Preconditions{All: []kyverno.Condition{{Key: "{{ element.image }}", Operator: "Equals", Value: "*:latest"}}}
	for name, fe := range map[string]kyverno.ForEach{
		"a variable in the item":       item("containers", map[string]any{"workingDir": "{{ element.image }}"}),
		"per-element preconditions":    withPre,
		"a list other than containers": item("volumes", nil),
		"a condition anchor":           item("containers", map[string]any{"(image)": "*:latest"}),
	} {
		if _, err := ForEach("v1", "Pod", fe, "foreach[0]", sc); err == nil || !strings.Contains(err.Error(), "anchors in the patched item") {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}

// TestMultiSelectList: a multi-select list of container lists below request.object, flattened,
// reads as its way and its lists; other lists, repeats or other shapes do not.
func TestMultiSelectList(t *testing.T) {
	for list, want := range map[string][]string{
		"request.object.spec.[ephemeralContainers, initContainers, containers][]": {"spec", "|", "ephemeralContainers", "initContainers", "containers"},
		"request.object.spec.template.spec.[initContainers,containers][]":         {"spec", "template", "spec", "|", "initContainers", "containers"},
		"request.object.spec.[initContainers, volumes][]":                         nil,
		"request.object.spec.[containers, containers][]":                          nil,
		"request.object.spec.[initContainers, containers]":                        nil,
		"element.[initContainers, containers][]":                                  nil,
	} {
		prefix, lists, ok := multiSelectOf(list)
		var got []string
		if ok {
			got = append(append(append(got, prefix...), "|"), lists...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", list, got, want)
		}
	}
}
