package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/internal/kyvernobin"
)

const legacyConfig = `apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata:
  name: config
  namespace: gatekeeper-system
spec:
  match:
  - excludedNamespaces: ["legacy-*"]
    processes: ["mutation-webhook"]
  - excludedNamespaces: ["audit-only"]
    processes: ["audit"]
`

const installObjects = `apiVersion: v1
kind: Namespace
metadata:
  name: quiet
  labels: {admission.gatekeeper.sh/ignore: "yes"}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: legacy-a}
spec:
  containers: [{name: c, image: nginx, imagePullPolicy: IfNotPresent}]
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: quiet}
spec:
  containers: [{name: c, image: nginx, imagePullPolicy: IfNotPresent}]
---
apiVersion: v1
kind: Pod
metadata: {name: c, namespace: audit-only}
spec:
  containers: [{name: c, image: nginx, imagePullPolicy: IfNotPresent}]
`

// TestInstallContext: a Config's mutation-webhook exclusions, --exclude-namespaces and the
// admission.gatekeeper.sh/ignore label become exclusions of every policy, and verify's
// reference engine honours the same installation.
func TestInstallContext(t *testing.T) {
	dir := t.TempDir()
	muts := writeFile(t, dir, "m.yaml", goodAssign)
	cfg := writeFile(t, dir, "config.yaml", legacyConfig)
	objs := writeFile(t, dir, "objects.yaml", installObjects)

	for _, layout := range []string{"fused", "per-mutator"} {
		code, out, errs := runCLI(t, "", "compile", "-f", muts, "-f", cfg, "--exclude-namespaces", "team-x", "--layout", layout)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", layout, code, errs)
		}
		for _, want := range []string{"name: gatekeeper-excluded-namespaces", `startsWith("legacy-")`, `"team-x"`, "key: admission.gatekeeper.sh/ignore", "operator: DoesNotExist"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", layout, want, out)
			}
		}
		if strings.Contains(out, "audit-only") {
			t.Errorf("%s: an exclusion for the audit process leaked into the policies:\n%s", layout, out)
		}
	}

	// Gatekeeper skips legacy-a (Config) and quiet (label), mutates audit-only; so do the policies.
	code, out, errs := runCLI(t, "", "verify", "-f", muts, "-f", cfg, "-f", objs)
	if code != 0 {
		t.Fatalf("verify: exit %d:\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "10 passed, 0 failed") { // 3 Pods also on kubectl debug's request and bound
		t.Errorf("verify:\n%s", out)
	}

	// Policies compiled without the Config mutate in legacy-a, where Gatekeeper does not.
	_, plain, _ := runCLI(t, "", "compile", "-f", muts)
	pols := writeFile(t, dir, "plain.yaml", plain)
	code, out, _ = runCLI(t, "", "verify", "-f", muts, "-f", cfg, "-f", objs, "--policies", pols)
	if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "legacy-a") {
		t.Errorf("verify of policies without the exclusion: exit %d, want 1 and a failure for legacy-a:\n%s", code, out)
	}

	// --mutate-ignored-namespaces: both sides mutate in quiet too.
	code, out, errs = runCLI(t, "", "compile", "-f", muts, "--mutate-ignored-namespaces")
	if code != 0 || strings.Contains(out, "admission.gatekeeper.sh/ignore") {
		t.Errorf("--mutate-ignored-namespaces: exit %d, output still excludes the label:\n%s%s", code, out, errs)
	}
	everywhere := writeFile(t, dir, "everywhere.yaml", out)
	code, out, errs = runCLI(t, "", "verify", "-f", muts, "-f", objs, "--mutate-ignored-namespaces")
	if code != 0 {
		t.Errorf("verify --mutate-ignored-namespaces: exit %d:\n%s\n%s", code, out, errs)
	}
	// ... and Gatekeeper as installed does not mutate in quiet, so those policies fail there.
	code, out, _ = runCLI(t, "", "verify", "-f", muts, "-f", objs, "--policies", everywhere)
	if code != 1 || !strings.Contains(out, "FAIL Pod/quiet/b") {
		t.Errorf("verify of policies that mutate in ignored namespaces: exit %d, want 1 and a failure for quiet:\n%s", code, out)
	}

	code, _, errs = runCLI(t, "", "compile", "-f", muts, "--exclude-namespaces", "Bad_Name")
	if code != 2 || !strings.Contains(errs, "Bad_Name") {
		t.Errorf("a bad --exclude-namespaces: exit %d, want 2 naming it: %s", code, errs)
	}
}

func TestExplainShowsCouplingsAndInstallation(t *testing.T) {
	code, out, errs := runCLI(t, "", "explain", "-f", "../../testdata/golden/gatekeeper/defaulting-couplings/mutators.yaml", "--exclude-namespaces", "kube-*", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{`"computedTogether": [`, `"Assign/init-cpu-limit + Assign/init-cpu-request"`, `"skipsIgnoredNamespaces": true`, `"kube-*"`} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %s:\n%s", want, out)
		}
	}
}

// TestReinvocationIfNeeded: policies compiled with IfNeeded are re-run by the API server when a
// later policy changed the object, and still give Gatekeeper's result (they are idempotent).
func TestReinvocationIfNeeded(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "", "compile", "-f", "../../examples/gatekeeper", "--layout", "per-mutator", "--reinvocation-policy", "IfNeeded")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if n := strings.Count(out, "reinvocationPolicy: IfNeeded"); n < 2 || strings.Contains(out, "reinvocationPolicy: Never") {
		t.Fatalf("want every policy IfNeeded, got %d:\n%s", n, out)
	}
	pols := writeFile(t, dir, "policies.yaml", out)
	code, out, errs = runCLI(t, "", "verify", "-f", "../../examples/gatekeeper", "-f", "../../examples/objects", "--policies", pols)
	if code != 0 {
		t.Errorf("verify of IfNeeded policies: exit %d:\n%s\n%s", code, out, errs)
	}
	if code, _, errs = runCLI(t, "", "compile", "-f", "../../examples/gatekeeper", "--reinvocation-policy", "Always"); code != 2 || !strings.Contains(errs, "IfNeeded") {
		t.Errorf("a bad --reinvocation-policy: exit %d: %s", code, errs)
	}
}

// TestExplainCELCost: with objects among -f, explain admits them through the API server's MAP
// code and reports the largest CEL cost of each expression against the API server's limits, and
// the most JSONPatch operations each mutation gave an object.
func TestExplainCELCost(t *testing.T) {
	mutators, objects := "../../testdata/bench/realistic-20/mutators.yaml", "../../testdata/bench/objects"
	code, out, errs := runCLI(t, "", "explain", "-f", mutators, "-f", objects, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		CELCost []struct {
			Policy, Expression, PatchType, Object, OperationsObject string
			MaxCost, Limit                                          int64
			MaxOperations                                           int
		} `json:"celCost"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	// The AssignMetadata groups also run in the pods policy (one mutation per Pod).
	if !strings.Contains(out, `"alsoIn": [`) || !strings.Contains(out, `"gatekeeper-pods"`) {
		t.Errorf("explain does not say that the groups for every kind also run in gatekeeper-pods:\n%s", out)
	}
	found := false
	for _, c := range doc.CELCost {
		if c.Policy == "gatekeeper-pods" && c.Expression == "mutations[0]" {
			found = true
			// The 10-container Pod is the costliest; its cost is in the thousands (bench/README.md).
			if c.PatchType != "JSONPatch" || c.Limit != 1000000 || c.MaxCost < 1000 || c.MaxCost > 100000 || !strings.HasPrefix(c.Object, "Pod/shop/checkout") {
				t.Errorf("unexpected cost entry %+v", c)
			}
			// Its mutation writes a dozen fields in most of its containers (73 operations).
			if c.MaxOperations < 20 || c.MaxOperations > 200 || !strings.HasPrefix(c.OperationsObject, "Pod/shop/checkout") {
				t.Errorf("unexpected operations of %+v", c)
			}
		}
	}
	if !found {
		t.Fatalf("no cost for gatekeeper-pods mutations[0]:\n%s", out)
	}
	if code, out, _ = runCLI(t, "", "explain", "-f", mutators, "-f", objects); code != 0 || !strings.Contains(out, "CEL cost on the objects given") || !strings.Contains(out, "JSONPatch operations, on Pod/shop/checkout") {
		t.Errorf("text output: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI(t, "", "explain", "-f", mutators, "--output", "json"); code != 0 || strings.Contains(out, "celCost") {
		t.Errorf("no objects, no cost: exit %d\n%s", code, out)
	}
}

// TestExplainMutations: explain lists what each mutation of a fused policy computes and why it
// could not join the mutation before; steps that commute were moved together.
func TestExplainMutations(t *testing.T) {
	mutators := "../../testdata/golden/gatekeeper/fused-reordered-chains/mutators.yaml"
	var doc struct {
		Policies []struct {
			Policy    string
			Mutations []struct {
				PatchType  string
				Steps      []struct{ Mutator string }
				After, Why string
			}
		}
	}
	out := runExplainJSON(t, mutators, &doc)
	if len(doc.Policies) != 1 || len(doc.Policies[0].Mutations) != 2 {
		t.Fatalf("want one policy with two mutations:\n%s", out)
	}
	ms := doc.Policies[0].Mutations
	var first, second []string
	for _, s := range ms[0].Steps {
		first = append(first, s.Mutator)
	}
	for _, s := range ms[1].Steps {
		second = append(second, s.Mutator)
	}
	if strings.Join(first, ",") != "Assign/a-sidecar,Assign/c-init" || strings.Join(second, ",") != "Assign/b-ns-env,Assign/d-init-ns-env" {
		t.Errorf("mutations compute %v then %v", first, second)
	}
	if ms[0].After != "" || ms[1].After != "Assign/a-sidecar (round 1)" || !strings.Contains(ms[1].Why, "spec.containers") {
		t.Errorf("reasons: %+v", ms)
	}
	code, text, errs := runCLI(t, "", "explain", "-f", mutators)
	if code != 0 || !strings.Contains(text, "mutations[1] (JSONPatch): Assign/b-ns-env, Assign/d-init-ns-env") || !strings.Contains(text, "not in the mutation before (which runs Assign/a-sidecar (round 1))") {
		t.Errorf("text explain (exit %d, %s):\n%s", code, errs, text)
	}
}

// TestExplainCompletions: explain names the new elements written already as the mutators
// sorted before their creator change them in Gatekeeper's next pass.
func TestExplainCompletions(t *testing.T) {
	mutators := "../../testdata/golden/gatekeeper/completed-new-elements/mutators.yaml"
	var doc struct {
		Groups []struct{ CompletedElements []string }
	}
	runExplainJSON(t, mutators, &doc)
	var all []string
	for _, g := range doc.Groups {
		all = append(all, g.CompletedElements...)
	}
	got := strings.Join(all, "\n")
	for _, want := range []string{
		`Assign/c-debug-image writes spec.containers[name: debug] already as Assign/a-pull-always changes it in Gatekeeper's next pass`,
		`Assign/c-debug-image writes spec.containers[name: debug] already as Assign/b-debug-unprivileged changes it in Gatekeeper's next pass where its match holds`,
		`AssignImage/d-proxy-image writes spec.containers[name: proxy] already as Assign/e-all-tty changes it in Gatekeeper's next pass`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestExplainLaterCompletionsAndForwarded: on the docs examples, explain names the element a
// whole-element Assign writes with what a later mutator sets in it in the same pass, and the
// mutator computed with a later one's constant.
func TestExplainLaterCompletionsAndForwarded(t *testing.T) {
	var doc struct {
		Groups    []struct{ CompletedElements []string }
		Forwarded []struct{ Mutator, Because string }
	}
	runExplainJSON(t, "../../examples/gatekeeper", &doc)
	var all []string
	for _, g := range doc.Groups {
		all = append(all, g.CompletedElements...)
	}
	want := `Assign/intent-networking writes spec.containers[name: networking] already as AssignImage/assign-container-image changes it later in the same pass where its match holds`
	if !strings.Contains(strings.Join(all, "\n"), want) {
		t.Errorf("missing %q in:\n%s", want, strings.Join(all, "\n"))
	}
	found := false
	for _, f := range doc.Forwarded {
		if f.Mutator == "AssignImage/add-nginx-digest" && strings.Contains(f.Because, "AssignImage/assign-container-image, sorted after it, always writes") {
			found = true
		}
	}
	if !found {
		t.Errorf("add-nginx-digest should be computed with assign-container-image's constant: %+v", doc.Forwarded)
	}
}

// runExplainJSON runs explain --output json on mutators, decodes its output into doc and returns it.
func runExplainJSON(t *testing.T, mutators string, doc any) string {
	t.Helper()
	code, out, errs := runCLI(t, "", "explain", "-f", mutators, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), doc); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExplainRedundant: explain lists the mutators the fused layout emits nothing for, with the
// mutator that makes each moot; compile says so on stderr; the per-mutator layout keeps them.
func TestExplainRedundant(t *testing.T) {
	mutators := "../../testdata/golden/gatekeeper/interaction-same-value-if-missing/mutators.yaml"
	var doc struct {
		Redundant []struct{ Mutator, Because string }
	}
	runExplainJSON(t, mutators, &doc)
	var got []string
	for _, r := range doc.Redundant {
		got = append(got, r.Mutator+": "+r.Because)
	}
	want := []string{
		"AssignMetadata/owner-web: AssignMetadata/owner-all, sorted before it, writes metadata.annotations.owner wherever it could, and it only adds a value there where none is",
		"AssignMetadata/team-config: AssignMetadata/team-any, sorted before it, writes metadata.labels.team wherever it could, and it only adds a value there where none is",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("redundant:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	code, out, errs := runCLI(t, "", "compile", "-f", mutators)
	if code != 0 || !strings.Contains(errs, "AssignMetadata/owner-web: no mutation emitted: it never changes an object in Gatekeeper's run") {
		t.Errorf("compile: exit %d, stderr:\n%s", code, errs)
	}
	if strings.Contains(out, "name=owner-web") {
		t.Errorf("the fused policies should not name owner-web")
	}
	code, out, errs = runCLI(t, "", "compile", "--layout", "per-mutator", "-f", mutators)
	if code != 0 || strings.Contains(errs, "no mutation emitted") || !strings.Contains(out, "name=owner-web") {
		t.Errorf("per-mutator: exit %d, owner-web kept: %v, stderr:\n%s", code, strings.Contains(out, "name=owner-web"), errs)
	}
}

// TestExplainCreatedOnly: explain lists the mutators computed only where they create their
// list element, with the reason, and the emitted policies no longer write intent-image-pull-policy's
// field in an existing container foo (always-pull-image has set it there).
func TestExplainCreatedOnly(t *testing.T) {
	var doc struct {
		CreatedOnly []struct{ Mutator, Because string }
	}
	runExplainJSON(t, "../../examples/gatekeeper", &doc)
	got := map[string]string{}
	for _, c := range doc.CreatedOnly {
		got[c.Mutator] = c.Because
	}
	want := map[string]string{
		"Assign/intent-image-pull-policy": "Assign/always-pull-image, sorted before it, has set the same value there",
		"AssignImage/add-nginx-digest":    "AssignImage/assign-container-image, sorted after it, always replaces",
	}
	for m, why := range want {
		if !strings.Contains(got[m], why) {
			t.Errorf("%s: want a reason with %q, got %q", m, why, got[m])
		}
	}
	code, out, errs := runCLI(t, "", "compile", "-f", "../../examples/gatekeeper")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Only always-pull-image's glob writes a pull policy in an existing container (before:
	// intent-image-pull-policy's write in container foo too); new containers get it in their
	// literal.
	if n := strings.Count(out, `/imagePullPolicy"`); n != 1 {
		t.Errorf("%d operations write a pull policy into an existing container, want 1 (always-pull-image's)", n)
	}
}

// TestExplainLeavesOut: the docs examples' Pod goes through one mutation, whose prune
// (remove-err-logging) leaves out the container intent-networking replaces; explain says so.
func TestExplainLeavesOut(t *testing.T) {
	var doc struct {
		Policies []struct {
			Policy    string
			Mutations []struct {
				Steps     []struct{ Mutator string }
				LeavesOut []string
			}
		}
	}
	runExplainJSON(t, "../../examples/gatekeeper", &doc)
	for _, p := range doc.Policies {
		if p.Policy != "gatekeeper-pods" {
			continue
		}
		if len(p.Mutations) != 1 {
			t.Fatalf("gatekeeper-pods has %d mutations, want 1", len(p.Mutations))
		}
		m := p.Mutations[0]
		want := "ModifySet/remove-err-logging leaves out the element spec.containers[name: networking] that Assign/intent-networking replaces"
		if len(m.LeavesOut) != 1 || !strings.HasPrefix(m.LeavesOut[0], want) {
			t.Errorf("leavesOut %q, want one starting %q", m.LeavesOut, want)
		}
		return
	}
	t.Fatal("no policy gatekeeper-pods")
}

// TestExplainKyverno: explain names each Kyverno policy's mutations by rule and says why each is
// a JSONPatch, and claims no Gatekeeper installation for Kyverno policies.
func TestExplainKyverno(t *testing.T) {
	code, out, errs := runCLI(t, "", "explain", "-f", "../../examples/kyverno/policies")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"kyverno-clusterpolicy-container-defaults: 1 mutation(s)",
		"mutations[0] (JSONPatch): ClusterPolicy/container-defaults rules per-container, autogen-per-container, autogen-cronjob-per-container\n",
		"a JSONPatch for foreach: ",
		"mutations[0] (JSONPatch): ClusterPolicy/shop-config rule add-entries\n",
		"a JSONPatch for patchStrategicMerge as Kyverno's merge gives it",
		"a JSONPatch for patchesJson6902: ",
		"mutations[0] (JSONPatch): ClusterPolicy/add-labels rules team-label, autogen-team-label, autogen-cronjob-team-label\n",
		"one item per key left in every keyed list of the object",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "installation:") {
		t.Errorf("explain claims a Gatekeeper installation for Kyverno policies:\n%s", out)
	}
	code, out, _ = runCLI(t, "", "explain", "-f", "../../examples/kyverno/policies", "-o", "json")
	if code != 0 || !strings.Contains(out, `"rule": "per-container"`) || !strings.Contains(out, `"skipsIgnoredNamespaces": false`) {
		t.Errorf("explain json: exit %d\n%s", code, out)
	}
}

// TestExcludeNamespacesRefusedForKyverno: Gatekeeper's exempt namespaces, ignore label and
// webhook subresources do not apply to Kyverno policies; given with them, compile says so and
// fails rather than ignore the flag.
func TestExcludeNamespacesRefusedForKyverno(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "", "compile", "-f", "../../examples/kyverno/policies", "--exclude-namespaces", "kube-*", "--output-dir", dir+"/out")
	if code != 1 || !strings.Contains(errs, "--exclude-namespaces kube-*: it names the namespaces Gatekeeper's webhook is exempted from") || !strings.Contains(errs, "--kyverno-config") {
		t.Errorf("exit %d, want 1 and the flag named:\nstdout: %s\nstderr: %s", code, out, errs)
	}
	for _, flag := range []string{"--mutate-ignored-namespaces", "--webhook-subresources=false"} {
		code, out, errs := runCLI(t, "", "compile", "-f", "../../examples/kyverno/policies", flag, "--output-dir", dir+"/out")
		if code != 1 || !strings.Contains(errs, flag+": it is about") {
			t.Errorf("%s: exit %d, want 1 and the flag named:\nstdout: %s\nstderr: %s", flag, code, out, errs)
		}
	}
	if _, err := os.Stat(dir + "/out"); !os.IsNotExist(err) {
		t.Errorf("output directory written despite the refusal (%v)", err)
	}
	if code, _, errs := runCLI(t, "", "compile", "-f", "../../examples/gatekeeper", "--exclude-namespaces", "kube-*"); code != 0 {
		t.Errorf("Gatekeeper mutators with --exclude-namespaces: exit %d: %s", code, errs)
	}
}

// TestKyvernoConfig: --kyverno-config makes compile add Kyverno's resource filters and excluded
// users as match conditions and its webhook selectors to the bindings, and verify run Kyverno's
// engine with the same ConfigMap; a ConfigMap that cannot be honoured refuses the policies.
func TestKyvernoConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "kyverno.yaml", `apiVersion: v1
kind: ConfigMap
metadata:
  name: kyverno
  namespace: kyverno
data:
  resourceFilters: '[*/*,kube-system,*][Event,*,*]'
  excludeUsernames: 'system:serviceaccount:ci:*'
  webhooks: '{"objectSelector":{"matchExpressions":[{"key":"mutate","operator":"NotIn","values":["off"]}]}}'
`)
	code, out, errs := runCLI(t, "", "compile", "-f", "../../examples/kyverno/policies/add-labels.yaml", "--kyverno-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"name: kyverno-resource-filters", `request.namespace : "") == "kube-system"`, "name: kyverno-excluded-users",
		"objectSelector:", "key: mutate"} {
		if !strings.Contains(out, want) {
			t.Errorf("compile output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Event") {
		t.Errorf("the Event filter is kept for a policy without Event rules:\n%s", out)
	}
	// explain says what the configuration adds, a line for each part it has.
	code, out, errs = runCLI(t, "", "explain", "-f", "../../examples/kyverno/policies/add-labels.yaml", "--kyverno-config", cfg)
	if code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errs)
	}
	for _, want := range []string{"installation: Kyverno's ConfigMap kyverno/kyverno: resourceFilters are the match condition kyverno-resource-filters",
		"installation: Kyverno's ConfigMap kyverno/kyverno: excludeUsernames and excludeGroups are the match condition kyverno-excluded-users",
		"installation: Kyverno's ConfigMap kyverno/kyverno: the webhooks' objectSelector is every binding's"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "namespaceSelector") || strings.Contains(out, "matchConditions") {
		t.Errorf("explain names parts the configuration does not have:\n%s", out)
	}
	objs := writeFile(t, dir, "objects.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: dns
  namespace: kube-system
spec:
  containers:
  - name: app
    image: coredns
---
apiVersion: v1
kind: Pod
metadata:
  name: quiet
  namespace: default
  labels:
    mutate: "off"
spec:
  containers:
  - name: app
    image: nginx
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: app
    image: nginx
`)
	engine, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "", "verify", "-f", "../../examples/kyverno/policies/add-labels.yaml", "-f", objs, "--kyverno-config", cfg, "--kyverno-engine", engine)
	if code != 0 || !strings.Contains(out, "12 passed, 0 failed") { // 3 Pods: created, updated, debugged, updated as created
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	bad := writeFile(t, dir, "bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kyverno\ndata:\n  excludeClusterRoles: cluster-admin\n")
	code, out, errs = runCLI(t, "", "compile", "-f", "../../examples/kyverno/policies/add-labels.yaml", "--kyverno-config", bad, "--skip-unsupported")
	if code != 1 || !strings.Contains(errs, "bad.yaml:6: ConfigMap/kyverno: data.excludeClusterRoles:") || strings.Contains(out, "MutatingAdmissionPolicy") {
		t.Errorf("a ConfigMap that cannot be honoured: exit %d\n%s%s", code, out, errs)
	}
	ns := writeFile(t, dir, "ns.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kyverno\ndata:\n  matchConditions: '[{\"name\":\"team\",\"expression\":\"namespaceObject.metadata.name == \\\"team\\\"\"}]'\n")
	code, _, errs = runCLI(t, "", "compile", "-f", "../../examples/kyverno/policies/add-labels.yaml", "--kyverno-config", ns)
	if code != 1 || !strings.Contains(errs, "ns.yaml:6: ConfigMap/kyverno: data.matchConditions: [0] (team): ") || !strings.Contains(errs, "reads namespaceObject") {
		t.Errorf("a webhook match condition reading namespaceObject: exit %d\n%s", code, errs)
	}
	// A policy with conditions of its own whose every request the configuration skips.
	own := writeFile(t, dir, "own.yaml", `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: own
spec:
  webhookConfiguration:
    matchConditions:
    - name: any
      expression: "true"
  rules:
  - name: label
    match:
      any:
      - resources:
          kinds: [ConfigMap]
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            a: b
`)
	all := writeFile(t, dir, "all.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kyverno\ndata:\n  resourceFilters: '[ConfigMap,*,*]'\n")
	report := dir + "/report.json"
	code, _, errs = runCLI(t, "", "compile", "-f", own, "--kyverno-config", all, "--report", report)
	data, err := os.ReadFile(report)
	if code != 0 || err != nil || !strings.Contains(string(data), "Kyverno's configuration (its resource filters or excluded users) skips every request its rules match") {
		t.Errorf("a policy the configuration skips entirely: exit %d, report %s (%v)\n%s", code, data, err, errs)
	}
}

// TestWebhookSubresources: Gatekeeper's Helm chart installs its webhook for subresources
// (kubectl debug's, a Pod's binding, a Service's status), its static manifest for resources
// only; --webhook-subresources=false compiles and verifies for the latter.
func TestWebhookSubresources(t *testing.T) {
	dir := t.TempDir()
	golden := "../../testdata/golden/gatekeeper/pods-binding/"
	subs := []string{"pods/ephemeralcontainers", "pods/binding", "services/status"}
	_, chart, _ := runCLI(t, "", "compile", "-f", golden+"mutators.yaml")
	code, static, errs := runCLI(t, "", "compile", "-f", golden+"mutators.yaml", "--webhook-subresources=false")
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, errs)
	}
	for _, s := range subs {
		if !strings.Contains(chart, "- "+s) {
			t.Errorf("the chart's policies lack %s:\n%s", s, chart)
		}
		if strings.Contains(static, s) {
			t.Errorf("the static manifest's policies match %s:\n%s", s, static)
		}
	}
	// Each is right for its installation: Gatekeeper mutates the Bindings, or is not called.
	args := []string{"verify", "-f", golden + "mutators.yaml", "-f", golden + "objects.yaml"}
	for _, tc := range []struct {
		name  string
		extra []string
		code  int
		want  string
	}{
		{"chart", nil, 0, "6 passed, 0 failed"},
		{"static manifest", []string{"--webhook-subresources=false"}, 0, "6 passed, 0 failed"},
		{"the chart's policies for the static manifest", []string{"--webhook-subresources=false", "--policies", writeFile(t, dir, "chart.yaml", chart)}, 1,
			"FAIL CREATE pods/binding Pod/default/owned: the policies mutate the object differently from Gatekeeper"},
		{"the static manifest's policies for the chart", []string{"--policies", writeFile(t, dir, "static.yaml", static)}, 1,
			"FAIL CREATE pods/binding Pod/default/owned: the policies mutate the object differently from Gatekeeper"},
	} {
		code, out, errs := runCLI(t, "", append(append([]string(nil), args...), tc.extra...)...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want %d and %q:\n%s\n%s", tc.name, code, tc.code, tc.want, out, errs)
		}
	}
}
