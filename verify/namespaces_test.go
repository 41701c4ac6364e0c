package verify

import (
	"context"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

const labelTeamMutator = `apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: team
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [%KINDS%]}]
    namespaceSelector: %SELECTOR%
  location: metadata.labels.team
  parameters:
    assign:
      value: payments
`

func mutatorDocs(t *testing.T, kinds, selector string) []*source.Document {
	t.Helper()
	y := strings.NewReplacer("%KINDS%", kinds, "%SELECTOR%", selector).Replace(labelTeamMutator)
	docs, err := source.Parse("m.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func compileDocs(t *testing.T, docs []*source.Document, layout compiler.Layout) []*emit.Policy {
	t.Helper()
	out := compiler.Compile(docs, compiler.Options{Layout: layout})
	if len(out.Problems) > 0 {
		t.Fatalf("compile: %v", out.Problems)
	}
	return out.Policies
}

func podIn(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: "+ns+"\nspec:\n  containers: [{name: c, image: nginx}]\n"), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

type namespaceCase struct {
	name        string
	kinds       string
	selector    string
	opts        Options
	wantReason  []string // nil: the case passes
	wantLabel   bool     // the Pod gets the label
	wantAssumed []string
	// anyAssumed: the fused layout's policy for all kinds tests the kind in CEL, so its binding's
	// ignore-label requirement applies to the Pod too.
	anyAssumed bool
}

func TestNamespaceNotGiven(t *testing.T) {
	prod := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}}
	envProd := "{matchLabels: {env: prod}}"
	byName := "{matchLabels: {kubernetes.io/metadata.name: prod}}"
	tests := []namespaceCase{
		{name: "selector on env, namespace not given", kinds: "Pod", selector: envProd,
			opts:       Options{GiveNamespacesWith: "with --namespaces or -f"},
			wantReason: []string{"namespace prod is not given, but its labels matter (AssignMetadata/team: spec.match.namespaceSelector on env", "give the Namespace object (kubectl get namespace prod -o yaml) with --namespaces or -f"}},
		{name: "selector on env, namespace given", kinds: "Pod", selector: envProd,
			opts: Options{Namespaces: []*corev1.Namespace{prod}}, wantLabel: true},
		{name: "selector on the name only", kinds: "Pod", selector: byName,
			wantLabel: true, wantAssumed: []string{"prod"}},
		{name: "selector on the name only, ignored namespaces mutated", kinds: "Pod", selector: byName,
			opts: Options{MutateIgnoredNamespaces: true}, wantLabel: true},
		{name: "mutator for other kinds: the selector does not matter", kinds: "ConfigMap", selector: envProd, anyAssumed: true},
		{name: "namespace excluded by Gatekeeper's Config", kinds: "Pod", selector: envProd,
			opts: Options{ExcludedNamespaces: []string{"pro*"}}},
	}
	for _, layout := range []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator} {
		for _, tc := range tests {
			t.Run(string(layout)+"/"+tc.name, func(t *testing.T) {
				docs := mutatorDocs(t, tc.kinds, tc.selector)
				out := compiler.Compile(docs, compiler.Options{Layout: layout,
					ExcludedNamespaces: tc.opts.ExcludedNamespaces, MutateIgnoredNamespaces: tc.opts.MutateIgnoredNamespaces})
				if len(out.Problems) > 0 {
					t.Fatal(out.Problems)
				}
				checkNamespaceCase(t, tc, []*unstructured.Unstructured{docs[0].Object}, policySets(out.Policies))
			})
		}
	}
}

func policySets(ps []*emit.Policy) []admission.PolicySet {
	var sets []admission.PolicySet
	for _, p := range ps {
		sets = append(sets, admission.PolicySet{Policy: p.Policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{p.Binding}})
	}
	return sets
}

func checkNamespaceCase(t *testing.T, tc namespaceCase, mutators []*unstructured.Unstructured, sets []admission.PolicySet) {
	t.Helper()
	v, err := NewSets(mutators, sets, tc.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := v.Check(context.Background(), Case{Object: podIn(t, "prod")})
	if tc.wantReason != nil {
		if r.Pass {
			t.Fatalf("the case passes, want a failure: %v", tc.wantReason)
		}
		for _, w := range tc.wantReason {
			if !strings.Contains(r.Reason, w) {
				t.Errorf("reason %q does not contain %q", r.Reason, w)
			}
		}
		return
	}
	if !r.Pass {
		t.Fatalf("the case fails: %s", Report([]Result{r}))
	}
	if got := r.Got.GetLabels()["team"] == "payments"; got != tc.wantLabel {
		t.Errorf("labelled = %v, want %v", got, tc.wantLabel)
	}
	if a := v.AssumedNamespaces(); !tc.anyAssumed && !reflect.DeepEqual(a, tc.wantAssumed) {
		t.Errorf("assumed namespaces = %v, want %v", a, tc.wantAssumed)
	}
}

// TestNamespaceNotGivenByPolicy: hand-written policies whose binding selects namespaces by a
// label fail a case in a namespace not given, though the mutator has no selector.
func TestNamespaceNotGivenByPolicy(t *testing.T) {
	docs := mutatorDocs(t, "Pod", "{}")
	unstructured.RemoveNestedField(docs[0].Object.Object, "spec", "match", "namespaceSelector")
	sets := policySets(compileDocs(t, docs, compiler.LayoutPerMutator))
	b := sets[0].Bindings[0].DeepCopy()
	b.Spec.MatchResources.NamespaceSelector.MatchLabels = map[string]string{"tier": "gold"}
	sets[0].Bindings[0] = b
	checkNamespaceCase(t, namespaceCase{wantReason: []string{"namespace prod is not given", "binding " + b.Name + ": spec.matchResources.namespaceSelector on tier"}},
		[]*unstructured.Unstructured{docs[0].Object}, sets)
}

// TestIgnoredFailureInReason: a policy expression that fails under failurePolicy Ignore leaves
// the object as it was; the mismatch with Gatekeeper names the failure.
func TestIgnoredFailureInReason(t *testing.T) {
	docs := mutatorDocs(t, "Pod", "{}")
	unstructured.RemoveNestedField(docs[0].Object.Object, "spec", "match", "namespaceSelector")
	ps := compileDocs(t, docs, compiler.LayoutPerMutator)
	ps[0].Policy.Spec.Mutations = []admissionregistrationv1.Mutation{{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "add", path: "/metadata/labels/team", value: object.spec.nodeName}]`},
	}}
	if fp := ps[0].Policy.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Ignore {
		t.Fatalf("compiled policies have failurePolicy %v, want Ignore", fp)
	}
	v, err := NewSets([]*unstructured.Unstructured{docs[0].Object}, policySets(ps), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := v.Check(context.Background(), Case{Object: podIn(t, "prod")})
	if r.Pass {
		t.Fatal("the case passes; the policy never labels")
	}
	want := "the policies mutate the object differently from Gatekeeper; policy " + ps[0].Policy.Name + ": spec.mutations[0] failed, and failurePolicy Ignore admitted the object without it: "
	if !strings.HasPrefix(r.Reason, want) || !strings.Contains(r.Reason, "no such key: nodeName") {
		t.Errorf("reason = %q\nwant it to start with %q and name the missing key", r.Reason, want)
	}
	if len(r.Ignored) != 1 {
		t.Errorf("Ignored = %v, want one failure", r.Ignored)
	}
}
