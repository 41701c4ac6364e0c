package backend

import (
	"testing"

	"github.com/mapc-dev/mapc/cel"
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
	deploy, ds, job := gk{"apps", "v1", "Deployment"}, gk{"apps", "v1", "DaemonSet"}, gk{"batch", "v1", "Job"}
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
