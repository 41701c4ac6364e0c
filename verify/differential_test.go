package verify

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/quiet"
	"github.com/mapc-dev/mapc/verify/gen"
)

// Differential testing: generated sets of interacting Gatekeeper mutators (package verify/gen) are
// compiled and every generated object is admitted through Gatekeeper's engine and through the
// compiled policies in every order (all orders up to 4 policies, seeded shuffles beyond).
//
//	go test ./verify -run TestDifferential                   # 3000 cases (300 with -short)
//	go test ./verify -run TestDifferential -diff.n 100000    # or MAPC_DIFF_N=100000
//	go test ./verify -run TestDifferential -diff.seed 1234 -diff.n 1 -v   # one case, printed
var (
	diffN     = flag.Int("diff.n", 0, "number of generated differential cases (default 3000, 300 with -short; env MAPC_DIFF_N)")
	diffSeed  = flag.Uint64("diff.seed", 0, "seed of the first case; case i has seed diff.seed+i (default 1; env MAPC_DIFF_SEED)")
	diffShow  = flag.Int("diff.show", 5, "how many failing cases to print in full")
	diffCanon = flag.Bool("diff.canonical", false, "generate every case with canonical values (gen.GenerateCanonical)")
	diffWrite = flag.String("diff.write", "", "write the YAML of every failing case to this directory (seed-N.yaml), to minimise it")
)

// knownFailures are compiler bugs found by differential testing, each with its minimal case in
// testdata/diff-failures/<name>.yaml. TestDiffFailures skips exactly these files while they fail
// (and says so when one passes, so that the entry is removed once the bug is fixed; the file stays
// as a regression test); TestDifferential counts a generated case that shows the same bug (match)
// as known instead of failing.
var knownFailures = []knownFailure{
	{
		name:   "request-null-field",
		reason: "Gatekeeper fails on the nulls of the request's object (a Pod without containers); the policies take them for missing",
		match: func(c *gen.Case, res *caseResult) bool {
			for _, r := range res.results {
				if strings.Contains(r.WantErr, "(type: <nil>)") || strings.Contains(r.WantErr, "<nil> is not a list of values") {
					return true
				}
			}
			return false
		},
	},
}

// rulesDropOperations reports whether some policy's rules miss a (kind, operation) one of its
// mutations applies to.
func rulesDropOperations(out *compiler.Output) bool {
	for i, g := range out.Groups {
		if i >= len(out.PolicyOf) || out.PolicyOf[i] == nil {
			continue
		}
		rules := out.PolicyOf[i].Policy.Spec.MatchConstraints.ResourceRules
		for _, m := range g.Mutations {
			for _, r := range m.Match.Rules {
				plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
				res := plural.Resource
				for _, op := range r.Operations {
					covered := false
					for _, pr := range rules {
						if (slices.Contains(pr.APIGroups, r.Group) || slices.Contains(pr.APIGroups, "*")) &&
							(slices.Contains(pr.APIVersions, r.Version) || slices.Contains(pr.APIVersions, "*")) &&
							(slices.Contains(pr.Resources, res) || slices.Contains(pr.Resources, "*")) &&
							(slices.Contains(pr.Operations, admissionregistrationv1.OperationType(op)) || slices.Contains(pr.Operations, admissionregistrationv1.OperationAll)) {
							covered = true
						}
					}
					if !covered {
						return true
					}
				}
			}
		}
	}
	return false
}

type knownFailure struct {
	name   string // testdata/diff-failures/<name>.yaml
	reason string
	// match recognises the bug in a generated case that failed with res.
	match func(c *gen.Case, res *caseResult) bool
}

// A refusal is clear when it says why no policy can do what Gatekeeper does: it matches
// clearRefusals, or it explains Gatekeeper's behaviour (names Gatekeeper) and is not one of the
// compiler's internal failures (unclearRefusals). Any other refusal fails the test.
var (
	clearRefusals = []*regexp.Regexp{
		regexp.MustCompile(`no policy can (reproduce|match)`),
		regexp.MustCompile(`Gatekeeper fails every request this mutator sees with this selector`),
		regexp.MustCompile(`key value .* of list element \d+ is not a string`),
		regexp.MustCompile(`\(use --kubernetes-version [0-9.]+ or later\)`),
	}
	unclearRefusals = []*regexp.Regexp{
		regexp.MustCompile(`rejects the generated expression`),
		regexp.MustCompile(`(?i)unknown (path node|operation)|unsupported type|internal error|cannot marshal|panic`),
		regexp.MustCompile(`two consecutive list steps|ends at the key field`),
	}
)

func envOr(flagVal, def int, env string) int {
	if flagVal > 0 {
		return flagVal
	}
	if s := os.Getenv(env); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// quietLogs silences the logs of the API server's code (klog) and of Gatekeeper's (controller-runtime),
// which the engines print for every policy set and failed match.
func quietLogs(t *testing.T) {
	quiet.Klog()
	ctrllog.SetLogger(logr.Discard())
}

func TestDifferential(t *testing.T) {
	quietLogs(t)
	def := 3000
	if testing.Short() {
		def = 300
	}
	n := envOr(*diffN, def, "MAPC_DIFF_N")
	first := uint64(1)
	if *diffSeed > 0 {
		first = *diffSeed
	} else if s := os.Getenv("MAPC_DIFF_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MAPC_DIFF_SEED=%q: %v", s, err)
		}
		first = v
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		st       diffStats
		failures []*caseResult
	)
	st.refusals = map[string]int{}
	st.known = map[string]int{}
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	start := time.Now()
	progress := n >= 20000
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				c := gen.Generate(seed)
				if *diffCanon {
					c = gen.GenerateCanonical(seed)
				}
				res := runCase(ctx, c)
				known := ""
				if res.failed() && ctx.Err() == nil {
					known = knownFor(c, res)
				}
				mu.Lock()
				st.add(c, res)
				if res.failed() {
					if known != "" {
						st.known[known]++
					} else {
						failures = append(failures, res)
						if len(failures) >= 50 {
							cancel() // enough to go on with
						}
					}
				}
				if progress && st.cases%5000 == 0 {
					fmt.Fprintf(os.Stderr, "differential: %d/%d cases, %d failures, %v\n", st.cases, n, len(failures), time.Since(start).Round(time.Second))
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := 0; i < n; i++ {
		select {
		case seeds <- first + uint64(i):
		case <-ctx.Done():
			break feed
		}
	}
	close(seeds)
	wg.Wait()

	sort.Slice(failures, func(i, j int) bool { return failures[i].seed < failures[j].seed })
	if *diffWrite != "" {
		for _, f := range failures {
			if err := os.WriteFile(filepath.Join(*diffWrite, f.name+".yaml"), []byte(f.yaml), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	for i, f := range failures {
		if i < *diffShow {
			t.Errorf("%s", f.String())
		} else {
			t.Errorf("%s: %s (not printed; rerun with -diff.seed %d -diff.n 1)", f.name, f.summary(), f.seed)
		}
	}
	t.Logf("%d cases from seed %d in %v (%d workers)\n%s", st.cases, first, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0), st.String())
}

// TestDiffFailures runs the minimal cases of the bugs found so far.
func TestDiffFailures(t *testing.T) {
	quietLogs(t)
	files, _ := filepath.Glob("testdata/diff-failures/*.yaml")
	known := map[string]string{}
	for _, k := range knownFailures {
		known[k.name] = k.reason
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := gen.ParseCase(name, data)
			if err != nil {
				t.Fatal(err)
			}
			res := runCase(context.Background(), c)
			reason, isKnown := known[name]
			switch {
			case res.failed() && isKnown:
				t.Skipf("known bug: %s\n%s", reason, res.summary())
			case res.failed():
				t.Errorf("%s", res.String())
			case isKnown:
				t.Logf("%s passes now: remove it from knownFailures in verify/differential_test.go", f)
			}
		})
	}
	for _, k := range knownFailures {
		if _, err := os.Stat(filepath.Join("testdata/diff-failures", k.name+".yaml")); err != nil {
			t.Errorf("knownFailures lists %s, which has no testdata/diff-failures/%s.yaml", k.name, k.name)
		}
	}
}

func knownFor(c *gen.Case, res *caseResult) string {
	for _, k := range knownFailures {
		if k.match != nil && k.match(c, res) {
			return k.name
		}
	}
	return ""
}

// caseResult is what became of one case.
type caseResult struct {
	name    string
	seed    uint64
	yaml    string
	refused []string // clear refusals (the case was not admitted)
	// problem is a failure of the pipeline itself (unclear refusal, engine error); results are
	// the admissions that differ.
	problem string
	results []Result
	// gkConflicts are the mutators Gatekeeper skips for schema conflicts.
	gkConflicts []string
	out         *compiler.Output
	admitted    int
	orders      int
	policies    int
}

func (r *caseResult) failed() bool { return r.problem != "" || len(r.results) > 0 }

func (r *caseResult) summary() string {
	if r.problem != "" {
		return firstLine(r.problem)
	}
	var s []string
	for _, x := range r.results {
		s = append(s, x.Case+": "+x.Reason)
	}
	return strings.Join(s, "; ")
}

func (r *caseResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "differential case %s fails: %s\n", r.name, r.summary())
	if r.problem != "" {
		b.WriteString(r.problem + "\n")
	}
	if len(r.results) > 0 {
		b.WriteString(Report(r.results))
	}
	b.WriteString("--- the case, ready to run (mapc compile -f it; kubectl apply the objects):\n")
	b.WriteString(r.yaml)
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// runCase compiles the case's mutators from its YAML and admits every object both ways.
func runCase(ctx context.Context, c *gen.Case) *caseResult {
	res := &caseResult{name: c.Name, seed: c.Seed, yaml: c.YAML()}
	docs, err := source.Parse(c.Name+".yaml", []byte(res.yaml))
	if err != nil {
		res.problem = "the case's YAML does not parse: " + err.Error()
		return res
	}
	opts := compiler.Options{Layout: compiler.Layout(c.Layout), FailurePolicy: admissionregistrationv1.FailurePolicyType(c.FailurePolicy)}
	if c.KubernetesVersion != "" {
		v, err := compiler.ParseVersion(c.KubernetesVersion)
		if err != nil {
			res.problem = err.Error()
			return res
		}
		opts.KubernetesVersion = v
	}
	res.out = compiler.Compile(docs, opts)
	res.policies = len(res.out.Policies)
	if rulesDropOperations(res.out) {
		res.problem = "a policy's rules miss a kind or operation one of its mutations applies to"
		return res
	}
	for _, p := range res.out.Problems {
		msg := p.Error()
		if gp, ok := p.(*gatekeeper.Problem); ok {
			msg = gp.Msg
		}
		if !isClearRefusal(msg) {
			res.problem = "the compiler refuses without a clear reason: " + p.Error()
			return res
		}
		res.refused = append(res.refused, msg)
	}
	if len(res.refused) > 0 {
		return res
	}
	var muts []*unstructured.Unstructured
	var nss []*corev1.Namespace
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		switch {
		case gatekeeper.IsMutator(d.Object):
			muts = append(muts, d.Object)
		case d.Object.GetKind() == "Namespace" && d.Object.GetAPIVersion() == "v1":
			ns := &corev1.Namespace{}
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, ns); err != nil {
				res.problem = "namespace: " + err.Error()
				return res
			}
			nss = append(nss, ns)
			objs = append(objs, d.Object)
		default:
			objs = append(objs, d.Object)
		}
	}
	v, err := New(muts, res.out.Policies, Options{Namespaces: nss, Idempotence: true, Seed: int64(c.Seed)})
	if err != nil {
		res.problem = "cannot build the engines: " + err.Error()
		return res
	}
	defer v.Close()
	res.gkConflicts = v.ref.(*gatekeeperReference).engine.Conflicts()
	// The compiler emits nothing for a mutator Gatekeeper skips for a schema conflict.
	for _, g := range res.out.Groups {
		for _, m := range g.Mutations {
			if slices.Contains(res.gkConflicts, m.Source.Kind+"/"+m.Source.Name) {
				res.problem = fmt.Sprintf("Gatekeeper skips %s for schema conflicts, but the compiler emits %s", strings.Join(res.gkConflicts, ", "), m.Source)
				return res
			}
		}
	}
	op := admissionv1.Operation(c.Operation)
	for _, o := range objs {
		if ctx.Err() != nil {
			break
		}
		vc := Case{Object: o, Operation: op}
		if op == admissionv1.Update {
			vc.OldObject = o
		}
		cases := []Case{vc}
		if dc, ok := DebugCase(o); ok && op != admissionv1.Update {
			// Gatekeeper's webhook, as its Helm chart installs it, mutates kubectl debug's
			// request too, and a Pod's binding, and a Service's status update.
			cases = append(cases, dc)
		}
		if bc, ok := BindingCase(o); ok && op != admissionv1.Update {
			cases = append(cases, bc)
		}
		if sc, ok := ServiceStatusCase(o); ok && op != admissionv1.Update {
			cases = append(cases, sc)
		}
		for _, vc := range cases {
			r := v.Check(ctx, vc)
			res.admitted++
			res.orders += r.Orders
			if !r.Pass {
				res.results = append(res.results, r)
			}
		}
	}
	return res
}

func isClearRefusal(msg string) bool {
	for _, re := range clearRefusals {
		if re.MatchString(msg) {
			return true
		}
	}
	for _, re := range unclearRefusals {
		if re.MatchString(msg) {
			return false
		}
	}
	return strings.Contains(msg, "Gatekeeper")
}

type diffStats struct {
	cases, mutators, discarded, policies, admitted, orders int
	refusedCases                                           int
	refusals                                               map[string]int
	known                                                  map[string]int
	kinds                                                  [4]int
}

var mutatorKinds = []string{"Assign", "AssignMetadata", "ModifySet", "AssignImage"}

func (s *diffStats) add(c *gen.Case, r *caseResult) {
	s.cases++
	s.mutators += len(c.Mutators)
	s.discarded += c.Discarded
	s.policies += r.policies
	s.admitted += r.admitted
	s.orders += r.orders
	for _, m := range c.Mutators {
		for i, k := range mutatorKinds {
			if m.GetKind() == k {
				s.kinds[i]++
			}
		}
	}
	if len(r.refused) > 0 {
		s.refusedCases++
	}
	for _, m := range r.refused {
		s.refusals[refusalClass(m)]++
	}
}

var (
	namesInMessage = regexp.MustCompile(`((Assign|AssignMetadata|ModifySet|AssignImage)/[-a-z0-9]+(, )?)+`)
	valueInMessage = regexp.MustCompile(`value .* as .* \(`)
)

func refusalClass(msg string) string {
	msg = namesInMessage.ReplaceAllString(msg, "…")
	msg = valueInMessage.ReplaceAllString(msg, "value … as … (")
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	return msg
}

func (s *diffStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mutators: %d (", s.mutators)
	for i, k := range mutatorKinds {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, s.kinds[i])
	}
	fmt.Fprintf(&b, "), %d more generated and discarded because Gatekeeper rejects them\n", s.discarded)
	fmt.Fprintf(&b, "policies: %d; admissions: %d objects in %d policy orders\n", s.policies, s.admitted, s.orders)
	fmt.Fprintf(&b, "cases refused by the compiler (not admitted): %d\n", s.refusedCases)
	for _, k := range sortedByCount(s.refusals) {
		fmt.Fprintf(&b, "  %6d  %s\n", s.refusals[k], k)
	}
	if len(s.known) > 0 {
		b.WriteString("cases failing with a known bug (testdata/diff-failures):\n")
		for _, k := range sortedByCount(s.known) {
			fmt.Fprintf(&b, "  %6d  %s\n", s.known[k], k)
		}
	}
	return b.String()
}

func sortedByCount(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
