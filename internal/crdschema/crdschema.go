// Package crdschema stands in for the Kubernetes API server's handling of custom resources
// before their controller ever sees them: decoding with strict field validation (unknown
// fields), pruning of unknown fields, OpenAPI defaulting and OpenAPI schema validation (types,
// required fields, enums, lengths, metadata), for the CustomResourceDefinitions of one project
// given as files. The CRDs are processed with the API server's own code from
// k8s.io/apiextensions-apiserver, in the order its custom resource handler applies it.
//
// internal/gkschema (Gatekeeper's CRDs) and internal/kyschema (Kyverno's) each hold one Set.
// It must not re-implement what that code decides, nor know any project's CRDs, nor depend on
// the rest of mapc.
package crdschema

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Set is the CRDs of the *.yaml files of one directory, each file holding one
// CustomResourceDefinition (apiextensions.k8s.io/v1). They are read and turned into schemas on
// first use, once.
type Set struct {
	fsys fs.FS
	dir  string

	once     sync.Once
	err      error
	versions map[schema.GroupVersionKind]*crdVersion
}

type crdVersion struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	namespaced bool
}

// New returns the Set of the CRDs in directory dir of fsys (usually an embed.FS). Nothing is
// read until the Set is used.
func New(fsys fs.FS, dir string) *Set {
	return &Set{fsys: fsys, dir: dir}
}

func (s *Set) load() error {
	s.once.Do(func() {
		s.versions, s.err = s.read()
	})
	return s.err
}

func (s *Set) read() (map[schema.GroupVersionKind]*crdVersion, error) {
	out := map[schema.GroupVersionKind]*crdVersion{}
	entries, err := fs.ReadDir(s.fsys, s.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		name := path.Join(s.dir, e.Name())
		data, err := fs.ReadFile(s.fsys, name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("%s %s: %w", name, v.Name, err)
			}
			st, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", name, v.Name, err)
			}
			validator, _, err := apiservervalidation.NewSchemaValidator(internal)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", name, v.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			out[gvk] = &crdVersion{structural: st, validator: validator, namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}
		}
	}
	return out, nil
}

// Served returns every group, version and kind the CRDs serve, sorted.
func (s *Set) Served() ([]schema.GroupVersionKind, error) {
	if err := s.load(); err != nil {
		return nil, err
	}
	out := make([]schema.GroupVersionKind, 0, len(s.versions))
	for gvk := range s.versions {
		out = append(out, gvk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// Admission is what the API server makes of a custom resource it is asked to create.
type Admission struct {
	// Object is the resource as the API server would store it: pruned and defaulted.
	Object *unstructured.Unstructured
	// Unknown lists the fields the CRD does not have, as strict field validation names them
	// (`unknown field "spec.match.excludeNamespaces"`): with it the API server refuses the
	// resource, without it pruning drops them silently. Sorted.
	Unknown []string
	// Invalid lists what schema validation refuses in Object (types, required fields, enums,
	// lengths, metadata).
	Invalid field.ErrorList
}

// NotServedError is returned for a group, version and kind no CRD serves.
type NotServedError struct{ GVK schema.GroupVersionKind }

func (e *NotServedError) Error() string {
	// Same wording as the API server's RESTMapper error.
	return fmt.Sprintf("no matches for kind %q in version %q", e.GVK.Kind, e.GVK.GroupVersion().String())
}

// Admit runs obj through the API server's handling of a create request for a custom resource:
// unknown-field tracking and pruning, dropping of nulls, defaulting, then validation. obj is not
// modified. The error is a *NotServedError when no CRD serves obj's kind and version.
//
// A cluster-scoped resource loses its namespace, as the API server clears it. A namespaced one
// keeps its namespace, or has none when it names none: the namespace is then the request's
// (kubectl's context), which a file does not know.
func (s *Set) Admit(obj *unstructured.Unstructured) (*Admission, error) {
	if err := s.load(); err != nil {
		return nil, err
	}
	gvk := obj.GroupVersionKind()
	v, ok := s.versions[gvk]
	if !ok {
		return nil, &NotServedError{GVK: gvk}
	}
	// A copy through JSON, as the API server decodes a request: numbers become int64 or
	// float64, whatever types the reader produced.
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	a := &Admission{Object: out}

	// unstructuredSchemaCoercer.apply (customresource_handler.go): metadata is decoded into
	// ObjectMeta, the rest pruned along the structural schema.
	meta, foundMeta, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(out.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		a.Invalid = append(a.Invalid, field.Invalid(field.NewPath("metadata"), out.Object["metadata"], err.Error()))
		foundMeta = false
	}
	a.Unknown = append(a.Unknown, metaUnknown...)
	a.Unknown = append(a.Unknown, pruning.PruneWithOptions(out.Object, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	sort.Strings(a.Unknown)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(out.Object, v.structural)
	if foundMeta {
		// The API server clears the namespace of a cluster-scoped resource before it
		// validates (rest.BeforeCreate) and stores only what ObjectMeta has.
		if !v.namespaced {
			meta.Namespace = ""
		}
		if err := schemaobjectmeta.SetObjectMeta(out.Object, meta); err != nil {
			return nil, err
		}
		requiresNamespace := v.namespaced && meta.Namespace != ""
		a.Invalid = append(a.Invalid, metavalidation.ValidateObjectMeta(meta, requiresNamespace, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	}
	structuraldefaulting.Default(out.Object, v.structural)

	a.Invalid = append(a.Invalid, apiservervalidation.ValidateCustomResource(nil, out.Object, v.validator)...)
	a.Invalid = append(a.Invalid, schemaobjectmeta.Validate(context.Background(), nil, out.Object, v.structural, false)...)
	return a, nil
}

// Field is the schema of one field of a served kind.
type Field struct{ s *structuralschema.Structural }

// Lookup returns the schema of the field at path in gvk's CRD. path is written as field errors
// and unknown-field paths write it: "spec.applyTo[0].operations[1]". It returns false if the
// path leaves the schema (an unknown field, or a field whose contents are free).
func (s *Set) Lookup(gvk schema.GroupVersionKind, path string) (Field, bool) {
	if s.load() != nil {
		return Field{}, false
	}
	v, ok := s.versions[gvk]
	if !ok {
		return Field{}, false
	}
	st := v.structural
	rest := path
	for rest != "" {
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 || st.Items == nil {
				return Field{}, false
			}
			if _, err := strconv.Atoi(rest[1:end]); err != nil {
				return Field{}, false
			}
			st, rest = st.Items, rest[end+1:]
			continue
		}
		rest = strings.TrimPrefix(rest, ".")
		// Property names of these schemas have no dots or brackets; the keys of free maps may,
		// and end the walk.
		end := strings.IndexAny(rest, ".[")
		if end < 0 {
			end = len(rest)
		}
		p, ok := st.Properties[rest[:end]]
		if !ok {
			return Field{}, false
		}
		st, rest = &p, rest[end:]
	}
	return Field{s: st}, true
}

// Properties returns the names of the fields an object at this place may have, sorted.
func (f Field) Properties() []string {
	if f.s == nil {
		return nil
	}
	out := make([]string, 0, len(f.s.Properties))
	for k := range f.s.Properties {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Enum returns the values the field allows when the schema enumerates them.
func (f Field) Enum() []any {
	if f.s == nil || f.s.ValueValidation == nil {
		return nil
	}
	out := make([]any, len(f.s.ValueValidation.Enum))
	for i, e := range f.s.ValueValidation.Enum {
		out[i] = e.Object
	}
	return out
}

// Type returns the field's OpenAPI type ("string", "array", "object", ...), or "" if any.
func (f Field) Type() string {
	if f.s == nil {
		return ""
	}
	return f.s.Type
}
