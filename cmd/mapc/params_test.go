package main

import (
	"strings"
	"testing"
)

// ownerFromParams is ownerPolicy (eval_test.go) taking the owner from a ConfigMap param named
// in its binding.
const ownerFromParams = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: owner
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
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
        Object{metadata: Object.metadata{labels: {"owner": params.data.owner}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: owner
spec:
  policyName: owner
  paramRef: {name: owner, parameterNotFoundAction: Deny}
`

const ownerConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: owner
  namespace: default
data:
  owner: admin
`

const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Cluster
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
              owner: {type: string}
`

// ownerFromGadget takes the owner from the cluster-scoped Gadget "owner".
var ownerFromGadget = strings.NewReplacer(
	"paramKind: {apiVersion: v1, kind: ConfigMap}", "paramKind: {apiVersion: example.com/v1, kind: Gadget}",
	"params.data.owner", "params.spec.owner",
).Replace(ownerFromParams)

const ownerGadget = `apiVersion: example.com/v1
kind: Gadget
metadata:
  name: owner
spec:
  owner: admin
`

const secretParam = `apiVersion: v1
kind: Secret
metadata:
  name: owner
  namespace: default
`

func TestEvalParams(t *testing.T) {
	dir := t.TempDir()
	policy := writeFile(t, dir, "policy.yaml", ownerFromParams)
	gadgetPolicy := writeFile(t, dir, "gadget-policy.yaml", ownerFromGadget)
	crd := writeFile(t, dir, "crd.yaml", gadgetCRD)
	cm := writeFile(t, dir, "cm.yaml", ownerConfigMap)
	twice := writeFile(t, dir, "twice.yaml", ownerConfigMap+"---\n"+ownerConfigMap)
	gadget := writeFile(t, dir, "gadget.yaml", ownerGadget)
	secret := writeFile(t, dir, "secret.yaml", secretParam)
	empty := writeFile(t, dir, "empty.yaml", "# nothing\n")
	pod := writeFile(t, dir, "pod.yaml", podV1)

	tests := []cliCase{
		{
			name:   "a ConfigMap param gives the value",
			args:   []string{"--policies", policy, "-f", pod, "--params", cm},
			stdout: []string{"    owner: admin"},
		},
		{
			name:     "without the param, parameterNotFoundAction Deny denies",
			args:     []string{"--policies", policy, "-f", pod},
			code:     1,
			noStdout: []string{"owner: admin"},
			stderr:   []string{"denied: " + pod + ":1: Pod/default/app: policy 'owner' with binding 'owner' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"},
		},
		{
			name:   "a param in -f is admitted, not read as a param",
			args:   []string{"--policies", policy, "-f", pod, "-f", cm},
			code:   1,
			stdout: []string{"kind: ConfigMap"},
			stderr: []string{"1 of 2 object(s) denied"},
		},
		{
			name:   "a custom resource param with its CRD",
			args:   []string{"--policies", gadgetPolicy, "-f", pod, "--params", gadget, "--crd", crd},
			stdout: []string{"    owner: admin"},
		},
		{
			name:   "a custom resource param without its CRD",
			args:   []string{"--policies", gadgetPolicy, "-f", pod, "--params", gadget},
			code:   1,
			stderr: []string{gadget + ":1: Gadget/owner: --params: example.com/v1 Gadget is neither a built-in kind nor a kind of the CRDs given: give its CustomResourceDefinition with --crd"},
		},
		{
			name:   "a param of a kind no policy names is warned about",
			args:   []string{"--policies", policy, "-f", pod, "--params", cm, "--params", secret},
			stdout: []string{"    owner: admin"},
			stderr: []string{"warning: " + secret + ":1: Secret/default/owner: --params: no policy has paramKind v1 Secret (theirs: v1 ConfigMap); this param is never read"},
		},
		{
			name:   "a param file with no object",
			args:   []string{"--policies", policy, "-f", pod, "--params", empty},
			code:   1,
			stderr: []string{empty + ": --params: no object in it; give the param objects"},
		},
		{
			name:   "a CRD given as a param",
			args:   []string{"--policies", gadgetPolicy, "-f", pod, "--params", crd},
			code:   1,
			stderr: []string{crd + ":1: CustomResourceDefinition/gadgets.example.com: --params: a CustomResourceDefinition is not a param; give it with --crd"},
		},
		{
			name:   "the same param twice",
			args:   []string{"--policies", policy, "-f", pod, "--params", twice},
			code:   1,
			stderr: []string{twice + ":9: ConfigMap/default/owner: --params: given twice in namespace default"},
		},
		{
			name: "params from standard input, once",
			args: []string{"--policies", "-", "-f", pod, "--params", "-"},
			code: 2, stderr: []string{"only one of --policies, -f, --namespaces, --crd, --params, --old-object can read standard input"},
		},
	}
	runCLICases(t, "eval", tests)
}

// A hand-written policy taking its value from a param is verified against the mutator with the
// param's value.
func TestVerifyParams(t *testing.T) {
	dir := t.TempDir()
	mutator := writeFile(t, dir, "mutator.yaml", ownerMutator)
	pod := writeFile(t, dir, "pod.yaml", podV1)
	policy := writeFile(t, dir, "policy.yaml", ownerFromParams)
	cm := writeFile(t, dir, "cm.yaml", ownerConfigMap)
	root := writeFile(t, dir, "root.yaml", strings.Replace(ownerConfigMap, "owner: admin", "owner: root", 1))
	gadgetPolicy := writeFile(t, dir, "gadget-policy.yaml", ownerFromGadget)
	crd := writeFile(t, dir, "crd.yaml", gadgetCRD)
	gadget := writeFile(t, dir, "gadget.yaml", ownerGadget)

	tests := []cliCase{
		{
			name:   "the param's value is Gatekeeper's",
			args:   []string{"-f", mutator, "-f", pod, "--policies", policy, "--params", cm},
			stdout: []string{"PASS Pod/default/app", "3 passed, 0 failed"},
		},
		{
			name:   "a custom resource param, with --crd",
			args:   []string{"-f", mutator, "-f", pod, "--policies", gadgetPolicy, "--params", gadget, "--crd", crd},
			stdout: []string{"PASS Pod/default/app", "3 passed, 0 failed"},
		},
		{
			name:   "another value differs",
			args:   []string{"-f", mutator, "-f", pod, "--policies", policy, "--params", root},
			code:   1,
			stdout: []string{"FAIL Pod/default/app", "  -    owner: admin\n  +    owner: root\n"},
		},
		{
			name:   "no param: the policies deny",
			args:   []string{"-f", mutator, "-f", pod, "--policies", policy},
			code:   1,
			stdout: []string{"FAIL Pod/default/app", "no params found for policy binding with `Deny` parameterNotFoundAction"},
		},
		{
			name:   "a custom resource param without --crd",
			args:   []string{"-f", mutator, "-f", pod, "--policies", gadgetPolicy, "--params", gadget},
			code:   1,
			stderr: []string{gadget + ":1: Gadget/owner: --params: example.com/v1 Gadget is neither a built-in kind nor a kind of the CRDs given: give its CustomResourceDefinition with --crd"},
		},
		{
			// Compiled policies read params only from Kyverno's configMap context entries.
			name:   "--params the compiled policies do not read",
			args:   []string{"-f", mutator, "-f", pod, "--params", cm},
			stderr: []string{cm + ":1: ConfigMap/default/owner: --params: no policy has a paramKind; this param is never read"},
		},
	}
	runCLICases(t, "verify", tests)
}

// The parameterised examples pass, and mapc eval gives what their suites expect.
func TestParamsExamples(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "test", "../../examples/params")
	for _, want := range []string{
		"=== sidecar-param (../../examples/params/sidecar/sidecar.test.yaml, mapc format)\n",
		"PASS a Pod in shop gets shop's sidecar (1 policy order)\n",
		"=== configmap-params (../../examples/params/configmap/configmap.test.yaml, mapc format)\n",
		"PASS a Pod in shop gets the labels of both labelled ConfigMaps, not of the other (1 policy order)\n",
		"6 passed, 0 failed\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if code != 0 || strings.Contains(stdout, "warning") {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}

	const dir = "../../examples/params/sidecar/"
	code, stdout, stderr = runCLI(t, "", "eval", "--policies", dir+"policy.yaml", "-f", dir+"pods.yaml", "--params", dir+"sidecar.yaml", "--crd", dir+"crd.yaml")
	if code != 0 || strings.Count(stdout, "image: mesh/proxy:v1.0.0") != 1 || strings.Count(stdout, "image: mesh/proxy:v0.9.0") != 1 {
		t.Errorf("eval: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
