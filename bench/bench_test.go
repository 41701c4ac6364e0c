package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mapc-dev/mapc/compiler"
	frontend "github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
	"github.com/mapc-dev/mapc/reference/gatekeeper"
	"github.com/mapc-dev/mapc/verify"
)

// TestExpertPoliciesMatchGatekeeper: the hand-written baselines are only fair if they are
// correct: every bench object, admitted through them in every order and again (idempotence),
// gives Gatekeeper's object.
func TestExpertPoliciesMatchGatekeeper(t *testing.T) {
	for _, wl := range Workloads() {
		if wl.Expert == "" || strings.HasPrefix(wl.Name, "kyverno-") {
			continue
		}
		t.Run(wl.Name, func(t *testing.T) {
			w := load(t, wl)
			sets, err := ReadPolicies(Path(wl.Expert))
			if err != nil {
				t.Fatal(err)
			}
			v, err := verify.NewSets(w.Mutators, sets, verify.Options{Namespaces: w.Namespaces, Idempotence: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			var rs []verify.Result
			for _, obj := range w.Objects {
				rs = append(rs, v.Check(context.Background(), verify.Case{Object: obj}))
			}
			for _, r := range rs {
				if !r.Pass {
					t.Errorf("%s", verify.Report([]verify.Result{r}))
				}
			}
		})
	}
}

// TestExpertPoliciesMatchKyverno: the hand-written baselines of the Kyverno workloads, fused
// and one per Kyverno policy, give for every object of their workload, in every order of the
// hand-written policies and again (idempotence), the object Kyverno's engine stores with its
// policies in the same order (those a policy's mapc.dev/source annotation names; the order of
// the input for the fused ones), as mapc verify --policies checks them.
func TestExpertPoliciesMatchKyverno(t *testing.T) {
	n := 0
	for _, wl := range Workloads() {
		if len(wl.Experts()) == 0 || !strings.HasPrefix(wl.Name, "kyverno-") {
			continue
		}
		n++
		t.Run(wl.Name, func(t *testing.T) {
			w := load(t, wl)
			if !w.Kyverno || len(w.Mutators) == 0 {
				t.Fatalf("%s: no Kyverno policies in %s", wl.Name, wl.Mutators)
			}
			path, err := kyvernobin.Path()
			if err != nil {
				t.Fatal(err)
			}
			for _, expert := range wl.Experts() {
				t.Run(filepath.Base(expert), func(t *testing.T) {
					sets, err := ReadPolicies(Path(expert))
					if err != nil {
						t.Fatal(err)
					}
					ref, err := verify.NewKyvernoReference(path, w.Mutators, nil)
					if err != nil {
						t.Fatal(err)
					}
					v, err := verify.NewSets(nil, sets, verify.Options{Namespaces: w.Namespaces, Idempotence: true, Reference: ref})
					if err != nil {
						ref.Close()
						t.Fatal(err)
					}
					defer v.Close()
					for _, obj := range w.Objects {
						if r := v.Check(context.Background(), verify.Case{Object: obj}); !r.Pass {
							t.Errorf("%s", verify.Report([]verify.Result{r}))
						}
					}
				})
			}
		})
	}
	if n == 0 {
		t.Fatal("no Kyverno workload with hand-written policies")
	}
}

func load(t testing.TB, wl WorkloadSpec) *Workload {
	t.Helper()
	w, err := wl.Load()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestRealisticSubsets: each realistic workload repeats the next smaller one word for word
// (realistic-20 ⊂ realistic-50 ⊂ realistic-100), so that their figures compare.
func TestRealisticSubsets(t *testing.T) {
	read := func(p string) map[string]string {
		docs, err := source.ReadPaths([]string{Path(p)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, d := range docs {
			data, err := json.Marshal(d.Object.Object)
			if err != nil {
				t.Fatal(err)
			}
			key := d.Object.GetKind() + "/" + d.Object.GetName()
			if _, dup := out[key]; dup {
				t.Errorf("%s: %s appears twice", p, key)
			}
			out[key] = string(data)
		}
		return out
	}
	for _, tc := range []struct{ small, large int }{{20, 50}, {50, 100}} {
		small := read(fmt.Sprintf("testdata/bench/realistic-%d/mutators.yaml", tc.small))
		large := read(fmt.Sprintf("testdata/bench/realistic-%d/mutators.yaml", tc.large))
		if len(small) != tc.small || len(large) != tc.large {
			t.Errorf("realistic-%d has %d mutators, realistic-%d %d", tc.small, len(small), tc.large, len(large))
		}
		for k, v := range small {
			if large[k] != v {
				t.Errorf("%s of realistic-%d differs from (or is missing in) realistic-%d", k, tc.small, tc.large)
			}
		}
	}
}

// TestGenerate: the generated mutators are valid for Gatekeeper and distinct, and nearly all are
// independent.
func TestGenerate(t *testing.T) {
	const n = 300
	docs, err := source.Parse("generated.yaml", Generate(n))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		objs = append(objs, d.Object)
	}
	if len(objs) != n {
		t.Fatalf("%d documents", len(objs))
	}
	if _, err := gatekeeper.New(objs); err != nil {
		t.Fatal(err)
	}
	groups := plan.Plan(frontend.Compile(docs).Mutations)
	if len(groups) < n*9/10 {
		t.Errorf("%d groups for %d mutators: most should be independent", len(groups), n)
	}
}

// TestMismatchesStayFixed: the compiler bugs the bench found (testdata/bench/mismatch-*.yaml,
// mutators and objects in one file) stay fixed: both layouts compile and match Gatekeeper. A file
// whose header does not say "Fixed in" is an open bug and is skipped.
func TestMismatchesStayFixed(t *testing.T) {
	files, err := filepath.Glob(Path("testdata/bench/mismatch-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no mismatch files (%v)", err)
	}
	for _, f := range files {
		for _, layout := range []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator} {
			t.Run(filepath.Base(f)+"/"+string(layout), func(t *testing.T) {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if header, _, _ := strings.Cut(string(data), "\napiVersion:"); !strings.Contains(header, "Fixed in") {
					t.Skip("open: its header does not say \"Fixed in\"")
				}
				docs, err := source.ReadPaths([]string{f}, nil)
				if err != nil {
					t.Fatal(err)
				}
				w := &Workload{Name: f}
				var nss []*corev1.Namespace
				for _, d := range docs {
					if d.Object.GetKind() == "Namespace" && d.Object.GetAPIVersion() == "v1" {
						ns := &corev1.Namespace{}
						if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, ns); err != nil {
							t.Fatal(err)
						}
						nss = append(nss, ns)
					}
					if frontend.IsMutator(d.Object) {
						w.Docs = append(w.Docs, d)
						w.Mutators = append(w.Mutators, d.Object)
					} else {
						w.Objects = append(w.Objects, d.Object)
					}
				}
				sets, err := w.Compile(layout)
				if err != nil {
					t.Fatal(err)
				}
				v, err := verify.NewSets(w.Mutators, sets, verify.Options{Idempotence: true, Namespaces: nss})
				if err != nil {
					t.Fatal(err)
				}
				defer v.Close()
				for _, obj := range w.Objects {
					if r := v.Check(context.Background(), verify.Case{Object: obj}); !r.Pass {
						t.Errorf("%s", verify.Report([]verify.Result{r}))
					}
				}
			})
		}
	}
}

// TestMergesIntoOneList: merges of distinct values into one list compile to a number of
// mutations that does not grow with their number (each expression holds as many values as fit
// in its length bound), in a policy far below the API server's limits, quickly; and the result
// is Gatekeeper's, for Pods without tolerations, with some, and with values of the merges.
func TestMergesIntoOneList(t *testing.T) {
	pods := `apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: team-1, labels: {tier: t2}}
spec:
  containers: [{name: app, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: some, namespace: default}
spec:
  tolerations:
  - {key: other, operator: Exists}
  - {key: gen.example.com/t7, operator: Exists, effect: NoSchedule}
  - {key: other, operator: Exists}
  containers: [{name: app, image: nginx}]
`
	objDocs, err := source.Parse("pods.yaml", []byte(pods))
	if err != nil {
		t.Fatal(err)
	}
	for _, mixed := range []bool{false, true} {
		var counts []int
		for _, n := range []int{20, 160} {
			docs, err := source.Parse("merges.yaml", GenerateMerges(n, mixed))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			out := compiler.Compile(docs, compiler.Options{})
			took := time.Since(start)
			if len(out.Problems) > 0 {
				t.Fatal(out.Problems[0])
			}
			kv, err := compiler.ParseVersion(compiler.DefaultKubernetesVersion)
			if err != nil {
				t.Fatal(err)
			}
			stream, err := emit.Stream(out.Policies, emit.APIVersion(kv), emit.YAML)
			if err != nil {
				t.Fatal(err)
			}
			policies, mutations := Count(Sets(out.Policies))
			t.Logf("%d merges (mixed matches: %v): %d policy, %d mutation(s), %d bytes, compiled in %v", n, mixed, policies, mutations, len(stream), took.Round(time.Millisecond))
			counts = append(counts, mutations)
			if n == 160 && len(stream) > 100_000 {
				t.Errorf("%d merges: %d bytes of policies", n, len(stream))
			}
			var muts []*unstructured.Unstructured
			for _, d := range docs {
				muts = append(muts, d.Object)
			}
			v, err := verify.NewSets(muts, Sets(out.Policies), verify.Options{Idempotence: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range objDocs {
				if r := v.Check(context.Background(), verify.Case{Object: d.Object}); !r.Pass {
					t.Errorf("%s", verify.Report([]verify.Result{r}))
				}
			}
			v.Close()
		}
		// With every third merge's label selector written out with its value, 160 values of
		// mixed matches outgrow one expression's length bound.
		want := 1
		if mixed {
			want = 2
		}
		if counts[0] != 1 || counts[1] > want {
			t.Errorf("mixed matches %v: %v mutations for 20 and 160 merges, want 1 and at most %d", mixed, counts, want)
		}
	}
}
