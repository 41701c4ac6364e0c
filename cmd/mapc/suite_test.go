package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The bundled example suites, one per format, pass.
func TestSuitesExamplesPass(t *testing.T) {
	for _, args := range [][]string{
		{"../../testdata/suites"},
		{"../../testdata/suites/mapc/examples.test.yaml"},
		{"../../testdata/suites/mapc/handwritten.test.yaml"},
		{"../../testdata/suites/kaptest/kaptest.yaml"},
		{"../../testdata/suites/kaptest-params"},
		{"../../testdata/suites/kyverno"},
		{"../../examples/kyverno"},
	} {
		code, stdout, stderr := runCLI(t, "", append([]string{"test"}, args...)...)
		if code != 0 || !strings.Contains(stdout, " passed, 0 failed") || strings.Contains(stdout, "FAIL") {
			t.Errorf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
	}
	_, stdout, _ := runCLI(t, "", "test", "../../testdata/suites")
	for _, want := range []string{
		"=== gatekeeper-examples (../../testdata/suites/mapc/examples.test.yaml, mapc format)\n",
		"=== handwritten-policies (../../testdata/suites/mapc/handwritten.test.yaml, mapc format)\n",
		"=== ../../testdata/suites/kaptest/kaptest.yaml (../../testdata/suites/kaptest/kaptest.yaml, kaptest format)\n",
		"=== kyverno-mutating-admission-policies (../../testdata/suites/kyverno/kyverno-test.yaml, kyverno format)\n",
		"PASS a Deployment only gets the metadata of the kind-less AssignMetadata mutators (",
		"PASS a ConfigMap that is not reviewed is denied (",
		"PASS default-environment: (UPDATE) Deployment:base - MUTATE (1 policy order)\n",
		"PASS set-replicas: Deployment prod-ns/nginx-prod - SKIP (1 policy order)\n",
		"SKIP default-environment: (DELETE) Deployment:base - ERROR: DELETE: MutatingAdmissionPolicies do not run on DELETE\n",
		"PASS deployment-replicas: (CREATE) Deployment:one - MUTATE with param replicas in large (1 policy order)\n",
		"=== namespace-team (../../testdata/suites/kyverno-namespace/kyverno-test.yaml, kyverno format)\n",
		"PASS namespace-team/team: Pod sandbox/scratch - PASS (1 policy order)\n",
		"=== mirror-images (../../testdata/suites/kyverno-images/kyverno-test.yaml, kyverno format)\n",
		"PASS mirror-images/mirror: Pod default/web - PASS (1 policy order)\n",
		"27 passed, 0 failed, 1 skipped\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// The bundled Kyverno examples' kyverno-test.yaml runs its results through the compiled policies.
func TestSuitesKyvernoExamples(t *testing.T) {
	_, stdout, _ := runCLI(t, "", "test", "../../examples/kyverno")
	for _, want := range []string{
		"=== kyverno-examples (../../examples/kyverno/kyverno-test.yaml, kyverno format)\n",
		"PASS add-labels/team-label: Deployment team-a/api - PASS (1 policy order)\n",
		"PASS always-pull-latest: Pod team-b/shipper-already - SKIP (1 policy order)\n",
		"PASS log-shipper: Pod team-b/shipper-already - PASS (1 policy order)\n",
		"15 passed, 0 failed\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// Suites with wrong expectations fail, saying where and how.
func TestSuitesWrongExpectationsFail(t *testing.T) {
	dir := t.TempDir()
	examples := abs(t, "../../examples")
	suites := abs(t, "../../testdata/suites")
	wrongLabel := writeFile(t, dir, "native.test.yaml", `apiVersion: mapc.dev/v1alpha1
kind: Test
metadata:
  name: wrong
sources: [`+examples+`/gatekeeper]
namespaces: [`+examples+`/objects/namespaces.yaml]
cases:
- name: wrong label
  object: `+suites+`/mapc/expected/../../../../examples/objects/pod-bar-privileged-foo.yaml
  expect: `+suites+`/mapc/expected/pod-bar-privileged-foo.yaml
- name: the owner is not root
  object:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: settings, namespace: bar}
  expect:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: settings
      namespace: bar
      labels: {namespace: bar, owner: root}
      annotations: {owner: admin}
- name: not unchanged
  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: bar}}
  expectUnchanged: true
- name: no error
  object: {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: bar}}
  expectError: denied
`)
	wrongKaptest := writeFile(t, dir, "kaptest.yaml", `version: v1alpha1
policies: [`+suites+`/kaptest/policy.yaml]
resources: [`+suites+`/kaptest/resources.yaml]
mapTestSuites:
- policy: default-environment
  tests:
  - object: {kind: Deployment, name: base}
    expect: skip
  - object: {kind: Deployment, name: labelled}
    expect: mutate
    expectObject: {kind: Deployment, name: base-mutated}
`)
	writeFile(t, dir, "patched.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-test
  namespace: test-ns
spec:
  replicas: 4
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx
`)
	wrongKyverno := writeFile(t, dir, "kyverno-test.yaml", `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata:
  name: wrong-kyverno
policies: [`+suites+`/kyverno/policy.yaml]
resources: [`+suites+`/kyverno/resources.yaml]
variables: `+suites+`/kyverno/values.yaml
results:
- policy: set-replicas
  kind: Deployment
  resources: [nginx-test]
  patchedResources: patched.yaml
  result: pass
- policy: add-default-app-label
  kind: Pod
  resources: [pass-pod]
  result: skip
`)
	// The patched resources of the Kyverno examples, one of them wrong.
	kyvernoExamples := abs(t, "../../examples/kyverno")
	patched, err := os.ReadFile(filepath.Join(kyvernoExamples, "patched", "log-shipper.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wrongPatched := strings.Replace(string(patched), "app: web", "app: website", 1)
	if wrongPatched == string(patched) {
		t.Fatal("the web Pod's label is not in the patched resources")
	}
	writeFile(t, dir, "wrong-patched.yaml", wrongPatched)
	wrongKyvernoPolicies := writeFile(t, dir, "kyverno-policies-test.yaml", `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata:
  name: wrong-kyverno-policies
policies:
- `+kyvernoExamples+`/policies/add-labels.yaml
- `+kyvernoExamples+`/policies/configmap-entries.yaml
- `+kyvernoExamples+`/policies/image-pull-policy.yaml
- `+kyvernoExamples+`/policies/sidecar.yaml
resources: [`+kyvernoExamples+`/objects]
results:
- policy: log-shipper
  kind: Pod
  resources: [team-a/web]
  patchedResources: wrong-patched.yaml
  result: pass
- policy: always-pull-latest
  kind: Pod
  resources: [team-a/web]
  result: skip
`)

	tests := []struct {
		name   string
		suite  string
		stdout []string
	}{
		{"mapc format", wrongLabel, []string{
			"FAIL the owner is not root: the policies' result differs from the expected object\n",
			"  case at " + wrongLabel + ":11\n",
			"  --- expected\n",
			"  +++ got\n",
			"  -    owner: root\n",
			"  +    owner: admin\n",
			"PASS wrong label (",
			"FAIL not unchanged: the policies change the object, which was expected unchanged\n",
			"FAIL no error: admitted, but an error was expected\n",
			"  expected: an error containing \"denied\"\n",
			"1 passed, 3 failed\n",
		}},
		{"kaptest", wrongKaptest, []string{
			"FAIL default-environment: (CREATE) Deployment:base - SKIP: the policies change the object, which was expected unchanged\n",
			"  +    environment: test\n",
			"FAIL default-environment: (CREATE) Deployment:labelled - MUTATE: the policies' result differs from the expected object\n",
			"  -    environment: test\n  +    environment: prod\n",
			"0 passed, 2 failed\n",
		}},
		{"kyverno", wrongKyverno, []string{
			"FAIL set-replicas: Deployment nginx-test - PASS: the policies' result differs from the expected object (nulls, empty maps and lists aside, as kyverno test compares)\n",
			"  -  replicas: 4\n  +  replicas: 3\n",
			"FAIL add-default-app-label: Pod pass-pod - SKIP: the policies change the object, which was expected unchanged\n",
			"0 passed, 2 failed\n",
		}},
		{"kyverno policies", wrongKyvernoPolicies, []string{
			"FAIL log-shipper: Pod team-a/web - PASS: the compiled policy's result differs from the patched resource (nulls, empty maps and lists aside, as kyverno test compares)\n",
			"  policy order: kyverno-clusterpolicy-add-labels, kyverno-clusterpolicy-shop-config, kyverno-clusterpolicy-always-pull-latest, kyverno-clusterpolicy-log-shipper\n",
			"  -    app: website\n  +    app: web\n",
			"FAIL always-pull-latest: Pod team-a/web - SKIP: the compiled policy changes the object: Kyverno's result skip (always-pull-latest changes nothing) was expected\n",
			"  +    imagePullPolicy: Always\n",
			"0 passed, 2 failed\n",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", "test", tc.suite)
			if code != 1 {
				t.Errorf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
		})
	}

	// The same, as JUnit and JSON: one testsuite per file, the skipped case too.
	code, stdout, _ := runCLI(t, "", "test", wrongKaptest, abs(t, "../../testdata/suites/kaptest/kaptest.yaml"), "--output", "junit")
	if code != 1 {
		t.Errorf("junit: exit %d", code)
	}
	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(stdout), &junit); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if junit.Tests != 7 || junit.Failures != 2 || junit.Skipped != 1 || len(junit.Suites) != 2 {
		t.Errorf("unexpected JUnit report:\n%s", stdout)
	}
	code, stdout, _ = runCLI(t, "", "test", wrongLabel, "--output", "json")
	var rep struct {
		Passed, Failed int
	}
	if err := json.Unmarshal([]byte(stdout), &rep); code != 1 || err != nil || rep.Passed != 1 || rep.Failed != 3 {
		t.Errorf("json: exit %d, %v:\n%s", code, err, stdout)
	}
}

// Suites that cannot be read or run fail, saying why; usage errors exit 2.
func TestSuitesErrors(t *testing.T) {
	dir := t.TempDir()
	suites := abs(t, "../../testdata/suites")
	typo := writeFile(t, dir, "typo.test.yaml", `apiVersion: mapc.dev/v1alpha1
kind: Test
sources: [`+suites+`/mapc/handwritten-policies.yaml]
cases:
- object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  expectUnchanged: true
  expected: {}
`)
	noExpect := writeFile(t, dir, "noexpect.test.yaml", `apiVersion: mapc.dev/v1alpha1
kind: Test
sources: [`+suites+`/mapc/handwritten-policies.yaml]
cases:
- object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
- object: {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
`)
	missing := writeFile(t, dir, "missing.test.yaml", `apiVersion: mapc.dev/v1alpha1
kind: Test
sources: [`+suites+`/mapc/handwritten-policies.yaml]
cases:
- object: nowhere.yaml
  expectUnchanged: true
`)
	writeFile(t, dir, "rejected.yaml", rejectedPolicy)
	cannotRun := writeFile(t, dir, "cannotrun.test.yaml", `apiVersion: mapc.dev/v1alpha1
kind: Test
metadata: {name: cannot-run}
sources: [rejected.yaml]
cases:
- object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  expectUnchanged: true
`)
	writeFile(t, dir, "refused.yaml", badAssign)
	refusedSuite := writeFile(t, dir, "refused.test.yaml", `apiVersion: mapc.dev/v1alpha1
kind: Test
sources: [refused.yaml]
cases:
- object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  expectUnchanged: true
`)
	notSuite := writeFile(t, dir, "pod.yaml", podV1)

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"a misspelt field", []string{typo}, 1, []string{"FAIL " + typo + ": the suite cannot be read:", "typo.test.yaml:7: cases[0].expected: unknown field"}, nil},
		{"a case without expectation", []string{noExpect}, 1, []string{noExpect + ":5: cases[0]: give exactly one of expect, expectUnchanged, expectError"}, nil},
		{"a missing object file", []string{missing}, 1, []string{missing + ":5: cases[0].object: ", "nowhere.yaml: no such file or directory"}, nil},
		{"a policy the API server would reject", []string{cannotRun}, 1, []string{
			"FAIL cannot-run: the suite cannot run:\n",
			`rejected.yaml:10: MutatingAdmissionPolicy/broken: spec.matchConstraints.resourceRules[0].operations[1]: Unsupported value: "PATCH"`,
			"0 passed, 1 failed\n",
		}, nil},
		{"a refused mutator", []string{refusedSuite}, 1, []string{"the suite cannot run:", "refused.yaml:", "Assign/broken"}, nil},
		{"not a suite", []string{notSuite}, 1, []string{"pod.yaml: not a test suite"}, nil},
		{"a directory without suites", []string{abs(t, "../../examples/objects")}, 1, nil, []string{"no test suite found"}},
		{"nothing to run", nil, 2, nil, []string{"test needs at least one SUITE"}},
		{"bad output", []string{typo, "--output", "yaml"}, 2, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append([]string{"test"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s\n%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}
