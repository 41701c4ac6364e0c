package main

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/internal/kyvernobin"
)

// ownerClusterPolicy is Kyverno's ownerMutator: label owner=admin on Pods.
const ownerClusterPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: owner
spec:
  rules:
  - name: owner
    match:
      any:
      - resources:
          kinds: [Pod]
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            owner: admin
`

func TestVerifyKyverno(t *testing.T) {
	engine, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policy := writeFile(t, dir, "policy.yaml", ownerClusterPolicy)
	mutator := writeFile(t, dir, "mutator.yaml", ownerMutator)
	pod := writeFile(t, dir, "pod.yaml", podV1)
	good := writeFile(t, dir, "good.yaml", ownerPolicy+"---\n"+ownerBinding)
	wrong := writeFile(t, dir, "wrong.yaml", wrongOwnerPolicy+"---\n"+ownerBinding)

	tests := []cliCase{
		{
			name: "a correct hand-written policy passes",
			args: []string{"-f", policy, "-f", pod, "--policies", good, "--kyverno-engine", engine},
			stdout: []string{"PASS Pod/default/app (1 policy orders)", "PASS UPDATE Pod/default/app (1 policy orders)",
				"PASS UPDATE pods/ephemeralcontainers Pod/default/app (1 policy orders)",
				"PASS UPDATE Pod/default/app, as created (1 policy orders)", "4 passed, 0 failed"},
		},
		{
			name: "a wrong hand-written policy fails, with a diff from Kyverno's result",
			args: []string{"-f", policy, "-f", pod, "--policies", wrong, "--kyverno-engine", engine},
			code: 1,
			stdout: []string{
				"FAIL Pod/default/app: the policies mutate the object differently from Kyverno\n",
				"  --- kyverno\n  +++ policies\n",
				"  -    owner: admin\n  +    owner: root\n",
				"FAIL UPDATE Pod/default/app: the policies mutate the object differently from Kyverno\n",
				// The label written there is not stored.
				"PASS UPDATE pods/ephemeralcontainers Pod/default/app",
				"1 passed, 2 failed\n",
			},
			noStdout: []string{"gatekeeper", "Gatekeeper"},
			stderr:   []string{"2 of 3 request(s) are not mutated as Kyverno mutates them"},
		},
		{
			name:   "Gatekeeper mutators and Kyverno policies together",
			args:   []string{"-f", policy, "-f", mutator, "-f", pod, "--policies", good, "--kyverno-engine", engine},
			code:   2,
			stderr: []string{"verify takes one input language per run: " + mutator + ":1 has a Gatekeeper mutator and " + policy + ":1 a Kyverno policy"},
		},
		{
			name:   "Kyverno's engine not found",
			args:   []string{"-f", policy, "-f", pod, "--policies", good, "--kyverno-engine", dir + "/nope"},
			code:   1,
			stderr: []string{"Kyverno's engine program (--kyverno-engine)", "build it with `make kyverno-engine`"},
		},
	}
	runCLICases(t, "verify", tests)
}

func TestVerifyKyvernoEngineFromEnvironment(t *testing.T) {
	engine, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MAPC_KYVERNO_ENGINE", engine)
	dir := t.TempDir()
	code, stdout, stderr := runCLI(t, "", "verify", "-f", writeFile(t, dir, "policy.yaml", ownerClusterPolicy+"---\n"+podV1),
		"--policies", writeFile(t, dir, "good.yaml", ownerPolicy+"---\n"+ownerBinding))
	if code != 0 || !strings.Contains(stdout, "4 passed, 0 failed") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}
