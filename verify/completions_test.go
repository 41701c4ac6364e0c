package verify

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify/gen"
)

// scanGenerated compiles the differential test's cases (seeds 1, 2, ..., at most its default
// 3,000) with the default options until found says it has seen enough, and reports how many it
// compiled.
func scanGenerated(t *testing.T, found func(*compiler.Output) bool) int {
	t.Helper()
	for seed := uint64(1); seed <= 3000; seed++ {
		c := gen.Generate(seed)
		docs, err := source.Parse(c.Name+".yaml", []byte(c.YAML()))
		if err != nil {
			t.Fatal(err)
		}
		if found(compiler.Compile(docs, compiler.Options{})) {
			return int(seed)
		}
	}
	return 3000
}

// TestGeneratedCasesComplete: the differential cases exercise plan.Complete (new elements
// written with the values earlier mutators set in them), unconditional and conditional, so that
// TestDifferential checks it against Gatekeeper.
func TestGeneratedCasesComplete(t *testing.T) {
	var plain, conditional, later, whole int
	enough := func() bool { return plain >= 2 && conditional >= 2 && later >= 2 && whole >= 2 }
	n := scanGenerated(t, func(out *compiler.Output) bool {
		for _, g := range out.Groups {
			for _, m := range g.Mutations {
				for _, cp := range m.Completions {
					if cp.By.Match.Namespaces == nil && cp.By.Match.ExcludedNamespaces == nil && cp.By.Match.Scope == "" && cp.By.Match.Name == "" && cp.By.Match.NamespaceSelector == nil {
						plain++
					} else {
						conditional++
					}
					if cp.By.SortKey > m.SortKey {
						later++
						if m.Path[len(m.Path)-1].List {
							whole++
						}
					}
				}
			}
		}
		return enough()
	})
	t.Logf("%d cases: %d completions, %d conditional; %d by later mutators, %d of whole elements", n, plain, conditional, later, whole)
	if !enough() {
		t.Errorf("%d cases: %d completions, %d conditional; %d by later mutators, %d of whole elements: the differential test would hardly check each", n, plain, conditional, later, whole)
	}
}

// TestGeneratedCasesRedundant: the differential cases include mutators the fused layout leaves
// out as redundant (plan.Redundant), for each kind of reason, and mutators it computes with a
// later one's constant (plan.Forward), so that TestDifferential checks that this keeps
// Gatekeeper's result.
func TestGeneratedCasesRedundant(t *testing.T) {
	kinds := map[string]int{}
	enough := func() bool {
		return kinds["after"] >= 2 && kinds["before, add-only"] >= 2 && kinds["before, same value"] >= 2 && kinds["forwarded"] >= 2
	}
	n := scanGenerated(t, func(out *compiler.Output) bool {
		kinds["forwarded"] += len(out.Forwarded)
		for _, r := range out.Redundant {
			switch {
			case strings.Contains(r.Why, "sorted after it"):
				kinds["after"]++
			case strings.Contains(r.Why, "only adds"):
				kinds["before, add-only"]++
			default:
				kinds["before, same value"]++
			}
		}
		return enough()
	})
	t.Logf("%d cases: redundant mutators %v", n, kinds)
	if !enough() {
		t.Errorf("%d cases: redundant mutators %v; the differential test would hardly check each kind", n, kinds)
	}
}

// TestGeneratedCasesCreateOnly: the differential cases exercise plan.CreateOnly (writes through
// a keyed element computed only where they create it), because of a mutator sorted before and
// one sorted after, and pairs computed in one expression (OnlyCreating.SharesCreation), so that
// TestDifferential checks them against Gatekeeper.
func TestGeneratedCasesCreateOnly(t *testing.T) {
	var before, after, shared int
	enough := func() bool { return before >= 2 && after >= 2 && shared >= 2 }
	n := scanGenerated(t, func(out *compiler.Output) bool {
		for _, o := range out.CreateOnly {
			if o.By.SortKey < o.M.SortKey {
				before++
			} else {
				after++
			}
			if o.SharesCreation() {
				shared++
			}
		}
		return enough()
	})
	t.Logf("%d cases: created only, %d because of a mutator before, %d after, %d sharing the creation", n, before, after, shared)
	if !enough() {
		t.Errorf("%d cases: created only, %d because of a mutator before, %d after, %d sharing the creation: the differential test would hardly check each", n, before, after, shared)
	}
}

// TestGeneratedCasesKeyLists: the differential cases include fused expressions whose lookups of
// keyed elements use a policy variable of the list's keys (cel.KeyLists), for element tests and
// for the index of an element replaced whole, so that TestDifferential checks them against
// Gatekeeper.
func TestGeneratedCasesKeyLists(t *testing.T) {
	var tests, indexes int
	enough := func() bool { return tests >= 2 && indexes >= 2 }
	n := scanGenerated(t, func(out *compiler.Output) bool {
		for _, p := range out.Policies {
			for _, v := range p.Policy.Spec.Variables {
				if !strings.HasPrefix(v.Name, "keys_") {
					continue
				}
				for _, m := range p.Policy.Spec.Mutations {
					if m.JSONPatch == nil {
						continue
					}
					ref := "variables." + v.Name
					if strings.Contains(m.JSONPatch.Expression, " in "+ref) {
						tests++
					}
					if strings.Contains(m.JSONPatch.Expression, ref+".indexOf(") {
						indexes++
					}
				}
			}
		}
		return enough()
	})
	t.Logf("%d cases: %d expressions test elements by a list of keys, %d find an element's index in one", n, tests, indexes)
	if !enough() {
		t.Errorf("%d cases: %d expressions test elements by a list of keys, %d find an element's index in one: the differential test would hardly check them", n, tests, indexes)
	}
}

// TestGeneratedCasesPrunedAround: the differential cases include prunes computed in one
// expression with a whole-element Assign of the list they prune through, leaving out the
// element it replaces (plan.Fuser.PrunedAround, cel.Replaced), unconditionally and under the
// Assign's match, so that TestDifferential checks them against Gatekeeper.
func TestGeneratedCasesPrunedAround(t *testing.T) {
	skip := regexp.MustCompile(`i\d+ (==|!=) variables\.keys_\w+\.indexOf\(`)
	guarded := regexp.MustCompile(`!\(variables\.\w+ && i\d+ == variables\.keys_\w+\.indexOf\(`)
	var plain, conditional int
	enough := func() bool { return plain >= 2 && conditional >= 2 }
	n := scanGenerated(t, func(out *compiler.Output) bool {
		for _, p := range out.Policies {
			for _, m := range p.Policy.Spec.Mutations {
				if m.JSONPatch == nil {
					continue
				}
				e := strings.ReplaceAll(m.JSONPatch.Expression, "\n", " ")
				all, cond := len(skip.FindAllString(e, -1)), len(guarded.FindAllString(e, -1))
				plain += all - cond
				conditional += cond
			}
		}
		return enough()
	})
	t.Logf("%d cases: %d prunes leave out an element replaced unconditionally, %d one replaced under a match", n, plain, conditional)
	if !enough() {
		t.Errorf("%d cases: %d prunes leave out an element replaced unconditionally, %d one replaced under a match: the differential test would hardly check them", n, plain, conditional)
	}
}
