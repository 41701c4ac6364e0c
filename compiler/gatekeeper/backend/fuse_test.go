package backend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/bench"
	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/backend"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/verify"
)

func compileFile(t *testing.T, paths ...string) []*emit.Policy {
	t.Helper()
	docs, err := source.ReadPaths(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := backend.Compile(docs, route.Options{Layout: route.LayoutFused})
	for _, p := range out.Problems {
		t.Fatal(p)
	}
	return out.Policies
}

// TestEveryKindGroupsJoinKindPolicies: the mutators for every kind also run in a kind's policy
// when that costs the kind no extra mutation, and their own policy then excludes that kind, so a
// Pod of realistic-20 goes through one mutation, not two; so does the docs examples' Pod (41
// mutations, not 42). When they do not fit (five mutations for every kind next to a Pod policy),
// nothing is excluded.
func TestEveryKindGroupsJoinKindPolicies(t *testing.T) {
	ps := compileFile(t, "../../../testdata/bench/realistic-20/mutators.yaml")
	byName := map[string]*emit.Policy{}
	for _, p := range ps {
		byName[p.Policy.Name] = p
	}
	all, pods := byName["gatekeeper-all-resources"], byName["gatekeeper-pods"]
	if all == nil || pods == nil || len(ps) != 2 {
		t.Fatalf("want the all-resources and pods policies, got %d", len(ps))
	}
	ex := all.Policy.Spec.MatchConstraints.ExcludeResourceRules
	if len(ex) != 1 || ex[0].Resources[0] != "pods" || ex[0].APIGroups[0] != "" {
		t.Errorf("the all-resources policy should exclude exactly the pods policy's rules: %+v", ex)
	}
	if len(pods.Policy.Spec.Mutations) != 1 || !strings.Contains(pods.Policy.Annotations[emit.AnnotationSource], "AssignMetadata, name=label-managed") {
		t.Errorf("the pods policy should hold the AssignMetadata mutators in its one mutation: %d mutations, sources %s",
			len(pods.Policy.Spec.Mutations), pods.Policy.Annotations[emit.AnnotationSource])
	}
	for _, p := range compileFile(t, "../../../examples/gatekeeper") {
		ex := p.Policy.Spec.MatchConstraints.ExcludeResourceRules
		if p.Policy.Name == "gatekeeper-all-resources" && (len(ex) != 1 || ex[0].Resources[0] != "pods") {
			t.Errorf("examples: the all-resources policy should exclude the pods policy's rules: %+v", ex)
		}
	}
	// A chain of five label selectors, each waiting for the label the next-sorted mutator adds:
	// five rounds, five mutations for every kind.
	var chain []string
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		sel := ""
		if i < 4 {
			sel = fmt.Sprintf("  match:\n    labelSelector:\n      matchLabels: {l%d: 'y'}\n", i+1)
		}
		chain = append(chain, fmt.Sprintf("apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata:\n  name: %s\nspec:\n%s  location: metadata.labels.l%d\n  parameters:\n    assign:\n      value: 'y'\n", name, sel, i))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chain.yaml"), []byte(strings.Join(chain, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	ps = compileFile(t, dir, "../../../testdata/golden/gatekeeper/fused-reordered-chains/mutators.yaml")
	if len(ps) != 2 {
		t.Fatalf("want the all-resources and pods policies, got %d", len(ps))
	}
	for _, p := range ps {
		if n := len(p.Policy.Spec.Mutations); p.Policy.Name == "gatekeeper-all-resources" && n <= 4 {
			t.Errorf("the chain should take more than 4 mutations, got %d", n)
		}
		if len(p.Policy.Spec.MatchConstraints.ExcludeResourceRules) > 0 {
			t.Errorf("%s excludes %+v although the mutators for every kind (five mutations) were not merged", p.Policy.Name, p.Policy.Spec.MatchConstraints.ExcludeResourceRules)
		}
	}
}

// TestExpressionOverParserLimitRefused: a mutation whose expression the API server's CEL parser
// would refuse (longer than cel.MaxExpressionCodePoints) is refused at compile time in both
// layouts, saying why (not with the expression's text); a shorter one compiles.
func TestExpressionOverParserLimitRefused(t *testing.T) {
	for _, n := range []int{20_000, 40_000} { // the value appears three times (where each parent is missing)
		doc := fmt.Sprintf("apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata: {name: big}\nspec:\n  location: metadata.annotations.big\n  parameters:\n    assign: {value: %s}\n", strings.Repeat("x", n))
		docs, err := source.Parse("mutators.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, layout := range []route.Layout{route.LayoutFused, route.LayoutPerMutator} {
			out := backend.Compile(docs, route.Options{Layout: layout})
			var msgs []string
			for _, p := range out.Problems {
				msgs = append(msgs, p.Error())
			}
			refused := strings.Contains(strings.Join(msgs, "\n"), "code points long, above the 100000 the API server's CEL parser accepts: what it writes is too large for one mutation (shorten the value)")
			if refused != (3*n > cel.MaxExpressionCodePoints) || len(msgs) > 0 && !refused {
				t.Errorf("%d characters, %s: problems %q", n, layout, msgs)
			}
		}
	}
}

// TestSplitOverSizeLimit: a policy too large for the API server is divided into parts that fit
// (here with a limit of a twentieth of emit's, so that realistic-100's policies are too large),
// named after it with -part-1, -part-2, ..., each with some of its groups; a part over the limit
// holds one group only. The parts give Gatekeeper's result on the bench objects in every order
// tried, as the whole policies do.
func TestSplitOverSizeLimit(t *testing.T) {
	w, err := bench.Load("realistic-100", []string{"../../../testdata/bench/realistic-100/mutators.yaml"}, []string{"../../../testdata/bench/objects"}, "Pod/shop/checkout-7d9f8b6c5d-x2x4k")
	if err != nil {
		t.Fatal(err)
	}
	whole := backend.Compile(w.Docs, route.Options{Layout: route.LayoutFused})
	defer backend.SetSplitAt(0.05)()
	out := backend.Compile(w.Docs, route.Options{Layout: route.LayoutFused})
	for _, p := range append(whole.Problems, out.Problems...) {
		t.Fatal(p)
	}
	if len(out.Policies) <= len(whole.Policies) {
		t.Fatalf("want more than the %d policies of the whole, got %d", len(whole.Policies), len(out.Policies))
	}
	names := map[string]bool{}
	for _, p := range whole.Policies {
		names[p.Policy.Name] = true
	}
	groupsIn := map[*emit.Policy]int{}
	for _, p := range out.Detail.(*backend.Plan).PolicyOf {
		groupsIn[p]++
	}
	parts := 0
	for _, p := range out.Policies {
		base, n, isPart := strings.Cut(p.Policy.Name, "-part-")
		if isPart {
			parts++
			if !names[base] || n == "" || p.Binding.Name != p.Policy.Name || p.Binding.Spec.PolicyName != p.Policy.Name {
				t.Errorf("part %s (binding %s for %s) is not named after a policy of the whole", p.Policy.Name, p.Binding.Name, p.Binding.Spec.PolicyName)
			}
		}
		over, err := p.Oversize()
		if err != nil {
			t.Fatal(err)
		}
		if over > 0.05 && groupsIn[p] > 1 {
			t.Errorf("%s is %.2f times emit's limit with %d groups: it should have been divided further", p.Policy.Name, over, groupsIn[p])
		}
	}
	if parts < 2 {
		t.Errorf("want the large policies divided into parts, got %d parts", parts)
	}
	t.Logf("%d policies whole, %d split (%d parts)", len(whole.Policies), len(out.Policies), parts)
	for _, res := range []*route.Output{whole, out} {
		v, err := verify.New(w.Mutators, res.Policies, verify.Options{Namespaces: w.Namespaces, AllOrdersUpTo: 1, Shuffles: 6})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range w.Objects {
			if r := v.Check(context.Background(), verify.Case{Object: o}); !r.Pass {
				t.Errorf("%d policies:\n%s", len(res.Policies), verify.Report([]verify.Result{r}))
			}
		}
		v.Close()
	}
}

// TestGroupTooLargeRefused: a group of interacting mutators whose policy the API server would not
// store cannot be divided: in both layouts every mutator of the group is refused, saying why and
// naming the others, and the other mutators still compile (here with a limit of 20,000 bytes, which
// realistic-100's container group exceeds).
func TestGroupTooLargeRefused(t *testing.T) {
	docs, err := source.ReadPaths([]string{"../../../testdata/bench/realistic-100/mutators.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer backend.SetStoredLimit(20000)()
	defer backend.SetSplitAt(0.01)()
	for _, layout := range []route.Layout{route.LayoutFused, route.LayoutPerMutator} {
		out := backend.Compile(docs, route.Options{Layout: layout})
		if len(out.Problems) < 2 || len(out.Policies) == 0 {
			t.Fatalf("%s: want a group refused and the rest compiled, got %d problems and %d policies", layout, len(out.Problems), len(out.Policies))
		}
		for _, p := range out.Problems {
			msg := p.Error()
			if !strings.Contains(msg, "mutators that interact (Assign/") || !strings.Contains(msg, "above 20000") {
				t.Errorf("%s: %v", layout, p)
			}
		}
		for _, p := range out.Policies {
			data, err := json.Marshal(p.Policy)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > 20000 {
				t.Errorf("%s: %s is %d bytes, above the limit", layout, p.Policy.Name, len(data))
			}
		}
		t.Logf("%s: %d refused, %d policies", layout, len(out.Problems), len(out.Policies))
	}
}
