package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"strings"
	"testing"
)

// ownerMutator adds label owner=admin to namespaced Pods; ownerPolicy (eval_test.go) is its
// hand-written translation and wrongOwnerPolicy a mistaken one.
const ownerMutator = `apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: owner
spec:
  match:
    scope: Namespaced
    kinds:
    - apiGroups: [""]
      kinds: ["Pod"]
  location: metadata.labels.owner
  parameters:
    assign:
      value: admin
`

var wrongOwnerPolicy = strings.Replace(ownerPolicy, `{"owner": "admin"}`, `{"owner": "root"}`, 1)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	mutator := writeFile(t, dir, "mutator.yaml", ownerMutator)
	pod := writeFile(t, dir, "pod.yaml", podV1)
	good := writeFile(t, dir, "good.yaml", ownerPolicy+"---\n"+ownerBinding)
	wrong := writeFile(t, dir, "wrong.yaml", wrongOwnerPolicy+"---\n"+ownerBinding)
	rejected := writeFile(t, dir, "rejected.yaml", rejectedPolicy)
	refused := writeFile(t, dir, "refused.yaml", badAssign)
	both := writeFile(t, dir, "both.yaml", ownerMutator+"---\n"+podV1)
	noNamespace := writeFile(t, dir, "nons.yaml", strings.Replace(podV1, "  namespace: default\n", "", 1))
	noKind := writeFile(t, dir, "nokind.yaml", "apiVersion: v1\nmetadata:\n  name: x\n")

	tests := []cliCase{
		{
			name:     "the bundled examples all pass",
			args:     []string{"-f", "../../examples/gatekeeper", "-f", "../../examples/objects"},
			stdout:   []string{"PASS Pod/default/nginx-basic (", "PASS Namespace/bar (", "PASS Deployment/default/web (", " passed, 0 failed\n"},
			noStdout: []string{"FAIL"},
		},
		{
			name:     "the bundled examples are idempotent",
			args:     []string{"-f", "../../examples/gatekeeper", "-f", "../../examples/objects", "--idempotence", "--seed", "7"},
			stdout:   []string{" passed, 0 failed\n"},
			noStdout: []string{"FAIL"},
		},
		{
			name:   "mutators and objects in one file",
			args:   []string{"-f", both},
			stdout: []string{"PASS Pod/default/app (1 policy", "PASS UPDATE pods/ephemeralcontainers Pod/default/app (", "PASS CREATE pods/binding Pod/default/app (", "3 passed, 0 failed"},
		},
		{
			name:   "an object without a namespace is in the request's namespace, for Gatekeeper too",
			args:   []string{"-f", mutator, "-f", noNamespace},
			stdout: []string{"PASS Pod/default/app (", "3 passed, 0 failed"},
		},
		{
			name:   "a correct hand-written policy passes",
			args:   []string{"-f", mutator, "-f", pod, "--policies", good},
			stdout: []string{"PASS Pod/default/app", "3 passed, 0 failed"},
		},
		{
			name: "a wrong hand-written policy fails with a readable diff and the order",
			args: []string{"-f", mutator, "-f", pod, "--policies", wrong},
			code: 1,
			stdout: []string{
				"FAIL Pod/default/app: the policies mutate the object differently from Gatekeeper\n",
				"  policy order: owner\n",
				"  --- gatekeeper\n  +++ policies\n",
				"  -    owner: admin\n  +    owner: root\n",
				"2 passed, 1 failed\n",
			},
			stderr: []string{"1 of 3 request(s) are not mutated as Gatekeeper mutates them"},
		},
		{
			name:     "a document that is not an object fails before anything is admitted",
			args:     []string{"-f", mutator, "-f", pod, "-f", noKind},
			code:     1,
			stderr:   []string{"nokind.yaml:1: not an object to admit: it has no kind (the API server needs apiVersion, kind and metadata.name or generateName)"},
			noStdout: []string{"PASS"},
		},
		{
			name:   "policies the API server would reject are not verified",
			args:   []string{"-f", mutator, "-f", pod, "--policies", rejected},
			code:   1,
			stderr: []string{`rejected.yaml:10: MutatingAdmissionPolicy/broken: spec.matchConstraints.resourceRules[0].operations[1]: Unsupported value: "PATCH"`},
		},
		{
			name:     "a refused mutator is listed and nothing is verified",
			args:     []string{"-f", refused, "-f", mutator, "-f", pod},
			code:     1,
			stderr:   []string{"refused.yaml:", "Assign/broken", "1 problem(s) with the mutators; no object verified"},
			noStdout: []string{"PASS", "FAIL"},
		},
		{
			name:   "policies among -f are ignored",
			args:   []string{"-f", mutator, "-f", pod, "-f", good},
			stderr: []string{"good.yaml:1: MutatingAdmissionPolicy/owner is a policy; to verify policies give them with --policies (ignored)"},
			stdout: []string{"3 passed, 0 failed"},
		},
		{name: "no mutators", args: []string{"-f", pod}, code: 1, stderr: []string{"no Gatekeeper mutators"}},
		{name: "no objects", args: []string{"-f", mutator}, code: 1, stderr: []string{"no objects to admit"}},
		{name: "no -f", args: nil, code: 2, stderr: []string{"verify needs -f"}},
		{name: "bad output", args: []string{"-f", both, "--output", "yaml"}, code: 2},
		{name: "bad version", args: []string{"-f", both, "--kubernetes-version", "1.20"}, code: 2},
		{name: "unknown flag", args: []string{"-f", both, "--frobnicate"}, code: 2},
	}
	runCLICases(t, "verify", tests)
}

// Every object of the examples is reported, and passes.
func TestVerifyExamplesEveryObject(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "verify", "-f", "../../examples/gatekeeper", "-f", "../../examples/objects", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Passed, Failed int
		Suites         []struct {
			Results []struct {
				Case string
				Pass bool
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	// 5 namespaces in namespaces.yaml and one object per other file.
	entries, err := os.ReadDir("../../examples/objects")
	if err != nil {
		t.Fatal(err)
	}
	want := 5 + len(entries) - 1
	// Pods are also checked on kubectl debug's request and on their binding.
	objects, debugged, bound := 0, 0, 0
	if len(rep.Suites) == 1 {
		for _, r := range rep.Suites[0].Results {
			switch {
			case strings.HasPrefix(r.Case, "UPDATE pods/ephemeralcontainers "):
				debugged++
			case strings.HasPrefix(r.Case, "CREATE pods/binding "):
				bound++
			default:
				objects++
			}
		}
	}
	if rep.Failed != 0 || len(rep.Suites) != 1 || objects != want || debugged == 0 || bound != debugged || rep.Passed != objects+debugged+bound {
		t.Errorf("passed %d failed %d, want %d objects to pass, and the Pods on kubectl debug's request and their binding:\n%s", rep.Passed, rep.Failed, want, stdout)
	}
}

func TestVerifyReports(t *testing.T) {
	dir := t.TempDir()
	mutator := writeFile(t, dir, "mutator.yaml", ownerMutator)
	pod := writeFile(t, dir, "pod.yaml", podV1)
	pod2 := writeFile(t, dir, "pod2.yaml", strings.Replace(podV2, "name: app", "name: other", 1))
	wrong := writeFile(t, dir, "wrong.yaml", wrongOwnerPolicy+"---\n"+ownerBinding)

	code, stdout, _ := runCLI(t, "", "verify", "-f", mutator, "-f", pod, "-f", pod2, "--policies", wrong, "--output", "json")
	if code != 1 {
		t.Fatalf("json: exit %d", code)
	}
	var rep struct {
		Passed int `json:"passed"`
		Failed int `json:"failed"`
		Suites []struct {
			Name    string `json:"name"`
			Results []struct {
				Case         string         `json:"case"`
				Pass         bool           `json:"pass"`
				FailingOrder []string       `json:"failingOrder"`
				Reason       string         `json:"reason"`
				Diff         string         `json:"diff"`
				Want         map[string]any `json:"want"`
				Got          map[string]any `json:"got"`
			} `json:"results"`
		} `json:"suites"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	// The two creates fail; kubectl debug's requests pass (the label written there is not
	// stored), and so do the bindings (the mutator is of Pods).
	if rep.Failed != 2 || rep.Passed != 4 || len(rep.Suites) != 1 || len(rep.Suites[0].Results) != 6 {
		t.Fatalf("unexpected report:\n%s", stdout)
	}
	r := rep.Suites[0].Results[2]
	if r.Case != "Pod/default/app" || r.Pass || len(r.FailingOrder) != 1 || !strings.Contains(r.Diff, "+    owner: root") || r.Want == nil || r.Got == nil {
		t.Errorf("unexpected result %+v", r)
	}

	code, stdout, _ = runCLI(t, "", "verify", "-f", mutator, "-f", pod, "-f", pod2, "--policies", wrong, "--output", "junit")
	if code != 1 {
		t.Fatalf("junit: exit %d", code)
	}
	var junit struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(stdout), &junit); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if junit.Tests != 6 || junit.Failures != 2 || len(junit.Suites) != 1 || len(junit.Suites[0].Cases) != 6 {
		t.Fatalf("unexpected JUnit report:\n%s", stdout)
	}
	c := junit.Suites[0].Cases[2]
	if c.Name != "Pod/default/app" || c.Failure == nil || c.Failure.Message != "the policies mutate the object differently from Gatekeeper" ||
		!strings.Contains(c.Failure.Text, "policy order: owner\n") || !strings.Contains(c.Failure.Text, "-    owner: admin\n+    owner: root\n") {
		t.Errorf("unexpected testcase %+v", c)
	}

	// A passing run has no failure elements.
	good := writeFile(t, dir, "good.yaml", ownerPolicy+"---\n"+ownerBinding)
	code, stdout, _ = runCLI(t, "", "verify", "-f", mutator, "-f", pod, "--policies", good, "--output", "junit")
	if code != 0 || strings.Contains(stdout, "<failure") || !strings.Contains(stdout, `<testcase name="Pod/default/app" classname="mapc verify"></testcase>`) {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
}
