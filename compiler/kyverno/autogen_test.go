package kyverno

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/internal/kyschema"
)

// TestComputeRules runs autogen on each policy testdata/autogen/<case>.yaml and compares the
// rules with <case>.rules.yaml, which is Kyverno v1.19.1's output for the same policy:
// autogen.Default.ComputeRules(policy, "") marshalled to JSON, run outside this module (Kyverno's
// engine does not build against its k8s.io versions).
func TestComputeRules(t *testing.T) {
	inputs, err := filepath.Glob("testdata/autogen/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, in := range inputs {
		if strings.HasSuffix(in, ".rules.yaml") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			policy := &unstructured.Unstructured{Object: readAutogenData(t, in).(map[string]any)}
			// The inputs are policies the API server accepts.
			if _, errs := kyschema.Decode(policy); len(errs) > 0 {
				t.Fatalf("not a valid policy: %v", errs.ToAggregate())
			}
			before := policy.DeepCopy()
			got := ComputeRules(policy)
			if !cmp.Equal(policy.Object, before.Object) {
				t.Errorf("ComputeRules modified the policy")
			}
			want := readAutogenData(t, strings.TrimSuffix(in, ".yaml")+".rules.yaml")
			if d := cmp.Diff(normalAutogen(want), normalAutogen(any(got))); d != "" {
				t.Errorf("rules differ from Kyverno's (-Kyverno +mapc):\n%s", d)
			}
		})
	}
	if n < 12 {
		t.Errorf("%d cases, want at least 12", n)
	}
}

// readAutogenData reads a YAML file as unstructured objects hold it (numbers int64 or float64).
func readAutogenData(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	// Through a wrapper object, as unstructured decodes only objects.
	if err := u.UnmarshalJSON([]byte(`{"kind":"X","apiVersion":"v1","v":` + string(j) + `}`)); err != nil {
		t.Fatal(err)
	}
	return u.Object["v"]
}

// normalAutogen drops empty objects and lists, recursively: Kyverno's Go types marshal a zero struct
// as {} (every match and exclude gets resources: {}) and omit empty lists, where the
// unstructured rules have nothing or keep what was written.
func normalAutogen(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			x = normalAutogen(x)
			if m, ok := x.(map[string]any); ok && len(m) == 0 {
				continue
			}
			if l, ok := x.([]any); ok && len(l) == 0 {
				continue
			}
			out[k] = x
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalAutogen(x)
		}
		return out
	}
	return v
}
