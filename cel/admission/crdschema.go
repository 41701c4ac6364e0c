package admission

import (
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const (
	schemaRefPrefix   = "#/components/schemas/"
	objectMetaDefName = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	// x-kubernetes-group-version-kind, the extension the type converter
	// uses to find the schema of a kind.
	gvkExtension = "x-kubernetes-group-version-kind"
)

// crdTypeConverter builds the type converter the API server would use for a
// custom resource version.
//
// In the API server, the apiextensions-apiserver publishes an OpenAPI v3
// document for each CRD version (k8s.io/apiextensions-apiserver
// pkg/controller/openapi/builder.BuildOpenAPIV3) and the MAP type converter
// manager turns its components.schemas into a converter with
// managedfields.NewTypeConverter. BuildOpenAPIV3 cannot be imported here
// (it pulls in k8s.io/apiserver/pkg/endpoints and with it a module this
// repository does not require), so this is a condensed copy of the part of
// it that produces the kind's schema (builder.buildKubeNative and
// addEmbeddedProperties): the structural, unfolded openAPIV3Schema with
// apiVersion, kind and a reference to ObjectMeta added, plus the generated
// definitions of the apimachinery types it refers to.
func crdTypeConverter(crd *apiextensionsv1.CustomResourceDefinition, version string) (managedfields.TypeConverter, error) {
	defs := map[string]*spec.Schema{}
	generated := generatedopenapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef(schemaRefPrefix + common.EscapeJsonPointer(modelName(name)))
	})
	for name, def := range generated {
		s := def.Schema
		defs[modelName(name)] = &s
	}
	if defs[objectMetaDefName] == nil {
		return nil, fmt.Errorf("no generated OpenAPI definition for ObjectMeta")
	}
	// apiVersion and kind as in TypeMeta.
	typeMeta := &spec.Schema{SchemaProps: spec.SchemaProps{Properties: map[string]spec.Schema{
		"apiVersion": *spec.StringProperty(),
		"kind":       *spec.StringProperty(),
	}}}

	var kindSchema *spec.Schema
	validation, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	if validation != nil && validation.OpenAPIV3Schema != nil {
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validation, internal, nil); err != nil {
			return nil, fmt.Errorf("converting CRD validation to internal version: %w", err)
		}
		ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return nil, fmt.Errorf("schema is not structural: %w", err)
		}
		if errs := structuralschema.ValidateStructural(nil, ss); len(errs) > 0 {
			return nil, fmt.Errorf("schema is not structural: %v", errs.ToAggregate())
		}
		kindSchema = ss.Unfold().ToKubeOpenAPI()
		kindSchema.SetProperty("metadata", *spec.RefSchema(schemaRefPrefix + objectMetaDefName))
		kindSchema.SetProperty("apiVersion", typeMeta.Properties["apiVersion"])
		kindSchema.SetProperty("kind", typeMeta.Properties["kind"])
		addEmbeddedProperties(kindSchema, typeMeta)
	} else {
		kindSchema = &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	}
	kindSchema.AddExtension(gvkExtension, []interface{}{
		map[string]interface{}{"group": crd.Spec.Group, "version": version, "kind": crd.Spec.Names.Kind},
	})
	defs[fmt.Sprintf("%s.%s.%s", util.ToRESTFriendlyName(crd.Spec.Group), version, crd.Spec.Names.Kind)] = kindSchema

	return managedfields.NewTypeConverter(defs, false)
}

// modelName returns the OpenAPI model name for a definition key, which is
// either already a model name (io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta)
// or a Go type name (k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta).
func modelName(name string) string {
	if strings.Contains(name, "/") {
		return util.ToRESTFriendlyName(name)
	}
	return name
}

// addEmbeddedProperties mirrors the builder function of the same name:
// x-kubernetes-embedded-resource objects get apiVersion, kind and metadata.
func addEmbeddedProperties(s *spec.Schema, typeMeta *spec.Schema) {
	if s == nil {
		return
	}
	for k := range s.Properties {
		v := s.Properties[k]
		addEmbeddedProperties(&v, typeMeta)
		s.Properties[k] = v
	}
	if s.Items != nil {
		addEmbeddedProperties(s.Items.Schema, typeMeta)
	}
	if s.AdditionalProperties != nil {
		addEmbeddedProperties(s.AdditionalProperties.Schema, typeMeta)
	}
	if isTrue, ok := s.Extensions.GetBool("x-kubernetes-embedded-resource"); ok && isTrue {
		s.SetProperty("apiVersion", typeMeta.Properties["apiVersion"])
		s.SetProperty("kind", typeMeta.Properties["kind"])
		s.SetProperty("metadata", *spec.RefSchema(schemaRefPrefix + objectMetaDefName))
	}
}
