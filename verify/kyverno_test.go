package verify

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
)

// kyvernoLabelPolicy is a ClusterPolicy labelling Pods team=<value>.
func kyvernoLabelPolicy(t *testing.T, value string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: label-team
spec:
  rules:
  - name: team
    match:
      any:
      - resources:
          kinds: [Pod]
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            team: `+value+`
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func kyvernoEngine(t *testing.T) string {
	t.Helper()
	p, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// kyvernoVerifier compiles the Kyverno policies among docs, which must give want policies, and
// returns a verifier of them against Kyverno's engine (opts.Reference set to it).
func kyvernoVerifier(t *testing.T, docs []*source.Document, want int, opts Options) *Verifier {
	t.Helper()
	out := compiler.Compile(docs, compiler.Options{})
	if len(out.Problems) > 0 || len(out.Policies) != want {
		t.Fatalf("compile: %d policies, %v", len(out.Policies), out.Problems)
	}
	var pols []*unstructured.Unstructured
	for _, d := range docs {
		if kyverno.IsPolicy(d.Object) {
			pols = append(pols, d.Object)
		}
	}
	ref, err := NewKyvernoReference(kyvernoEngine(t), pols, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts.Reference = ref
	v, err := New(nil, out.Policies, opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestKyvernoReference(t *testing.T) {
	engine := kyvernoEngine(t)
	tests := []struct {
		name       string
		value      string
		wantReport []string
	}{{
		name:       "agrees",
		value:      "payments",
		wantReport: []string{"PASS Pod/default/web (1 policy orders)"},
	}, {
		name:  "mutates differently",
		value: "platform",
		wantReport: []string{
			"FAIL Pod/default/web: the policies mutate the object differently from Kyverno",
			"  --- kyverno", "  +++ policies", "  -    team: platform", "  +    team: payments",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := NewKyvernoReference(engine, []*unstructured.Unstructured{kyvernoLabelPolicy(t, tc.value)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewSets(nil, labelTeamSets(t), Options{Reference: ref, Idempotence: true})
			if err != nil {
				t.Fatal(err)
			}
			r := v.Check(context.Background(), Case{Object: podIn(t, "default")})
			v.Close()
			if ref.cmd != nil {
				t.Error("the Verifier's Close did not stop Kyverno's engine")
			}
			rep := Report([]Result{r})
			wantPass := !strings.Contains(strings.Join(tc.wantReport, "\n"), "FAIL")
			if r.Pass != wantPass {
				t.Errorf("pass = %v, want %v:\n%s", r.Pass, wantPass, rep)
			}
			for _, l := range tc.wantReport {
				if !strings.Contains(rep, l) {
					t.Errorf("report lacks %q:\n%s", l, rep)
				}
			}
		})
	}
}

func TestKyvernoReferenceDenies(t *testing.T) {
	p := kyvernoLabelPolicy(t, `"{{ request.object.metadata.annotations.missing }}"`)
	ref, err := NewKyvernoReference(kyvernoEngine(t), []*unstructured.Unstructured{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	_, err = ref.Admit(context.Background(), RefRequest{Object: podIn(t, "default"), Operation: admissionv1.Create})
	if err == nil || !strings.Contains(err.Error(), `admission webhook "mutate.kyverno.svc-fail" denied the request`) {
		t.Fatalf("err = %v, want Kyverno's denial", err)
	}
}

func TestKyvernoReferenceBadPolicy(t *testing.T) {
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy",
		"metadata": map[string]any{"name": "x"}, "spec": map[string]any{"rulez": []any{}}}}
	_, err := NewKyvernoReference(kyvernoEngine(t), []*unstructured.Unstructured{bad}, nil)
	if err == nil || !strings.Contains(err.Error(), "Kyverno's engine: policies[0]: ClusterPolicy/x") {
		t.Fatalf("err = %v, want the engine's refusal", err)
	}
}

// withContext gives the policy's first rule an apiCall entry that reads the request's namespace.
func withContext(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	rules[0].(map[string]any)["context"] = []any{map[string]any{"name": "ns", "apiCall": map[string]any{
		"urlPath": "/api/v1/namespaces/{{request.namespace}}", "jmesPath": "metadata.labels"}}}
	if err := unstructured.SetNestedSlice(u.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	return u
}

// inForEach gives the policy's first rule a foreach entry with an apiCall context entry.
func inForEach(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	rules[0].(map[string]any)["mutate"] = map[string]any{"foreach": []any{map[string]any{
		"list":    "request.object.spec.containers",
		"context": []any{map[string]any{"name": "ns", "apiCall": map[string]any{"urlPath": "/api/v1/namespaces/{{request.namespace}}"}}},
	}}}
	if err := unstructured.SetNestedSlice(u.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestKyvernoNamespaceUses(t *testing.T) {
	policy := func(kind, namespace, resources string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		y := "apiVersion: kyverno.io/v1\nkind: " + kind + "\nmetadata:\n  name: p\n  namespace: " + namespace +
			"\nspec:\n  rules:\n  - name: r\n    match:\n      any:\n      - resources:\n" + resources +
			"    mutate:\n      patchStrategicMerge:\n        metadata:\n          labels:\n            a: b\n"
		if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	const envSelector = "          kinds: [Pod]\n          namespaceSelector:\n            matchLabels: {env: prod}\n"
	tests := []struct {
		name   string
		policy *unstructured.Unstructured
		obj    string // kind
		want   []string
	}{
		{"a selector on env", policy("ClusterPolicy", "", envSelector), "Pod", []string{"ClusterPolicy/p: spec.rules[0].match.any[0].resources.namespaceSelector on env"}},
		{"autogen extends it to Deployments", policy("ClusterPolicy", "", envSelector), "Deployment", []string{"ClusterPolicy/p: spec.rules[0].match.any[0].resources.namespaceSelector on env"}},
		{"another kind", policy("ClusterPolicy", "", strings.Replace(envSelector, "[Pod]", "[ConfigMap]", 1)), "Pod", nil},
		{"the name label only", policy("ClusterPolicy", "", strings.Replace(envSelector, "env: prod", "kubernetes.io/metadata.name: prod", 1)), "Pod", nil},
		{"a Policy of the object's namespace", policy("Policy", "default", envSelector), "Pod", []string{"Policy/p: spec.rules[0].match.any[0].resources.namespaceSelector on env"}},
		{"a Policy of another namespace", policy("Policy", "other", envSelector), "Pod", nil},
		{"no selector", policy("ClusterPolicy", "", "          kinds: [Pod]\n"), "Pod", nil},
		{"an apiCall reading the namespace", withContext(t, policy("ClusterPolicy", "", "          kinds: [Pod]\n")), "Pod", []string{"ClusterPolicy/p: spec.rules[0].context[0].apiCall reads the request's namespace"}},
		{"an apiCall in a rule for another kind", withContext(t, policy("ClusterPolicy", "", "          kinds: [ConfigMap]\n")), "Pod", nil},
		{"an apiCall of a foreach entry", inForEach(t, policy("ClusterPolicy", "", "          kinds: [Pod]\n")), "Pod", []string{"ClusterPolicy/p: spec.rules[0].mutate.foreach[0].context[0].apiCall reads the request's namespace"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := &KyvernoReference{policies: []*unstructured.Unstructured{tc.policy}}
			obj := &unstructured.Unstructured{}
			obj.SetKind(tc.obj)
			obj.SetNamespace("default")
			got, _ := k.NamespaceUses(obj, admissionv1.Create)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("uses = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKyvernoNamespaceNotGiven(t *testing.T) {
	// A policy whose namespaceSelector reads env makes a case in a namespace not given fail.
	p := kyvernoLabelPolicy(t, "payments")
	res, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	res[0].(map[string]any)["match"].(map[string]any)["any"].([]any)[0].(map[string]any)["resources"].(map[string]any)["namespaceSelector"] =
		map[string]any{"matchLabels": map[string]any{"env": "prod"}}
	_ = unstructured.SetNestedSlice(p.Object, res, "spec", "rules")
	ref, err := NewKyvernoReference(kyvernoEngine(t), []*unstructured.Unstructured{p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	given := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "prod"}}}
	v, err := NewSets(nil, labelTeamSets(t), Options{Reference: ref, Namespaces: []*corev1.Namespace{given}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if r := v.Check(context.Background(), Case{Object: podIn(t, "default")}); !r.Pass {
		t.Errorf("in the namespace given:\n%s", Report([]Result{r}))
	}
	r := v.Check(context.Background(), Case{Object: podIn(t, "prod")})
	if r.Pass || !strings.Contains(r.Reason, "namespace prod is not given, but its labels matter (ClusterPolicy/label-team: spec.rules[0].match.any[0].resources.namespaceSelector on env)") {
		t.Errorf("in a namespace not given:\n%s", Report([]Result{r}))
	}
}

func TestFindKyvernoEngine(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "kyverno-engine")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, flag, env, path string
		want, wantErr         string
	}{
		{name: "the flag", flag: prog, env: "/nowhere", want: prog},
		{name: "the environment", env: prog, want: prog},
		{name: "the flag names nothing", flag: filepath.Join(dir, "nope"), wantErr: "--kyverno-engine"},
		{name: "PATH", path: dir, want: prog},
		{name: "nowhere", path: t.TempDir(), wantErr: "build it with `make kyverno-engine`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(KyvernoEngineEnv, tc.env)
			t.Setenv("PATH", tc.path)
			got, err := FindKyvernoEngine(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, err %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, err %v; want %q", got, err, tc.want)
			}
		})
	}
}
