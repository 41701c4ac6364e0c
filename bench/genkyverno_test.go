package bench

import (
	"bytes"
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
	"github.com/mapc-dev/mapc/verify"
)

// kyvernoGenObjects are objects the generated Kyverno policies change: the containers, env
// variables, sidecars, ConfigMaps and Deployments of several families, and a Pod one family's
// exclude skips.
const kyvernoGenObjects = `apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: team-2, labels: {gen.example.com/skip: "3"}}
spec:
  containers:
  - {name: app, image: "x:v1", env: [{name: GEN_3, value: old}]}
  - {name: other, image: "registry-5.example/y:v11"}
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: team-12, annotations: {gen.example.com/a0: keep}}
spec:
  securityContext: {runAsNonRoot: false}
  containers:
  - {name: gen-sidecar-12, image: old}
  - {name: app, image: "x:v21"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: team-4, labels: {gen.example.com/part-of: app-4}}
data: {debug-4: "x", debug-14: "y"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: team-7}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
      - {name: app, image: "x:v1"}
`

// TestGenerateKyverno: the generated Kyverno policies are distinct, the same for the same n, of
// every family, and each compiles (one MutatingAdmissionPolicy per policy); for 30 of them
// Kyverno's engine accepts them and the compiled policies store Kyverno's object for each
// object above, in several orders.
func TestGenerateKyverno(t *testing.T) {
	const n = 100
	data := GenerateKyverno(n)
	if !bytes.Equal(data, GenerateKyverno(n)) {
		t.Error("GenerateKyverno is not deterministic")
	}
	docs, err := source.Parse("generated.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range docs {
		names[d.Object.GetKind()+"/"+d.Object.GetNamespace()+"/"+d.Object.GetName()] = true
	}
	if len(docs) != n || len(names) != n {
		t.Fatalf("%d documents, %d distinct policies, want %d", len(docs), len(names), n)
	}
	for _, fam := range kyvernoFamilies {
		if !bytes.Contains(data, []byte("family "+fam+"\n")) {
			t.Errorf("no policy of family %s", fam)
		}
	}
	out := compiler.Compile(docs, compiler.Options{})
	for _, p := range out.Problems {
		t.Error(p)
	}
	if len(out.Policies) != n {
		t.Errorf("%d policies compiled from %d Kyverno policies", len(out.Policies), n)
	}

	few, err := source.Parse("generated.yaml", GenerateKyverno(30))
	if err != nil {
		t.Fatal(err)
	}
	out = compiler.Compile(few, compiler.Options{})
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems[0])
	}
	var policies []*unstructured.Unstructured
	for _, d := range few {
		policies = append(policies, d.Object)
	}
	path, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := verify.NewKyvernoReference(path, policies, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.NewSets(nil, Sets(out.Policies), verify.Options{Reference: ref, Idempotence: true})
	if err != nil {
		ref.Close()
		t.Fatal(err)
	}
	defer v.Close()
	objs, err := source.Parse("objects.yaml", []byte(kyvernoGenObjects))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range objs {
		r := v.Check(context.Background(), verify.Case{Object: d.Object})
		if !r.Pass {
			t.Errorf("%s", verify.Report([]verify.Result{r}))
		}
		// Each object is one the policies change: else it would check nothing.
		if in, err := verify.Normalize(d.Object); err != nil || r.Want == nil || Same(in, r.Want) {
			t.Errorf("%s: Kyverno's engine leaves it unchanged (%v)", d.Object.GetName(), err)
		}
	}
}
