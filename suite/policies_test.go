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

const paramPolicies = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: no-param-kind
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  matchConditions:
  - name: reads-params
    expression: params.data.on == "yes"
  variables:
  - name: team
    expression: params.data.team
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": params.data.team}}}'
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: bad-param-kind
spec:
  paramKind:
    apiVersion: Example.com/v1/x
    kind: Config_Map
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": params.data.team}}}'
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: params
spec:
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  matchConditions:
  - name: reads-params
    expression: params.data.on == "yes"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": params.data.team}}}'
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: both
spec:
  policyName: params
  paramRef:
    name: a/b
    selector: {matchLabels: {a: b}}
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: neither
spec:
  policyName: params
  paramRef:
    parameterNotFoundAction: Ignore
---
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: alpha-defaults-not-found-action
spec:
  policyName: params
  paramRef: {name: team}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: no-param-ref
spec:
  policyName: params
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: ignored-param-ref
spec:
  policyName: no-param-kind
  paramRef: {name: team, parameterNotFoundAction: Allow}
`

// TestParamChecks: what the API server's validation (k8s.io/kubernetes
// pkg/apis/admissionregistration/validation) says of paramKind, paramRef and expressions reading
// params, and what it accepts but ignores or evaluates with params null.
func TestParamChecks(t *testing.T) {
	ps := ReadPolicies(readDocs(t, "params.yaml", paramPolicies), nil)
	var got []string
	for _, p := range ps.Problems {
		got = append(got, strings.SplitN(p.Error(), "/params.yaml:", 2)[1])
	}
	all := strings.Join(got, "\n")
	t.Log(all)
	for _, want := range []string{
		`11: MutatingAdmissionPolicy/no-param-kind: spec.matchConditions[0].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'`,
		`14: MutatingAdmissionPolicy/no-param-kind: spec.variables[0].expression: compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'`,
		`18: MutatingAdmissionPolicy/no-param-kind: spec.mutations[0].applyConfiguration.expression: compilation failed: ERROR: <input>:1:51: undeclared reference to 'params'`,
		`27: MutatingAdmissionPolicy/bad-param-kind: spec.paramKind.apiVersion: Invalid value: "Example.com/v1/x": unexpected GroupVersion string: Example.com/v1/x`,
		`28: MutatingAdmissionPolicy/bad-param-kind: spec.paramKind.kind: Invalid value: "Config_Map": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-'`,
		`65: MutatingAdmissionPolicyBinding/both: spec.paramRef.name: Invalid value: "a/b": may not contain '/'`,
		`65: MutatingAdmissionPolicyBinding/both: spec.paramRef.name: Forbidden: name and selector are mutually exclusive`,
		`66: MutatingAdmissionPolicyBinding/both: spec.paramRef.selector: Forbidden: name and selector are mutually exclusive`,
		`64: MutatingAdmissionPolicyBinding/both: spec.paramRef.parameterNotFoundAction: Required value`,
		`74: MutatingAdmissionPolicyBinding/neither: spec.paramRef: Required value: one of name or selector must be specified`,
		`75: MutatingAdmissionPolicyBinding/neither: spec.paramRef.parameterNotFoundAction: Unsupported value: "Ignore"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing problem %q", want)
		}
	}
	for _, unwanted := range []string{"MutatingAdmissionPolicy/params:", "alpha-defaults-not-found-action", "no-param-ref", "ignored-param-ref"} {
		if strings.Contains(all, unwanted) {
			t.Errorf("unexpected problem for %s", unwanted)
		}
	}
	warnings := strings.Join(ps.Warnings, "\n")
	t.Log(warnings)
	for _, want := range []string{
		`params.yaml:85: MutatingAdmissionPolicyBinding/no-param-ref: spec.paramRef: none, but MutatingAdmissionPolicy/params has spec.paramKind: the API server runs the policy once with params null`,
		`params.yaml:98: MutatingAdmissionPolicyBinding/ignored-param-ref: spec.paramRef: MutatingAdmissionPolicy/no-param-kind has no spec.paramKind, so the API server ignores this paramRef`,
	} {
		if !strings.Contains(warnings, want) {
			t.Errorf("missing warning %q", want)
		}
	}
	for _, set := range ps.Sets {
		for _, b := range set.Bindings {
			if b.Name != "alpha-defaults-not-found-action" {
				continue
			}
			if a := b.Spec.ParamRef.ParameterNotFoundAction; a == nil || *a != "Deny" {
				t.Errorf("v1alpha1 binding: parameterNotFoundAction %v, want Deny (its default)", a)
			}
		}
	}
}
