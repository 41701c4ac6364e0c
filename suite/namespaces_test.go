package suite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const envPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": "payments"}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: team}
spec:
  policyName: team
  matchResources:
    namespaceSelector: {matchLabels: {%SELECTOR%}}
`

const envMutator = `apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: team}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
    namespaceSelector: {matchLabels: {%SELECTOR%}}
  location: metadata.labels.team
  parameters: {assign: {value: payments}}
`

const failingPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: node}
spec:
  failurePolicy: Ignore
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/metadata/labels", value: {"node": object.spec.nodeName}}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: node}
spec:
  policyName: node
`

const namespaceSuite = `apiVersion: mapc.dev/v1alpha1
kind: Test
metadata: {name: namespaces}
sources: [sources.yaml]
%NAMESPACES%
cases:
- name: a Pod in prod
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: api, namespace: prod}
    spec:
      containers: [{name: api, image: nginx}]
  %EXPECT%
`

func runSuite(t *testing.T, sources, namespaces, expect string) (*Outcome, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sources.yaml"), []byte(sources), 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("%NAMESPACES%", namespaces, "%EXPECT%", expect).Replace(namespaceSuite)
	path := filepath.Join(dir, "s.test.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	o := Run(context.Background(), s)
	var b strings.Builder
	WriteText(&b, o)
	return o, b.String()
}

func TestNamespaceNotGivenFailsCase(t *testing.T) {
	prodNS := "namespaces:\n- {apiVersion: v1, kind: Namespace, metadata: {name: prod, labels: {env: prod}}}"
	labelled := "expect:\n    apiVersion: v1\n    kind: Pod\n    metadata: {name: api, namespace: prod, labels: {team: payments}}\n    spec:\n      containers: [{name: api, image: nginx}]"
	byEnv := strings.NewReplacer("%SELECTOR%", "env: prod")
	byName := strings.NewReplacer("%SELECTOR%", "kubernetes.io/metadata.name: prod")
	tests := []struct {
		name       string
		sources    string
		namespaces string
		wantFail   []string // substrings of the text report; nil: the case passes
		wantText   []string
	}{
		{name: "binding selector on env, namespace not given", sources: byEnv.Replace(envPolicy),
			wantFail: []string{"FAIL a Pod in prod: namespace prod is not given, but its labels matter (binding team: spec.matchResources.namespaceSelector on env): give the Namespace object (kubectl get namespace prod -o yaml) in the suite's namespaces"}},
		{name: "binding selector on env, namespace given", sources: byEnv.Replace(envPolicy), namespaces: prodNS},
		{name: "binding selector on the name", sources: byName.Replace(envPolicy)},
		{name: "mutator selector on env, namespace not given", sources: byEnv.Replace(envMutator),
			wantFail: []string{"namespace prod is not given, but its labels matter (AssignMetadata/team: spec.match.namespaceSelector on env"}},
		{name: "mutator selector on env, namespace given", sources: byEnv.Replace(envMutator), namespaces: prodNS,
			wantText: []string{"PASS a Pod in prod"}},
		{name: "mutator selector on the name: the ignore label is assumed", sources: byName.Replace(envMutator),
			wantText: []string{"warning: namespace(s) prod not given: taken as not labelled admission.gatekeeper.sh/ignore, so the policies mutate there (give the Namespace objects in the suite's namespaces to check)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, text := runSuite(t, tc.sources, tc.namespaces, labelled)
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			if tc.wantFail == nil && o.Failed() > 0 {
				t.Fatalf("the case fails:\n%s", text)
			}
			if tc.wantFail != nil && o.Failed() == 0 {
				t.Fatalf("the case passes:\n%s", text)
			}
			for _, w := range append(tc.wantFail, tc.wantText...) {
				if !strings.Contains(text, w) {
					t.Errorf("the report does not contain %q:\n%s", w, text)
				}
			}
		})
	}
}

func TestIgnoredFailureNote(t *testing.T) {
	o, text := runSuite(t, failingPolicy, "", "expectUnchanged: true")
	if o.Err != nil || o.Failed() != 0 {
		t.Fatalf("the case fails:\n%s", text)
	}
	want := "PASS a Pod in prod (1 policy order)\n  note: policy node: spec.mutations[0] failed, and failurePolicy Ignore admitted the object without it: "
	if !strings.Contains(text, want) || !strings.Contains(text, "no such key: nodeName") {
		t.Errorf("the report does not note the failure:\n%s", text)
	}
}
