package backend

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestAssumeKinds: under the kinds a step's branch runs for, the tests of the request's group
// and kind are decided; a disjunction of kinds reduces to what is left of each (the version),
// and a test that differs between the kinds stays.
func TestAssumeKinds(t *testing.T) {
	kind := cel.Field(cel.Ident("request"), "kind")
	is := func(group, version, k string) cel.Expr {
		cs := []cel.Expr{cel.Bin("==", cel.Field(kind, "group"), cel.Str(group))}
		if version != "" {
			cs = append(cs, cel.Bin("==", cel.Field(kind, "version"), cel.Str(version)))
		}
		return cel.And(append(cs, cel.Bin("==", cel.Field(kind, "kind"), cel.Str(k)))...)
	}
	ops := cel.List(cel.PatchOp("add", cel.Pointer{}.Child("x"), cel.Str("y")))
	deploy, ds, job := gk{Group: "apps", Version: "v1", Kind: "Deployment"}, gk{Group: "apps", Version: "v1", Kind: "DaemonSet"}, gk{Group: "batch", Version: "v1", Kind: "Job"}
	for _, tc := range []struct {
		name  string
		e     cel.Expr
		kinds []gk
		want  string
	}{
		{"one kind", cel.Guarded(is("apps", "v1", "Deployment"), ops), []gk{deploy},
			`((request.kind.version) == ("v1")) ? ([JSONPatch{op: "add", path: "/x", value: "y"}]) : ([])`},
		{"a disjunction of the kinds", cel.Guarded(cel.Or(is("apps", "v1", "Deployment"), is("apps", "v1", "DaemonSet"), is("batch", "v1", "Job")), ops), []gk{deploy, ds, job},
			`((request.kind.version) == ("v1")) ? ([JSONPatch{op: "add", path: "/x", value: "y"}]) : ([])`},
		{"another kind", cel.Guarded(is("", "", "Pod"), ops), []gk{deploy}, `[]`},
		{"a test that differs", cel.Guarded(cel.Bin("==", cel.Field(kind, "group"), cel.Str("apps")), ops), []gk{deploy, job},
			`((request.kind.group) == ("apps")) ? ([JSONPatch{op: "add", path: "/x", value: "y"}]) : ([])`},
		{"a test all share", cel.Guarded(cel.Bin("==", cel.Field(kind, "group"), cel.Str("apps")), ops), []gk{deploy, ds},
			`[JSONPatch{op: "add", path: "/x", value: "y"}]`},
	} {
		if got := cel.String(assumeKinds(tc.e, tc.kinds)); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestStepsAnyKind: a rule for every kind runs in its place for each kind the other rules name,
// and alone for the others.
func TestStepsAnyKind(t *testing.T) {
	pod, cm := gk{Version: "v1", Kind: "Pod"}, gk{Version: "v1", Kind: "ConfigMap"}
	rules := []emitted{
		{kinds: []gk{pod}, rule: &kyverno.Rule{Name: "pod"}, e: cel.List(cel.Str("pod"))},
		{kinds: []gk{anyKind}, rule: &kyverno.Rule{Name: "any"}, e: cel.List(cel.Str("any"))},
		{kinds: []gk{cm}, rule: &kyverno.Rule{Name: "cm"}, e: cel.List(cel.Str("cm"))},
	}
	var got []string
	for _, st := range steps(rules) {
		var ms []string
		for _, m := range st {
			var ks []string
			for _, k := range m.kinds {
				ks = append(ks, k.Kind)
			}
			ms = append(ms, m.rule.Name+":"+strings.Join(ks, ","))
		}
		got = append(got, strings.Join(ms, " "))
	}
	want := []string{
		"pod:Pod any:ConfigMap,*", // ConfigMaps and the other kinds run the rule for every kind first
		"any:Pod cm:ConfigMap",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// In the first step, the rule for every kind is the branch for every kind but Pod; in the
	// second, ConfigMaps run theirs and every other kind the rule for every kind.
	for i, want := range []string{
		`(((request.kind.group) == ("")) && ((request.kind.kind) == ("Pod"))) ? (["pod"]) : (["any"])`,
		`(((request.kind.group) == ("")) && ((request.kind.kind) == ("Pod"))) ? (["any"]) : ((((request.kind.group) == ("")) && ((request.kind.kind) == ("ConfigMap"))) ? (["cm"]) : ([]))`,
	} {
		e, _ := steps(rules)[i].expr()
		if s := cel.String(e); s != want {
			t.Errorf("step %d: %s\nwant %s", i, s, want)
		}
	}
}
