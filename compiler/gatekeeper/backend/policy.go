package backend

import (
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/emit"
)

// namePrefix starts the name of every policy and binding compiled from Gatekeeper mutators;
// shortestName is the shortest such name.
const (
	namePrefix   = "gatekeeper-"
	shortestName = namePrefix + "x"
)

// policyName derives the policy name from the source: "gatekeeper-<kind>-<name>", lower case.
func policyName(src ir.Source) string {
	return namePrefix + strings.ToLower(src.Kind) + "-" + src.Name
}

// emitSource is a mutator as emit names it.
func emitSource(s ir.Source) emit.Source {
	return emit.Source{APIVersion: s.APIVersion, Kind: s.Kind, Name: s.Name}
}

// newPolicy builds a policy named name for mutators srcs: resource rules and the binding's
// namespace selector from match, the given match conditions, variables and mutations.
func newPolicy(name string, srcs []ir.Source, match ir.Match, conds []emit.Condition, vars []emit.Variable, muts []emit.Mutation, opts route.Options) (*emit.Policy, error) {
	eo := emitOptions(opts)
	spec := emit.Spec{Name: name, Rules: resourceRules(match, eo.Resources, !opts.NoWebhookSubresources), NamespaceSelector: match.NamespaceSelector,
		Conditions: conds, Variables: vars, Mutations: muts}
	for _, s := range srcs {
		spec.Sources = append(spec.Sources, emitSource(s))
	}
	return emit.NewPolicy(spec, eo)
}

// resourceRules expresses the kinds and operations a mutation applies to. Kinds the client
// libraries know become their resources; other kinds (custom resources) match every resource of
// their group and version, and the kind itself is checked by a match condition (needsKindCondition).
// Where Pods are, pods/ephemeralcontainers is too, where Services are, services/status, and
// where Bindings are (every resource), pods/binding: Gatekeeper's Helm chart installs its
// mutating webhook for them (mutatingWebhookSubResources), so kubectl debug's request (an UPDATE
// of the Pod of which the API server keeps only the ephemeral containers) goes through the
// mutators of Pods, an update of a Service's status (of which it keeps the status and the
// metadata) through those of Services, and a scheduler's Binding (whose annotations and labels
// the API server copies to its Pod) through those of Bindings. subs is false where the webhook
// is installed for resources only (Gatekeeper's static manifest): the policies match no
// subresource either.
func resourceRules(m ir.Match, resources *emit.Resources, subs bool) []admissionregistrationv1.NamedRuleWithOperations {
	scope := admissionregistrationv1.AllScopes
	switch m.Scope {
	case "Namespaced":
		scope = admissionregistrationv1.NamespacedScope
	case "Cluster":
		scope = admissionregistrationv1.ClusterScope
	}
	if len(m.Rules) == 0 {
		res := []string{"*"}
		if subs {
			res = append(res, ephemeralContainers, podsBinding, servicesStatus)
		}
		return []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: operationTypes(m.Operations),
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: res, Scope: &scope},
			},
		}}
	}
	// Group rules with the same operations and group/version, listing resources together.
	type key struct{ ops, group, version string }
	byKey := map[key][]string{}
	for _, r := range m.Rules {
		res, ok := resources.Resource(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind})
		if !ok {
			res = "*"
		}
		k := key{strings.Join(r.Operations, ","), r.Group, r.Version}
		if !contains(byKey[k], res) {
			byKey[k] = append(byKey[k], res)
		}
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a.group+"/"+a.version+"/"+a.ops < b.group+"/"+b.version+"/"+b.ops
	})
	var out []admissionregistrationv1.NamedRuleWithOperations
	for _, k := range keys {
		res := byKey[k]
		if contains(res, "*") {
			res = []string{"*"}
		}
		if subs && (k.group == "" || k.group == "*") && (k.version == "v1" || k.version == "*") {
			if contains(res, "pods") || contains(res, "*") {
				res = append(res, ephemeralContainers)
			}
			if contains(res, "services") || contains(res, "*") {
				res = append(res, servicesStatus)
			}
			if contains(res, "bindings") || contains(res, "*") {
				res = append(res, podsBinding)
			}
		}
		sort.Strings(res)
		sc := scope
		out = append(out, admissionregistrationv1.NamedRuleWithOperations{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: operationTypes(strings.Split(k.ops, ",")),
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{k.group}, APIVersions: []string{k.version}, Resources: res, Scope: &sc},
			},
		})
	}
	return out
}

// The subresources of the chart's webhook whose requests the mutators of some kind run on: a
// Pod's ephemeral containers (a Pod), its binding (a Binding) and a Service's status (a
// Service).
const (
	ephemeralContainers = "pods/ephemeralcontainers"
	podsBinding         = "pods/binding"
	servicesStatus      = "services/status"
)

// needsKindCondition reports whether some rule had to match all resources of a group/version, so
// that the kinds must be checked by a match condition.
func needsKindCondition(m ir.Match, resources *emit.Resources) bool {
	for _, r := range m.Rules {
		if _, ok := resources.Resource(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}); !ok {
			return true
		}
	}
	return false
}

func operationTypes(o []string) []admissionregistrationv1.OperationType {
	out := make([]admissionregistrationv1.OperationType, len(o))
	for i, x := range o {
		out[i] = admissionregistrationv1.OperationType(x)
	}
	return out
}
