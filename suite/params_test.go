package suite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const teamPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: team
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"]}
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": params.data.team}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: team
spec:
  policyName: team
  paramRef: {name: team, parameterNotFoundAction: Deny}
`

const teamParams = `apiVersion: v1
kind: ConfigMap
metadata: {name: team, namespace: shop}
data: {team: payments}
---
apiVersion: v1
kind: Secret
metadata: {name: team, namespace: shop}
`

// teamSuite gives one param in a file (with a Secret no policy reads) and one inline.
const teamSuite = `apiVersion: mapc.dev/v1alpha1
kind: Test
sources: [policy.yaml]
params:
- params.yaml
- {apiVersion: v1, kind: ConfigMap, metadata: {name: team, namespace: web}, data: {team: frontend}}
cases:
- name: the param of the Pod's namespace
  object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: shop}, spec: {containers: [{name: c, image: nginx}]}}
  expect: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: shop, labels: {team: payments}}, spec: {containers: [{name: c, image: nginx}]}}
- name: the inline param
  object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: web}, spec: {containers: [{name: c, image: nginx}]}}
  expect: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: web, labels: {team: frontend}}, spec: {containers: [{name: c, image: nginx}]}}
- name: no param in this namespace
  object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: other}, spec: {containers: [{name: c, image: nginx}]}}
  expectError: "no params found for policy binding with ` + "`Deny`" + ` parameterNotFoundAction"
`

func writeSuite(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "suite.yaml")
}

func TestSuiteParams(t *testing.T) {
	path := writeSuite(t, map[string]string{"suite.yaml": teamSuite, "policy.yaml": teamPolicy, "params.yaml": teamParams})
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Params) != 3 {
		t.Fatalf("%d params, want 3", len(s.Params))
	}
	if d := s.Params[2]; d.File != path || d.Line != 6 {
		t.Errorf("inline param at %s:%d, want %s:6", d.File, d.Line, path)
	}
	o := Run(context.Background(), s)
	var b strings.Builder
	WriteText(&b, o)
	if o.Err != nil || o.Failed() != 0 || o.Passed() != 3 {
		t.Errorf("want 3 passed:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "params.yaml:6: Secret/shop/team: params: no policy has paramKind v1 Secret (theirs: v1 ConfigMap); this param is never read") {
		t.Errorf("no warning of the Secret:\n%s", b.String())
	}

	// Without the params, the first two cases fail.
	s.Params = nil
	if o := Run(context.Background(), s); o.Err != nil || o.Failed() != 2 {
		t.Errorf("without params: %d failed (%v), want 2", o.Failed(), o.Err)
	}
}

func TestSuiteParamsRefused(t *testing.T) {
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`
	head := "apiVersion: mapc.dev/v1alpha1\nkind: Test\nsources: [policy.yaml]\n"
	cases := "cases:\n- {object: {apiVersion: v1, kind: Pod, metadata: {name: p}}, expectUnchanged: true}\n"
	for _, tc := range []struct {
		name    string
		suite   string
		loadErr string // an error of Load
		runErr  string // else an error of Run
	}{
		{"a CRD given as a param", head + "params: [crd.yaml]\n" + cases, "suite.yaml:4: params[0]: ", ""},
		{"a param without name", head + "params: [{apiVersion: v1, kind: ConfigMap}]\n" + cases, "params[0]: ", ""},
		{"an empty params file", head + "params: [empty.yaml]\n" + cases, "params[0]: empty.yaml holds no object", ""},
		{"a custom param without its CRD", head + "params: [{apiVersion: example.com/v1, kind: Gadget, metadata: {name: g}}]\n" + cases, "",
			"suite.yaml:4: Gadget/g: params: example.com/v1 Gadget is neither a built-in kind nor a kind of the CRDs given: give its CustomResourceDefinition in the suite's crds"},
		{"a custom param with its CRD", head + "crds: [crd.yaml]\nparams: [{apiVersion: example.com/v1, kind: Gadget, metadata: {name: g}}]\n" + cases, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSuite(t, map[string]string{"suite.yaml": tc.suite, "policy.yaml": teamPolicy, "crd.yaml": crd, "empty.yaml": "# none\n"})
			s, err := Load(path)
			if tc.loadErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.loadErr) {
					t.Fatalf("Load: %v, want %q", err, tc.loadErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o := Run(context.Background(), s)
			if tc.runErr == "" {
				if o.Err != nil {
					t.Fatalf("Run: %v", o.Err)
				}
				return
			}
			if o.Err == nil || !strings.Contains(o.Err.Error(), tc.runErr) {
				t.Fatalf("Run: %v, want %q", o.Err, tc.runErr)
			}
		})
	}
}

// kaptest gives a test's param to the policy: the case runs with that param whatever the
// binding's paramRef says, and another param gives another result.
func TestKaptestParams(t *testing.T) {
	s, err := Load("../testdata/suites/kaptest-params/kaptest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Params) != 2 || len(s.Cases) != 3 || len(s.Skipped) != 0 {
		t.Fatalf("%d params, %d cases, %d skipped; want 2, 3, 0", len(s.Params), len(s.Cases), len(s.Skipped))
	}
	for _, c := range s.Cases {
		if c.Param == nil || c.Param.GetKind() != "ConfigMap" {
			t.Errorf("%s: param %v", c.Name, c.Param)
		}
	}
	o := Run(context.Background(), s)
	var b strings.Builder
	WriteText(&b, o)
	if o.Err != nil || o.Failed() != 0 {
		t.Errorf("%s", b.String())
	}
	// The params swapped: the first case gets 5 replicas, not 3, and fails.
	s.Cases[0].Param, s.Cases[2].Param = s.Cases[2].Param, s.Cases[0].Param
	o = Run(context.Background(), s)
	if o.Err != nil || o.Failed() != 2 {
		b.Reset()
		WriteText(&b, o)
		t.Errorf("params swapped: %d failed, want 2:\n%s", o.Failed(), b.String())
	}
}

func TestKaptestParamNotFound(t *testing.T) {
	dir, err := filepath.Abs("../testdata/suites/kaptest-params")
	if err != nil {
		t.Fatal(err)
	}
	path := writeSuite(t, map[string]string{"suite.yaml": `version: v1alpha1
policies: [` + dir + `/policy.yaml]
resources: [` + dir + `/resources.yaml]
mapTestSuites:
- policy: deployment-replicas
  tests:
  - object: {kind: Deployment, name: one}
    param: {name: replicas, namespace: medium}
    expect: skip
`})
	_, err = Load(path)
	if err == nil || !strings.Contains(err.Error(), "suite.yaml:8: mapTestSuites[0].tests[0].param: no resource is ConfigMap:medium/replicas") {
		t.Errorf("Load: %v", err)
	}
}
