package main

import (
	"strings"
	"testing"
)

// teamPolicy labels Pods team=payments; its binding selects namespaces by %SELECTOR%.
const teamPolicy = `apiVersion: admissionregistration.k8s.io/v1
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

// nodePolicy copies spec.nodeName into a label: an error at run time for a Pod without one.
const nodePolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: node}
spec:
  failurePolicy: %FAILURE%
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

const teamMutator = `apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: team}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
    namespaceSelector: {matchLabels: {%SELECTOR%}}
  location: metadata.labels.team
  parameters: {assign: {value: payments}}
`

const prodPod = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: prod}
spec:
  containers: [{name: c, image: nginx}]
`

const prodNamespace = `apiVersion: v1
kind: Namespace
metadata: {name: prod, labels: {env: prod}}
`

func selector(s, sel string) string { return strings.ReplaceAll(s, "%SELECTOR%", sel) }

func TestProcessEvalNamespaceNotGiven(t *testing.T) {
	dir := t.TempDir()
	byEnv := writeFile(t, dir, "env/policies.yaml", selector(teamPolicy, "env: prod"))
	byName := writeFile(t, dir, "name/policies.yaml", selector(teamPolicy, "kubernetes.io/metadata.name: prod"))
	pod := writeFile(t, dir, "pod.yaml", prodPod)
	ns := writeFile(t, dir, "ns.yaml", prodNamespace)
	podAndNS := writeFile(t, dir, "both.yaml", prodNamespace+"---\n"+prodPod)
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantErr   []string
		wantLabel bool
	}{
		{name: "selector on env, namespace not given", args: []string{"--policies", byEnv, "-f", pod}, wantCode: 1,
			wantErr: []string{pod + ":1: Pod/prod/web: namespace prod is not given, but its labels matter (binding team: spec.matchResources.namespaceSelector on env): give the Namespace object (kubectl get namespace prod -o yaml) with --namespaces or -f\n",
				"1 of 1 object(s) not admitted: their namespace's labels matter and it is not given"}},
		{name: "selector on env, --namespaces", args: []string{"--policies", byEnv, "-f", pod, "--namespaces", ns}, wantLabel: true},
		{name: "selector on env, the Namespace among -f", args: []string{"--policies", byEnv, "-f", podAndNS}, wantLabel: true},
		{name: "selector on the name only", args: []string{"--policies", byName, "-f", pod}, wantLabel: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := mapcProcess(t, "", append([]string{"eval"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, errs)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, errs)
				}
			}
			if tc.wantErr == nil && errs != "" {
				t.Errorf("stderr: %s", errs)
			}
			if got := strings.Contains(out, "team: payments"); got != tc.wantLabel {
				t.Errorf("labelled = %v, want %v; stdout:\n%s", got, tc.wantLabel, out)
			}
		})
	}
}

// TestProcessEvalCompiledAssumesIgnoreLabel: mapc's policies require the namespace not to be
// labelled admission.gatekeeper.sh/ignore; a namespace not given is taken as not labelled, and
// said so.
func TestProcessEvalCompiledAssumesIgnoreLabel(t *testing.T) {
	dir := t.TempDir()
	muts := writeFile(t, dir, "m.yaml", selector(teamMutator, "kubernetes.io/metadata.name: prod"))
	code, policies, errs := mapcProcess(t, "", "compile", muts)
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, errs)
	}
	ps := writeFile(t, dir, "policies.yaml", policies)
	pod := writeFile(t, dir, "pod.yaml", prodPod)
	code, out, errs := mapcProcess(t, "", "eval", "--policies", ps, "-f", pod)
	if code != 0 || !strings.Contains(out, "team: payments") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	want := "warning: namespace(s) prod not given: taken as not labelled admission.gatekeeper.sh/ignore, so the policies mutate there (give the Namespace objects with --namespaces or -f to check)\n"
	if errs != want {
		t.Errorf("stderr = %q, want %q", errs, want)
	}
}

func TestProcessEvalIgnoredFailure(t *testing.T) {
	dir := t.TempDir()
	pod := writeFile(t, dir, "pod.yaml", prodPod)
	ns := writeFile(t, dir, "ns.yaml", prodNamespace)
	ignore := writeFile(t, dir, "ignore.yaml", strings.ReplaceAll(nodePolicy, "%FAILURE%", "Ignore"))
	fail := writeFile(t, dir, "fail.yaml", strings.ReplaceAll(nodePolicy, "%FAILURE%", "Fail"))

	code, out, errs := mapcProcess(t, "", "eval", "--policies", ignore, "-f", pod, "--namespaces", ns)
	if code != 0 {
		t.Fatalf("Ignore: exit %d: %s", code, errs)
	}
	want := "warning: " + pod + ":1: Pod/prod/web: policy node: spec.mutations[0] failed, and failurePolicy Ignore admitted the object without it: "
	if !strings.HasPrefix(errs, want) || !strings.Contains(errs, "no such key: nodeName") || strings.Count(errs, "\n") != 1 {
		t.Errorf("Ignore: stderr = %q, want one line starting with %q and naming the missing key", errs, want)
	}
	if !strings.Contains(out, "name: web") || strings.Contains(out, "node:") {
		t.Errorf("Ignore: the Pod is not admitted unmutated:\n%s", out)
	}

	code, out, errs = mapcProcess(t, "", "eval", "--policies", fail, "-f", pod, "--namespaces", ns)
	if code != 1 {
		t.Fatalf("Fail: exit %d, want 1: %s", code, errs)
	}
	if !strings.HasPrefix(errs, "denied: "+pod+":1: Pod/prod/web: ") || !strings.Contains(errs, "no such key: nodeName") || strings.Contains(errs, "warning:") {
		t.Errorf("Fail: stderr = %q, want the admission error", errs)
	}
	if out != "" {
		t.Errorf("Fail: stdout = %q", out)
	}
}

func TestProcessVerifyNamespaceNotGiven(t *testing.T) {
	dir := t.TempDir()
	muts := writeFile(t, dir, "m.yaml", selector(teamMutator, "env: prod"))
	pod := writeFile(t, dir, "objects/pod.yaml", prodPod)
	ns := writeFile(t, dir, "ns.yaml", prodNamespace)

	code, out, errs := mapcProcess(t, "", "verify", "-f", muts, "-f", pod)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	want := "FAIL Pod/prod/web: namespace prod is not given, but its labels matter (AssignMetadata/team: spec.match.namespaceSelector on env"
	if !strings.Contains(out, want) || !strings.Contains(out, "give the Namespace object (kubectl get namespace prod -o yaml) with --namespaces or -f") {
		t.Errorf("stdout does not contain %q:\n%s", want, out)
	}

	code, out, errs = mapcProcess(t, "", "verify", "-f", muts, "-f", pod, "--namespaces", ns)
	if code != 0 || !strings.Contains(out, "PASS Pod/prod/web") {
		t.Errorf("with --namespaces: exit %d; stdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

func TestProcessTestNamespaceNotGiven(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "m.yaml", selector(teamMutator, "env: prod"))
	suite := func(namespaces string) string {
		return `apiVersion: mapc.dev/v1alpha1
kind: Test
metadata: {name: team}
sources: [m.yaml]
` + namespaces + `
cases:
- name: a Pod in prod is labelled
  object: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: prod}, spec: {containers: [{name: c, image: nginx}]}}
  expect: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: prod, labels: {team: payments}}, spec: {containers: [{name: c, image: nginx}]}}
`
	}
	without := writeFile(t, dir, "without.test.yaml", suite(""))
	with := writeFile(t, dir, "with.test.yaml", suite("namespaces:\n- {apiVersion: v1, kind: Namespace, metadata: {name: prod, labels: {env: prod}}}"))

	code, out, errs := mapcProcess(t, "", "test", without)
	want := "FAIL a Pod in prod is labelled: namespace prod is not given, but its labels matter (AssignMetadata/team: spec.match.namespaceSelector on env): give the Namespace object (kubectl get namespace prod -o yaml) in the suite's namespaces"
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("exit %d; stdout does not contain %q:\n%s\nstderr:\n%s", code, want, out, errs)
	}
	code, out, errs = mapcProcess(t, "", "test", with)
	if code != 0 || !strings.Contains(out, "PASS a Pod in prod is labelled") {
		t.Errorf("with the namespace: exit %d; stdout:\n%s\nstderr:\n%s", code, out, errs)
	}

	// A selector on the name: the case passes; the namespace is taken as not ignored, which the
	// JSON report leaves to standard error.
	writeFile(t, dir, "byname/m.yaml", selector(teamMutator, "kubernetes.io/metadata.name: prod"))
	byName := writeFile(t, dir, "byname/s.test.yaml", suite(""))
	code, out, errs = mapcProcess(t, "", "test", byName, "-o", "json")
	want = "warning: " + byName + ": namespace(s) prod not given: taken as not labelled admission.gatekeeper.sh/ignore"
	if code != 0 || !strings.Contains(out, `"passed": 1`) || !strings.HasPrefix(errs, want) {
		t.Errorf("by name: exit %d; stderr does not start with %q:\n%s\nstdout:\n%s", code, want, errs, out)
	}
}
