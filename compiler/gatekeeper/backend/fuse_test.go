package backend_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/backend"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
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
