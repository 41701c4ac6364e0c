// Package typed passes objects of built-in kinds through their Go types and back, as the API
// server does when it decodes a request and encodes the object again: fields the type omits
// when empty disappear, fields it always writes appear.
//
// It uses the Kubernetes types as they are and must not decide anything about translation.
package typed

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Known reports whether gvk is a kind the Kubernetes client libraries have a Go type for.
func Known(gvk schema.GroupVersionKind) bool { return clientgoscheme.Scheme.Recognizes(gvk) }

// RoundTrip decodes obj into gvk's Go type and encodes it back. strict refuses unknown fields
// (as the API server does for a request); otherwise they are dropped (as it does for a mutating
// webhook's result). obj is not modified.
func RoundTrip(gvk schema.GroupVersionKind, obj map[string]any, strict bool) (map[string]any, error) {
	t, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, t, strict); err != nil {
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(t)
}
