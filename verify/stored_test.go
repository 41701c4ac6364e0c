package verify

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
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

// TestStatusCase: an object gets an update of its status where a mutate rule of a policy that
// applies in its namespace names its kind's status, in any of Kyverno's spellings; not for other
// kinds, rules for the resource itself, other rules, or a Policy of another namespace.
func TestStatusCase(t *testing.T) {
	policy := func(kind, ns, rule string, kinds ...string) *unstructured.Unstructured {
		var ks []any
		for _, k := range kinds {
			ks = append(ks, k)
		}
		p := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kyverno.io/v1", "kind": kind,
			"metadata": map[string]any{"name": "p", "namespace": ns},
			"spec": map[string]any{"rules": []any{map[string]any{"name": "r",
				"match": map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": ks}}}},
				rule:    map[string]any{}}}}}}
		if ns == "" {
			unstructured.RemoveNestedField(p.Object, "metadata", "namespace")
		}
		return p
	}
	obj := func(kind, ns string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": "x"}}}
		if ns != "" {
			o.SetNamespace(ns)
		}
		return o
	}
	for _, tc := range []struct {
		name   string
		policy *unstructured.Unstructured
		obj    *unstructured.Unstructured
		want   bool
	}{
		{"Kind/status", policy("ClusterPolicy", "", "mutate", "Node/status"), obj("Node", ""), true},
		{"Version/Kind.status", policy("ClusterPolicy", "", "mutate", "v1/Node.status"), obj("Node", ""), true},
		{"Version/Kind/status", policy("ClusterPolicy", "", "mutate", "Pod", "v1/Pod/status"), obj("Pod", "a"), true},
		{"another kind", policy("ClusterPolicy", "", "mutate", "Node/status"), obj("Pod", "a"), false},
		{"the resource itself", policy("ClusterPolicy", "", "mutate", "Node"), obj("Node", ""), false},
		{"another subresource", policy("ClusterPolicy", "", "mutate", "Pod/ephemeralcontainers"), obj("Pod", "a"), false},
		{"a validate rule", policy("ClusterPolicy", "", "validate", "Node/status"), obj("Node", ""), false},
		{"a Policy of its namespace", policy("Policy", "a", "mutate", "Pod/status"), obj("Pod", "a"), true},
		{"a Policy of another namespace", policy("Policy", "b", "mutate", "Pod/status"), obj("Pod", "a"), false},
	} {
		k := &KyvernoReference{policies: []*unstructured.Unstructured{tc.policy}}
		c, ok := k.StatusCase(tc.obj)
		if ok != tc.want {
			t.Errorf("%s: StatusCase %v, want %v", tc.name, ok, tc.want)
			continue
		}
		if ok && (c.SubResource != "status" || c.Operation != admissionv1.Update || c.Object != tc.obj || c.OldObject != tc.obj) {
			t.Errorf("%s: case %+v", tc.name, c)
		}
	}
}
