package verify

import (
	"testing"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify/gen"
)

// TestGeneratedCasesComplete: the differential cases exercise plan.Complete (new elements
// written with the values earlier mutators set in them), unconditional and conditional, so that
// TestDifferential checks it against Gatekeeper.
func TestGeneratedCasesComplete(t *testing.T) {
	var plain, conditional int
	for seed := uint64(1); seed <= 300; seed++ {
		c := gen.Generate(seed)
		docs, err := source.Parse(c.Name+".yaml", []byte(c.YAML()))
		if err != nil {
			t.Fatal(err)
		}
		out := compiler.Compile(docs, compiler.Options{})
		for _, g := range out.Groups {
			for _, m := range g.Mutations {
				for _, cp := range m.Completions {
					if cp.By.Match.Namespaces == nil && cp.By.Match.ExcludedNamespaces == nil && cp.By.Match.Scope == "" && cp.By.Match.Name == "" && cp.By.Match.NamespaceSelector == nil {
						plain++
					} else {
						conditional++
					}
				}
			}
		}
	}
	t.Logf("300 cases: %d completions, %d conditional", plain, conditional)
	if plain == 0 || conditional == 0 {
		t.Errorf("300 cases: %d completions, %d conditional; the differential test would not check both", plain, conditional)
	}
}
