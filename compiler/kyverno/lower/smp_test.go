package lower

import (
	"encoding/json"
	"reflect"
	"testing"
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
