package admission

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The API server defaults MAP and binding objects when they are created
// (k8s.io/kubernetes pkg/apis/admissionregistration/v1 defaults, not
// importable here), and the admission code relies on those defaults, e.g.
// a nil namespaceSelector is a configuration error. These functions
// re-implement them for objects written by hand.

// DefaultPolicy applies the defaults the API server applies to a MutatingAdmissionPolicy on create.
func DefaultPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		fail := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &fail
	}
	defaultMatchResources(p.Spec.MatchConstraints)
}

// DefaultBinding applies the defaults the API server applies to a v1 (or v1beta1) binding on
// create. paramRef.parameterNotFoundAction is not defaulted: v1 and v1beta1 require it (only
// v1alpha1 defaults it to Deny, see DefaultParamRefV1alpha1), and the API server's param code
// takes a missing one as Allow.
func DefaultBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
}

// DefaultParamRefV1alpha1 applies the default the API server applies to a v1alpha1 binding's
// paramRef on create: parameterNotFoundAction Deny.
func DefaultParamRefV1alpha1(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	if b.Spec.ParamRef != nil && b.Spec.ParamRef.ParameterNotFoundAction == nil {
		deny := admissionregistrationv1.DenyAction
		b.Spec.ParamRef.ParameterNotFoundAction = &deny
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		equivalent := admissionregistrationv1.Equivalent
		m.MatchPolicy = &equivalent
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				all := admissionregistrationv1.AllScopes
				rules[i].Scope = &all
			}
		}
	}
}
