package plan_test

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/bench"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify/gen"
)

// describe prints a plan completely: members, rounds, reasons and couplings of every group.
func describe(groups []*plan.Group) string {
	var b strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&b, "group, %d rounds:", g.Rounds)
		for _, m := range g.Mutations {
			fmt.Fprintf(&b, " %s", m.Source)
		}
		b.WriteString("\n")
		for _, w := range g.Why {
			fmt.Fprintf(&b, "  why: %s\n", w)
		}
		for _, c := range g.Couplings {
			fmt.Fprintf(&b, "  coupling: %s %s stable=%v: %s\n", c.A.Source, c.B.Source, c.Stable, c.Why)
		}
	}
	return b.String()
}

func compileYAML(t *testing.T, name string, data []byte) []*ir.Mutation {
	t.Helper()
	docs, err := source.Parse(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return mutatorsOf(docs)
}

// mutatorsOf lowers the Gatekeeper mutators among docs (bench files hold objects too).
func mutatorsOf(docs []*source.Document) []*ir.Mutation {
	var keep []*source.Document
	for _, d := range docs {
		if gatekeeper.IsMutator(d.Object) {
			keep = append(keep, d)
		}
	}
	return gatekeeper.Compile(keep).Mutations
}

// TestIndexFindsEveryInteraction: the planner's path index must give exactly the plan of
// testing every pair, on the generated differential cases (pooled into sets of about a hundred
// mutators, which interact in every way the generator knows), the docs examples, the bench
// workloads and the generated compile-throughput set.
func TestIndexFindsEveryInteraction(t *testing.T) {
	sets := map[string][]*ir.Mutation{}
	for pool := 0; pool < 12; pool++ {
		var docs []string
		for seed := uint64(pool*25 + 1); seed <= uint64(pool*25+25); seed++ {
			for _, m := range gen.Generate(seed).Mutators {
				m = m.DeepCopy()
				m.SetName(fmt.Sprintf("s%d-%s", seed, m.GetName()))
				y, err := yaml.Marshal(m.Object)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(y))
			}
		}
		sets[fmt.Sprintf("generated pool %d", pool)] = compileYAML(t, "pool.yaml", []byte(strings.Join(docs, "---\n")))
	}
	for _, f := range []string{"../../../examples/gatekeeper", "../../../testdata/bench/realistic-50/mutators.yaml"} {
		docs, err := source.ReadPaths([]string{f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sets[f] = mutatorsOf(docs)
	}
	// An object written whole above another mutator's field (found only looking down from it),
	// defaults of a written limit read by a request default, appended containers, a field
	// defaulted from another (serviceAccountName from serviceAccount) and tested.
	var crafted []*ir.Mutation
	for i := 0; i < 4; i++ {
		crafted = append(crafted, mutations(t,
			assign(fmt.Sprintf("ctx-%d", i), "spec.securityContext", "{runAsNonRoot: true}", ""),
			assign(fmt.Sprintf("fsgroup-%d", i), "spec.securityContext.fsGroup", "1", ""),
			assign(fmt.Sprintf("limit-%d", i), "spec.containers[name: *].resources.limits.cpu", "'1'", ""),
			assign(fmt.Sprintf("request-%d", i), "spec.containers[name: *].resources.requests.cpu", "'1'",
				"    pathTests:\n    - subPath: 'spec.containers[name: *].resources.requests.cpu'\n      condition: MustNotExist\n"),
			assign(fmt.Sprintf("sidecar-%d", i), fmt.Sprintf("spec.containers[name: side%d].image", i), "img", ""),
			assign(fmt.Sprintf("sa-%d", i), "spec.serviceAccount", "robot", ""),
			assign(fmt.Sprintf("san-%d", i), "spec.serviceAccountName", "robot",
				"    pathTests:\n    - subPath: spec.serviceAccountName\n      condition: MustNotExist\n"),
		)...)
	}
	sets["crafted"] = crafted
	sets["bench.Generate(600)"] = compileYAML(t, "generated.yaml", bench.Generate(600))
	for name, ms := range sets {
		if len(ms) < 10 {
			t.Fatalf("%s: only %d mutations", name, len(ms))
		}
		indexed, all := describe(plan.Plan(ms)), describe(plan.PlanAllPairs(ms))
		if indexed != all {
			t.Errorf("%s (%d mutations): the indexed plan differs from testing every pair.\nindexed:\n%s\nall pairs:\n%s", name, len(ms), indexed, all)
		}
		if strings.HasPrefix(name, "generated pool") && !strings.Contains(all, "why:") {
			t.Errorf("%s: no interaction at all; the comparison shows nothing", name)
		}
	}
}
