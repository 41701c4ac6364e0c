package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/verify"
)

// memoryPods returns n Pods: the workload's Pods in turn, each with a distinct name.
func memoryPods(w *Workload, n int) []*unstructured.Unstructured {
	var pods []*unstructured.Unstructured
	for _, o := range w.Objects {
		if o.GetKind() == "Pod" {
			pods = append(pods, o)
		}
	}
	out := make([]*unstructured.Unstructured, n)
	for i := range out {
		p := pods[i%len(pods)].DeepCopy()
		p.SetName(fmt.Sprintf("%s-%04d", p.GetName(), i))
		out[i] = p
	}
	return out
}

// TestVerifyMemoryChild is run by TestBenchReport in a child process (MAPC_BENCH_CHILD=n), so
// that its peak RSS is its own.
func TestVerifyMemoryChild(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MAPC_BENCH_CHILD"))
	if n == 0 {
		t.Skip("run by TestBenchReport")
	}
	var wl WorkloadSpec
	for _, s := range Workloads() {
		if s.Name == "realistic-20" {
			wl = s
		}
	}
	w := load(t, wl)
	layout := compiler.Layout(os.Getenv("MAPC_BENCH_LAYOUT"))
	r := memoryResult{Layout: string(layout), Objects: n}
	peak := newPeakHeap()
	start := time.Now()
	out := compiler.Compile(w.Docs, compiler.Options{Layout: layout})
	if len(out.Problems) > 0 {
		t.Fatal(out.Problems)
	}
	r.Policies = len(out.Policies)
	v, err := verify.New(w.Mutators, out.Policies, verify.Options{Namespaces: w.Namespaces})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var results []verify.Result
	for _, pod := range memoryPods(w, n) {
		res := v.Check(context.Background(), verify.Case{Object: pod})
		if res.Pass {
			r.Passed++
		} else {
			r.Failed++
			if r.Failed == 1 {
				t.Log(verify.Report([]verify.Result{res}))
			}
		}
		r.Orders = res.Orders
		results = append(results, res)
	}
	r.Seconds = time.Since(start).Seconds()
	r.PeakHeapInuse = peak.stop()
	m := ReadMem()
	r.HeapSys, r.Sys, r.TotalAl = m.HeapSys, m.Sys, m.TotalAlloc
	_ = verify.Summary(results)
	r.VmHWM = vmHWM()
	data, _ := json.Marshal(r)
	fmt.Printf("MEMORY %s\n", data)
}

// vmHWM is the process's peak resident set size (Linux /proc/self/status VmHWM), 0 if unknown. Unlike
// getrusage's ru_maxrss seen by a parent, it does not include the parent's memory at fork time.
func vmHWM() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
