package compiler

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mapc-dev/mapc/compiler/source"
)

// CRDs picks the CustomResourceDefinitions (apiextensions.k8s.io/v1) out of docs.
func CRDs(docs []*source.Document) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, d := range docs {
		gvk := d.Object.GroupVersionKind()
		if gvk.Group != apiextensionsv1.GroupName || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		if gvk.Version != "v1" {
			return nil, fmt.Errorf("%s:%d: CustomResourceDefinition %s: only apiextensions.k8s.io/v1 is read", d.File, d.Line, d.Object.GetName())
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(d.Object.Object, crd, true); err != nil {
			return nil, fmt.Errorf("%s:%d: CustomResourceDefinition %s: %v", d.File, d.Line, d.Object.GetName(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}
