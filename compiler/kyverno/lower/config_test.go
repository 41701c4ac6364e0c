package lower

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestUnfiltered: filters for kinds and subresources the policy is not called for are dropped;
// a filter that matches every kind of the policy tests neither group nor kind, one that matches
// every subresource it is called for tests none (a Pod's ephemeralcontainers counts where Pods
// are); the Namespace case is only there for policies on Namespaces; inclusions beat
// exclusions.
func TestUnfiltered(t *testing.T) {
	pod := []Kind{{Group: "", Kind: "Pod"}}
	filter := func(g, v, k, s, ns, n string) kyverno.ResourceFilter {
		return kyverno.ResourceFilter{Group: g, Version: v, Kind: k, Subresource: s, Namespace: ns, Name: n}
	}
	env := cel.NewEnv(version.MajorMinor(1, 37))
	print := func(e cel.Expr) string {
		s, err := env.Print(e)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(s), " ") // unwrapped
	}
	ns := `(has(request.namespace) ? request.namespace : "")`
	name := `(has(request.name) ? request.name : "")`
	sub := `(has(request.subResource) ? request.subResource : "")`
	for _, tc := range []struct {
		name    string
		filters []kyverno.ResourceFilter
		kinds   []Kind
		want    string
	}{
		{"other kinds", []kyverno.ResourceFilter{filter("*", "*", "Event", "", "*", "*"), filter("apps", "*", "Pod", "", "*", "*")}, pod, "true"},
		{"subresources", []kyverno.ResourceFilter{filter("*", "*", "Pod", "exec", "*", "*"), filter("*", "*", "*", "status", "*", "*")}, pod, "true"},
		{"every request", []kyverno.ResourceFilter{filter("*", "*", "Pod", "*", "*", "*")}, pod, "false"},
		{"not kubectl debug's", []kyverno.ResourceFilter{filter("*", "*", "Pod", "", "*", "*")}, pod, `!(` + sub + ` == "")`},
		{"kubectl debug's", []kyverno.ResourceFilter{filter("*", "*", "Pod", "ephemeralcontainers", "*", "*")}, pod, `!(` + sub + ` == "ephemeralcontainers")`},
		{"a status", []kyverno.ResourceFilter{filter("*", "*", "Node", "*", "*", "*"), filter("*", "*", "Node", "", "*", "*")}, []Kind{{Kind: "Node", Subresource: "status"}}, "false"},
		{"status beside the resource", []kyverno.ResourceFilter{filter("*", "*", "Node", "status", "*", "*")}, []Kind{{Kind: "Node"}, {Kind: "Node", Subresource: "status"}},
			`!(` + sub + ` == "status")`},
		{"the resource beside a status", []kyverno.ResourceFilter{filter("*", "*", "Node", "", "*", "*")}, []Kind{{Kind: "Node"}, {Kind: "ConfigMap", Subresource: "status"}},
			`!(request.kind.kind == "Node")`},
		{"a namespace", []kyverno.ResourceFilter{filter("*", "*", "*", "*", "kube-system", "*")}, pod,
			`!(` + ns + ` == "kube-system")`},
		{"one kind of two, a version", []kyverno.ResourceFilter{filter("*", "v1", "ConfigMap", "", "*", "skip-*")}, append(pod, Kind{Kind: "ConfigMap"}),
			`!(request.kind.kind == "ConfigMap" && request.kind.version == "v1" && ` + name + `.startsWith("skip-"))`},
		{"Namespaces", []kyverno.ResourceFilter{filter("*", "*", "Namespace", "", "team-?", "*")}, []Kind{{Kind: "Namespace"}},
			`!(` + ns + `.matches("^(?s)team-.$") || request.kind.group == "" && request.kind.version == "v1" && request.kind.kind == "Namespace" && ` + name + `.matches("^(?s)team-.$"))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, users := Unfiltered(&kyverno.Config{Filters: tc.filters}, tc.kinds)
			if s := print(got); s != tc.want {
				t.Errorf("got\n%s\nwant\n%s", s, tc.want)
			}
			if users != cel.True {
				t.Errorf("users %s, want true", cel.String(users))
			}
		})
	}
	_, users := Unfiltered(&kyverno.Config{Excluded: kyverno.Users{Names: []string{"ci-*"}, Groups: []string{"system:nodes"}}, Included: kyverno.Users{Names: []string{"ci-admin"}}}, pod)
	user := `(has(request.userInfo.username) ? request.userInfo.username : "")`
	want := user + ` == "ci-admin" || !(` + user + `.startsWith("ci-") || (has(request.userInfo.groups) ? request.userInfo.groups : []).exists(g, g == "system:nodes"))`
	if s := print(users); s != want {
		t.Errorf("users\n%s\nwant\n%s", s, want)
	}
}
