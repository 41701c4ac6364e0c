// Package emit builds MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding objects
// (k8s.io/api types) for the target API version from what its caller decided (names, sources,
// resource rules, namespace selector, match conditions, variables, printed mutations, failure
// and reinvocation policy), and writes them: one YAML or JSON stream, or a directory with a
// kustomization.yaml (and the kustomize configuration that keeps each binding naming its policy
// under namePrefix and nameSuffix), atomically. It refuses objects larger than the API server
// stores (MaxObjectBytes, and MaxAnnotationBytes of annotations) and reports those that
// client-side apply cannot apply (CheckSizes); Oversize tells a back end when to divide a policy.
//
// It knows no input language: it must not import anything under compiler/, and it invents no
// names (the front ends' back ends choose them). It builds no CEL either: expressions arrive
// printed and checked.
package emit

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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
	// Reinvocation is the policies' reinvocationPolicy; default Never.
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
	// Contents says, for each mutation of a fused policy or of a Kyverno policy, which mutator
	// steps (rules) it computes and why it is not part of the mutation before it (for explain;
	// empty for other policies).
	Contents []Contents
}

// Contents is what one mutation of a fused policy computes.
type Contents struct {
	Steps []Step
	// After and Why: the step of the mutation before that this one's first step cannot be
	// computed with, and why (After is empty when the expression before was full).
	After, Why string
	// LeavesOut says, for steps that leave out of their operations a list element another step
	// replaces whole, which and why.
	LeavesOut []string
	// Patch says why the mutation is of its patch type ("" when no front end said).
	Patch string
}

// Step is one run of an input policy: in its engine's pass Round (from 1), of its part Rule
// (a Kyverno rule's name; "" for a Gatekeeper mutator, which has one).
type Step struct {
	Source Source
	Round  int
	Rule   string
}

// Source names an input object a policy was generated from (Namespace only for a namespaced
// one).
type Source struct {
	APIVersion, Kind, Namespace, Name string
}

// String is "Kind/name", as used in messages.
func (s Source) String() string { return s.Kind + "/" + s.Name }

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

// Variable is one policy variable, printed and checked.
type Variable struct {
	Name       string
	Expression string
}

// CheckNamePrefix checks a name prefix (Options.NamePrefix): followed by a generated name, least
// being the shortest a caller generates, it must make a valid object name, a lowercase RFC 1123
// subdomain of at most 253 characters. Each full name is checked again when it is made.
func CheckNamePrefix(prefix, least string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix)+len(least) > validation.DNS1123SubdomainMaxLength {
		return fmt.Errorf("--name-prefix %q: %d characters is too long: with the generated names (%q and longer) a name may have at most %d characters", prefix, len(prefix), least, validation.DNS1123SubdomainMaxLength)
	}
	if errs := validation.IsDNS1123Subdomain(prefix + least); len(errs) > 0 {
		return fmt.Errorf("--name-prefix %q: does not begin a valid object name (%q): use lower case letters, digits, '-' and '.', beginning with a letter or digit and with a letter or digit on both sides of each '.', e.g. \"team-a-\"", prefix, prefix+least)
	}
	return nil
}

// Spec is what one policy says, as its caller decided it.
type Spec struct {
	// Name is the policy's and its binding's name, before Options.NamePrefix.
	Name string
	// Sources are the input objects it was generated from (its AnnotationSource).
	Sources []Source
	// Rules are its matchConstraints' resourceRules (matchPolicy Exact).
	Rules []admissionregistrationv1.NamedRuleWithOperations
	// NamespaceSelector is the binding's (nil for none), before Options.NamespaceRequirements.
	NamespaceSelector *metav1.LabelSelector
	// ObjectSelector is the binding's (nil for none).
	ObjectSelector *metav1.LabelSelector
	Conditions     []Condition
	Variables      []Variable
	Mutations      []Mutation
	// Param is the object the policy's expressions read as params (nil: none).
	Param *Param
}

// Param is a policy's param object: its kind (the policy's spec.paramKind) and where its
// binding finds it (spec.paramRef).
type Param struct {
	APIVersion, Kind string
	Name, Namespace  string
	// NotFound is what the API server does when the object does not exist: Deny fails the
	// request (subject to the policy's failurePolicy), Allow skips the policy.
	NotFound admissionregistrationv1.ParameterNotFoundActionType
}

// NewPolicy builds a MAP and its binding, both named opts.NamePrefix + s.Name, with
// annotations naming the sources.
func NewPolicy(s Spec, opts Options) (*Policy, error) {
	name := opts.NamePrefix + s.Name
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		if opts.NamePrefix != "" {
			return nil, fmt.Errorf("the generated name %q (with --name-prefix %q) is not valid: %s", name, opts.NamePrefix, strings.Join(errs, "; "))
		}
		return nil, fmt.Errorf("the generated name %q is not valid: %s", name, strings.Join(errs, "; "))
	}
	meta := metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{LabelManagedBy: ManagedByValue},
		Annotations: map[string]string{AnnotationSource: sourcesAnnotation(s.Sources)},
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
	spec := admissionregistrationv1.MutatingAdmissionPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{
			ResourceRules: s.Rules,
			MatchPolicy:   &exact,
		},
		FailurePolicy:      &fp,
		ReinvocationPolicy: never,
	}
	if s.Param != nil {
		spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: s.Param.APIVersion, Kind: s.Param.Kind}
	}
	for _, c := range s.Conditions {
		spec.MatchConditions = append(spec.MatchConditions, admissionregistrationv1.MatchCondition{Name: c.Name, Expression: c.Expression})
	}
	for _, v := range s.Variables {
		spec.Variables = append(spec.Variables, admissionregistrationv1.Variable{Name: v.Name, Expression: v.Expression})
	}
	for _, mu := range s.Mutations {
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
	if s.Param != nil {
		action := s.Param.NotFound
		b.Spec.ParamRef = &admissionregistrationv1.ParamRef{Name: s.Param.Name, Namespace: s.Param.Namespace, ParameterNotFoundAction: &action}
	}
	if s.NamespaceSelector != nil || len(opts.NamespaceRequirements) > 0 {
		sel := &metav1.LabelSelector{}
		if s.NamespaceSelector != nil {
			sel = s.NamespaceSelector.DeepCopy()
		}
		for _, r := range opts.NamespaceRequirements {
			sel.MatchExpressions = append(sel.MatchExpressions, *r.DeepCopy())
		}
		b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: sel}
	}
	if s.ObjectSelector != nil {
		if b.Spec.MatchResources == nil {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{}
		}
		b.Spec.MatchResources.ObjectSelector = s.ObjectSelector.DeepCopy()
	}
	return &Policy{Policy: p, Binding: b}, nil
}

// Rename gives p and its binding the name name (a full name: Options.NamePrefix is not added).
func (p *Policy) Rename(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("the generated name %q is not valid: %s", name, strings.Join(errs, "; "))
	}
	p.Policy.Name, p.Binding.Name, p.Binding.Spec.PolicyName = name, name, name
	return nil
}

// builtinResource is the plural resource of a kind the Kubernetes client libraries know.
func builtinResource(gvk schema.GroupVersionKind) (string, bool) {
	if !clientgoscheme.Scheme.Recognizes(gvk) || strings.HasSuffix(gvk.Kind, "List") && gvk.Kind != "List" && clientgoscheme.Scheme.Recognizes(gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))) {
		return "", false
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.Resource, true
}

// ParseSources reads an AnnotationSource value back.
func ParseSources(a string) []Source {
	var out []Source
	for _, part := range strings.Split(a, "; ") {
		fields := strings.Split(part, ", ")
		if len(fields) < 3 {
			continue
		}
		src := Source{APIVersion: fields[0]}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "Kind":
				src.Kind = v
			case "namespace":
				src.Namespace = v
			case "name":
				src.Name = v
			}
		}
		out = append(out, src)
	}
	return out
}

func sourcesAnnotation(srcs []Source) string {
	parts := make([]string, len(srcs))
	for i, s := range srcs {
		parts[i] = s.APIVersion + ", Kind=" + s.Kind
		if s.Namespace != "" {
			parts[i] += ", namespace=" + s.Namespace
		}
		parts[i] += ", name=" + s.Name
	}
	return strings.Join(parts, "; ")
}
