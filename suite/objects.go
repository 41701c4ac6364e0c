package suite

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mapc-dev/mapc/compiler/source"
)

// IsNamespace reports whether obj is a core/v1 Namespace.
func IsNamespace(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Namespace"
}

// IsCRD reports whether obj is an apiextensions.k8s.io/v1 CustomResourceDefinition.
func IsCRD(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "apiextensions.k8s.io" && gvk.Version == "v1" && gvk.Kind == "CustomResourceDefinition"
}

// Namespaces decodes the Namespace documents among docs (others are skipped).
func Namespaces(docs []*source.Document) ([]*corev1.Namespace, error) {
	var out []*corev1.Namespace
	for _, d := range docs {
		if !IsNamespace(d.Object) {
			continue
		}
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, ns); err != nil {
			return nil, &source.Error{File: d.File, Line: d.Line, Msg: "Namespace: " + err.Error()}
		}
		out = append(out, ns)
	}
	return out, nil
}

// CRDs decodes the CustomResourceDefinition documents among docs; any other document is an error.
func CRDs(docs []*source.Document) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, d := range docs {
		if !IsCRD(d.Object) {
			return nil, &source.Error{File: d.File, Line: d.Line, Msg: fmt.Sprintf("%s %s is not an apiextensions.k8s.io/v1 CustomResourceDefinition", d.Object.GetAPIVersion(), d.Object.GetKind())}
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, crd); err != nil {
			return nil, &source.Error{File: d.File, Line: d.Line, Msg: "CustomResourceDefinition: " + err.Error()}
		}
		out = append(out, crd)
	}
	return out, nil
}

// Identity names an object for messages and lookups: "Kind/namespace/name" or "Kind/name".
func Identity(o *unstructured.Unstructured) string {
	s := o.GetKind() + "/"
	if o.GetNamespace() != "" {
		s += o.GetNamespace() + "/"
	}
	return s + o.GetName()
}

// sameObject reports whether a and b are the same object (group, kind, namespace, name); a
// namespace missing on either side matches any.
func sameObject(a, b *unstructured.Unstructured) bool {
	ga, gb := a.GroupVersionKind(), b.GroupVersionKind()
	if ga.Group != gb.Group || ga.Kind != gb.Kind || a.GetName() != b.GetName() {
		return false
	}
	return a.GetNamespace() == "" || b.GetNamespace() == "" || a.GetNamespace() == b.GetNamespace()
}

// Pick returns the object among candidates that is the same object as o; when there is exactly
// one candidate it is returned whatever its name.
func Pick(o *unstructured.Unstructured, candidates []*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if len(candidates) == 1 {
		return candidates[0], nil
	}
	var found *unstructured.Unstructured
	for _, c := range candidates {
		if sameObject(o, c) {
			if found != nil && !apiequality.Semantic.DeepEqual(found.Object, c.Object) {
				return nil, fmt.Errorf("several different objects are %s", Identity(c))
			}
			found = c
		}
	}
	if found == nil {
		return nil, fmt.Errorf("none of the %d objects is %s", len(candidates), Identity(o))
	}
	return found, nil
}
