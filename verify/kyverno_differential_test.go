package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
)

// TestKyvernoDifferential compiles the Kyverno examples and every Kyverno golden case that
// compiles, and admits generated objects (Pods, Deployments, CronJobs, ConfigMaps with random
// containers, images, labels, annotations, data and namespaces, with empty strings and letters
// outside ASCII for the variables' functions) through Kyverno's engine and
// the compiled policies, on CREATE, on UPDATE and a Pod on kubectl debug's request
// (KyvernoCases), and on an UPDATE of what the create gave (UpdateOfResult), in every policy
// order; some Pods have init containers, and ephemeral containers as kubectl debug leaves them.
// MAPC_DIFF_N sets the
// objects per case (default 40), MAPC_DIFF_SEED the seed.
func TestKyvernoDifferential(t *testing.T) {
	n := 40
	if s := os.Getenv("MAPC_DIFF_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	seed := uint64(1)
	if s := os.Getenv("MAPC_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	engine, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := filepath.Glob("../testdata/golden/kyverno/*/mutators.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, "../examples/kyverno/policies")
	namespaces := []*corev1.Namespace{
		namespace("default", nil),
		namespace("team-a", map[string]string{"env": "prod"}),
		namespace("team-b", map[string]string{"env": "staging", "team": "b"}),
		annotated(namespace("shop", map[string]string{"env": "prod"}), map[string]string{"owner": "carol"}),
		namespace("kube-tools", nil),
	}
	for _, c := range cases {
		t.Run(filepath.Base(filepath.Dir(c))+"/"+filepath.Base(c), func(t *testing.T) {
			docs, err := source.ReadPaths([]string{c}, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := compiler.Compile(docs, compiler.Options{})
			if len(out.Problems) > 0 || len(out.Policies) == 0 {
				t.Skip("refused: nothing to compare") // the golden test checks its refusals
			}
			var pols []*unstructured.Unstructured
			for _, d := range docs {
				if kyverno.IsPolicy(d.Object) {
					pols = append(pols, d.Object)
				}
			}
			ref, err := NewKyvernoReference(engine, pols, nil)
			if err != nil {
				t.Fatal(err)
			}
			v, err := New(nil, out.Policies, Options{Namespaces: namespaces, Reference: ref, Idempotence: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			r := rand.New(rand.NewPCG(seed, uint64(len(c))))
			failed := 0
			for i := 0; i < n && failed < 3; i++ {
				obj := generateObject(r, i, namespaces)
				cases := KyvernoCases(obj)
				for j := 0; j < len(cases); j++ {
					res := v.Check(context.Background(), cases[j])
					if !res.Pass {
						failed++
						t.Errorf("%s\nobject:\n%s", Report([]Result{res}), yamlOf(cases[j].Object))
					}
					if u, ok := UpdateOfResult(cases[j], res); ok {
						cases = append(cases, u)
					}
				}
			}
		})
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	l := map[string]string{corev1.LabelMetadataName: name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func annotated(ns *corev1.Namespace, annotations map[string]string) *corev1.Namespace {
	ns.Annotations = annotations
	return ns
}

// generateObject is a random Pod, Deployment, CronJob or ConfigMap.
func generateObject(r *rand.Rand, i int, nss []*corev1.Namespace) *unstructured.Unstructured {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	names := []string{"web-1", "api-7", "db", "worker", "nginx", "shop", "batch"}
	meta := map[string]any{
		"name":      fmt.Sprintf("%s-%d", pick(names...), i),
		"namespace": nss[r.IntN(len(nss))].Name,
	}
	if r.IntN(4) == 0 {
		meta["name"] = pick(names...) // exact names the policies match
	}
	labels := map[string]any{}
	for _, k := range []string{"app", "tier", "team", "legacy", "env"} {
		if r.IntN(3) == 0 {
			labels[k] = pick("web", "web-frontend", "api", "backend", "yes", "10", "prod")
		}
	}
	if r.IntN(4) == 0 {
		labels["flag"] = pick("true", "FALSE", "maybe", "") // what to_boolean reads
	}
	if len(labels) > 0 || r.IntN(2) == 0 {
		meta["labels"] = labels
	}
	ann := map[string]any{}
	for _, k := range []string{"owner", "cost-center", "skip", "app", "pad"} {
		if r.IntN(4) == 0 {
			ann[k] = pick("alice", "analytics", "true", "web", "", " -é- ")
		}
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	containers := func() []any {
		var cs []any
		pool := []string{"app", "web", "cache", "proxy", "log-shipper", "side", "main"}
		r.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
		for _, name := range pool[:1+r.IntN(4)] {
			c := map[string]any{"name": name, "image": pick("nginx:latest", "redis:7.4", "registry.trusted.example/x:1", "busybox", "envoy:1.29", "a:latest",
				"ghcr.io/org/app:v2", "quay.io:443/team/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "Upper.io/x", "my_org.io/app:1", "bad image!")}
			if r.IntN(3) == 0 {
				c["env"] = []any{map[string]any{"name": pick("MODE", "LOG"), "value": pick("strict", "debug")}}
			}
			if r.IntN(4) == 0 {
				c["args"] = []any{"--verbose"}
			}
			if r.IntN(4) == 0 {
				c["securityContext"] = map[string]any{"runAsUser": int64(1000)}
			}
			if r.IntN(5) == 0 {
				c["imagePullPolicy"] = "IfNotPresent"
			}
			cs = append(cs, c)
		}
		return cs
	}
	podSpec := func() map[string]any {
		s := map[string]any{"containers": containers()}
		if r.IntN(4) == 0 {
			s["initContainers"] = containers()
		}
		if r.IntN(3) == 0 {
			s["volumes"] = []any{map[string]any{"name": "logs", "emptyDir": map[string]any{}}}
		}
		if r.IntN(4) == 0 {
			s["priorityClassName"] = "high"
		}
		if r.IntN(4) == 0 {
			s["securityContext"] = map[string]any{"runAsUser": int64(1000)}
		}
		return s
	}
	var obj map[string]any
	switch r.IntN(5) {
	case 0, 1:
		obj = map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": podSpec()}
		if r.IntN(5) == 0 {
			// As kubectl debug left them (the API server refuses them on create, but every
			// update carries them).
			obj["spec"].(map[string]any)["ephemeralContainers"] = containers()
		}
	case 2:
		obj = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "x"}}, "spec": podSpec()},
		}}
	case 3:
		spec := podSpec()
		spec["restartPolicy"] = "OnFailure"
		obj = map[string]any{"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": map[string]any{
			"schedule":    "0 1 * * *",
			"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": spec}}},
		}}
	default:
		data := map[string]any{}
		for _, k := range []string{"debug", "region", "zone"} {
			if r.IntN(2) == 0 {
				data[k] = pick("1", "eu", "us")
			}
		}
		obj = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
		if len(data) > 0 {
			obj["data"] = data
		}
		if r.IntN(3) == 0 {
			labels["app.kubernetes.io/part-of"] = "shop"
			meta["labels"] = labels
		}
	}
	return &unstructured.Unstructured{Object: obj}
}

func yamlOf(o *unstructured.Unstructured) string {
	b, err := o.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	return string(b)
}
