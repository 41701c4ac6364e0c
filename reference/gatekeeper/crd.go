package gatekeeper

// This file stands in for the Kubernetes API server's handling of Gatekeeper's
// mutator custom resources before Gatekeeper ever sees them: pruning of
// unknown fields, OpenAPI defaulting (e.g. ModifySet spec.parameters.operation
// defaults to "merge") and OpenAPI schema validation (enums such as
// pathTests[].condition, match.source, applyTo[].operations; metadata.name
// maxLength 63). The CRDs under crds/ are copied verbatim from Gatekeeper
// v3.23.1 (manifest_staging/charts/gatekeeper/crds) and processed with the
// API server's own code from k8s.io/apiextensions-apiserver.

import (
	"embed"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

//go:embed crds/*.yaml
var crdFS embed.FS

type crdVersion struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

var (
	crdOnce     sync.Once
	crdErr      error
	crdVersions map[schema.GroupVersionKind]*crdVersion
)

func loadCRDs() error {
	crdOnce.Do(func() {
		crdVersions = map[schema.GroupVersionKind]*crdVersion{}
		entries, err := crdFS.ReadDir("crds")
		if err != nil {
			crdErr = err
			return
		}
		for _, e := range entries {
			data, err := crdFS.ReadFile("crds/" + e.Name())
			if err != nil {
				crdErr = err
				return
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(data, crd); err != nil {
				crdErr = fmt.Errorf("crds/%s: %w", e.Name(), err)
				return
			}
			for _, v := range crd.Spec.Versions {
				if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
					continue
				}
				internal := &apiextensions.JSONSchemaProps{}
				if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
					crdErr = fmt.Errorf("crds/%s %s: %w", e.Name(), v.Name, err)
					return
				}
				s, err := structuralschema.NewStructural(internal)
				if err != nil {
					crdErr = fmt.Errorf("crds/%s %s: %w", e.Name(), v.Name, err)
					return
				}
				validator, _, err := apiservervalidation.NewSchemaValidator(internal)
				if err != nil {
					crdErr = fmt.Errorf("crds/%s %s: %w", e.Name(), v.Name, err)
					return
				}
				gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
				crdVersions[gvk] = &crdVersion{structural: s, validator: validator}
			}
		}
	})
	return crdErr
}

// admitCustomResource returns a copy of obj as the API server would persist it:
// pruned, defaulted and validated against the served CRD version.
func admitCustomResource(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := loadCRDs(); err != nil {
		return nil, err
	}
	gvk := obj.GroupVersionKind()
	v, ok := crdVersions[gvk]
	if !ok {
		// Same wording as the API server's RESTMapper error.
		return nil, fmt.Errorf("no matches for kind %q in version %q", gvk.Kind, gvk.GroupVersion().String())
	}
	out := obj.DeepCopy()
	pruning.Prune(out.Object, v.structural, true)
	structuraldefaulting.Default(out.Object, v.structural)
	if errs := apiservervalidation.ValidateCustomResource(nil, out.Object, v.validator); len(errs) > 0 {
		return nil, fmt.Errorf("%s.%s %q is invalid: %v", gvk.Kind, gvk.Group, obj.GetName(), errs.ToAggregate())
	}
	return out, nil
}
