package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A policy adding label owner=admin to Pods, bound to everything; more policies below.
const ownerPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: owner
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["pods"]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"owner": "admin"}}}
`

const ownerBinding = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: owner
spec:
  policyName: owner
`

// updateOnly labels Pods on UPDATE only, with the user's name and the old object's label.
const updateOnly = `apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: updated-by
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["UPDATE"]
      resources: ["pods"]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/annotations",
          value: {"updated-by": request.userInfo.username, "was": string(oldObject.metadata.labels["v"])}}]
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: updated-by
spec:
  policyName: updated-by
`

// denyConfigMaps fails every ConfigMap without annotation reviewed=true (failurePolicy Fail).
const denyConfigMaps = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: reviewed
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "test", path: "/metadata/annotations/reviewed", value: "true"}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: reviewed
spec:
  policyName: reviewed
`

const rejectedPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: broken
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "PATCH"]
      resources: ["pods"]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/metadata/labels/x", value: object.nope + 1}] + variables.v'
  - patchType: ApplyConfiguration
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: broken
spec:
  policyName: broken
  extra: true
`

const podV1 = `apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: default
  labels:
    v: "1"
spec:
  containers:
  - name: app
    image: nginx
`

const podV2 = `apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: default
  labels:
    v: "2"
spec:
  containers:
  - name: app
    image: nginx
`

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
data:
  a: b
`

func TestEval(t *testing.T) {
	dir := t.TempDir()
	// The bundled examples, compiled by mapc.
	code, compiled, stderr := runCLI(t, "", "compile", "-f", "../../examples/gatekeeper")
	if code != 0 {
		t.Fatalf("compile: exit %d\n%s", code, stderr)
	}
	examples := writeFile(t, dir, "examples-policies.yaml", compiled)
	owner := writeFile(t, dir, "owner.yaml", ownerPolicy+"---\n"+ownerBinding)
	unbound := writeFile(t, dir, "unbound.yaml", ownerPolicy+"---\n"+strings.ReplaceAll(ownerBinding, "policyName: owner", "policyName: ownr"))
	update := writeFile(t, dir, "update.yaml", updateOnly)
	deny := writeFile(t, dir, "deny.yaml", denyConfigMaps)
	rejected := writeFile(t, dir, "rejected.yaml", rejectedPolicy)
	pod := writeFile(t, dir, "pod.yaml", podV1)
	pod2 := writeFile(t, dir, "pod2.yaml", podV2)
	cm := writeFile(t, dir, "cm.yaml", configMap)
	noName := writeFile(t, dir, "noname.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: default\n")

	tests := []cliCase{
		{
			name:   "the compiled examples mutate a Pod",
			args:   []string{"--policies", examples, "-f", "../../examples/objects/pod-default-nginx-basic.yaml", "--namespaces", "../../examples/objects/namespaces.yaml"},
			stdout: []string{"kind: Pod", "    owner: admin", "  dnsPolicy: None", "    imagePullPolicy: Always", "name: networking"},
		},
		{
			name:   "every object of a directory, namespaces among them",
			args:   []string{"--policies", examples, "-f", "../../examples/objects"},
			stdout: []string{"kind: Namespace", "name: multi-container", "name: web", "\n---\n"},
		},
		{
			name:     "an object without a name is refused, and nothing is admitted",
			args:     []string{"--policies", owner, "-f", pod, "-f", noName},
			code:     1,
			stderr:   []string{"noname.yaml:1: not an object to admit: it has no metadata.name"},
			noStdout: []string{"owner: admin"},
		},
		{
			name:   "a hand-written policy",
			args:   []string{"--policies", owner, "-f", pod},
			stdout: []string{"    owner: admin", "    v: \"1\""},
		},
		{
			name:     "a policy without binding never runs, and is warned about",
			args:     []string{"--policies", unbound, "-f", pod},
			stdout:   []string{"name: app"},
			noStdout: []string{"owner: admin"},
			stderr: []string{
				"unbound.yaml:25: MutatingAdmissionPolicyBinding/owner: spec.policyName: no MutatingAdmissionPolicy named \"ownr\" among the policies; this binding does nothing",
				"unbound.yaml:1: MutatingAdmissionPolicy/owner has no MutatingAdmissionPolicyBinding: it never runs",
			},
		},
		{
			name: "a policy the API server would reject is listed with file:line: name: field: problem",
			args: []string{"--policies", rejected, "-f", pod},
			code: 1,
			stderr: []string{
				`rejected.yaml:10: MutatingAdmissionPolicy/broken: spec.matchConstraints.resourceRules[0].operations[1]: Unsupported value: "PATCH"`,
				`rejected.yaml:15: MutatingAdmissionPolicy/broken: spec.mutations[0].jsonPatch.expression: compilation failed: ERROR: <input>:1:`,
				`rejected.yaml:16: MutatingAdmissionPolicy/broken: spec.mutations[1].applyConfiguration: Required value`,
				`rejected.yaml:5: MutatingAdmissionPolicy/broken: spec.reinvocationPolicy: Required value`,
				`rejected.yaml:24: MutatingAdmissionPolicyBinding/broken: spec.extra: unknown field`,
				"5 problem(s): Kubernetes 1.37 would reject these policies",
			},
			noStdout: []string{"kind: Pod"},
		},
		{
			name:   "a denied object is reported and the others still printed",
			args:   []string{"--policies", deny, "--policies", owner, "-f", cm, "-f", pod},
			code:   1,
			stdout: []string{"kind: Pod", "owner: admin"},
			stderr: []string{"denied: " + cm + ":1: ConfigMap/default/settings: policy 'reviewed' with binding 'reviewed' denied request", "1 of 2 object(s) denied"},
		},
		{
			name:     "CREATE does not run an UPDATE policy",
			args:     []string{"--policies", update, "-f", pod2},
			noStdout: []string{"updated-by"},
			stdout:   []string{"v: \"2\""},
		},
		{
			name:   "--old-object makes an UPDATE, seen by oldObject and the user",
			args:   []string{"--policies", update, "-f", pod2, "--old-object", pod, "--user", "alice"},
			stdout: []string{"    updated-by: alice", "    was: \"1\"", "    v: \"2\""},
		},
		{
			name:   "an UPDATE without --old-object updates the object to itself",
			args:   []string{"--policies", update, "-f", pod2, "--operation", "update"},
			stdout: []string{"    updated-by: mapc", "    was: \"2\""},
		},
		{
			name:   "a binding in -f is not admitted",
			args:   []string{"--policies", owner, "-f", owner, "-f", pod},
			stderr: []string{"is a policy; give policies with --policies (not admitted)"},
			stdout: []string{"owner: admin"},
		},
		{
			name:   "an API version the target Kubernetes does not serve is warned about",
			args:   []string{"--policies", owner, "-f", pod, "--kubernetes-version", "1.34"},
			stderr: []string{"MutatingAdmissionPolicy/owner: admissionregistration.k8s.io/v1 is served from Kubernetes 1.36 on, not by 1.34"},
		},
		{name: "no policies", args: []string{"-f", pod}, code: 2, stderr: []string{"eval needs --policies"}},
		{name: "no objects", args: []string{"--policies", owner}, code: 2, stderr: []string{"eval needs at least one -f"}},
		{name: "DELETE", args: []string{"--policies", owner, "-f", pod, "--operation", "DELETE"}, code: 2, stderr: []string{"use CREATE or UPDATE"}},
		{name: "old object with CREATE", args: []string{"--policies", owner, "-f", pod, "--old-object", pod, "--operation", "CREATE"}, code: 2},
		{name: "bad output", args: []string{"--policies", owner, "-f", pod, "--output", "xml"}, code: 2},
		{name: "missing file", args: []string{"--policies", filepath.Join(dir, "nope.yaml"), "-f", pod}, code: 1, stderr: []string{"no such file"}},
		{name: "only policies in -f", args: []string{"--policies", owner, "-f", owner}, code: 1, stderr: []string{"no objects to admit"}},
	}
	runCLICases(t, "eval", tests)
}

func TestEvalJSON(t *testing.T) {
	dir := t.TempDir()
	owner := writeFile(t, dir, "owner.yaml", ownerPolicy+"---\n"+ownerBinding)
	pod := writeFile(t, dir, "pod.yaml", podV1)
	cm := writeFile(t, dir, "cm.yaml", configMap)

	code, stdout, stderr := runCLI(t, "", "eval", "--policies", owner, "-f", pod, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(stdout), &obj); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	labels := obj["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["owner"] != "admin" {
		t.Errorf("labels %v", labels)
	}

	code, stdout, stderr = runCLI(t, "", "eval", "--policies", owner, "-f", pod, "-f", cm, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 {
		t.Errorf("want a List of 2 objects, got %v:\n%s", err, stdout)
	}
}

// The policies mapc compiles are accepted by the create-time checks in every API version.
func TestEvalAcceptsCompiledPolicies(t *testing.T) {
	// (1.32 accepts no list steps in new expressions, and the examples have them.)
	for _, kv := range []string{"1.33", "1.34", "1.37"} {
		code, compiled, stderr := runCLI(t, "", "compile", "-f", "../../examples/gatekeeper", "--kubernetes-version", kv)
		if code != 0 {
			t.Fatalf("compile %s: %s", kv, stderr)
		}
		p := writeFile(t, t.TempDir(), "p.yaml", compiled)
		code, _, stderr = runCLI(t, "", "eval", "--policies", p, "-f", "../../examples/objects", "--kubernetes-version", kv)
		if code != 0 || strings.Contains(stderr, "warning") {
			t.Errorf("%s: exit %d\n%s", kv, code, stderr)
		}
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string}
              color: {type: string}
`

const widgetPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: widget-size
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["example.com"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["widgets"]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{spec: Object.spec{size: "large"}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: widget-size
spec:
  policyName: widget-size
`

const widget = `apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  namespace: default
spec:
  color: blue
`

// Custom resources need their schema (--crd) for ApplyConfiguration; policies can come from stdin.
func TestEvalCRDAndStdin(t *testing.T) {
	dir := t.TempDir()
	crd := writeFile(t, dir, "crd.yaml", widgetCRD)
	w := writeFile(t, dir, "widget.yaml", widget)

	code, stdout, stderr := runCLI(t, widgetPolicy, "eval", "--policies", "-", "-f", w, "--crd", crd)
	if code != 0 || !strings.Contains(stdout, "  size: large\n") || !strings.Contains(stdout, "  color: blue\n") {
		t.Errorf("with --crd: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, widgetPolicy, "eval", "--policies", "-", "-f", w)
	if code != 1 || !strings.Contains(stderr, "denied: ") || strings.Contains(stdout, "size: large") {
		t.Errorf("without --crd: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, widgetPolicy, "eval", "--policies", "-", "-f", "-")
	if code != 2 || !strings.Contains(stderr, "standard input") {
		t.Errorf("two stdin: exit %d\n%s", code, stderr)
	}
	policies := writeFile(t, dir, "policies.yaml", widgetPolicy)
	code, _, stderr = runCLI(t, "", "eval", "--policies", policies, "-f", w, "--crd", w)
	if code != 1 || !strings.Contains(stderr, "--crd: ") {
		t.Errorf("--crd of a Widget: exit %d\n%s", code, stderr)
	}
}
