package lower

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

func TestJSONPatchTypeChecks(t *testing.T) {
	glob := ir.Step{List: true, KeyField: "name", Glob: true}
	keyed := ir.Step{List: true, KeyField: "name", KeyValue: "foo"}
	f := func(n string) ir.Step { return ir.Step{Field: n} }
	all := func(n int) []bool {
		b := make([]bool, n)
		for i := range b {
			b[i] = true
		}
		return b
	}
	cases := []struct {
		name string
		m    ir.Mutation
	}{
		{"set scalar", ir.Mutation{Path: []ir.Step{f("spec"), f("dnsPolicy")}, Op: ir.SetValue{Value: "None"}}},
		{"glob", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), glob, f("imagePullPolicy")}, Op: ir.SetValue{Value: "Always"}}},
		{"nested create", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), glob, f("securityContext"), f("privileged")}, Op: ir.SetValue{Value: false}}},
		{"keyed create", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), keyed, f("image")}, Op: ir.SetValue{Value: "nginx"}}},
		{"keyed last", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), keyed}, Op: ir.SetValue{Value: map[string]any{"name": "foo", "image": "x", "args": []any{"a", int64(1)}}}}},
		{"merge", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), glob, f("args")}, Op: ir.MergeSet{Values: []any{"-v", "-v"}}}},
		{"prune", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), glob, f("args")}, Op: ir.PruneSet{Values: []any{"-v"}}}},
		{"image", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), glob, f("image")}, Op: ir.RewriteImage{Domain: "my.reg"}}},
		{"label", ir.Mutation{Path: []ir.Step{f("metadata"), f("labels"), f("owner")}, Op: ir.SetValue{FromMetadata: "namespace"}}},
		{"nested globs", ir.Mutation{Path: []ir.Step{f("spec"), f("containers"), glob, f("ports"), glob, f("protocol")}, Op: ir.SetValue{Value: "TCP"}}},
	}
	for _, v := range []string{"1.32", "1.34", "1.37"} {
		env := cel.NewEnv(version.MustParseGeneric(v))
		for _, c := range cases {
			m := c.m
			n := len(m.Path)
			if m.ExistsOK == nil {
				m.ExistsOK, m.MissingOK = all(n), all(n)
			}
			if c.name == "label" {
				m.ExistsOK[n-1] = false
			}
			e, err := JSONPatch(&m, env.Features())
			hasList := false
			for _, st := range m.Path {
				hasList = hasList || st.List
			}
			if err != nil {
				// 1.32 takes no list steps in new expressions; 1.34 no list inside a list.
				if v == "1.32" && hasList || c.name == "nested globs" && v == "1.34" {
					continue
				}
				t.Fatalf("%s %s: %v", v, c.name, err)
			}
			if v == "1.32" && hasList {
				t.Fatalf("%s %s: compiled a list step for 1.32", v, c.name)
			}
			s, err := env.Print(e)
			if err != nil {
				t.Fatalf("%s %s: %v", v, c.name, err)
			}
			if err := env.CheckJSONPatch(s); err != nil {
				t.Errorf("%s %s: %v\n%s", v, c.name, err, s)
			}
			t.Logf("%s %s: %s", v, c.name, s)
		}
	}
}
