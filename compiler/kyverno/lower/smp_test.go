package lower

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
)

// TestDecideAdds: each combination of a patch item's +(key) decisions gives the item Kyverno's
// walk leaves: the kept keys plain, the dropped ones gone, maps left empty dropped.
func TestDecideAdds(t *testing.T) {
	item := map[string]any{
		"+(workingDir)":   "/w",
		"resources":       map[string]any{"limits": map[string]any{"+(cpu)": "1", "+(memory)": "1Gi"}},
		"securityContext": map[string]any{},
	}
	adds, err := addAnchors(item, nil, "f")
	if err != nil {
		t.Fatal(err)
	}
	want := []addAnchor{{key: "workingDir"}, {path: []string{"resources", "limits"}, key: "cpu"}, {path: []string{"resources", "limits"}, key: "memory"}}
	if !reflect.DeepEqual(adds, want) {
		t.Fatalf("addAnchors: %v, want %v", adds, want)
	}
	for _, tc := range []struct {
		c    int
		want map[string]any
	}{
		{0, map[string]any{}},
		{0b001, map[string]any{"workingDir": "/w"}},
		{0b100, map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}}},
		{0b111, map[string]any{"workingDir": "/w", "resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "1Gi"}}}},
	} {
		if got := pruned(decideAdds(item, tc.c, adds, nil)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("case %03b: %v, want %v", tc.c, got, tc.want)
		}
	}
	for _, bad := range []map[string]any{
		{"resources": map[string]any{"(cpu)": "1"}},                     // a condition below the top
		{"+(resources)": map[string]any{"+(limits)": map[string]any{}}}, // an anchor in an anchor's value
		{"env": []any{map[string]any{"name": "A", "+(value)": "1"}}},    // an anchor in a list
		{"=(securityContext)": map[string]any{"+(runAsNonRoot)": true}}, // in an equality anchor's value
	} {
		if _, err := addAnchors(bad, nil, "f"); err == nil {
			t.Errorf("addAnchors(%v): no error", bad)
		}
	}
}

// TestItemAnchored: what sends a list item down Kyverno's processListOfMaps — condition, global
// and +(key) anchors, not equality anchors.
func TestItemAnchored(t *testing.T) {
	for v, want := range map[string]bool{
		`{"(name)": "*"}`:                   true,
		`{"a": {"+(b)": 1}}`:                true,
		`{"a": [{"<(b)": 1}]}`:              true,
		`{"a": "(b)"}`:                      true,
		`{"=(a)": {"b": 1}, "name": "x"}`:   false,
		`{"name": "x", "a": {"b": "+(c)"}}`: false,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			t.Fatal(err)
		}
		if got := itemAnchored(m); got != want {
			t.Errorf("itemAnchored(%s) = %v, want %v", v, got, want)
		}
	}
}

// TestSubstituteCases: a patch with variables that can be null is one case per combination of
// them being null (null written in) or not; a variable that cannot be null makes no case, and
// too many nullable ones are refused.
func TestSubstituteCases(t *testing.T) {
	sc := Scope{Object: ObjectShape(Kind{Version: "v1", Kind: "Pod"}), Features: cel.Features{TwoVar: true}}
	nullable := "{{ request.object.metadata.labels.a || request.object.metadata.annotations.a }}"
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]any{
		"x": nullable, "y": nullable, "z": "{{ request.object.metadata.labels.a || 'none' }}",
	}}}
	cases, _, err := SubstituteCases(patch, sc, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 {
		t.Fatalf("%d cases, want 2 (one nullable variable, twice)", len(cases))
	}
	labels := func(c PatchCase) map[string]any {
		return c.Patch.(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
	}
	if l := labels(cases[0]); l["x"] != nil || l["y"] != nil || l["z"] == nil {
		t.Errorf("null case: %v, want x and y null, z a value", l)
	}
	if l := labels(cases[1]); l["x"] == nil || l["x"].(expr).t&tNull != 0 {
		t.Errorf("value case: %v, want x a value that is not null", l)
	}
	if w := cel.String(cases[0].When); !strings.HasSuffix(w, "== (null)") {
		t.Errorf("null case's condition %s does not test for null", w)
	}
	many := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d"} {
		many[k] = "{{ request.object.metadata.labels." + k + " || request.object.metadata.annotations." + k + " }}"
	}
	if _, _, err := SubstituteCases(map[string]any{"metadata": map[string]any{"labels": many}}, sc, ""); err == nil || !strings.Contains(err.Error(), "more than 3") {
		t.Errorf("four nullable variables: %v, want a refusal", err)
	}
}

// TestAnchoredItemManyAdds: the +(key) anchors of a list item with anchors are merged one by one,
// however many; one case per combination of the decisions only where the copy's merge is not
// that (a $patch in the item), and then up to three.
func TestAnchoredItemManyAdds(t *testing.T) {
	item := func(extra map[string]any) map[string]any {
		m := map[string]any{
			"(name)": "*",
			"resources": map[string]any{
				"requests": map[string]any{"+(memory)": "64Mi", "+(cpu)": "50m"},
				"limits":   map[string]any{"+(memory)": "256Mi", "+(cpu)": "500m"},
			},
		}
		maps.Copy(m, extra)
		return map[string]any{"spec": map[string]any{"containers": []any{m}}}
	}
	if _, _, err := StrategicMerge("v1", "Pod", item(nil)); err != nil {
		t.Errorf("four anchors: %v", err)
	}
	_, _, err := StrategicMerge("v1", "Pod", item(map[string]any{"securityContext": map[string]any{"$patch": "replace", "runAsNonRoot": true}}))
	if err == nil || !strings.Contains(err.Error(), "4 +(key) anchors") {
		t.Errorf("four anchors beside a $patch: %v, want refused", err)
	}
}
