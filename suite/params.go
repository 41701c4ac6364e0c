package suite

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler/source"
)

// Param objects are the objects a policy with spec.paramKind reads through a binding's
// spec.paramRef (a ConfigMap, a custom resource). They exist in the cluster before the request,
// so they are given apart from the objects to admit, as Namespace objects are; the evaluator
// serves them to the API server's own param code (admission.Options.Params).

// ParamKinds are the kinds the policies of sets name in spec.paramKind.
func ParamKinds(sets []admission.PolicySet) map[schema.GroupVersionKind]bool {
	out := map[schema.GroupVersionKind]bool{}
	for _, s := range sets {
		if pk := s.Policy.Spec.ParamKind; pk != nil {
			out[schema.FromAPIVersionAndKind(pk.APIVersion, pk.Kind)] = true
		}
	}
	return out
}

// UnreadParams warns of each param among params of a kind no policy of sets names in
// spec.paramKind (a param of another apiVersion of the kind is not read either: the API server's
// informer lists the paramKind's version). flag names where params are given ("--params").
func UnreadParams(params []*source.Document, sets []admission.PolicySet, flag string) []string {
	kinds := ParamKinds(sets)
	var named []string
	for k := range kinds {
		named = append(named, k.GroupVersion().String()+" "+k.Kind)
	}
	sort.Strings(named)
	var out []string
	for _, d := range params {
		gvk := d.Object.GroupVersionKind()
		if kinds[gvk] {
			continue
		}
		why := "no policy has a paramKind"
		if len(named) > 0 {
			why = fmt.Sprintf("no policy has paramKind %s %s (theirs: %s)", d.Object.GetAPIVersion(), gvk.Kind, strings.Join(named, ", "))
		}
		out = append(out, fmt.Sprintf("warning: %s:%d: %s: %s: %s; this param is never read", d.File, d.Line, Identity(d.Object), flag, why))
	}
	return out
}

// ParamObjects are the objects of the documents.
func ParamObjects(docs []*source.Document) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(docs))
	for i, d := range docs {
		out[i] = d.Object
	}
	return out
}

// PositionParamError places an *admission.ParamError (a param the evaluator refuses) at the
// document of the param: "file:line: Kind/name: flag: message". Other errors are returned as
// they are.
func PositionParamError(err error, params []*source.Document, flag string) error {
	var pe *admission.ParamError
	if !errors.As(err, &pe) || pe.Index < 0 || pe.Index >= len(params) {
		return err
	}
	d := params[pe.Index]
	return &source.Error{File: d.File, Line: d.Line, Msg: fmt.Sprintf("%s: %s: %s", Identity(d.Object), flag, pe.Msg)}
}
