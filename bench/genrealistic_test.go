package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler"
	frontend "github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
)

// TestGenerateRealistic: the realistic mixes are what GenerateRealistic promises, for a few
// sizes and seeds: n distinct mutators, the same stream for the same n and seed, every family
// present (sidecars, merges into one list, registry rewrites and tag pins, Pod template
// mutators), Gatekeeper converging on every bench object and on copies of them in team
// namespaces, both layouts compiling every mutator, and (up to 200 mutators) the fused policies
// storing Gatekeeper's object for each of those objects.
func TestGenerateRealistic(t *testing.T) {
	base, err := LoadDocs("objects", nil, []string{Path("testdata/bench/objects")}, "Pod/shop/checkout-7d9f8b6c5d-x2x4k")
	if err != nil {
		t.Fatal(err)
	}
	objects := append([]*unstructured.Unstructured(nil), base.Objects...)
	namespaces := append([]*corev1.Namespace(nil), base.Namespaces...)
	for team := 0; team < 3; team++ {
		name := fmt.Sprintf("team-%d", team)
		namespaces = append(namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}})
	}
	// The same objects in team namespaces, some Pods in a tier, so that team mutators apply.
	for _, o := range base.Objects {
		if o.GetNamespace() == "" || o.GetNamespace() == "kube-system" {
			continue
		}
		for team := 0; team < 3; team++ {
			c := o.DeepCopy()
			c.SetNamespace(fmt.Sprintf("team-%d", team))
			labels := c.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels["tier"] = fmt.Sprintf("t%d", team)
			c.SetLabels(labels)
			objects = append(objects, c)
		}
	}
	// Admitting every object through the fused policies of 500 mutators takes seconds: the
	// largest size is only compiled.
	for _, tc := range []struct {
		n     int
		seed  int64
		check bool
	}{{100, 1, true}, {200, 2, true}, {500, 3, false}} {
		t.Run(fmt.Sprintf("n=%d,seed=%d", tc.n, tc.seed), func(t *testing.T) {
			data := GenerateRealistic(tc.n, tc.seed)
			if !bytes.Equal(data, GenerateRealistic(tc.n, tc.seed)) {
				t.Error("two streams for the same n and seed")
			}
			if bytes.Equal(data, GenerateRealistic(tc.n, tc.seed+1)) {
				t.Error("the same stream for two seeds")
			}
			docs, err := source.Parse("generated.yaml", data)
			if err != nil {
				t.Fatal(err)
			}
			w := &Workload{Name: "generated", Docs: docs, Namespaces: namespaces, Objects: objects}
			names := map[string]bool{}
			families := map[string]int{}
			for _, d := range docs {
				if !frontend.IsMutator(d.Object) {
					t.Fatalf("%s: not a mutator", d.Object.GetKind())
				}
				w.Mutators = append(w.Mutators, d.Object)
				key := d.Object.GetKind() + "/" + d.Object.GetName()
				if names[key] {
					t.Errorf("%s twice", key)
				}
				names[key] = true
				families[familyOf(d.Object)]++
			}
			if len(w.Mutators) != tc.n {
				t.Fatalf("%d mutators, want %d", len(w.Mutators), tc.n)
			}
			for _, f := range []string{"sidecar", "merge", "prune", "registry", "template", "workload", "env", "label"} {
				if families[f] == 0 {
					t.Errorf("no mutator of family %s (%v)", f, families)
				}
			}
			if tc.n >= 200 && families["tag pin"] == 0 {
				t.Errorf("no tag pin (%v)", families)
			}
			t.Logf("families: %v", families)

			gk, err := NewGatekeeper(w) // fails on schema conflicts
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for _, o := range objects {
				if _, err := Result(ctx, gk, o); err != nil {
					t.Errorf("Gatekeeper on %s/%s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			for _, layout := range []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator} {
				sets, err := w.Compile(layout)
				if err != nil {
					t.Fatalf("%s: %s", layout, firstLine(err))
				}
				if layout != compiler.LayoutFused || !tc.check {
					continue
				}
				m, err := NewMAP(w, sets)
				if err != nil {
					t.Fatal(err)
				}
				err = Check(ctx, w, map[string]Engine{engGatekeeper: gk, engFused: m})
				m.Close()
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// familyOf names what a generated mutator does, for TestGenerateRealistic.
func familyOf(m *unstructured.Unstructured) string {
	loc, _, _ := unstructured.NestedString(m.Object, "spec", "location")
	op, _, _ := unstructured.NestedString(m.Object, "spec", "parameters", "operation")
	tag, _, _ := unstructured.NestedString(m.Object, "spec", "parameters", "assignTag")
	switch {
	case strings.HasPrefix(m.GetName(), "sidecar-"):
		return "sidecar"
	case m.GetKind() == "ModifySet":
		return op
	case m.GetKind() == "AssignImage" && tag != "":
		return "tag pin"
	case m.GetKind() == "AssignImage":
		return "registry"
	case strings.HasPrefix(loc, "spec.template."):
		return "template"
	case m.GetKind() == "AssignMetadata" && strings.HasPrefix(m.GetName(), "workload-"):
		return "workload"
	case m.GetKind() == "AssignMetadata":
		return "label"
	case strings.Contains(loc, ".env["):
		return "env"
	}
	return "default"
}
