package suite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

func readDocs(t *testing.T, name, text string) []*source.Document {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	docs, err := source.ReadPaths([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func TestCompiledPoliciesAreAccepted(t *testing.T) {
	docs, err := source.ReadPaths([]string{"../examples/gatekeeper"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, compiler.Options{})
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	for _, apiVersion := range []string{"admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1", "admissionregistration.k8s.io/v1alpha1"} {
		data, err := emit.Stream(out.Policies, apiVersion, emit.YAML)
		if err != nil {
			t.Fatal(err)
		}
		ps := ReadPolicies(readDocs(t, "policies.yaml", string(data)), nil)
		if len(ps.Problems) > 0 || len(ps.Warnings) > 0 {
			t.Errorf("%s: problems %v, warnings %v", apiVersion, ps.Problems, ps.Warnings)
		}
		if len(ps.Sets) != len(out.Policies) {
			t.Errorf("%s: %d sets, want %d", apiVersion, len(ps.Sets), len(out.Policies))
		}
		for i, s := range ps.Sets {
			if s.Policy.Name != out.Policies[i].Policy.Name || len(s.Bindings) != 1 {
				t.Errorf("%s: set %d is %s with %d bindings", apiVersion, i, s.Policy.Name, len(s.Bindings))
			}
		}
	}
}

const badPolicies = `apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: bad
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "PATCH"]
      resources: ["pods"]
  matchConditions:
  - name: uses-variables
    expression: variables.x == "a"
  variables:
  - name: x
    expression: object.metadata.name
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/labels/x", value: variables.y}]
  - patchType: ApplyConfiguration
    jsonPatch:
      expression: "[]"
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "[]"
  - patchType: Merge
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: empty
spec:
  matchConstraints:
    resourceRules: []
  reinvocationPolicy: Sometimes
  bogus: 1
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: orphan
spec:
  policyName: missing
`

func TestPolicyChecks(t *testing.T) {
	ps := ReadPolicies(readDocs(t, "bad.yaml", badPolicies), nil)
	var got []string
	for _, p := range ps.Problems {
		got = append(got, strings.SplitN(p.Error(), "/bad.yaml:", 2)[1])
	}
	all := strings.Join(got, "\n")
	t.Log(all)
	for _, want := range []string{
		`10: MutatingAdmissionPolicy/bad: spec.matchConstraints.resourceRules[0].operations[1]: Unsupported value: "PATCH"`,
		`14: MutatingAdmissionPolicy/bad: spec.matchConditions[0].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables'`,
		`21: MutatingAdmissionPolicy/bad: spec.mutations[0].jsonPatch.expression: compilation failed:`,
		`24: MutatingAdmissionPolicy/bad: spec.mutations[1].jsonPatch: Forbidden: must not be specified when patchType is ApplyConfiguration`,
		`23: MutatingAdmissionPolicy/bad: spec.mutations[1].applyConfiguration: Required value`,
		`28: MutatingAdmissionPolicy/bad: spec.mutations[2].applyConfiguration.expression: must evaluate to Object but got list(`,
		`29: MutatingAdmissionPolicy/bad: spec.mutations[3].patchType: Unsupported value: "Merge"`,
		`5: MutatingAdmissionPolicy/bad: spec.reinvocationPolicy: Required value`,
		`39: MutatingAdmissionPolicy/empty: spec.bogus: unknown field`,
		`37: MutatingAdmissionPolicy/empty: spec.matchConstraints.resourceRules: Required value`,
		`38: MutatingAdmissionPolicy/empty: spec.reinvocationPolicy: Unsupported value: "Sometimes"`,
		`35: MutatingAdmissionPolicy/empty: spec.mutations: Required value`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing problem %q", want)
		}
	}
	warnings := strings.Join(ps.Warnings, "\n")
	for _, want := range []string{
		`bad.yaml:46: MutatingAdmissionPolicyBinding/orphan: spec.policyName: no MutatingAdmissionPolicy named "missing" among the policies; this binding does nothing`,
		`bad.yaml:1: MutatingAdmissionPolicy/bad has no MutatingAdmissionPolicyBinding: it never runs`,
	} {
		if !strings.Contains(warnings, want) {
			t.Errorf("missing warning %q in\n%s", want, warnings)
		}
	}
}
