//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	mapcbench "github.com/mapc-dev/mapc/bench"
	"github.com/mapc-dev/mapc/compiler"
	gkfront "github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/reference/gatekeeper"
)

// Environment of the benchmark (set by hack/e2e.sh bench).
const (
	EnvBench          = "MAPC_E2E_BENCH"
	EnvAPIServerPID   = "MAPC_E2E_APISERVER_PID"
	EnvGatekeeperBin  = "MAPC_E2E_GATEKEEPER_BIN"
	EnvGatekeeperCRDs = "MAPC_E2E_GATEKEEPER_CRDS"
	EnvBenchN         = "MAPC_E2E_BENCH_N"      // sequential creates per configuration and round (default 200)
	EnvBenchRounds    = "MAPC_E2E_BENCH_ROUNDS" // rounds, configurations alternated (default 3)
)

const (
	gatekeeperNamespace = "gatekeeper-system"
	gatekeeperWebhook   = "gatekeeper-mutating-webhook-configuration"
	concurrency         = 8
)

type benchWorkload struct {
	name     string
	mutators string
	objects  string
	bench    string // key of the object whose creation is timed
	expert   string // hand-written policies for the same mutations ("" if none)
}

// benchConfig is one way of mutating: nothing, Gatekeeper's webhook, or mapc's policies.
type benchConfig struct {
	name     string
	policies []*emit.Policy             // mapc's
	webhook  bool                       // Gatekeeper
	expect   *unstructured.Unstructured // the stored object, when not Gatekeeper's result
}

type sample struct {
	latencies []time.Duration
	apiCPU    time.Duration
	gkCPU     time.Duration
	requests  int
}

func (s *sample) add(o sample) {
	s.latencies = append(s.latencies, o.latencies...)
	s.apiCPU += o.apiCPU
	s.gkCPU += o.gkCPU
	s.requests += o.requests
}

// TestBench is make e2e-bench: the same objects created on the same API server with no
// mutation, with Gatekeeper as a real mutating webhook, and with mapc's policies in each layout,
// configurations alternated round by round to cancel drift; latency per create (sequential and
// with 8 concurrent clients) and CPU per request of the API server and of Gatekeeper. Every
// configuration must store the same object as Gatekeeper.
func TestBench(t *testing.T) {
	if os.Getenv(EnvBench) == "" {
		t.Skipf("%s is not set: run `make e2e-bench`", EnvBench)
	}
	c := connect(t)
	apiPID, err := strconv.Atoi(os.Getenv(EnvAPIServerPID))
	if err != nil {
		t.Fatalf("%s: %v", EnvAPIServerPID, err)
	}
	gk := startGatekeeper(t, c, os.Getenv(EnvGatekeeperBin), os.Getenv(EnvGatekeeperCRDs))
	n := envInt(EnvBenchN, 200)
	rounds := envInt(EnvBenchRounds, 3)
	workloads := []benchWorkload{
		{name: "examples", mutators: examplesDir, objects: objectsDir, bench: "Pod/default/multi-container",
			expert: filepath.Join(benchDir, "examples", "expert-policies.yaml")},
		{name: "realistic-20", mutators: filepath.Join(benchDir, "realistic-20", "mutators.yaml"), objects: filepath.Join(benchDir, "objects"), bench: "Pod/shop/checkout-7d9f8b6c5d-x2x4k",
			expert: filepath.Join(benchDir, "realistic-20", "expert-policies.yaml")},
		// Timed on realistic-20's Pod. No hand-written baseline: working out Gatekeeper's fixed
		// point of 50 or 100 mutators by hand is a project of its own.
		{name: "realistic-50", mutators: filepath.Join(benchDir, "realistic-50", "mutators.yaml"), objects: filepath.Join(benchDir, "objects"), bench: "Pod/shop/checkout-7d9f8b6c5d-x2x4k"},
		{name: "realistic-100", mutators: filepath.Join(benchDir, "realistic-100", "mutators.yaml"), objects: filepath.Join(benchDir, "objects"), bench: "Pod/shop/checkout-7d9f8b6c5d-x2x4k"},
	}
	var report []string
	for _, wl := range workloads {
		if _, err := os.Stat(wl.mutators); err != nil {
			t.Logf("workload %s: %v", wl.name, err)
			continue
		}
		clusterObjects(t, c, wl.mutators)
		lines := runBench(t, c, gk, apiPID, wl, n, rounds)
		for _, l := range lines {
			t.Log(l)
		}
		report = append(report, lines...)
	}
	fmt.Println()
	fmt.Printf("%-13s %-22s %-6s %6s %8s %8s %8s %8s %10s %10s\n", "workload", "configuration", "mode", "n", "p50 ms", "p90 ms", "p99 ms", "x p50", "apisrv ms", "gk ms")
	for _, l := range report {
		fmt.Println(l)
	}
	fmt.Println("(x p50: p50 over the no-mutation p50 of the same mode; apisrv/gk ms: CPU time per request)")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func runBench(t *testing.T, c *cluster, gk *gatekeeperProc, apiPID int, wl benchWorkload, n, rounds int) []string {
	ctx := context.Background()
	docs := readMutators(t, wl.mutators)
	var mutators []*unstructured.Unstructured
	for _, d := range docs {
		if gkfront.IsMutator(d.Object) {
			mutators = append(mutators, d.Object)
		}
	}
	objects := readObjects(t, wl.objects)
	var bench *unstructured.Unstructured
	nss := map[string]*corev1.Namespace{}
	for _, o := range objects {
		if caseName(o) == wl.bench {
			bench = o.DeepCopy()
		}
		if o.GetKind() == "Namespace" {
			ns := &corev1.Namespace{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ns); err != nil {
				t.Fatal(err)
			}
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
			nss[ns.Name] = ns
			if immortal[ns.Name] {
				continue
			}
			if _, err := c.create(ctx, nsGVR, o, false); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("namespace %s: %v", ns.Name, err)
			}
		}
	}
	if bench == nil {
		t.Fatalf("workload %s: no object %s", wl.name, wl.bench)
	}
	podGVR, _, err := c.resourceFor(bench)
	if err != nil {
		t.Fatal(err)
	}
	if ns := bench.GetNamespace(); nss[ns] == nil {
		nss[ns] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{corev1.LabelMetadataName: ns}}}
		if _, err := c.cs.CoreV1().Namespaces().Create(ctx, nss[ns], metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// What Gatekeeper stores, predicted with no mutation active.
	if err := c.unbind(ctx); err != nil {
		t.Fatal(err)
	}
	presented, err := c.create(ctx, podGVR, bench, true)
	if err != nil {
		t.Fatalf("dry-run create of %s: %v", wl.bench, err)
	}
	presented = stripServerFields(presented)
	engine, err := gatekeeper.New(mutators)
	if err != nil {
		t.Fatal(err)
	}
	gkOut, err := engine.Admit(ctx, gatekeeper.Request{Object: presented.DeepCopy(), Namespace: nss[bench.GetNamespace()]})
	if err != nil {
		t.Fatalf("Gatekeeper's engine denies %s: %v", wl.bench, err)
	}
	want, err := c.create(ctx, podGVR, stripServerFields(gkOut), true)
	if err != nil {
		t.Fatalf("Gatekeeper's result for %s is rejected: %v", wl.bench, err)
	}

	// Gatekeeper's mutators in the cluster (the webhook is only registered while measured).
	gk.setMutators(t, mutators)

	configs := []benchConfig{{name: "no mutation"}, {name: "gatekeeper webhook", webhook: true}}
	var first []byte
	for _, layout := range layouts {
		out := compiler.Compile(docs, compiler.Options{KubernetesVersion: c.version, Layout: layout})
		if len(out.Problems) > 0 {
			t.Errorf("%s: the compiler refuses layout %s: %v", wl.name, layout, firstLine(out.Problems[0].Error()))
			continue
		}
		data := []byte(fmt.Sprint(len(out.Policies)))
		for _, p := range out.Policies {
			b, _ := p.Policy.Marshal()
			data = append(data, b...)
		}
		if first != nil && bytes.Equal(data, first) {
			continue
		}
		first = data
		configs = append(configs, benchConfig{name: fmt.Sprintf("mapc %s (%d MAPs)", layout, len(out.Policies)), policies: out.Policies})
	}

	// The hand-written baseline of make bench, which must store Gatekeeper's object too.
	if wl.expert != "" {
		sets, err := mapcbench.ReadPolicies(wl.expert)
		if err != nil {
			t.Fatal(err)
		}
		var ps []*emit.Policy
		for _, s := range sets {
			if len(s.Bindings) != 1 {
				t.Fatalf("%s: policy %s has %d bindings, want 1", wl.expert, s.Policy.Name, len(s.Bindings))
			}
			p := &emit.Policy{Policy: s.Policy.DeepCopy(), Binding: s.Bindings[0].DeepCopy()}
			for _, m := range []*metav1.ObjectMeta{&p.Policy.ObjectMeta, &p.Binding.ObjectMeta} {
				if m.Labels == nil {
					m.Labels = map[string]string{}
				}
				m.Labels[emit.LabelManagedBy] = emit.ManagedByValue // so that unbind removes them
			}
			ps = append(ps, p)
		}
		configs = append(configs, benchConfig{name: fmt.Sprintf("hand-written (%d MAPs)", len(ps)), policies: ps})
	}

	// The floor: one policy with one mutation that adds one label, compiled from one
	// AssignMetadata. Any policy that changes the object costs at least this much (the API server
	// encodes, patches, decodes and defaults the whole object after a mutation, and recomputes
	// its managed fields once admission changed it), so it bounds what fusing can reach.
	floor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mutations.gatekeeper.sh/v1", "kind": "AssignMetadata",
		"metadata": map[string]any{"name": "bench-floor"},
		"spec": map[string]any{
			"match":      map[string]any{"kinds": []any{map[string]any{"apiGroups": []any{bench.GroupVersionKind().Group}, "kinds": []any{bench.GetKind()}}}},
			"location":   `metadata.labels."mapc.dev/bench-floor"`,
			"parameters": map[string]any{"assign": map[string]any{"value": "1"}},
		},
	}}
	floorOut := compiler.Compile([]*source.Document{{File: "bench-floor", Object: floor}}, compiler.Options{KubernetesVersion: c.version})
	if len(floorOut.Problems) > 0 || len(floorOut.Policies) != 1 || len(floorOut.Policies[0].Policy.Spec.Mutations) != 1 {
		t.Fatalf("the floor policy: %d policies, problems %v", len(floorOut.Policies), floorOut.Problems)
	}
	floorEngine, err := gatekeeper.New([]*unstructured.Unstructured{floor})
	if err != nil {
		t.Fatal(err)
	}
	floorGK, err := floorEngine.Admit(ctx, gatekeeper.Request{Object: presented.DeepCopy(), Namespace: nss[bench.GetNamespace()]})
	if err != nil {
		t.Fatal(err)
	}
	floorWant, err := c.create(ctx, podGVR, stripServerFields(floorGK), true)
	if err != nil {
		t.Fatal(err)
	}
	configs = append(configs, benchConfig{name: "floor: 1 MAP, 1 label", policies: floorOut.Policies, expect: floorWant})

	results := map[string]map[string]*sample{} // config -> mode -> sample
	for _, cfg := range configs {
		results[cfg.name] = map[string]*sample{"seq": {}, "conc8": {}}
	}
	for r := 0; r < rounds; r++ {
		for i := range configs {
			cfg := configs[(i+r)%len(configs)]
			expect := want
			if cfg.policies == nil && !cfg.webhook {
				expect = presented
			}
			if cfg.expect != nil {
				expect = cfg.expect
			}
			enable(t, c, gk, cfg, podGVR, bench, expect)
			// The stored object must be Gatekeeper's.
			check := bench.DeepCopy()
			if got, err := c.create(ctx, podGVR, check, false); err != nil {
				t.Errorf("%s: %s: creating %s: %v", wl.name, cfg.name, wl.bench, err)
			} else if !equalJSON(clean(got).Object, clean(expect).Object) {
				t.Errorf("%s: %s stores a different object than expected:\n%s", wl.name, cfg.name, indent(diff(clean(expect), clean(got), "expected", cfg.name)))
			}
			if err := c.deleteObject(ctx, podGVR, bench.GetNamespace(), bench.GetName()); err != nil {
				t.Fatal(err)
			}
			prefix := fmt.Sprintf("%s-b%d%d", bench.GetName(), r, i)
			results[cfg.name]["seq"].add(measure(t, c, podGVR, bench, prefix+"s", n, 1, apiPID, gk.pid()))
			results[cfg.name]["conc8"].add(measure(t, c, podGVR, bench, prefix+"c", n*2, concurrency, apiPID, gk.pid()))
			disable(t, c, cfg, podGVR, bench, presented)
		}
	}
	gk.setMutators(t, nil)

	var lines []string
	for _, mode := range []string{"seq", "conc8"} {
		base := percentile(results[configs[0].name][mode].latencies, 0.5)
		for _, cfg := range configs {
			s := results[cfg.name][mode]
			p50 := percentile(s.latencies, 0.5)
			lines = append(lines, fmt.Sprintf("%-13s %-22s %-6s %6d %8.2f %8.2f %8.2f %8.2f %10.2f %10.2f",
				wl.name, cfg.name, mode, len(s.latencies), ms(p50), ms(percentile(s.latencies, 0.9)), ms(percentile(s.latencies, 0.99)),
				float64(p50)/float64(base), ms(s.apiCPU)/float64(s.requests), ms(s.gkCPU)/float64(s.requests)))
		}
	}
	return lines
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func percentile(l []time.Duration, p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1)+0.5)]
}

// enable turns a configuration on and waits until a dry-run create of the bench object gives
// the expected object.
func enable(t *testing.T, c *cluster, gk *gatekeeperProc, cfg benchConfig, gvr schema.GroupVersionResource, obj, expect *unstructured.Unstructured) {
	ctx := context.Background()
	switch {
	case cfg.webhook:
		gk.register(t)
	case cfg.policies != nil:
		// bind waits until the API server runs them; whether they give the expected object is
		// checked by the caller (a difference is a bug, not a delay).
		if _, err := c.bind(ctx, cfg.policies); err != nil {
			t.Fatal(err)
		}
		return
	}
	waitFor(t, c, cfg.name+" on", gvr, obj, expect)
}

// disable turns a configuration off and waits until the bench object is no longer mutated.
func disable(t *testing.T, c *cluster, cfg benchConfig, gvr schema.GroupVersionResource, obj, presented *unstructured.Unstructured) {
	ctx := context.Background()
	switch {
	case cfg.webhook:
		err := c.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, gatekeeperWebhook, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	case cfg.policies != nil:
		if err := c.unbind(ctx); err != nil {
			t.Fatal(err)
		}
		return
	}
	waitFor(t, c, cfg.name+" off", gvr, obj, presented)
}

func waitFor(t *testing.T, c *cluster, what string, gvr schema.GroupVersionResource, obj, expect *unstructured.Unstructured) {
	var last *unstructured.Unstructured
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*activationTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := c.create(ctx, gvr, obj, true)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = got
		return equalJSON(clean(last).Object, clean(expect).Object), nil
	})
	if err != nil {
		t.Fatalf("%s: the bench object never came out as expected (last error %v):\n%s", what, lastErr, indent(diff(clean(expect), clean(last), "expected", "dry run")))
	}
}

// measure creates count copies of obj (names prefix-i) from workers clients, then deletes them.
func measure(t *testing.T, c *cluster, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, prefix string, count, workers, apiPID, gkPID int) sample {
	ctx := context.Background()
	lat := make([]time.Duration, count)
	var wg sync.WaitGroup
	next := make(chan int)
	var mu sync.Mutex
	var firstErr error
	api0, gk0 := cpuTime(apiPID), cpuTime(gkPID)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := obj.DeepCopy()
				o.SetName(fmt.Sprintf("%s-%d", prefix, i))
				start := time.Now()
				_, err := c.dyn.Resource(gvr).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{})
				lat[i] = time.Since(start)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < count; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	s := sample{latencies: lat, apiCPU: cpuTime(apiPID) - api0, gkCPU: cpuTime(gkPID) - gk0, requests: count}
	if firstErr != nil {
		t.Fatalf("creating the bench objects: %v", firstErr)
	}
	// Delete them, outside the measurement.
	names := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			zero := int64(0)
			for i := range names {
				err := c.dyn.Resource(gvr).Namespace(obj.GetNamespace()).Delete(ctx, fmt.Sprintf("%s-%d", prefix, i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting: %v", err)
				}
			}
		}()
	}
	for i := 0; i < count; i++ {
		names <- i
	}
	close(names)
	wg.Wait()
	return s
}

// cpuTime is the user+system CPU time of a process (0 for pid 0).
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may contain spaces) start after the last ')'.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck
}

// gatekeeperProc is Gatekeeper's manager running out of cluster as the mutating webhook.
type gatekeeperProc struct {
	cmd      *exec.Cmd
	url      string
	caPEM    []byte
	c        *cluster
	mutators []*unstructured.Unstructured
}

func (g *gatekeeperProc) pid() int { return g.cmd.Process.Pid }

var mutatorGVRs = map[string]string{"Assign": "assign", "AssignMetadata": "assignmetadata", "ModifySet": "modifyset", "AssignImage": "assignimage"}

// startGatekeeper installs Gatekeeper's CRDs, starts its manager with --operation=mutation-webhook
// on 127.0.0.1 only, and waits until it is ready. The process is killed when the test ends.
func startGatekeeper(t *testing.T, c *cluster, bin, crdDir string) *gatekeeperProc {
	ctx := context.Background()
	if bin == "" || crdDir == "" {
		t.Fatalf("%s and %s must be set (make e2e-bench does)", EnvGatekeeperBin, EnvGatekeeperCRDs)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, crd := range readObjects(t, crdDir) {
		if _, err := c.dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("CRD %s: %v", crd.GetName(), err)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := c.dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", crd.GetName(), err)
		}
	}
	c.mapper.(interface{ Reset() }).Reset()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gatekeeperNamespace, Labels: map[string]string{"admission.gatekeeper.sh/ignore": "no-self-managing"}}}
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	dir := t.TempDir()
	caPEM := writeServingCert(t, dir)
	port, health, otlp := freePort(t), freePort(t), freePort(t)
	logPath := filepath.Join(dir, "gatekeeper.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--operation=mutation-webhook",
		"--disable-cert-rotation",
		"--cert-dir="+dir,
		"--host=127.0.0.1", "--port="+strconv.Itoa(port),
		"--health-addr=127.0.0.1:"+strconv.Itoa(health),
		"--metrics-addr=0",
		// The Prometheus exporter binds all interfaces: export to a closed loopback port instead.
		"--metrics-backend=opentelemetry", "--otlp-endpoint=127.0.0.1:"+strconv.Itoa(otlp), "--otlp-metric-interval=1h",
		"--log-level=WARNING",
		"--enable-external-data=false",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+os.Getenv(EnvKubeconfig), "POD_NAMESPACE="+gatekeeperNamespace, "POD_NAME=gatekeeper-e2e")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatekeeperProc{cmd: cmd, url: fmt.Sprintf("https://127.0.0.1:%d/v1/mutate", port), caPEM: caPEM, c: c}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), gatekeeperWebhook, metav1.DeleteOptions{})
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			if len(data) > 4000 {
				data = data[len(data)-4000:]
			}
			t.Logf("Gatekeeper's log (end):\n%s", data)
		}
	})
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("gatekeeper exited: %v", err)
		default:
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		data, _ := os.ReadFile(logPath)
		t.Fatalf("Gatekeeper is not ready: %v\n%s", err, data)
	}
	return g
}

// setMutators replaces the Gatekeeper mutators in the cluster.
func (g *gatekeeperProc) setMutators(t *testing.T, mutators []*unstructured.Unstructured) {
	ctx := context.Background()
	for _, m := range g.mutators {
		gvr := schema.GroupVersionResource{Group: gkfront.Group, Version: m.GroupVersionKind().Version, Resource: mutatorGVRs[m.GetKind()]}
		if err := g.c.dyn.Resource(gvr).Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s %s: %v", m.GetKind(), m.GetName(), err)
		}
	}
	g.mutators = nil
	for _, m := range mutators {
		gvr := schema.GroupVersionResource{Group: gkfront.Group, Version: m.GroupVersionKind().Version, Resource: mutatorGVRs[m.GetKind()]}
		if _, err := g.c.dyn.Resource(gvr).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", m.GetKind(), m.GetName(), err)
		}
		g.mutators = append(g.mutators, m)
	}
}

// register creates the MutatingWebhookConfiguration with the Helm chart's settings.
func (g *gatekeeperProc) register(t *testing.T) {
	ignore := admissionregistrationv1.Ignore
	exact := admissionregistrationv1.Exact
	none := admissionregistrationv1.SideEffectClassNone
	never := admissionregistrationv1.NeverReinvocationPolicy
	timeout := int32(1)
	scope := admissionregistrationv1.AllScopes
	wh := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: gatekeeperWebhook, Labels: map[string]string{labelE2E: "true"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mutation.gatekeeper.sh",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &g.url, CABundle: g.caPEM},
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			FailurePolicy:           &ignore,
			MatchPolicy:             &exact,
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "admission.gatekeeper.sh/ignore", Operator: metav1.LabelSelectorOpDoesNotExist},
				{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{gatekeeperNamespace}},
			}},
			ObjectSelector:     &metav1.LabelSelector{},
			ReinvocationPolicy: &never,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Scope: &scope,
					Resources: []string{"*", "pods/ephemeralcontainers", "pods/exec", "pods/log", "pods/eviction", "pods/portforward",
						"pods/proxy", "pods/attach", "pods/binding", "deployments/scale", "replicasets/scale", "statefulsets/scale",
						"replicationcontrollers/scale", "services/proxy", "nodes/proxy", "services/status"}},
			}},
			SideEffects:    &none,
			TimeoutSeconds: &timeout,
		}},
	}
	if _, err := g.c.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(), wh, metav1.CreateOptions{}); err != nil {
		t.Fatalf("registering Gatekeeper's webhook: %v", err)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeServingCert writes a CA and a serving certificate for 127.0.0.1 (tls.crt, tls.key)
// into dir and returns the CA in PEM.
func writeServingCert(t *testing.T, dir string) []byte {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mapc-e2e-gatekeeper-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "gatekeeper-webhook-service"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for name, data := range map[string][]byte{
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"ca.crt":  caPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caPEM
}
