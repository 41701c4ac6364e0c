package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs mapc in process and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd(strings.NewReader(stdin), &out, &errb)
	root.SetArgs(args)
	code := 0
	if err := root.Execute(); err != nil {
		code = 2
		if ee, ok := err.(*exitError); ok {
			code = ee.code
		}
		errb.WriteString(err.Error() + "\n")
	}
	return code, out.String(), errb.String()
}

const goodAssign = `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: pull
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *].imagePullPolicy"
  parameters:
    assign:
      value: Always
`

const badAssign = `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: broken
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *"
  parameters:
    assign:
      value: Always
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompileExamplesToStdout(t *testing.T) {
	code, out, errs := runCLI(t, "", "compile", "-f", "../../examples/gatekeeper")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "kind: MutatingAdmissionPolicy\n") || !strings.Contains(out, "kind: MutatingAdmissionPolicyBinding\n") {
		t.Fatalf("no policies in output:\n%s", out)
	}
}

// TestCompileKyvernoExamples compiles the Kyverno examples to standard output, "-o -" naming it
// as other tools do: the same output as without.
func TestCompileKyvernoExamples(t *testing.T) {
	code, out, errs := runCLI(t, "", "compile", "-f", "../../examples/kyverno", "-o", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if n := strings.Count(out, "kind: MutatingAdmissionPolicy\n"); n != 5 {
		t.Fatalf("%d policies, want one per Kyverno policy (5):\n%s", n, out)
	}
	_, plain, _ := runCLI(t, "", "compile", "-f", "../../examples/kyverno")
	if plain != out {
		t.Fatalf("-o - changes the output")
	}
}

func TestCompileIsDeterministicAcrossInputOrder(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", goodAssign)
	b := writeFile(t, dir, "b.yaml", strings.ReplaceAll(strings.ReplaceAll(goodAssign, "name: pull", "name: dns"), `"spec.containers[name: *].imagePullPolicy"`, "spec.dnsPolicy"))
	_, out1, _ := runCLI(t, "", "compile", "-f", a, "-f", b)
	_, out2, _ := runCLI(t, "", "compile", "-f", b, "-f", a)
	_, out3, _ := runCLI(t, "", "compile", "-f", dir)
	if out1 != out2 || out1 != out3 || out1 == "" {
		t.Fatalf("output depends on input order:\n%s\n---\n%s", out1, out2)
	}
}

func TestCompileStdinAndList(t *testing.T) {
	list := "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(goodAssign, "\n"), "\n", "\n  ") + "\n"
	code, out, errs := runCLI(t, list, "compile", "-f", "-", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, `"kind": "List"`) || !strings.Contains(out, `"name": "gatekeeper-pods"`) {
		t.Fatalf("unexpected output:\n%s", out)
	}
}

func TestCompileRefusalWritesNothing(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "in/m.yaml", goodAssign+"---\n"+badAssign)
	outDir := filepath.Join(dir, "out")
	code, out, errs := runCLI(t, "", "compile", "-f", in, "--output-dir", outDir)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if out != "" {
		t.Errorf("stdout not empty: %s", out)
	}
	want := in + ":18: Assign/broken: spec.location: Gatekeeper rejects this mutator: invalid location format"
	if !strings.Contains(errs, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs)
	}
	if _, err := os.Stat(outDir); !os.IsNotExist(err) {
		t.Errorf("output directory was written")
	}
	// --skip-unsupported writes the rest and still fails.
	code, _, errs = runCLI(t, "", "compile", "-f", in, "--output-dir", outDir, "--skip-unsupported")
	if code != 1 || !strings.Contains(errs, "Assign/broken") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(outDir, "gatekeeper-pods.yaml")); err != nil {
		t.Errorf("the compiled policy was not written: %v", err)
	}
}

func TestCompileDirAndCheck(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "in/m.yaml", goodAssign)
	outDir := filepath.Join(dir, "policies")
	if code, _, errs := runCLI(t, "", "compile", "-f", in, "--output-dir", outDir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	k, err := os.ReadFile(filepath.Join(outDir, "kustomization.yaml"))
	if err != nil || !strings.Contains(string(k), "- gatekeeper-pods.yaml") {
		t.Fatalf("kustomization.yaml: %v\n%s", err, k)
	}
	if code, out, errs := runCLI(t, "", "compile", "-f", in, "--output-dir", outDir, "--check"); code != 0 || out != "" {
		t.Fatalf("check of fresh output: exit %d\n%s%s", code, out, errs)
	}
	// Drift: change the mutator; --check reports a diff and exit 1, and writes nothing.
	writeFile(t, dir, "in/m.yaml", strings.ReplaceAll(goodAssign, "Always", "IfNotPresent"))
	before, _ := os.ReadFile(filepath.Join(outDir, "gatekeeper-pods.yaml"))
	code, out, _ := runCLI(t, "", "compile", "-f", in, "--output-dir", outDir, "--check")
	if code != 1 || !strings.Contains(out, `-        value: "Always"`) && !strings.Contains(out, "-") {
		t.Fatalf("check after drift: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "+++ "+filepath.Join(outDir, "gatekeeper-pods.yaml")) || !strings.Contains(out, "IfNotPresent") {
		t.Errorf("diff does not show the change:\n%s", out)
	}
	after, _ := os.ReadFile(filepath.Join(outDir, "gatekeeper-pods.yaml"))
	if !bytes.Equal(before, after) {
		t.Errorf("--check wrote to the directory")
	}
	// An extra file in the output directory is drift too.
	writeFile(t, dir, "in/m.yaml", goodAssign)
	writeFile(t, outDir, "stray.yaml", "x: 1\n")
	if code, out, _ := runCLI(t, "", "compile", "-f", in, "--output-dir", outDir, "--check"); code != 1 || !strings.Contains(out, "stray.yaml") {
		t.Errorf("stray file not reported: exit %d\n%s", code, out)
	}
}

func TestCompileRefusesForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "in/m.yaml", goodAssign)
	foreign := filepath.Join(dir, "mine")
	writeFile(t, foreign, "notes.txt", "keep me")
	code, _, errs := runCLI(t, "", "compile", "-f", in, "--output-dir", foreign)
	if code != 1 || !strings.Contains(errs, "was not written by mapc") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if data, err := os.ReadFile(filepath.Join(foreign, "notes.txt")); err != nil || string(data) != "keep me" {
		t.Errorf("foreign file touched")
	}
}

func TestCompileUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"compile"},
		{"compile", "-f", "x", "--output", "xml"},
		{"compile", "-f", "x", "--failure-policy", "Sometimes"},
		{"compile", "-f", "x", "--kubernetes-version", "1.30"},
		{"compile", "-f", "x", "--check"},
		{"compile", "--no-such-flag"},
	} {
		if code, _, errs := runCLI(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if code, _, errs := runCLI(t, "", "compile", "-f", "/no/such/file"); code != 1 || !strings.Contains(errs, "no such file") {
		t.Errorf("missing file: exit %d: %s", code, errs)
	}
}

func TestCompileVersions(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign)
	if code, _, errs := runCLI(t, "", "compile", "-f", in, "--kubernetes-version", "1.32"); code != 1 || !strings.Contains(errs, "from Kubernetes 1.33") {
		t.Errorf("1.32: a glob needs 1.33: exit %d %s", code, errs)
	}
	for v, api := range map[string]string{"1.33.4": "v1alpha1", "1.34": "v1beta1", "1.35": "v1beta1", "1.36": "v1", "v1.37.1": "v1"} {
		code, out, errs := runCLI(t, "", "compile", "-f", in, "--kubernetes-version", v)
		if code != 0 {
			t.Fatalf("%s: exit %d %s", v, code, errs)
		}
		if !strings.Contains(out, "apiVersion: admissionregistration.k8s.io/"+api+"\n") {
			t.Errorf("%s: want %s:\n%s", v, api, out)
		}
	}
}

func TestCompileCRDNamesCustomResources(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: widget-size
spec:
  applyTo: [{groups: [example.com], kinds: [Widget], versions: [v1]}]
  location: spec.size
  parameters:
    assign:
      value: large
`)
	crd := writeFile(t, dir, "crd.yaml", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`)
	_, without, _ := runCLI(t, "", "compile", "-f", in, "--layout", "per-mutator")
	if !strings.Contains(without, "- '*'") || !strings.Contains(without, `request.kind.kind in ["Widget"]`) {
		t.Errorf("without --crd the kind must be checked in CEL:\n%s", without)
	}
	code, with, errs := runCLI(t, "", "compile", "-f", in, "--crd", crd, "--layout", "per-mutator")
	if code != 0 || !strings.Contains(with, "- widgets\n") || strings.Contains(with, "request.kind.kind") {
		t.Errorf("with --crd: exit %d %s\n%s", code, errs, with)
	}
	if code, _, errs := runCLI(t, "", "compile", "-f", in, "--crd", in); code != 1 || !strings.Contains(errs, "no CustomResourceDefinition") {
		t.Errorf("--crd without a CRD: exit %d %s", code, errs)
	}
}

func TestCompileLayoutsAndExplain(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign+"---\n"+strings.ReplaceAll(strings.ReplaceAll(goodAssign, "name: pull", "name: dns"), `"spec.containers[name: *].imagePullPolicy"`, "spec.dnsPolicy"))
	_, fused, _ := runCLI(t, "", "compile", "-f", in)
	if strings.Count(fused, "kind: MutatingAdmissionPolicy\n") != 1 || !strings.Contains(fused, "name: gatekeeper-pods\n") {
		t.Errorf("fused layout: want one policy gatekeeper-pods:\n%s", fused)
	}
	_, per, _ := runCLI(t, "", "compile", "-f", in, "--layout", "per-mutator")
	if strings.Count(per, "kind: MutatingAdmissionPolicy\n") != 2 || !strings.Contains(per, "name: gatekeeper-assign-dns\n") {
		t.Errorf("per-mutator layout: want two policies:\n%s", per)
	}
	if code, _, _ := runCLI(t, "", "compile", "-f", in, "--layout", "other"); code != 2 {
		t.Errorf("bad --layout: exit %d", code)
	}
	code, out, errs := runCLI(t, "", "explain", "-f", in, "--layout", "per-mutator")
	if code != 0 || !strings.Contains(out, "gatekeeper-assign-pull: Assign/pull alone") {
		t.Errorf("explain: exit %d %s\n%s", code, errs, out)
	}
	code, out, _ = runCLI(t, "", "explain", "-f", in, "--output", "json")
	if code != 0 || !strings.Contains(out, `"policy": "gatekeeper-pods"`) {
		t.Errorf("explain json: exit %d\n%s", code, out)
	}
}

// cliCase is one run of a mapc command in a table test: its arguments, exit status, and the
// fragments its output must (or, noStdout, must not) hold.
type cliCase struct {
	name     string
	args     []string
	code     int
	stdout   []string // fragments expected on stdout
	noStdout []string
	stderr   []string
}

// runCLICases runs each case as `mapc command args...`.
func runCLICases(t *testing.T, command string, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", append([]string{command}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.noStdout {
				if strings.Contains(stdout, s) {
					t.Errorf("stdout has %q:\n%s", s, stdout)
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
