package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
)

// TestKyvernoConditionMatrix compiles a precondition for every operator, with keys of every
// JSON type a variable gives (strings, null, numbers as float64, booleans, lists) and values of
// every kind Kyverno reads differently (wildcards, quantities, numbers in strings, numbers,
// booleans, lists, ranges, durations, variables), each in a policy of its own that labels the ConfigMaps it
// passes for, and admits generated ConfigMaps through Kyverno's engine and the policies the
// compiler accepts. A condition the compiler refuses is left out; one it accepts must decide as
// Kyverno decides on every object (preconditions decide alike on CREATE and UPDATE).
func TestKyvernoConditionMatrix(t *testing.T) {
	engine, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{
		"{{ request.object.metadata.labels.app || '' }}",                 // a string
		"{{ request.object.metadata.labels.app || `null` }}",             // a string or null
		"{{ length(request.object.data || `{}`) }}",                      // a number (float64)
		"{{ request.object.immutable || `false` }}",                      // a boolean
		"{{ request.object.metadata.finalizers || `[]` }}",               // a list of strings
		"{{ request.object.metadata.annotations.size || `0` }}",          // a string or a number
		"{{ length(request.object.metadata.labels.app || '') }}",         // a number from a string
		"{{ request.object.metadata.labels.app || `1.5` }}",              // a string or a fraction
		"{{ [request.object.metadata.labels.app || ''][0] }}",            // refused or a string
		"{{ request.object.metadata.annotations.qty || '1Gi' }}",         // a quantity, often
		"{{ request.object.metadata.annotations.missing == `null` }}",    // a boolean, true
		"{{ request.object.metadata.labels.team || request.namespace }}", // a string
		"{{ request.object.metadata.labels || `{}` }}",                   // a map
	}
	values := []string{
		`web`, `web*`, `"*-frontend"`, `""`, `"1"`, `"2.5"`, `1Gi`, `512Mi`, `"10"`, `true`, `false`,
		`3`, `2.5`, `0`, `3.0`, `[web, api]`, `["web*", "1"]`, `[1, 3, true]`, `[]`, `"1-10"`, `30s`,
		`"1.2.3"`, `[gold, "kube*"]`, `{}`, `{app: web}`,
		// Variables: a list of strings, the same or missing (the rule fails), a string.
		"'{{ request.object.metadata.finalizers || `[]` }}'", "'{{ request.object.metadata.finalizers }}'",
		"'{{ request.namespace }}'",
	}
	ops := []string{"Equals", "NotEquals", "AnyIn", "AnyNotIn", "AllIn", "AllNotIn", "In", "NotIn",
		"GreaterThan", "GreaterThanOrEquals", "LessThan", "LessThanOrEquals"}
	var text strings.Builder
	n := 0
	for _, k := range keys {
		for _, v := range values {
			for _, op := range ops {
				fmt.Fprintf(&text, `---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: c%d
spec:
  rules:
  - name: r
    match:
      any:
      - resources:
          kinds: [ConfigMap]
    preconditions:
      all:
      - key: %q
        operator: %s
        value: %s
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            c%d: "yes"
`, n, k, op, v, n)
				n++
			}
		}
	}
	docs, err := source.Parse("matrix.yaml", []byte(text.String()))
	if err != nil {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, compiler.Options{})
	compiled := map[string]bool{}
	for _, m := range out.Mutators {
		if m.Status == route.Compiled {
			compiled[m.Mutator] = true
		}
	}
	var pols []*unstructured.Unstructured
	for _, d := range docs {
		if compiled[d.Object.GetKind()+"/"+d.Object.GetName()] {
			pols = append(pols, d.Object)
		}
	}
	t.Logf("%d conditions, %d translated, %d refused", n, len(pols), n-len(pols))
	if len(pols) < n/3 {
		t.Fatalf("only %d of %d conditions translated", len(pols), n)
	}
	ref, err := NewKyvernoReference(engine, pols, nil)
	if err != nil {
		t.Fatal(err)
	}
	namespaces := []*corev1.Namespace{namespace("default", nil), namespace("kube-tools", nil)}
	v, err := New(nil, out.Policies, Options{Namespaces: namespaces, Reference: ref, AllOrdersUpTo: 1, Shuffles: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := rand.New(rand.NewPCG(7, 11))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	failed := 0
	// Each object goes through some 1,500 policies both ways (about 4 s): a few cover the
	// types, MAPC_DIFF_N more.
	objects := 8
	if s := os.Getenv("MAPC_DIFF_N"); s != "" {
		objects, _ = strconv.Atoi(s)
	}
	for i := 0; i < objects && failed < 3; i++ {
		meta := map[string]any{"name": fmt.Sprintf("cm-%d", i), "namespace": pick("default", "kube-tools")}
		labels := map[string]any{}
		if r.IntN(5) > 0 {
			labels["app"] = pick("web", "web-frontend", "api", "10", "1", "2.5", "1Gi", "", "true", "30s", "1.2.3", "gold", "3", "1-10", "1.2.4", "1.2.3-rc.1", "0.9.0")
		}
		if r.IntN(3) == 0 {
			labels["team"] = pick("gold", "kube", "web")
		}
		meta["labels"] = labels
		ann := map[string]any{}
		if r.IntN(2) == 0 {
			ann["size"] = pick("3", "2.5", "abc", "", "1e3", "0x10", "3.0", "kube-*", "?eb")
		}
		if r.IntN(2) == 0 {
			ann["qty"] = pick("1Gi", "1024Mi", "2Gi", "100m", "x", "")
		}
		if len(ann) > 0 {
			meta["annotations"] = ann
		}
		if r.IntN(3) == 0 {
			// Distinct: Kyverno's merge (any patchStrategicMerge) drops a repeated finalizer,
			// which the API server's patches keep.
			var fs []any
			for _, f := range []string{"web", "kube-x", "api", "example.com/f"} {
				if r.IntN(3) == 0 {
					fs = append(fs, f)
				}
			}
			meta["finalizers"] = fs
		}
		obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
		if r.IntN(4) > 0 {
			data := map[string]any{}
			for j := range r.IntN(5) {
				data[fmt.Sprintf("k%d", j)] = "v"
			}
			obj["data"] = data
		}
		if r.IntN(3) == 0 {
			obj["immutable"] = r.IntN(2) == 0
		}
		u := &unstructured.Unstructured{Object: obj}
		if res := v.Check(context.Background(), Case{Object: u}); !res.Pass {
			failed++
			y, _ := yaml.Marshal(obj)
			t.Errorf("%s\nobject:\n%s", Report([]Result{res}), y)
		}
	}
}
