package verify

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestStoredEphemeralContainers(t *testing.T) {
	parse := func(s string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	old := parse("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, resourceVersion: '1'}\nspec:\n  containers: [{name: a, image: nginx}]\n")
	in := Debug(old)
	if in == nil {
		t.Fatal("Debug gave nothing for a Pod")
	}
	if again := Debug(in); again == nil {
		t.Fatal("Debug gave nothing for a Pod with an ephemeral container")
	} else if l, _, _ := unstructured.NestedSlice(again.Object, "spec", "ephemeralContainers"); len(l) != 2 || l[1].(map[string]any)["name"] != "debugger-1" {
		t.Errorf("a second debug container: %v", l)
	}
	if Debug(parse("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")) != nil {
		t.Error("Debug gave a debug container to a Deployment")
	}
	// Admission changed a label, a container and the new ephemeral container: only the last is
	// kept.
	admitted := in.DeepCopy()
	admitted.SetLabels(map[string]string{"team": "x"})
	cs, _, _ := unstructured.NestedSlice(admitted.Object, "spec", "containers")
	cs[0].(map[string]any)["imagePullPolicy"] = "Always"
	_ = unstructured.SetNestedSlice(admitted.Object, cs, "spec", "containers")
	ecs, _, _ := unstructured.NestedSlice(admitted.Object, "spec", "ephemeralContainers")
	ecs[0].(map[string]any)["imagePullPolicy"] = "Always"
	_ = unstructured.SetNestedSlice(admitted.Object, ecs, "spec", "ephemeralContainers")

	got := Stored("ephemeralcontainers", old, admitted)
	want := old.DeepCopy()
	_ = unstructured.SetNestedSlice(want.Object, ecs, "spec", "ephemeralContainers")
	if d := DiffObjects(want, got, "want", "got"); d != "" {
		t.Errorf("Stored:\n%s", d)
	}
	if Stored("", old, admitted) != admitted {
		t.Error("Stored changed a request on the resource itself")
	}
}
