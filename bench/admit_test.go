package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
)

// Engine names, in report order.
const (
	engGatekeeper = "gatekeeper"
	engNone       = "API server, no policy"
	engFused      = "mapc fused"
	engPerMutator = "mapc per-mutator"
	engExpert     = "hand-written"
	// engExpertPerPolicy: hand-written, one policy per input policy; the ratios' base where a
	// workload has it.
	engExpertPerPolicy = "hand-written per policy"
	// Kyverno's workloads: Kyverno's engine is a separate program reached over a pipe, so its
	// time includes the IPC and is no ratio's base; mapc compiles Kyverno policies in one layout.
	engKyverno = "kyverno engine (incl. IPC)"
	engMapc    = "mapc"
)

// admitCase is one engine ready to admit a workload's bench object.
type admitCase struct {
	workload, engine    string
	e                   Engine
	sets                []admission.PolicySet // nil for Gatekeeper
	policies, mutations int
	in                  *unstructured.Unstructured // the bench object, normalized
	err                 error                      // why the engine could not be built (e.g. a refusal)
	cost                struct{ CEL int64 }        // runtime cost units, summed over every evaluation
	perObject           int                        // mutations evaluated on the bench object
	ops                 int                        // the JSONPatch operations they give it
	costErr             error
	allocs              int64
	compile             time.Duration // for compiled policies
}

// setupAdmit builds every engine for the workload (Gatekeeper's or Kyverno's, the compiled
// policies, the hand-written ones), checks that all of them store the same object
// for every object of the workload (mismatch is the first difference, "" if none) and meters the
// CEL cost of the policies on the bench object. Cases whose engine could not be built carry err.
func setupAdmit(tb testing.TB, wl WorkloadSpec) (cases []*admitCase, mismatch string) {
	tb.Helper()
	ctx := context.Background()
	w := load(tb, wl)
	in, err := Result(ctx, identity{}, w.Bench)
	if err != nil {
		tb.Fatal(err)
	}
	add := func(engine string, sets []admission.PolicySet, err error, took time.Duration) {
		c := &admitCase{workload: wl.Name, engine: engine, sets: sets, in: in, err: err, compile: took}
		if err == nil {
			c.policies, c.mutations = Count(sets)
			c.e, c.err = NewMAP(w, sets)
		}
		cases = append(cases, c)
	}
	var kyv *Kyverno
	if w.Kyverno {
		path, err := kyvernobin.Path()
		if err != nil {
			tb.Fatal(err)
		}
		kyv, err = NewKyverno(w, path)
		if err != nil {
			tb.Fatal(err)
		}
		cases = append(cases, &admitCase{workload: wl.Name, engine: engKyverno, e: kyv, in: in})
		add(engNone, []admission.PolicySet{}, nil, 0)
		start := time.Now()
		sets, err := w.Compile(compiler.LayoutFused)
		took := time.Since(start)
		if err == nil {
			sets = kyv.InputOrder(sets)
		}
		add(engMapc, sets, err, took)
	} else {
		gk, err := NewGatekeeper(w)
		if err != nil {
			tb.Fatal(err)
		}
		cases = append(cases, &admitCase{workload: wl.Name, engine: engGatekeeper, e: gk, in: in})
		add(engNone, []admission.PolicySet{}, nil, 0)
		for _, l := range []struct {
			name   string
			layout compiler.Layout
		}{{engFused, compiler.LayoutFused}, {engPerMutator, compiler.LayoutPerMutator}} {
			start := time.Now()
			sets, err := w.Compile(l.layout)
			add(l.name, sets, err, time.Since(start))
		}
	}
	if wl.Expert != "" {
		sets, err := ReadPolicies(Path(wl.Expert))
		add(engExpert, sets, err, 0)
	}
	if wl.ExpertPerPolicy != "" {
		sets, err := ReadPolicies(Path(wl.ExpertPerPolicy))
		if err == nil && kyv != nil {
			sets = kyv.InputOrder(sets) // as the compiled policies, in the order the engine applies them
		}
		add(engExpertPerPolicy, sets, err, 0)
	}
	tb.Cleanup(func() {
		for _, c := range cases {
			if c.e != nil {
				c.e.Close()
			}
		}
	})

	engines := map[string]Engine{}
	for _, c := range cases {
		if c.err == nil && c.engine != engNone {
			engines[c.engine] = c.e
		}
	}
	if err := Check(ctx, w, engines); err != nil {
		mismatch = err.Error()
	}

	// The CEL cost is what the plugin's evaluators take from their budgets (admission.CostRecord,
	// as mapc explain reports it), admitting the bench object once; the mutations the object
	// goes through are those the record lists.
	for _, c := range cases {
		if c.err != nil || c.sets == nil {
			continue
		}
		rec := &admission.CostRecord{}
		if _, err := c.e.Admit(admission.WithCostRecord(ctx, rec), in); err != nil {
			c.costErr = err
			continue
		}
		for _, x := range rec.Costs() {
			c.cost.CEL += x.Cost
			if strings.HasPrefix(x.Expression, "mutations[") {
				c.perObject++
				c.ops += x.Operations
			}
		}
	}
	return cases, mismatch
}

// identity is an engine that changes nothing (to normalize objects).
type identity struct{}

func (identity) Admit(_ context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return o.DeepCopy(), nil
}
func (identity) Close() {}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 160 {
		s = s[:160] + " …"
	}
	return s
}

// BenchmarkAdmit: go test -bench Admit ./bench/ (make bench prints the same with ratios).
func BenchmarkAdmit(b *testing.B) {
	ctx := context.Background()
	for _, wl := range Workloads() {
		cases, mismatch := setupAdmit(b, wl)
		if mismatch != "" {
			b.Errorf("%s", mismatch)
		}
		for _, c := range cases {
			b.Run(wl.Name+"/"+strings.NewReplacer(",", "", " ", "-").Replace(c.engine), func(b *testing.B) {
				if c.err != nil {
					b.Skip(firstLine(c.err))
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.e.Admit(ctx, c.in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(c.cost.CEL), "cel-cost")
				b.ReportMetric(float64(c.ops), "ops")
			})
		}
	}
}
