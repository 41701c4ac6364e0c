// Package kyverno is the front end of Kyverno's route: it recognises Kyverno's policy documents
// (kyverno.io ClusterPolicy and Policy), decodes them as the API server stores them, expands
// Kyverno's autogen rules, and reads each mutate rule into its model (match, exclude,
// preconditions, patches, configMap context entries: the one ConfigMap of the policy, and
// variable context entries), refusing
// what cannot be translated exactly with the file, line, policy, rule, field and reason.
//
// It must not import Gatekeeper's route, emit or cmd; lowering to CEL is
// compiler/kyverno/lower's business.
package kyverno

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Group is the API group of Kyverno's policies.
const Group = "kyverno.io"

// Kinds are the kinds of Kyverno's policies that hold mutate rules.
var Kinds = []string{"ClusterPolicy", "Policy"}

// Versions are the API versions of kyverno.io the policies are read in.
var Versions = []string{"v1", "v2beta1"}

// IsPolicy: is obj a Kyverno ClusterPolicy or Policy (of any version of kyverno.io)?
func IsPolicy(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	if gvk.Group != Group {
		return false
	}
	for _, k := range Kinds {
		if gvk.Kind == k {
			return true
		}
	}
	return false
}
