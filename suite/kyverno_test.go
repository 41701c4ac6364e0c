package suite

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const kyvernoPolicies = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: first}
spec:
  rules:
  - name: tier
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge:
        metadata: {labels: {tier: web}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: two}
spec:
  rules:
  - name: owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge:
        metadata: {labels: {owner: team}}
  - name: special
    match: {any: [{resources: {kinds: [Pod], namespaces: [special]}}]}
    mutate:
      patchStrategicMerge:
        metadata: {annotations: {special: "yes"}}
  - name: check
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: named
      pattern: {metadata: {name: "?*"}}
---
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: local, namespace: special}
spec:
  rules:
  - name: seen
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge:
        metadata: {annotations: {seen: "yes"}}
`

const kyvernoResources = `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: q, namespace: special}
spec:
  containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: default}
data: {a: b}
`

// The patched resources as kyverno test reports them: each policy's result carries the changes
// of the policies before it (first, two, local). A ConfigMap's empty annotations and a Pod's
// null fields are tidied away, as kyverno test tidies both sides.
const kyvernoPatched = `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {tier: web}, annotations: {}}
spec:
  containers: [{name: c, image: nginx, args: null}]
---
apiVersion: v1
kind: Pod
metadata: {name: q, namespace: special, labels: {tier: web, owner: team}, annotations: {special: "yes"}}
spec:
  containers: [{name: c, image: nginx}]
`

const kyvernoPatchedLocal = `apiVersion: v1
kind: Pod
metadata: {name: q, namespace: special, labels: {tier: web, owner: team}, annotations: {special: "yes", seen: "yes"}}
spec:
  containers: [{name: c, image: nginx}]
`

const kyvernoWrong = `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, labels: {tier: db}}
spec:
  containers: [{name: c, image: nginx}]
`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Results for Kyverno policies run through the compiled policies, judged as kyverno test judges
// them, or skipped when the object cannot tell.
func TestKyvernoResults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result string
		want   string // the line of the case's outcome
	}{
		{"a patched resource", "policy: first\n  kind: Pod\n  resources: [p]\n  patchedResources: patched.yaml\n  result: pass",
			"PASS first: Pod p - PASS (1 policy order)"},
		{"on UPDATE", "policy: first\n  kind: Pod\n  resources: [default/p]\n  operation: UPDATE\n  patchedResources: patched.yaml\n  result: pass",
			"PASS first: Pod default/p - PASS (1 policy order)"},
		{"a wrong patched resource", "policy: first\n  kind: Pod\n  resources: [p]\n  patchedResources: wrong.yaml\n  result: pass",
			"FAIL first: Pod p - PASS: the compiled policy's result differs from the patched resource (nulls, empty maps and lists aside, as kyverno test compares)"},
		{"skip, but the policy changes the object", "policy: first\n  kind: Pod\n  resources: [p]\n  result: skip",
			"FAIL first: Pod p - SKIP: the compiled policy changes the object: Kyverno's result skip (first changes nothing) was expected"},
		{"skip, and the policy does not match", "policy: first\n  kind: ConfigMap\n  resources: [c]\n  result: skip",
			"PASS first: ConfigMap c - SKIP (1 policy order)"},
		{"pass, but the object is unchanged", "policy: first\n  kind: ConfigMap\n  resources: [c]\n  result: pass",
			"SKIP first: ConfigMap c - PASS: the compiled policy leaves the object unchanged: Kyverno reports a matching rule that changes nothing as skip"},
		{"error, but admitted", "policy: first\n  kind: Pod\n  resources: [p]\n  result: error",
			"FAIL first: Pod p - ERROR: admitted, but Kyverno's result error was expected"},
		{"the policies before it apply first", "policy: two\n  rule: owner\n  kind: Pod\n  resources: [q]\n  patchedResources: patched.yaml\n  result: pass",
			"PASS two/owner: Pod q - PASS (1 policy order)"},
		{"a namespaced Policy", "policy: special/local\n  kind: Pod\n  resources: [q]\n  patchedResources: local.yaml\n  result: pass",
			"PASS special/local: Pod q - PASS (1 policy order)"},
		{"one rule of several, without patched resource", "policy: two\n  rule: owner\n  kind: Pod\n  resources: [q]\n  result: pass",
			"SKIP two/owner: Pod q - PASS: the compiled policy changes the object, but two has 2 mutate rules and, without patchedResources, the object does not tell whether rule owner changed it"},
		{"skip for one rule of several", "policy: two\n  rule: special\n  kind: Pod\n  resources: [p]\n  result: skip",
			"SKIP two/special: Pod p - SKIP: the compiled policy changes the object, but two has 2 mutate rules and the object does not tell whether rule special of two changed nothing"},
		{"a validate rule", "policy: two\n  rule: check\n  kind: Pod\n  resources: [p]\n  result: pass",
			"SKIP two/check: Pod p - PASS: rule check of two is not a mutate rule: mapc compiles only mutate rules"},
		{"no such rule", "policy: two\n  rule: nope\n  kind: Pod\n  resources: [p]\n  result: pass",
			"SKIP two/nope: Pod p - PASS: two has no rule nope (kyverno test passes such a result as excluded)"},
		{"a policy with a validate rule", "policy: two\n  kind: Pod\n  resources: [p]\n  result: pass",
			"SKIP two: Pod p - PASS: two also has rules that are not mutate rules (check)"},
		{"a resource not in the patched resources", "policy: first\n  kind: ConfigMap\n  resources: [c]\n  patchedResources: patched.yaml\n  result: skip",
			"SKIP first: ConfigMap c - SKIP: patched.yaml has no v1 ConfigMap/default/c: kyverno test skips the result"},
		{"DELETE", "policy: first\n  kind: Pod\n  resources: [p]\n  operation: DELETE\n  result: skip",
			"SKIP first: Pod p - SKIP: operation DELETE: MutatingAdmissionPolicies do not run on DELETE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"policies.yaml": kyvernoPolicies, "resources.yaml": kyvernoResources,
				"patched.yaml": kyvernoPatched, "local.yaml": kyvernoPatchedLocal, "wrong.yaml": kyvernoWrong,
				"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: t}\npolicies: [policies.yaml]\nresources: [resources.yaml]\nresults:\n- " + tc.result + "\n",
			})
			s, err := Load(filepath.Join(dir, "kyverno-test.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			o := Run(context.Background(), s)
			var b strings.Builder
			WriteText(&b, o)
			if !strings.Contains(b.String(), "\n"+tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
}

// What kyverno test gives a Kyverno policy that mapc cannot give a compiled policy is refused.
func TestKyvernoRefused(t *testing.T) {
	refused := `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: one}
spec:
  applyRules: One
  rules:
  - name: tier
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {tier: web}}}}
`
	result := "results:\n- policy: first\n  kind: Pod\n  resources: [p]\n  result: skip\n"
	for _, tc := range []struct {
		name, extra, values string
		load, run           string // the error loading, or the suite's error running
	}{
		{"a refused policy", "policies: [refused.yaml]\n", "", "", "refused.yaml:5: ClusterPolicy/one: spec.applyRules: One (stop after the first rule that applied) is not supported"},
		{"values of variables", "variables: values.yaml\n", "globalValues: {request.name: x}\npolicies:\n- name: first\n  rules: [{name: tier, values: {a: b}}]\n",
			"kyverno-test.yaml:6: variables: values.yaml: globalValues.request.name; values for policy first, rule tier: mapc runs the policies compiled from the Kyverno policies", ""},
		{"CONNECT", "variables: values.yaml\n", "globalValues: {request.operation: CONNECT}\n", "variables: values.yaml: globalValues: request.operation CONNECT", ""},
		{"userinfo", "userinfo: user.yaml\n", "", "userinfo: the Kyverno policies would see this user's name", ""},
		{"exceptions", "exceptions: [x.yaml]\n", "", "exceptions: PolicyExceptions change what Kyverno's policies do", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policies := "policies: [policies.yaml]\n"
			if strings.HasPrefix(tc.extra, "policies:") {
				policies, tc.extra = "policies: [policies.yaml, refused.yaml]\n", ""
			}
			dir := writeFiles(t, map[string]string{
				"policies.yaml": kyvernoPolicies, "resources.yaml": kyvernoResources, "refused.yaml": refused, "values.yaml": tc.values,
				"kyverno-test.yaml": "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: t}\n" + policies + "resources: [resources.yaml]\n" + tc.extra + result,
			})
			s, err := Load(filepath.Join(dir, "kyverno-test.yaml"))
			if tc.load != "" {
				if err == nil || !strings.Contains(err.Error(), tc.load) {
					t.Fatalf("Load: %v, want an error containing %q", err, tc.load)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o := Run(context.Background(), s)
			if o.Err == nil || !strings.Contains(o.Err.Error(), tc.run) || o.Failed() != 1 {
				t.Errorf("Run: %v, want an error containing %q", o.Err, tc.run)
			}
		})
	}
}

func TestTidy(t *testing.T) {
	in := map[string]any{"a": nil, "b": map[string]any{}, "c": []any{}, "d": []any{map[string]any{"x": nil}, "y", nil},
		"e": map[string]any{"f": map[string]any{"g": []any{}}}, "h": "", "i": 0.0, "j": false}
	want := map[string]any{"d": []any{"y"}, "h": "", "i": 0.0, "j": false}
	if got := tidy(in); !reflect.DeepEqual(got, want) {
		t.Errorf("tidy = %v, want %v", got, want)
	}
}
