package verify

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
)

// TestIdempotenceCatchesUnstablePolicies: a policy that gives Gatekeeper's result on the first
// admission but changes it again on the second fails the idempotence check, since Gatekeeper,
// admitting its result again, leaves it alone. (Results that Gatekeeper itself changes again the
// same way pass: testdata/diff-failures/keyed-element-empty-key-readded.yaml.)
func TestIdempotenceCatchesUnstablePolicies(t *testing.T) {
	docs, err := source.Parse("m.yaml", []byte(`apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: label-x
spec:
  location: metadata.labels.x
  parameters:
    assign:
      value: "1"
`))
	if err != nil {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, compiler.Options{})
	if len(out.Problems) > 0 || len(out.Policies) != 1 {
		t.Fatalf("compile: %v", out.Problems)
	}
	p := out.Policies[0]
	p.Policy.Spec.Mutations = []admissionregistrationv1.Mutation{{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `"x" in object.metadata.labels ? ` +
			`[JSONPatch{op: "add", path: "/metadata/annotations", value: {"again": "1"}}] : ` +
			`[JSONPatch{op: "add", path: "/metadata/labels/x", value: "1"}]`},
	}}
	pod := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
  labels: {app: a}
spec:
  containers: [{name: c, image: nginx}]
`), &pod.Object); err != nil {
		t.Fatal(err)
	}
	for _, idem := range []bool{false, true} {
		v, err := New([]*unstructured.Unstructured{docs[0].Object}, out.Policies, Options{Idempotence: idem})
		if err != nil {
			t.Fatal(err)
		}
		r := v.Check(context.Background(), Case{Object: pod})
		v.Close()
		if idem && (r.Pass || !strings.Contains(r.Reason, "not idempotent")) {
			t.Errorf("with the check: pass %v, reason %q", r.Pass, r.Reason)
		}
		if !idem && !r.Pass {
			t.Errorf("without the check the first admission matches Gatekeeper, yet: %s", r.Reason)
		}
	}
}
