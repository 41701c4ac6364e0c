// Package emit turns compiled mutations into MutatingAdmissionPolicy and
// MutatingAdmissionPolicyBinding objects (k8s.io/api types) for the target API version, and writes
// them: one YAML or JSON stream, or a directory with a kustomization.yaml (and the kustomize
// configuration that keeps each binding naming its policy under namePrefix and nameSuffix),
// atomically. It refuses objects larger than the API server stores (MaxObjectBytes) and reports
// those that client-side apply cannot apply (CheckSizes).
//
// It builds no CEL itself: expressions come from package cel as printed, checked text.
package emit

import (
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/mapc-dev/mapc/compiler/ir"
)

const (
	// LabelManagedBy marks every generated object.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is its value.
	ManagedByValue = "mapc"
	// AnnotationSource names the input policy an object was generated from.
	AnnotationSource = "mapc.dev/source"
)

// Options are the choices that shape the emitted objects.
type Options struct {
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// Resources names the resources of kinds (built-in ones, and custom resources from CRDs).
	Resources *Resources
	// Reinvocation is the policies' reinvocationPolicy; default Never (as Gatekeeper's webhook).
	Reinvocation admissionregistrationv1.ReinvocationPolicyType
	// NamespaceRequirements are added to every binding's namespaceSelector (the namespaces the
	// replaced webhook was never called for).
	NamespaceRequirements []metav1.LabelSelectorRequirement
	// NamePrefix starts every policy's and binding's name (and so each binding's policyName), so
	// that several compilations can share a cluster; CheckNamePrefix says which prefixes are valid.
	NamePrefix string
}

// Resources maps kinds to their plural resource names: built-in kinds from the Kubernetes client
// libraries, custom resources from their CustomResourceDefinitions.
type Resources struct {
	custom map[schema.GroupVersionKind]string
}

// NewResources knows the built-in kinds and the kinds of crds.
func NewResources(crds []*apiextensionsv1.CustomResourceDefinition) *Resources {
	r := &Resources{custom: map[schema.GroupVersionKind]string{}}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			r.custom[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = crd.Spec.Names.Plural
		}
	}
	return r
}

// Resource is the plural resource of a kind, if known.
func (r *Resources) Resource(gvk schema.GroupVersionKind) (string, bool) {
	if r != nil {
		if p, ok := r.custom[gvk]; ok {
			return p, true
		}
	}
	return builtinResource(gvk)
}

// Policy is one emitted MAP with its binding.
type Policy struct {
	Policy  *admissionregistrationv1.MutatingAdmissionPolicy
	Binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	// Contents says, for each mutation of a fused policy, which mutator steps it computes and
	// why it is not part of the mutation before it (for explain; empty for other policies).
	Contents []Contents
}

// Contents is what one mutation of a fused policy computes.
type Contents struct {
	Steps []Step
	// After and Why: the step of the mutation before that this one's first step cannot be
	// computed with, and why (After is empty when the expression before was full).
	After, Why string
	// LeavesOut says, for steps that leave out of their operations a list element another step
	// replaces whole (lower.Replaced), which and why.
	LeavesOut []string
}

// Step is one run of a mutator: in Gatekeeper's pass Round (from 1).
type Step struct {
	Source ir.Source
	Round  int
}

// Mutation is one CEL mutation, already printed and checked.
type Mutation struct {
	PatchType  admissionregistrationv1.PatchType
	Expression string
}

// Condition is one named matchCondition, printed and checked.
type Condition struct {
	Name       string
	Expression string
}

// Name derives the policy name from the source: "gatekeeper-<kind>-<name>", lower case.
func Name(src ir.Source) string {
	return "gatekeeper-" + strings.ToLower(src.Kind) + "-" + src.Name
}

// CheckNamePrefix checks a name prefix (Options.NamePrefix): followed by a generated name, which
// always begins with "gatekeeper-", it must make a valid object name, a lowercase RFC 1123
// subdomain of at most 253 characters. Each full name is checked again when it is made.
func CheckNamePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	const least = "gatekeeper-x" // the shortest name a prefix can start
	if len(prefix)+len(least) > validation.DNS1123SubdomainMaxLength {
		return fmt.Errorf("--name-prefix %q: %d characters is too long: with the generated names (%q and longer) a name may have at most %d characters", prefix, len(prefix), least, validation.DNS1123SubdomainMaxLength)
	}
	if errs := validation.IsDNS1123Subdomain(prefix + least); len(errs) > 0 {
		return fmt.Errorf("--name-prefix %q: does not begin a valid object name (%q): use lower case letters, digits, '-' and '.', beginning with a letter or digit and with a letter or digit on both sides of each '.', e.g. \"team-a-\"", prefix, prefix+least)
	}
	return nil
}

// NewPolicy builds a MAP and its binding, both named opts.NamePrefix + name: rules and the
// binding's namespace selector from match, the given match conditions and mutations, and
// annotations naming the sources.
func NewPolicy(name string, srcs []ir.Source, match ir.Match, conds []Condition, muts []Mutation, opts Options) (*Policy, error) {
	name = opts.NamePrefix + name
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		if opts.NamePrefix != "" {
			return nil, fmt.Errorf("the generated name %q (with --name-prefix %q) is not valid: %s", name, opts.NamePrefix, strings.Join(errs, "; "))
		}
		return nil, fmt.Errorf("the generated name %q is not valid: %s", name, strings.Join(errs, "; "))
	}
	meta := metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{LabelManagedBy: ManagedByValue},
		Annotations: map[string]string{AnnotationSource: sourcesAnnotation(srcs)},
	}
	fp := opts.FailurePolicy
	if fp == "" {
		fp = admissionregistrationv1.Ignore
	}
	never := admissionregistrationv1.NeverReinvocationPolicy
	if opts.Reinvocation != "" {
		never = opts.Reinvocation
	}
	exact := admissionregistrationv1.Exact
	rules := resourceRules(match, opts.Resources)
	spec := admissionregistrationv1.MutatingAdmissionPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: rules,
			MatchPolicy:   &exact,
		},
		FailurePolicy:      &fp,
		ReinvocationPolicy: never,
	}
	for _, c := range conds {
		spec.MatchConditions = append(spec.MatchConditions, admissionregistrationv1.MatchCondition{Name: c.Name, Expression: c.Expression})
	}
	for _, mu := range muts {
		mut := admissionregistrationv1.Mutation{PatchType: mu.PatchType}
		switch mu.PatchType {
		case admissionregistrationv1.PatchTypeJSONPatch:
			mut.JSONPatch = &admissionregistrationv1.JSONPatch{Expression: mu.Expression}
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			mut.ApplyConfiguration = &admissionregistrationv1.ApplyConfiguration{Expression: mu.Expression}
		}
		spec.Mutations = append(spec.Mutations, mut)
	}
	p := &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: *meta.DeepCopy(),
		Spec:       spec,
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: *meta.DeepCopy(),
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
	}
	if match.NamespaceSelector != nil || len(opts.NamespaceRequirements) > 0 {
		sel := &metav1.LabelSelector{}
		if match.NamespaceSelector != nil {
			sel = match.NamespaceSelector.DeepCopy()
		}
		for _, r := range opts.NamespaceRequirements {
			sel.MatchExpressions = append(sel.MatchExpressions, *r.DeepCopy())
		}
		b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: sel}
	}
	return &Policy{Policy: p, Binding: b}, nil
}

// resourceRules expresses the kinds and operations a mutation applies to. Kinds the client
// libraries know become their resources; other kinds (custom resources) match every resource of
// their group and version, and the kind itself is checked by a match condition (KindCondition).
func resourceRules(m ir.Match, resources *Resources) []admissionregistrationv1.NamedRuleWithOperations {
	scope := admissionregistrationv1.AllScopes
	switch m.Scope {
	case "Namespaced":
		scope = admissionregistrationv1.NamespacedScope
	case "Cluster":
		scope = admissionregistrationv1.ClusterScope
	}
	if len(m.Rules) == 0 {
		return []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops(m.Operations),
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: &scope},
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
		sort.Strings(res)
		sc := scope
		out = append(out, admissionregistrationv1.NamedRuleWithOperations{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: ops(strings.Split(k.ops, ",")),
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{k.group}, APIVersions: []string{k.version}, Resources: res, Scope: &sc},
			},
		})
	}
	return out
}

// NeedsKindCondition reports whether some rule had to match all resources of a group/version, so
// that the kinds must be checked by a match condition.
func NeedsKindCondition(m ir.Match, resources *Resources) bool {
	for _, r := range m.Rules {
		if _, ok := resources.Resource(schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}); !ok {
			return true
		}
	}
	return false
}

func ops(o []string) []admissionregistrationv1.OperationType {
	out := make([]admissionregistrationv1.OperationType, len(o))
	for i, x := range o {
		out[i] = admissionregistrationv1.OperationType(x)
	}
	return out
}

// builtinResource is the plural resource of a kind the Kubernetes client libraries know.
func builtinResource(gvk schema.GroupVersionKind) (string, bool) {
	if !clientgoscheme.Scheme.Recognizes(gvk) || strings.HasSuffix(gvk.Kind, "List") && gvk.Kind != "List" && clientgoscheme.Scheme.Recognizes(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))) {
		return "", false
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.Resource, true
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

func sourcesAnnotation(srcs []ir.Source) string {
	parts := make([]string, len(srcs))
	for i, s := range srcs {
		parts[i] = s.APIVersion + ", Kind=" + s.Kind + ", name=" + s.Name
	}
	return strings.Join(parts, "; ")
}
