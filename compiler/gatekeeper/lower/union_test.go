package lower

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// TestMergeUnion: the values a union of merges adds, each under its merge's condition and
// without an equal value of an earlier merge that applies; and the expression type-checks in
// every version that takes the location.
func TestMergeUnion(t *testing.T) {
	f := func(n string) ir.Step { return ir.Step{Field: n} }
	glob := ir.Step{List: true, KeyField: "name", Glob: true}
	tol := func(k string) any { return map[string]any{"key": k, "operator": "Exists"} }
	prod, gpu := cel.Ident("prod"), cel.Ident("gpu")
	cases := []struct {
		name  string
		path  []ir.Step
		parts []MergePart
		want  []string // the values, as printed, in order
		not   []string // not in the expression
	}{
		{"unconditional, distinct",
			[]ir.Step{f("spec"), f("tolerations")},
			[]MergePart{{Values: []any{tol("a")}, When: cel.True}, {Values: []any{tol("b"), tol("c")}, When: cel.True}},
			[]string{`dyn({"key": "a", "operator": "Exists"}), dyn({"key": "b", "operator": "Exists"}), dyn({"key": "c", "operator": "Exists"})`},
			[]string{"optional"}},
		{"a value an earlier merge always adds is left out",
			[]ir.Step{f("spec"), f("tolerations")},
			[]MergePart{{Values: []any{tol("a")}, When: cel.True}, {Values: []any{tol("a"), tol("b")}, When: prod}},
			[]string{`[[dyn({"key": "a", "operator": "Exists"}), ?prod ? optional.of(dyn({"key": "b", "operator": "Exists"})) : optional.none()]]`},
			nil},
		{"a value an earlier merge adds where it applies",
			[]ir.Step{f("spec"), f("tolerations")},
			[]MergePart{{Values: []any{tol("a")}, When: prod}, {Values: []any{tol("b"), tol("a")}, When: gpu}},
			[]string{`?prod ? optional.of(dyn({"key": "a", "operator": "Exists"}))`, `?gpu ? optional.of(dyn({"key": "b"`, `?(gpu && !prod) ? optional.of(dyn({"key": "a"`},
			nil},
		{"a value an earlier merge adds under the same condition is left out",
			[]ir.Step{f("spec"), f("tolerations")},
			[]MergePart{{Values: []any{tol("a")}, When: prod}, {Values: []any{tol("a"), tol("b")}, When: prod}},
			[]string{`[[?prod ? optional.of(dyn({"key": "a", "operator": "Exists"})) : optional.none(), ?prod ? optional.of(dyn({"key": "b", "operator": "Exists"})) : optional.none()]]`},
			nil},
		{"scalars in every container",
			[]ir.Step{f("spec"), f("containers"), glob, f("args")},
			[]MergePart{{Values: []any{"-a"}, When: cel.True}, {Values: []any{"-b", "-a"}, When: prod}},
			[]string{`["-a", ?prod ? optional.of("-b") : optional.none()]`},
			nil},
	}
	for _, v := range []string{"1.32", "1.34", "1.37"} {
		env := cel.NewEnv(version.MustParseGeneric(v))
		for _, c := range cases {
			m := &ir.Mutation{Path: c.path, ExistsOK: make([]bool, len(c.path)), MissingOK: make([]bool, len(c.path)), Op: ir.MergeSet{Values: c.parts[0].Values}}
			for i := range c.path {
				m.ExistsOK[i], m.MissingOK[i] = true, true
			}
			e, err := MergeUnion(m, c.parts, env.Features(), 0)
			if err != nil {
				if v == "1.32" && len(c.path) > 2 {
					continue // no list steps before 1.33
				}
				t.Fatalf("%s %s: %v", v, c.name, err)
			}
			printed, err := env.Print(e)
			if err != nil {
				t.Fatalf("%s %s: %v", v, c.name, err)
			}
			printed = strings.ReplaceAll(printed, "\n", " ")
			for _, w := range c.want {
				if !strings.Contains(printed, w) {
					t.Errorf("%s %s: no %s in\n%s", v, c.name, w, printed)
				}
			}
			for _, w := range c.not {
				if strings.Contains(printed, w) {
					t.Errorf("%s %s: %s in\n%s", v, c.name, w, printed)
				}
			}
			// The test's conditions stand for the match variables of a policy.
			s := strings.NewReplacer("prod", "variables.prod", "gpu", "variables.gpu").Replace(printed)
			check, err := env.WithVariables([]cel.Variable{{Name: "prod", Expression: "true"}, {Name: "gpu", Expression: "false"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := check.CheckJSONPatch(s); err != nil {
				t.Errorf("%s %s: %v\n%s", v, c.name, err, s)
			}
		}
	}
}
