package kyverno

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/source"
)

// TestParseFilters: resourceFilters as Kyverno v1.19 parses them (config.parseKinds with
// kubeutils.ParseKindSelector), its quirks included.
func TestParseFilters(t *testing.T) {
	got := parseFilters("[Event,*,*][*/*,kube-system,*][Node/*,*,*][apps/v1/Deployment,shop,web-*][v1/ConfigMap][Pod/exec,a][*/status,*,*][a,b,c,d][]")
	f := func(g, v, k, s, ns, n, text string) ResourceFilter {
		return ResourceFilter{Group: g, Version: v, Kind: k, Subresource: s, Namespace: ns, Name: n, Text: text}
	}
	want := []ResourceFilter{
		f("*", "*", "Event", "", "*", "*", "[Event,*,*]"),
		f("*", "*", "*", "*", "kube-system", "*", "[*/*,kube-system,*]"),
		f("*", "*", "Node", "*", "*", "*", "[Node/*,*,*]"),
		f("apps", "v1", "Deployment", "", "shop", "web-*", "[apps/v1/Deployment,shop,web-*]"),
		f("*", "v1", "ConfigMap", "", "", "", "[v1/ConfigMap]"),
		f("*", "*", "Pod", "exec", "a", "", "[Pod/exec,a]"),
		f("*", "*", "*", "status", "*", "*", "[*/status,*,*]"),
		// More than three parts: Kyverno appends the filter before it again.
		f("*", "*", "*", "status", "*", "*", "[a,b,c,d]"),
		// No kind: a filter of empty patterns.
		f("", "", "", "", "", "", "[]"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseExclusions(t *testing.T) {
	ex, in := parseExclusions(" system:nodes, ,!system:serviceaccount:ci:deployer ,! , ci-*")
	if !reflect.DeepEqual(ex, []string{"system:nodes", "ci-*"}) || !reflect.DeepEqual(in, []string{"system:serviceaccount:ci:deployer"}) {
		t.Errorf("exclusions %q, inclusions %q", ex, in)
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true}, {"", "a", false}, {"*", "", true}, {"a*", "abc", true}, {"a?c", "abc", true},
		{"a?c", "ac", false}, {"*-system", "kube-system", true}, {"k*s*m", "kube-system", true}, {"ä?", "äö", true},
	} {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}

// TestReadConfig: what the policies honour is read; what they cannot is refused with the key.
func TestReadConfig(t *testing.T) {
	read := func(data string) (*Config, []error) {
		docs, err := source.Parse("kyverno.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kyverno\ndata:\n"+data))
		if err != nil {
			t.Fatal(err)
		}
		return ReadConfig(docs[0])
	}
	c, problems := read(`  resourceFilters: "[Event,*,*]"
  excludeGroups: "system:nodes"
  excludeRoles: ""
  webhooks: '{"namespaceSelector":{"matchLabels":{"a":"b"}}}'
  matchConditions: "[]"
  defaultRegistry: docker.io
`)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if len(c.Filters) != 1 || !reflect.DeepEqual(c.Excluded.Groups, []string{"system:nodes"}) || c.NamespaceSelector == nil || c.ObjectSelector != nil || c.IsZero() {
		t.Errorf("config %+v", c)
	}
	for _, tc := range []struct{ data, want string }{
		{"  excludeRoles: admin\n", "data.excludeRoles: Kyverno skips the requests of users bound to these roles"},
		{"  excludeClusterRoles: '!view'\n", "data.excludeClusterRoles:"},
		{"  webhooks: '[{}]'\n", "data.webhooks: a JSON array, where Kyverno v1.19 reads a JSON object"},
		{"  webhooks: '{\"namespaceSelector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Bad\"}]}}'\n", "data.webhooks: namespaceSelector:"},
		{"  matchConditions: '[{\"name\":\"a\",\"expression\":\"true\"},{\"name\":\"a\",\"expression\":\"false\"}]'\n", "data.matchConditions: [1].name: \"a\" names another condition too"},
		{"  matchConditions: '{}'\n", "data.matchConditions: a JSON object, where Kyverno v1.19 reads a JSON list"},
		{"  resourceFilters: 3\n", "data.resourceFilters: must be a string"},
	} {
		_, problems := read(tc.data)
		if len(problems) != 1 || !strings.Contains(problems[0].Error(), tc.want) {
			t.Errorf("%q: problems %v, want one containing %q", tc.data, problems, tc.want)
		}
	}
	docs, _ := source.Parse("x.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: kyverno\n"))
	if _, problems := ReadConfig(docs[0]); len(problems) != 1 || !strings.Contains(problems[0].Error(), "a v1 ConfigMap") {
		t.Errorf("a Secret: %v", problems)
	}
}
