package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

// TestBenchReport is make bench: every measurement, printed as tables with ratios measured in the
// same run. It only runs with MAPC_BENCH=1 (it takes a few minutes); go test ./... runs
// TestBenchSmoke instead.
func TestBenchReport(t *testing.T) {
	if os.Getenv("MAPC_BENCH") == "" {
		t.Skip("set MAPC_BENCH=1 (make bench) to run the benchmarks")
	}
	out := io.Writer(os.Stdout)
	benchtimeSet := false
	flag.Visit(func(f *flag.Flag) { benchtimeSet = benchtimeSet || f.Name == "test.benchtime" })
	if f := flag.Lookup("test.benchtime"); f != nil && !benchtimeSet {
		_ = f.Value.Set("300ms") // three rounds of 300 ms rather than one of 1 s
	}
	fmt.Fprintf(out, "\nmapc bench — %s, %s/%s, GOMAXPROCS=%d, %d CPUs\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
	ok := true
	if section("admission") {
		ok = reportAdmission(t, out, Workloads(), false) && ok
	}
	if section("compile") {
		ok = reportCompile(t, out, compileSizes, budget()) && ok
	}
	if section("memory") {
		ok = reportMemory(t, out, memoryObjects) && ok
	}
	if !ok {
		t.Error("the report found problems (marked ✗ above)")
	}
}

// section reports whether MAPC_BENCH_SECTIONS (comma-separated: admission, compile, memory;
// default all) selects name.
func section(name string) bool {
	v := os.Getenv("MAPC_BENCH_SECTIONS")
	if v == "" {
		return true
	}
	for _, s := range strings.Split(v, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// TestBenchSmoke runs the harness quickly (a few admissions per engine, a small compile, no
// child process): it checks that the engines agree and that every measurement works.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	var b strings.Builder
	var wls []WorkloadSpec
	for _, wl := range Workloads() {
		if wl.Name == "examples" || wl.Name == "kyverno-examples" {
			wls = append(wls, wl)
		}
	}
	ok := reportAdmission(t, &b, wls, true)
	ok = reportCompile(t, &b, []int{10}, time.Minute) && ok
	t.Log("\n" + b.String())
	if !ok {
		t.Error("problems (marked ✗)")
	}
}

// ---- 1 and 2: per-request admission ----

// rounds is how many times each engine is benchmarked (MAPC_BENCH_ROUNDS, default 3).
var rounds = func() int {
	if n, err := strconv.Atoi(os.Getenv("MAPC_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}()

func reportAdmission(t *testing.T, out io.Writer, workloads []WorkloadSpec, quick bool) bool {
	ctx := context.Background()
	ok := true
	fmt.Fprintf(out, "\n1. Per-request admission of one object, in process. ns/op, allocs/op: testing.Benchmark, the fastest of %d rounds over all engines\n"+
		"   (-test.benchtime each); CEL: runtime cost units the API server's evaluators count, summed over every expression that runs;\n"+
		"   ×GK, ×hand: ratios to Gatekeeper's engine and to the hand-written policies (%s where the workload has them);\n"+
		"   compile: compiler.Compile of the workload;\n"+
		"   per object: the mutations the timed object goes through (those whose policy matches it); ops: the JSONPatch operations\n"+
		"   they give it (the API server converts, marshals and applies each on its own); %s: Kyverno's engine, a program\n"+
		"   reached over a pipe, so its time includes the IPC and is in no ratio\n\n", rounds, engExpertPerPolicy, engKyverno)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tengine\tcompile\tpolicies\tmutations\tper object\tops\tns/op\tallocs/op\t×GK\t×hand\tCEL cost\tCEL ×hand\t")
	var notes []string
	for _, wl := range workloads {
		cases, mismatch := setupAdmit(t, wl)
		ns := map[string]float64{}
		for _, c := range cases {
			if c.err != nil || !quick {
				continue
			}
			start := time.Now()
			if _, err := c.e.Admit(ctx, c.in); err != nil {
				t.Errorf("%s %s: %v", c.workload, c.engine, err)
			}
			ns[c.engine] = float64(time.Since(start).Nanoseconds())
		}
		// Rounds over all engines in turn; the fastest round of each counts (the machine is shared).
		for r := 0; r < rounds && !quick; r++ {
			for _, c := range cases {
				if c.err != nil {
					continue
				}
				res := testing.Benchmark(func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := c.e.Admit(ctx, c.in); err != nil {
							b.Fatal(err)
						}
					}
				})
				if v := float64(res.T.Nanoseconds()) / float64(res.N); r == 0 || v < ns[c.engine] {
					ns[c.engine] = v
				}
				c.allocs = res.AllocsPerOp()
			}
		}
		// The ratios' base: the hand-written policies, those written one per input policy where
		// the workload has them (the shape of mapc's output).
		var hand *admitCase
		for _, c := range cases {
			if c.err == nil && (c.engine == engExpertPerPolicy || c.engine == engExpert && (hand == nil || hand.engine != engExpertPerPolicy)) {
				hand = c
			}
		}
		for _, c := range cases {
			if c.err != nil {
				ok = false
				notes = append(notes, fmt.Sprintf("✗ %s, %s: %s", c.workload, c.engine, firstLine(c.err)))
				comp := ""
				if c.compile > 0 {
					comp = round(c.compile)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t✗ not built\t\t\t\t\t\t\t\t\t\t\n", c.workload, c.engine, comp)
				continue
			}
			pol, mut, per, ops := "-", "-", "-", "-"
			if c.sets != nil {
				pol, mut = fmt.Sprint(c.policies), fmt.Sprint(c.mutations)
				if c.costErr == nil {
					per, ops = fmt.Sprint(c.perObject), fmt.Sprint(c.ops)
				}
			}
			ratioRef, ratioHand, cost, costHand := "", "", "", ""
			if ns[engGatekeeper] > 0 {
				ratioRef = fmt.Sprintf("%.2f", ns[c.engine]/ns[engGatekeeper])
			}
			if hand != nil && c.engine != engKyverno {
				ratioHand = fmt.Sprintf("%.2f", ns[c.engine]/ns[hand.engine])
			}
			if c.sets != nil {
				if c.costErr != nil {
					ok = false
					cost = "✗"
					notes = append(notes, fmt.Sprintf("✗ %s, %s: CEL cost: %s", c.workload, c.engine, firstLine(c.costErr)))
				} else {
					cost = fmt.Sprint(c.cost.CEL)
					if hand != nil && hand.costErr == nil && hand.cost.CEL > 0 {
						costHand = fmt.Sprintf("%.2f", float64(c.cost.CEL)/float64(hand.cost.CEL))
					}
				}
			}
			allocs := ""
			if !quick {
				allocs = fmt.Sprint(c.allocs)
			}
			comp := ""
			if c.compile > 0 {
				comp = round(c.compile)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", c.workload, c.engine, comp, pol, mut, per, ops, ns[c.engine], allocs,
				ratioRef, ratioHand, cost, costHand)
		}
		if mismatch != "" {
			ok = false
			notes = append(notes, "✗ "+mismatch)
			t.Errorf("%s", mismatch)
		} else {
			objs := wl.Objects
			if wl.MoreObjects != "" {
				objs += " and " + wl.MoreObjects
			}
			notes = append(notes, fmt.Sprintf("✓ %s: every engine built stores the same object for each of %s", wl.Name, objs))
		}
	}
	tw.Flush()
	fmt.Fprintln(out)
	for _, n := range notes {
		fmt.Fprintln(out, "   "+strings.ReplaceAll(n, "\n", "\n     "))
	}
	return ok
}

// ---- 3: compile throughput ----

var (
	compileSizes  = []int{100, 200, 500, 1000, 2000, 5000, 10000}
	compileRuns   = 3                // per size and layout; the fastest counts
	compileRepeat = 10 * time.Second // no second run after a run this long
	compileBudget = 60 * time.Second // a series stops before a size predicted to take longer
)

// The target for GenerateRealistic(10000, 1), fused.
const (
	targetMutators = 10000
	targetTime     = 5 * time.Second
	targetHeap     = 1 << 30
)

// The target for GenerateKyverno(1000).
const (
	targetKyvernoPolicies = 1000
	targetKyvernoTime     = 2 * time.Second
)

// compileMix is a generator of the compile section.
type compileMix struct {
	name string
	gen  func(n int) []byte
	// strict: a refusal fails the report (the independent mix always compiles); the realistic
	// mix shows where the compiler's limits are, and its refusals are reported, not failed.
	strict bool
	// kyverno: Kyverno policies, which compile in one layout (one policy per Kyverno policy).
	kyverno bool
	// fresh, when set, replaces gen: it writes n policies starting at from, none seen before in
	// the series, and only the first run of a size counts. The compiler remembers the expressions
	// that type-checked (cel's shape cache); where their shapes repeat little, as in Kyverno's
	// route, a second run of the same policies measures that cache, not the compiler.
	fresh func(from, n int) []byte
}

var compileMixes = []compileMix{
	{"independent", Generate, true, false, nil},
	{"realistic", func(n int) []byte { return GenerateRealistic(n, 1) }, false, false, nil},
	{"kyverno", nil, true, true, generateKyverno},
}

// budget is compileBudget or MAPC_BENCH_COMPILE_BUDGET (a Go duration, e.g. 10m to run every size).
func budget() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("MAPC_BENCH_COMPILE_BUDGET")); err == nil {
		return d
	}
	return compileBudget
}

// predict extrapolates the compile time of next mutators from the last two sizes measured
// (growth exponent at least 1).
func predict(prevN int, prev time.Duration, n int, took time.Duration, next int) time.Duration {
	e := 1.0
	if prevN > 0 && prev > 0 && took > prev {
		e = max(1, math.Log(float64(took)/float64(prev))/math.Log(float64(n)/float64(prevN)))
	}
	return time.Duration(float64(took) * math.Pow(float64(next)/float64(n), e))
}

func reportCompile(t *testing.T, out io.Writer, sizes []int, budget time.Duration) bool {
	ok := true
	fmt.Fprintf(out, "\n3. Compile throughput: generated mutators, source.Parse then compiler.Compile, the best of %d runs (one when a run takes over %s; kyverno: one);\n"+
		"   independent: bench.Generate (nearly independent mutators); realistic: bench.GenerateRealistic(n, 1) (a platform's families,\n"+
		"   with sidecars and merges into one list); kyverno: bench.GenerateKyverno (Kyverno policies, one or two mutate rules each,\n"+
		"   one MutatingAdmissionPolicy per policy: layout -), each size new policies of its stream (none compiled before in the process);\n"+
		"   a series stops before a size extrapolated to take over %s\n\n", compileRuns, compileRepeat, budget)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mix\tmutators\tlayout\tparse\tcompile\tcompile/mutator\tgrowth\tgroups\tpolicies\tmutations\tCEL bytes\tpeak heap\theap growth\t")
	var notes []string
	target := fmt.Sprintf("target: %d realistic mutators, fused, in under %s and %s of heap: not measured in this run", targetMutators, targetTime, MiB(targetHeap))
	kyvTarget := fmt.Sprintf("target: %d Kyverno policies in under %s: not measured in this run", targetKyvernoPolicies, targetKyvernoTime)
	for _, mix := range compileMixes {
		layouts := []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator}
		if mix.kyverno {
			layouts = layouts[:1] // Kyverno's route ignores the layout
		}
		for _, layout := range layouts {
			shown := string(layout)
			if mix.kyverno {
				shown = "-"
			}
			var first float64
			var prevN int
			var prev time.Duration
			stopped := false
			from := 0
			for i, n := range sizes {
				if stopped {
					continue
				}
				var data []byte
				runs := compileRuns
				if mix.fresh != nil {
					data, runs = mix.fresh(from, n), 1
					from += n
				} else {
					data = mix.gen(n)
				}
				runtime.GC()
				start := time.Now()
				docs, err := source.Parse("generated.yaml", data)
				if err != nil {
					t.Fatal(err)
				}
				parse := time.Since(start)
				runtime.GC()
				base := ReadMem().HeapInuse
				peak := newPeakHeap()
				start = time.Now()
				res := compiler.Compile(docs, compiler.Options{Layout: layout})
				took := time.Since(start)
				m := peak.stop()
				heap := m - min(base, m)
				// The best of compileRuns: one run on a shared machine varies by ±15 %.
				for r := 1; r < runs && took < compileRepeat; r++ {
					runtime.GC()
					start := time.Now()
					compiler.Compile(docs, compiler.Options{Layout: layout})
					took = min(took, time.Since(start))
				}
				if mix.name == "realistic" && n == targetMutators && layout == compiler.LayoutFused {
					verdict := "met"
					if took >= targetTime || m >= targetHeap || len(res.Problems) > 0 {
						verdict = "✗ missed"
					}
					target = fmt.Sprintf("target: %d realistic mutators, fused, in under %s and %s of heap: %s (%s, peak heap %s, %d refused)",
						targetMutators, targetTime, MiB(targetHeap), verdict, round(took), MiB(m), len(res.Problems))
				}
				if mix.kyverno && n == targetKyvernoPolicies {
					verdict := "met"
					if parse+took >= targetKyvernoTime || len(res.Problems) > 0 {
						verdict = "✗ missed"
					}
					kyvTarget = fmt.Sprintf("target: %d Kyverno policies in under %s: %s (parse %s + compile %s, peak heap %s, %d refused)",
						targetKyvernoPolicies, targetKyvernoTime, verdict, round(parse), round(took), MiB(m), len(res.Problems))
				}
				if len(res.Problems) > 0 {
					ok = ok && !mix.strict
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t✗ %d refused\t\t\t\t\t\t%s\t%s\t\n", mix.name, n, shown, round(parse), round(took), len(res.Problems), MiB(m), MiB(heap))
					notes = append(notes, fmt.Sprintf("✗ %s, %d mutators, %s: %s", mix.name, n, shown, firstLine(res.Problems[0])))
				}
				if i+1 < len(sizes) {
					if p := predict(prevN, prev, n, took, sizes[i+1]); p > budget {
						stopped = true
						notes = append(notes, fmt.Sprintf("%s, %s: %v and more not run: %d would take about %s (extrapolated)", mix.name, shown, sizes[i+1:], sizes[i+1], round(p)))
					}
				}
				prevN, prev = n, took
				if len(res.Problems) > 0 {
					continue
				}
				per := float64(took.Nanoseconds()) / float64(n)
				if first == 0 {
					first = per
				}
				muts, size := 0, 0
				for _, p := range res.Policies {
					muts += len(p.Policy.Spec.Mutations)
					size += celBytes(p)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.2f\t%d\t%d\t%d\t%d\t%s\t%s\t\n", mix.name, n, shown, round(parse), round(took),
					round(time.Duration(per)), per/first, len(res.Groups), len(res.Policies), muts, size, MiB(m), MiB(heap))
			}
		}
	}
	tw.Flush()
	fmt.Fprintf(out, "\n   growth: compile time per mutator relative to the first size (1.00 everywhere = linear); peak heap: the highest HeapInuse\n"+
		"   sampled every 5 ms during the first Compile; heap growth: that minus HeapInuse before it\n")
	fmt.Fprintln(out, "   "+target)
	fmt.Fprintln(out, "   "+kyvTarget)
	for _, n := range notes {
		fmt.Fprintln(out, "   "+n)
	}
	return ok
}

func celBytes(p *emit.Policy) int {
	n := 0
	for _, m := range p.Policy.Spec.Mutations {
		if m.JSONPatch != nil {
			n += len(m.JSONPatch.Expression)
		}
		if m.ApplyConfiguration != nil {
			n += len(m.ApplyConfiguration.Expression)
		}
	}
	for _, c := range p.Policy.Spec.MatchConditions {
		n += len(c.Expression)
	}
	return n
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(100 * time.Nanosecond).String()
	}
}

// peakHeap samples HeapInuse every few milliseconds until stopped.
type peakHeap struct {
	done chan struct{}
	max  chan uint64
}

func newPeakHeap() *peakHeap {
	p := &peakHeap{done: make(chan struct{}), max: make(chan uint64)}
	go func() {
		var m uint64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if h := ReadMem().HeapInuse; h > m {
				m = h
			}
			select {
			case <-p.done:
				p.max <- m
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *peakHeap) stop() uint64 {
	close(p.done)
	return <-p.max
}

// ---- 4: memory of verify on 1,000 objects ----

const memoryObjects = 1000

// memoryResult is what the child process reports.
type memoryResult struct {
	Layout                string
	Objects, Policies     int
	Orders                int
	Passed, Failed        int
	Seconds               float64
	PeakHeapInuse         uint64
	HeapSys, Sys, TotalAl uint64
	VmHWM                 uint64
}

func reportMemory(t *testing.T, out io.Writer, n int) bool {
	fmt.Fprintf(out, "\n4. Memory of verify (verify.New + Check, results kept as mapc verify keeps them) on %d Pods with the realistic-20 set,\n"+
		"   in a child process (peak RSS: the child's VmHWM; heap: runtime.MemStats)\n\n", n)
	cmd := exec.Command(os.Args[0], "-test.run=^TestVerifyMemoryChild$", "-test.count=1")
	layout := compiler.LayoutFused
	for _, wl := range Workloads() {
		if wl.Name == "realistic-20" {
			w := load(t, wl)
			if _, err := w.Compile(layout); err != nil {
				layout = compiler.LayoutPerMutator
				fmt.Fprintf(out, "   the fused layout is refused (%s): measured with per-mutator\n\n", firstLine(err))
			}
		}
	}
	cmd.Env = append(os.Environ(), fmt.Sprintf("MAPC_BENCH_CHILD=%d", n), "MAPC_BENCH_LAYOUT="+string(layout))
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	if err != nil {
		t.Errorf("memory child: %v\n%s", err, data)
		return false
	}
	var r memoryResult
	line := ""
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "MEMORY ") {
			line = strings.TrimPrefix(l, "MEMORY ")
		}
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Errorf("memory child: %v\n%s", err, data)
		return false
	}
	rss := r.VmHWM
	if rss == 0 { // not Linux: getrusage, which may include the parent's memory at fork time
		rss = uint64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss) * 1024
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "objects\tlayout\tpolicies\torders/object\tpassed\tfailed\ttime\tpeak RSS\tpeak heap in use\tHeapSys\tSys\tTotalAlloc\t")
	fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%.1fs\t%s\t%s\t%s\t%s\t%s\t\n", r.Objects, r.Layout, r.Policies, r.Orders, r.Passed, r.Failed, r.Seconds,
		MiB(rss), MiB(r.PeakHeapInuse), MiB(r.HeapSys), MiB(r.Sys), MiB(r.TotalAl))
	tw.Flush()
	return r.Failed == 0
}
