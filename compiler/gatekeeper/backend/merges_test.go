package backend_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/backend"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify"
)

// TestMergesMatchGatekeeper: random sets of ModifySet merges (and a few prunes) into the same
// lists — the tolerations, every container's args, the args of one container they may create —
// with values they share, matches that differ and path tests, compiled in both layouts, give
// Gatekeeper's result on random Pods (none of the lists, some, values already there, twice).
// Merges into one list are computed together (lower.MergeUnion); the differential generator
// rarely puts two of them in one group.
func TestMergesMatchGatekeeper(t *testing.T) {
	locs := []string{"spec.tolerations", "spec.containers[name: *].args", "spec.containers[name: app].args"}
	tols := []string{"{key: a, operator: Exists}", "{key: b, operator: Exists}", "{key: c, operator: Equal, value: x}", "{key: d, operator: Exists, effect: NoSchedule}"}
	args := []string{"-a", "-b", "-c", "-d"}
	nss := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}, {ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	failed := 0
	for seed := int64(0); seed < 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		var docs []string
		for i := 2 + r.Intn(5); i > 0; i-- {
			loc := locs[r.Intn(len(locs))]
			pool := args
			if loc == "spec.tolerations" {
				pool = tols
			}
			var vals []string
			for _, p := range r.Perm(len(pool))[:1+r.Intn(3)] {
				vals = append(vals, pool[p])
			}
			match := []string{"", "  match:\n    namespaces: [prod]\n", "  match:\n    labelSelector: {matchLabels: {tier: gpu}}\n", ""}[r.Intn(4)]
			tests := ""
			if loc == locs[2] && r.Intn(4) == 0 {
				tests = "    pathTests:\n    - {subPath: 'spec.containers[name: app]', condition: MustExist}\n"
			}
			op := "merge"
			if r.Intn(8) == 0 {
				op = "prune"
			}
			docs = append(docs, fmt.Sprintf("apiVersion: mutations.gatekeeper.sh/v1\nkind: ModifySet\nmetadata: {name: m%d}\nspec:\n  applyTo: [{groups: [\"\"], kinds: [Pod], versions: [v1]}]\n%s  location: '%s'\n  parameters:\n%s    operation: %s\n    values: {fromList: [%s]}\n",
				i, match, loc, tests, op, strings.Join(vals, ", ")))
		}
		mutators := strings.Join(docs, "---\n")
		ds, err := source.Parse("mutators.yaml", []byte(mutators))
		if err != nil {
			t.Fatal(err)
		}
		var muts []*unstructured.Unstructured
		for _, d := range ds {
			muts = append(muts, d.Object)
		}
		var pods []*unstructured.Unstructured
		for o := 0; o < 4; o++ {
			var ctrs []any
			for _, name := range []string{"app", "side"} {
				if r.Intn(3) > 0 {
					c := map[string]any{"name": name, "image": "nginx"}
					if r.Intn(2) == 0 {
						as := []any{}
						for k := r.Intn(4); k > 0; k-- {
							as = append(as, args[r.Intn(len(args))])
						}
						c["args"] = as
					}
					ctrs = append(ctrs, c)
				}
			}
			if len(ctrs) == 0 {
				ctrs = []any{map[string]any{"name": "other", "image": "nginx"}}
			}
			spec := map[string]any{"containers": ctrs}
			if r.Intn(2) == 0 {
				ts := []any{}
				for k := r.Intn(4); k > 0; k-- {
					ts = append(ts, map[string]any{"key": []string{"a", "b", "z"}[r.Intn(3)], "operator": "Exists"})
				}
				spec["tolerations"] = ts
			}
			labels := map[string]any{}
			if r.Intn(2) == 0 {
				labels["tier"] = "gpu"
			}
			pods = append(pods, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": fmt.Sprintf("pod-%d", o), "namespace": []string{"prod", "default"}[r.Intn(2)], "labels": labels},
				"spec":     spec}})
		}
		for _, layout := range []route.Layout{route.LayoutFused, route.LayoutPerMutator} {
			out := backend.Compile(ds, route.Options{Layout: layout})
			for _, p := range out.Problems {
				t.Fatalf("seed %d: %v\n%s", seed, p, mutators)
			}
			v, err := verify.New(muts, out.Policies, verify.Options{Namespaces: nss, Idempotence: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, pod := range pods {
				if res := v.Check(context.Background(), verify.Case{Object: pod}); !res.Pass {
					if failed++; failed <= 3 {
						t.Errorf("seed %d, %s layout:\n%s\n%s", seed, layout, mutators, verify.Report([]verify.Result{res}))
					}
				}
			}
			v.Close()
		}
	}
	if failed > 3 {
		t.Errorf("%d more failures", failed-3)
	}
}
