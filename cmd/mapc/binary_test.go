package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
)

// The tests in this file run mapc as a process of its own: this test binary re-executes itself
// as mapc (TestMain), so exit codes, standard streams and files are what a user's shell sees.
const asMapc = "MAPC_TEST_RUN_AS_MAPC"

func TestMain(m *testing.M) {
	if os.Getenv(asMapc) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	code := m.Run()
	kyvernobin.Cleanup() // the kyverno-engine program the tests built, if they built one
	os.Exit(code)
}

// mapcProcess runs mapc with args and stdin, and returns its exit code, stdout and stderr.
func mapcProcess(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMapc+"=1")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// snapshot is every file below dir with its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		files[p] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestProcessEmptyInputLeavesDirectory(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "in/m.yaml", goodAssign)
	outDir := filepath.Join(dir, "deploy", "policies")
	if code, _, errs := mapcProcess(t, "", "compile", in, "--output-dir", outDir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	before := snapshot(t, outDir)
	empty := writeFile(t, dir, "empty.yaml", "")
	upper := writeFile(t, dir, "upper/M.YAML", goodAssign) // not read from a directory: .YAML is not an extension mapc reads
	cm := writeFile(t, dir, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	for name, c := range map[string]struct {
		stdin string
		args  []string
	}{
		"empty kubectl get on stdin": {"", []string{"-f", "-"}},
		"an empty List":              {"apiVersion: v1\nkind: List\nitems: []\n", []string{"-f", "-"}},
		"an empty file":              {"", []string{empty}},
		"a directory of .YAML files": {"", []string{filepath.Dir(upper)}},
		"no mutator among documents": {"", []string{cm}},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"compile", "--output-dir", outDir}, c.args...)
			code, stdout, errs := mapcProcess(t, c.stdin, args...)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, errs)
			}
			if !strings.Contains(errs, "no Gatekeeper mutator or Kyverno policy found in") || !strings.Contains(errs, "nothing written") || !strings.Contains(errs, "--allow-empty") {
				t.Errorf("stderr does not say what happened:\n%s", errs)
			}
			if stdout != "" {
				t.Errorf("stdout: %s", stdout)
			}
			if after := snapshot(t, outDir); !equalMaps(before, after) {
				t.Errorf("the output directory changed")
			}
		})
	}
	// --allow-empty writes an empty set on purpose, with a kustomization listing no resource.
	code, _, errs := mapcProcess(t, "", "compile", "-f", "-", "--output-dir", outDir, "--allow-empty")
	if code != 0 {
		t.Fatalf("--allow-empty: exit %d: %s", code, errs)
	}
	after := snapshot(t, outDir)
	k := after[filepath.Join(outDir, "kustomization.yaml")]
	if len(after) == len(before) || !strings.Contains(k, "resources: []") {
		t.Errorf("--allow-empty did not write an empty set: %v\n%s", after, k)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestProcessVersion(t *testing.T) {
	code, out, errs := mapcProcess(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "mapc ") || !strings.Contains(out, "github.com/open-policy-agent/gatekeeper/v3 v3.") || !strings.Contains(out, "k8s.io/apiserver v0.") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, out2, _ := mapcProcess(t, "", "--version")
	if code != 0 || !strings.HasPrefix(out2, "mapc ") || strings.Count(out2, "\n") != 1 {
		t.Errorf("--version: exit %d %q", code, out2)
	}
	if code, out, _ := mapcProcess(t, "", "version", "-o", "json"); code != 0 || !strings.Contains(out, `"libraries"`) {
		t.Errorf("version -o json: exit %d %s", code, out)
	}
	// The header of every generated YAML file names the version.
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign)
	_, policies, _ := mapcProcess(t, "", "compile", in)
	if v := emit.VersionOf([]byte(policies)); v == "" || !strings.Contains(out, v) {
		t.Errorf("header names version %q; mapc version says:\n%s", v, out)
	}
	// The usage hint names the command once.
	if _, _, errs := mapcProcess(t, "", "--no-such-flag"); !strings.Contains(errs, "see 'mapc --help'") {
		t.Errorf("usage hint: %s", errs)
	}
}

func TestProcessCheckNamesVersionDrift(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign)
	outDir := filepath.Join(dir, "policies")
	if code, _, errs := mapcProcess(t, "", "compile", in, "--output-dir", outDir); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Another build of mapc wrote the directory: only the version line differs.
	for p, content := range snapshot(t, outDir) {
		v := emit.VersionOf([]byte(content))
		if v == "" {
			t.Fatalf("%s names no version", p)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(content, v, "v0.9.0", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := mapcProcess(t, "", "compile", in, "--output-dir", outDir, "--check")
	if code != 1 || !strings.Contains(errs, "differs only in the mapc version") || !strings.Contains(errs, "generated by mapc v0.9.0") {
		t.Errorf("exit %d: %s", code, errs)
	}
	// A real change is reported as drift, not as a version difference.
	writeFile(t, dir, "m.yaml", strings.ReplaceAll(goodAssign, "Always", "Never"))
	code, _, errs = mapcProcess(t, "", "compile", in, "--output-dir", outDir, "--check")
	if code != 1 || strings.Contains(errs, "differs only") || !strings.Contains(errs, "is not what the mutators compile to") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

func TestProcessOutputFlags(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign)
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"compile", in, "-o", filepath.Join(dir, "policies")}, "use --output-dir"},
		{[]string{"compile", in, "-o", "policies.yaml"}, "redirect standard output"},
		{[]string{"compile", in, "--output-dir", "json"}, "did you mean -o json?"},
		{[]string{"compile", in, "--output-dir", filepath.Join(dir, "p.yaml")}, "names a directory"},
		{[]string{"compile", in, "--check"}, "give --output-dir DIR"},
		{[]string{"verify", "-f", in, "-o", "report.xml"}, "-o is the output format (text, json, junit"},
		{[]string{"explain", "-f", in, "-o", "yaml"}, "use text, json"},
		{[]string{"eval", "--policies", in, "-f", in, "-o", "out/"}, "not a file"},
		{[]string{"test", in, "-o", "xml"}, "use text, json, junit"},
	} {
		code, out, errs := mapcProcess(t, "", c.args...)
		if code != 2 || out != "" || !strings.Contains(errs, c.hint) {
			t.Errorf("%v: exit %d, stdout %q, stderr lacks %q:\n%s", c.args, code, out, c.hint, errs)
		}
	}
	// -o is the format on compile; PATH arguments are read as -f.
	code, out, errs := mapcProcess(t, "", "compile", in, "-o", "json")
	if code != 0 || !strings.HasPrefix(out, "{") || !strings.Contains(errs, "1 input policy found: 1 compiled into 1 policies") {
		t.Errorf("compile PATH -o json: exit %d\n%s\n%s", code, out, errs)
	}
	// --quiet hides notes, not problems or the summary.
	never := strings.ReplaceAll(goodAssign, "  applyTo: [{groups: [\"\"], kinds: [Pod], versions: [v1]}]\n", "  applyTo: [{groups: [\"\"], kinds: [Pod], versions: [v1]}]\n  match: {source: Generated}\n")
	never = strings.ReplaceAll(never, "name: pull", "name: generated-only")
	in2 := writeFile(t, dir, "n.yaml", never)
	_, _, loud := mapcProcess(t, "", "compile", in, in2)
	_, _, quiet := mapcProcess(t, "", "compile", in, in2, "-q")
	if !strings.Contains(loud, "note: ") || strings.Contains(quiet, "note: ") || !strings.Contains(quiet, "1 left out") {
		t.Errorf("notes:\n%s\nquiet:\n%s", loud, quiet)
	}
}

func TestProcessReportsCarryRefusals(t *testing.T) {
	dir := t.TempDir()
	never := strings.ReplaceAll(strings.ReplaceAll(goodAssign, "name: pull", "name: generated-only"),
		"  location:", "  match: {source: Generated}\n  location:")
	in := writeFile(t, dir, "m.yaml", goodAssign+"---\n"+badAssign+"---\n"+never)
	pod := writeFile(t, dir, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: a, image: nginx}]\n")
	report := filepath.Join(dir, "report.json")
	code, _, errs := mapcProcess(t, "", "compile", in, "--report", report)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Mutators []struct {
			Mutator, Status   string
			Policies, Reasons []string
			Line              int
		}
		Problems []struct {
			File, Object, Field, Message string
			Line                         int
		}
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	status := map[string]string{}
	for _, m := range rep.Mutators {
		status[m.Mutator] = m.Status
		if m.Status != "compiled" && len(m.Reasons) == 0 || m.Status == "compiled" && len(m.Policies) == 0 {
			t.Errorf("%+v: no reason or policy", m)
		}
	}
	if status["Assign/pull"] != "compiled" || status["Assign/broken"] != "refused" || status["Assign/generated-only"] != "left-out" || len(status) != 3 {
		t.Errorf("statuses %v\n%s", status, data)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].Object != "Assign/broken" || rep.Problems[0].Field != "spec.location" || rep.Problems[0].Line != 18 || rep.Problems[0].File != in {
		t.Errorf("problems %+v", rep.Problems)
	}
	// GitHub annotations of the same.
	code, _, errs = mapcProcess(t, "", "compile", in, "--report", report, "--report-format", "github")
	gh, _ := os.ReadFile(report)
	if code != 1 || !strings.Contains(string(gh), "::error file="+strings.ReplaceAll(in, ":", "%3A")+",line=18,title=Assign/broken::spec.location%3A") && !strings.Contains(string(gh), "::error file="+in+",line=18,title=Assign/broken::spec.location: ") {
		t.Errorf("exit %d: %s\n%s", code, errs, gh)
	}
	// verify's JUnit and JSON reports show the refusal as a failing case.
	code, out, _ := mapcProcess(t, "", "verify", in, pod, "-o", "junit")
	if code != 1 || !strings.Contains(out, `<testcase name="compile Assign/broken"`) || !strings.Contains(out, `failures="1"`) {
		t.Errorf("junit: exit %d\n%s", code, out)
	}
	code, out, _ = mapcProcess(t, "", "verify", in, pod, "-o", "json")
	if code != 1 || !strings.Contains(out, `"case": "compile Assign/broken"`) || !strings.Contains(out, `"line": 18`) {
		t.Errorf("json: exit %d\n%s", code, out)
	}
	code, out, _ = mapcProcess(t, "", "verify", in, pod, "-o", "github")
	if code != 1 || !strings.Contains(out, "title=compile Assign/broken::spec.location") || !strings.Contains(out, "0 passed, 1 failed") {
		t.Errorf("github: exit %d\n%s", code, out)
	}
	// explain's JSON lists the mutators and the problems.
	code, out, _ = mapcProcess(t, "", "explain", in, "-o", "json")
	if code != 1 || !strings.Contains(out, `"status": "refused"`) || !strings.Contains(out, `"object": "Assign/broken"`) {
		t.Errorf("explain: exit %d\n%s", code, out)
	}
	// --report - needs standard output free.
	if code, _, errs := mapcProcess(t, "", "compile", in, "--report", "-"); code != 2 || !strings.Contains(errs, "--output-dir") {
		t.Errorf("--report - to stdout with policies: exit %d %s", code, errs)
	}
}

func TestProcessSkipUnsupportedWritesEveryLayout(t *testing.T) {
	dir := t.TempDir()
	dns := strings.ReplaceAll(strings.ReplaceAll(goodAssign, "name: pull", "name: dns"), `"spec.containers[name: *].imagePullPolicy"`, "spec.dnsPolicy")
	dns = strings.ReplaceAll(dns, "value: Always", "value: Default")
	glob2 := strings.ReplaceAll(strings.ReplaceAll(goodAssign, "name: pull", "name: pull-init"), "spec.containers[", "spec.initContainers[")
	in := writeFile(t, dir, "m.yaml", goodAssign+"---\n"+dns+"---\n"+glob2)
	for _, layout := range []string{"fused", "per-mutator"} {
		t.Run(layout, func(t *testing.T) {
			outDir := filepath.Join(dir, "out-"+layout)
			// Kubernetes 1.32 has no two-variable comprehensions: both globs are refused, in one
			// run, each naming the version; the Assign of a plain field is written.
			code, _, errs := mapcProcess(t, "", "compile", in, "--kubernetes-version", "1.32", "--layout", layout, "--output-dir", outDir, "--skip-unsupported")
			if code != 1 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, m := range []string{"Assign/pull:", "Assign/pull-init:"} {
				if !strings.Contains(errs, m) || strings.Count(errs, "1.33") < 2 {
					t.Errorf("stderr does not name %s with the version:\n%s", m, errs)
				}
			}
			if strings.Contains(errs, "Assign/dns:") {
				t.Errorf("the plain Assign was refused too:\n%s", errs)
			}
			var policies string
			for p, c := range snapshot(t, outDir) {
				if !strings.HasSuffix(p, "kustomization.yaml") {
					policies += c
				}
			}
			if !strings.Contains(policies, "dnsPolicy") || strings.Contains(policies, "imagePullPolicy") {
				t.Errorf("written policies:\n%s", policies)
			}
			if !strings.Contains(errs, "3 input policies found: 1 compiled") || !strings.Contains(errs, "2 refused") {
				t.Errorf("summary:\n%s", errs)
			}
		})
	}
}

func TestProcessNamePrefix(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign)
	code, out, errs := mapcProcess(t, "", "compile", in, "--name-prefix", "team-a-")
	if code != 0 || !strings.Contains(out, "name: team-a-gatekeeper-pods\n") || !strings.Contains(out, "policyName: team-a-gatekeeper-pods\n") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := mapcProcess(t, "", "compile", in, "--name-prefix", "Team_A"); code != 2 || !strings.Contains(errs, "--name-prefix") {
		t.Errorf("bad prefix: exit %d %s", code, errs)
	}
}

func TestProcessAllowedRefusals(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign+"---\n"+badAssign)
	pod := writeFile(t, dir, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: a, image: nginx}]\n")
	allow := writeFile(t, dir, "allow.yaml", `apiVersion: mapc.dev/v1alpha1
kind: RefusalAllowList
refusals:
- mutator: Assign/broken
  reason: stays on Gatekeeper until its location is fixed
`)
	outDir := filepath.Join(dir, "policies")
	code, _, errs := mapcProcess(t, "", "compile", in, "--output-dir", outDir, "--allow-refusals", allow, "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "kept on Gatekeeper (allowed refusal): "+in+":18: Assign/broken: spec.location") || !strings.Contains(errs, "1 kept on Gatekeeper by the allow-list") {
		t.Errorf("the kept refusal is not listed:\n%s", errs)
	}
	if code, _, errs := mapcProcess(t, "", "compile", in, "--output-dir", outDir, "--allow-refusals", allow, "--check"); code != 0 {
		t.Errorf("--check: exit %d: %s", code, errs)
	}
	code, out, errs := mapcProcess(t, "", "verify", in, pod, "--allow-refusals", allow)
	if code != 0 || !strings.Contains(out, "PASS ") || !strings.Contains(out, "SKIP compile Assign/broken: ") || !strings.Contains(out, "3 passed, 0 failed, 1 skipped") {
		t.Errorf("verify: exit %d\n%s%s", code, out, errs)
	}
	// A stale entry (the mutator compiles, or is gone) fails the run, naming the list.
	stale := writeFile(t, dir, "stale.yaml", "apiVersion: mapc.dev/v1alpha1\nkind: RefusalAllowList\nrefusals:\n- {mutator: Assign/pull, reason: was refused once}\n- {mutator: Assign/gone, reason: deleted}\n")
	code, _, errs = mapcProcess(t, "", "compile", writeFile(t, dir, "good.yaml", goodAssign), "--allow-refusals", stale)
	if code != 1 || !strings.Contains(errs, "Assign/pull is listed as a refusal to allow, but it is compiled, not refused") || !strings.Contains(errs, "Assign/gone is listed as a refusal to allow, but it is not among the inputs") {
		t.Errorf("stale list: exit %d: %s", code, errs)
	}
	// The list is read strictly.
	for name, content := range map[string]string{
		"typo":          "apiVersion: mapc.dev/v1alpha1\nkind: RefusalAllowList\nrefusal:\n- {mutator: Assign/broken, reason: x}\n",
		"no reason":     "apiVersion: mapc.dev/v1alpha1\nkind: RefusalAllowList\nrefusals:\n- {mutator: Assign/broken}\n",
		"not Kind/name": "apiVersion: mapc.dev/v1alpha1\nkind: RefusalAllowList\nrefusals:\n- {mutator: broken, reason: x}\n",
	} {
		p := writeFile(t, dir, name+".yaml", content)
		if code, _, errs := mapcProcess(t, "", "compile", in, "--allow-refusals", p); code != 1 || !strings.Contains(errs, p) {
			t.Errorf("%s: exit %d: %s", name, code, errs)
		}
	}
}

func TestProcessTyposFail(t *testing.T) {
	dir := t.TempDir()
	pod := writeFile(t, dir, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers: [{name: a, image: nginx}]\n")
	for name, c := range map[string]struct{ doc, want string }{
		"misspelt field": {strings.Replace(goodAssign, "  location:", "  match: {excludeNamespaces: [kube-system]}\n  location:", 1),
			"Assign/pull: spec.match.excludeNamespaces: unknown field; did you mean excludedNamespaces?"},
		"bad enum": {strings.Replace(goodAssign, "      value: Always\n", "      value: Always\n    pathTests:\n    - {subPath: spec.containers, condition: MustExists}\n", 1),
			`did you mean "MustExist"?`},
		"misspelt kind":  {strings.Replace(goodAssign, "kind: Assign", "kind: Assing", 1), `has no kind "Assing"; did you mean Assign?`},
		"misspelt group": {strings.Replace(goodAssign, "mutations.gatekeeper.sh", "mutation.gatekeeper.sh", 1), "apiVersion: mutations.gatekeeper.sh/v1"},
	} {
		t.Run(name, func(t *testing.T) {
			in := writeFile(t, dir, strings.ReplaceAll(name, " ", "-")+".yaml", c.doc)
			code, out, errs := mapcProcess(t, "", "compile", in)
			if code != 1 || out != "" || !strings.Contains(errs, in+":") || !strings.Contains(errs, c.want) {
				t.Errorf("compile: exit %d, stdout %d bytes:\n%s", code, len(out), errs)
			}
			if code, _, errs := mapcProcess(t, "", "verify", in, pod); code != 1 || !strings.Contains(errs, c.want) {
				t.Errorf("verify: exit %d:\n%s", code, errs)
			}
		})
	}
}

func TestProcessSARIFReport(t *testing.T) {
	dir := t.TempDir()
	in := writeFile(t, dir, "m.yaml", goodAssign+"---\n"+badAssign)
	report := filepath.Join(dir, "mapc.sarif")
	if code, _, errs := mapcProcess(t, "", "compile", in, "--report", report, "--report-format", "sarif"); code != 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var log struct {
		Version string
		Runs    []struct {
			Tool    struct{ Driver struct{ Name string } }
			Results []struct {
				RuleID, Level string
				Message       struct{ Text string }
				Locations     []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           struct{ StartLine int }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(data, &log); err != nil {
		t.Fatal(err)
	}
	if log.Version != "2.1.0" || len(log.Runs) != 1 || log.Runs[0].Tool.Driver.Name != "mapc" || len(log.Runs[0].Results) != 1 {
		t.Fatalf("%s", data)
	}
	r := log.Runs[0].Results[0]
	if r.RuleID != "mapc/refused" || r.Level != "error" || !strings.HasPrefix(r.Message.Text, "Assign/broken: spec.location: ") ||
		len(r.Locations) != 1 || r.Locations[0].PhysicalLocation.ArtifactLocation.URI != filepath.ToSlash(in) || r.Locations[0].PhysicalLocation.Region.StartLine != 18 {
		t.Errorf("%+v", r)
	}
}
