package plan_test

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
)

// withMatch puts spec.match (YAML, indented as under spec) into a mutator document.
func withMatch(doc, match string) string {
	return strings.Replace(doc, "spec:\n", "spec:\n  match:\n"+match, 1)
}

// TestDisjointMatches: two mutators that write one place (and read it: the second only where it
// is missing) interact, unless no request is matched by both, by what stays as it is during
// admission: kind, operation, scope, name, namespace, and the namespace's labels (a Namespace
// object's own only when neither writes the label).
func TestDisjointMatches(t *testing.T) {
	ifUnset := "    pathTests:\n    - {subPath: spec.hostname, condition: MustNotExist}\n"
	pods := func(name, match string) string {
		value := map[string]string{"a": "x", "b": "y"}[name]
		extra := ""
		if name == "b" {
			extra = ifUnset
		}
		return withMatch(assign(name, "spec.hostname", value, extra), match)
	}
	// AssignMetadata for the kinds in match (every kind when it names none).
	meta := func(name, match string) string {
		return withMatch(metadata(name, "metadata.labels.environment", name, ""), match)
	}
	sel := func(s string) string { return "    namespaceSelector: " + s + "\n" }
	podsAndNamespaces := "    kinds: [{apiGroups: [\"\"], kinds: [Pod, Namespace]}]\n"
	for _, c := range []struct {
		name  string
		a, b  string
		apart bool
	}{
		{"namespace label values", pods("a", sel("{matchLabels: {env: prod}}")), pods("b", sel("{matchLabels: {env: staging}}")), true},
		{"In with disjoint values", pods("a", sel("{matchExpressions: [{key: env, operator: In, values: [a, b]}]}")), pods("b", sel("{matchExpressions: [{key: env, operator: In, values: [c]}]}")), true},
		{"In and NotIn of its values", pods("a", sel("{matchLabels: {env: prod}}")), pods("b", sel("{matchExpressions: [{key: env, operator: NotIn, values: [prod, dev]}]}")), true},
		{"In and DoesNotExist", pods("a", sel("{matchExpressions: [{key: env, operator: In, values: [prod]}]}")), pods("b", sel("{matchExpressions: [{key: env, operator: DoesNotExist}]}")), true},
		{"Exists and DoesNotExist", pods("a", sel("{matchExpressions: [{key: env, operator: Exists}]}")), pods("b", sel("{matchExpressions: [{key: env, operator: DoesNotExist}]}")), true},
		{"Pods and Namespaces whose label neither writes", meta("a", podsAndNamespaces+sel("{matchLabels: {env: prod}}")), meta("b", podsAndNamespaces+sel("{matchLabels: {env: staging}}")), true},
		{"every namespaced kind", meta("a", "    scope: Namespaced\n"+sel("{matchLabels: {env: prod}}")), meta("b", sel("{matchLabels: {env: staging}}")), true},
		{"namespaces", pods("a", "    namespaces: [prod]\n"), pods("b", "    namespaces: [staging, dev]\n"), true},
		{"namespace prefixes", pods("a", "    namespaces: [prod-*]\n"), pods("b", "    namespaces: [staging-*]\n"), true},
		{"namespace suffixes", pods("a", "    namespaces: ['*-prod']\n"), pods("b", "    namespaces: ['*-dev']\n"), true},
		{"a namespace the other excludes", pods("a", "    namespaces: [prod]\n"), pods("b", "    excludedNamespaces: [prod]\n"), true},
		{"namespaces a prefix excludes", pods("a", "    namespaces: [prod-a, 'prod-b*']\n"), pods("b", "    excludedNamespaces: [kube-system, prod-*]\n"), true},
		{"what both list, one excludes", pods("a", "    namespaces: [prod, dev]\n"), pods("b", "    namespaces: [prod, staging]\n    excludedNamespaces: [prod]\n"), true},
		{"names", pods("a", "    name: web\n"), pods("b", "    name: api\n"), true},
		{"name suffixes", pods("a", "    name: '*-web'\n"), pods("b", "    name: '*-api'\n"), true},
		{"scopes", meta("a", "    scope: Namespaced\n"), meta("b", "    scope: Cluster\n"), true},
		{"kinds", meta("a", "    kinds: [{apiGroups: [\"\"], kinds: [Pod]}]\n"), meta("b", "    kinds: [{apiGroups: [\"\"], kinds: [Namespace]}]\n"), true},
		{"operations",
			strings.Replace(pods("a", "    scope: '*'\n"), "versions: [v1]}", "versions: [v1], operations: [CREATE]}", 1),
			strings.Replace(pods("b", "    scope: '*'\n"), "versions: [v1]}", "versions: [v1], operations: [UPDATE]}", 1), true},

		// Counter-cases: they look apart, but a request meets both.
		{"overlapping globs", pods("a", "    namespaces: [prod-*]\n"), pods("b", "    namespaces: ['*-a']\n"), false},
		{"a prefix of a prefix", pods("a", "    namespaces: ['prod*']\n"), pods("b", "    namespaces: ['prod-*']\n"), false},
		{"a substring glob", pods("a", "    namespaces: ['*eam*']\n"), pods("b", "    namespaces: [team-a]\n"), false},
		{"an exclusion that misses", pods("a", "    namespaces: [prod]\n"), pods("b", "    excludedNamespaces: [prod-*]\n"), false},
		{"a selector a subset of the other", pods("a", sel("{matchExpressions: [{key: env, operator: In, values: [prod, staging]}]}")), pods("b", sel("{matchLabels: {env: prod}}")), false},
		{"In and NotIn that overlap", pods("a", sel("{matchExpressions: [{key: env, operator: In, values: [prod, staging]}]}")), pods("b", sel("{matchExpressions: [{key: env, operator: NotIn, values: [prod]}]}")), false},
		{"two NotIn: the label missing", pods("a", sel("{matchExpressions: [{key: env, operator: NotIn, values: [prod]}]}")), pods("b", sel("{matchExpressions: [{key: env, operator: NotIn, values: [staging]}]}")), false},
		{"an empty selector", pods("a", sel("{}")), pods("b", sel("{matchLabels: {env: prod}}")), false},
		{"different keys", pods("a", sel("{matchLabels: {env: prod}}")), pods("b", sel("{matchLabels: {team: a}}")), false},
		{"a name and a namespace", pods("a", "    namespaces: [prod]\n"), pods("b", sel("{matchLabels: {env: staging}}")), false},
		{"object labels change", pods("a", "    labelSelector: {matchLabels: {env: prod}}\n"), pods("b", "    labelSelector: {matchLabels: {env: staging}}\n"), false},
		{"a Namespace object whose label one of them writes",
			withMatch(metadata("a", "metadata.labels.env", "prod", ""), podsAndNamespaces+sel("{matchExpressions: [{key: env, operator: DoesNotExist}]}")),
			withMatch(metadata("b", "metadata.labels.env", "staging", ""), podsAndNamespaces+sel("{matchLabels: {env: prod}}")), false},
		{"every kind: other cluster-scoped objects match any namespaceSelector", meta("a", sel("{matchLabels: {env: prod}}")), meta("b", sel("{matchLabels: {env: staging}}")), false},
		{"a name prefix also matches generateName", pods("a", "    name: web\n"), pods("b", "    name: 'api-*'\n"), false},
		{"the cluster scope holds Namespaces", meta("a", "    scope: Cluster\n"), meta("b", "    kinds: [{apiGroups: [\"\"], kinds: [Namespace]}]\n"), false},
		{"a kind in any group", meta("a", "    kinds: [{apiGroups: ['*'], kinds: [Pod]}]\n"+sel("{matchLabels: {env: prod}}")), meta("b", "    kinds: [{apiGroups: ['*'], kinds: [Pod]}]\n"+sel("{matchLabels: {env: staging}}")), false},
		{"operations in common",
			strings.Replace(pods("a", "    scope: '*'\n"), "versions: [v1]}", "versions: [v1], operations: [CREATE]}", 1),
			strings.Replace(pods("b", "    scope: '*'\n"), "versions: [v1]}", "versions: [v1], operations: [CREATE, UPDATE]}", 1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := mutations(t, c.a, c.b)
			gs := plan.Plan(ms)
			if got := len(gs) == 2; got != c.apart {
				t.Errorf("planned apart = %v, want %v:\n%s", got, c.apart, describe(gs))
			}
			z := plan.NewFuser()
			a, b := named(ms)["a"], named(ms)["b"]
			if got := z.Commute(a, b); got != c.apart {
				t.Errorf("Commute = %v, want %v", got, c.apart)
			}
			if c.apart && !z.Fusable(a, b) {
				t.Errorf("apart, yet not fusable: %s", z.WhyNot(a, b))
			}
		})
	}
}

// TestDisjointThird: a mutator that writes the label two others' namespace selectors disagree
// on runs with both (it feeds them), in rounds; the two still do not interact with each other.
func TestDisjointThird(t *testing.T) {
	kinds := "    kinds: [{apiGroups: [\"\"], kinds: [Pod, Namespace]}]\n"
	ms := mutations(t,
		withMatch(metadata("a-prod", "metadata.labels.environment", "production", ""), kinds+"    namespaceSelector: {matchLabels: {env: prod}}\n"),
		withMatch(metadata("b-set-env", "metadata.labels.env", "staging", ""), "    kinds: [{apiGroups: [\"\"], kinds: [Namespace]}]\n"),
		withMatch(metadata("c-staging", "metadata.labels.environment", "staging", ""), kinds+"    namespaceSelector: {matchLabels: {env: staging}}\n"),
	)
	gs := plan.Plan(ms)
	if len(gs) != 1 || len(gs[0].Mutations) != 3 || gs[0].Rounds != 2 {
		t.Fatalf("want one group of three in two rounds:\n%s", describe(gs))
	}
	for _, w := range gs[0].Why {
		if strings.Contains(w, "a-prod") && strings.Contains(w, "c-staging") {
			t.Errorf("a-prod and c-staging never both apply to one object state: %s", w)
		}
	}
	if !plan.NewFuser().Commute(named(ms)["a-prod"], named(ms)["c-staging"]) {
		t.Errorf("a-prod and c-staging should commute")
	}
}

// TestDisjointRedundant: a mutator between two writers of one value that no request meets
// together with the later one does not keep it from being redundant; one that may does.
func TestDisjointRedundant(t *testing.T) {
	sel := func(s string) string { return "    namespaceSelector: " + s + "\n" }
	for _, c := range []struct {
		name, between string
		want          []string
	}{
		{"another namespace label value", sel("{matchLabels: {env: prod}}"), []string{"c by a"}},
		{"values in common", sel("{matchExpressions: [{key: env, operator: In, values: [prod, staging]}]}"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := mutations(t,
				assign("a", "spec.hostname", "h", ""),
				withMatch(assign("b", "spec.hostname", "other", ""), c.between),
				withMatch(assign("c", "spec.hostname", "h", ""), sel("{matchLabels: {env: staging}}")),
			)
			samePairs(t, "Redundant", plan.Redundant(ms), c.want)
		})
	}
}

// TestDisjointSharedCreation: two mutators no request meets both of fuse, each writing what it
// writes, but a node both may create is created once for both where either applies, which a
// mutator that creates it only where an ancestor is missing (MustNotExist) would not do.
func TestDisjointSharedCreation(t *testing.T) {
	inProd := "    namespaces: [prod]\n"
	inDev := "    namespaces: [dev]\n"
	specMissing := "    pathTests:\n    - {subPath: spec, condition: MustNotExist}\n"
	for _, c := range []struct {
		name  string
		a, b  string
		fuses bool
	}{
		{"one place", withMatch(assign("a", "spec.dnsConfig.searches", "[x]", ""), inProd), withMatch(assign("b", "spec.dnsConfig.searches", "[y]", ""), inDev), true},
		{"a parent both create", withMatch(assign("a", "spec.dnsConfig.searches", "[x]", ""), inProd), withMatch(assign("b", "spec.dnsConfig.nameservers", "[y]", ""), inDev), true},
		{"a parent one creates only with an ancestor", withMatch(assign("a", "spec.dnsConfig.searches", "[x]", specMissing), inProd), withMatch(assign("b", "spec.dnsConfig.nameservers", "[y]", ""), inDev), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := named(mutations(t, c.a, c.b))
			z := plan.NewFuser()
			if got := z.Fusable(ms["a"], ms["b"]); got != c.fuses {
				t.Errorf("Fusable = %v (%s), want %v", got, z.WhyNot(ms["a"], ms["b"]), c.fuses)
			}
			if !z.Commute(ms["a"], ms["b"]) {
				t.Errorf("they should commute")
			}
		})
	}
}
