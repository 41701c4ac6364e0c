// Package kyschema stands in for the Kubernetes API server's handling of Kyverno's policies
// (kyverno.io ClusterPolicy and Policy, in every served version: v1 and v2beta1) before Kyverno
// ever sees them: decoding with strict field validation (a misspelt field such as
// mutate.foreEach is an error naming its path, not dropped), pruning of unknown fields, OpenAPI
// defaulting (e.g. spec.validationFailureAction Audit, spec.background true,
// rules[].skipBackgroundRequests true) and OpenAPI schema validation (types, required fields,
// enums, lengths, metadata).
//
// The CRDs under crds/ are copied verbatim from Kyverno v1.19.1
// (config/crds/kyverno/kyverno.io_clusterpolicies.yaml and kyverno.io_policies.yaml) and
// processed by internal/crdschema with the API server's own code from
// k8s.io/apiextensions-apiserver. They are large (about 1.4 MB each): they are read and turned
// into schemas on first use, once (a quarter of a second and 70 MB allocated, 9 MB kept, on a
// small machine).
//
// It must not re-implement what that code decides, nor interpret policies (that is the business
// of Kyverno's route, compiler/kyverno), nor depend on the rest of mapc.
package kyschema

import (
	"embed"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mapc-dev/mapc/internal/crdschema"
)

//go:embed crds/*.yaml
var crdFS embed.FS

var crds = crdschema.New(crdFS, "crds")

// Admission is what the API server makes of a policy it is asked to create.
type Admission = crdschema.Admission

// NotServedError is returned for a group, version and kind no CRD serves.
type NotServedError = crdschema.NotServedError

// Field is the schema of one field of a served kind.
type Field = crdschema.Field

// Served returns every group, version and kind the CRDs serve, sorted.
func Served() ([]schema.GroupVersionKind, error) { return crds.Served() }

// Admit runs obj through the API server's handling of a create request for a policy:
// unknown-field tracking and pruning, dropping of nulls, defaulting, then validation. A
// ClusterPolicy loses its namespace; a Policy keeps its own, or has none when it names none.
// obj is not modified. The error is a *NotServedError when no CRD serves obj's kind and
// version.
func Admit(obj *unstructured.Unstructured) (*Admission, error) { return crds.Admit(obj) }

// Lookup returns the schema of the field at path in gvk's CRD. path is written as field errors
// and unknown-field paths write it: "spec.rules[0].mutate.foreach[1].list". It returns false if
// the path leaves the schema (an unknown field, or a field whose contents are free, such as
// patchStrategicMerge).
func Lookup(gvk schema.GroupVersionKind, path string) (Field, bool) { return crds.Lookup(gvk, path) }

// UnknownField is the detail of the error Decode gives for a field the CRD does not have.
const UnknownField = "unknown field: Kyverno's CRD has no such field; the API server refuses it (strict field validation) or drops it"

// Decode returns obj as the API server would store it (pruned and defaulted) and everything it
// would refuse in it: each unknown field (a Forbidden error whose detail is UnknownField, at
// the field's path, metadata included), then the errors of schema validation. A kind no CRD
// serves is one NotSupported error on kind, a version no CRD serves for the kind one on
// apiVersion, both with a nil object. obj is not modified.
func Decode(obj *unstructured.Unstructured) (*unstructured.Unstructured, field.ErrorList) {
	a, err := Admit(obj)
	var ns *NotServedError
	if errors.As(err, &ns) {
		var versions, kinds []string
		served, _ := Served()
		for _, gvk := range served {
			if gvk.Kind == ns.GVK.Kind {
				versions = append(versions, gvk.GroupVersion().String())
			}
			if !slices.Contains(kinds, gvk.Kind) {
				kinds = append(kinds, gvk.Kind)
			}
		}
		if len(versions) == 0 {
			return nil, field.ErrorList{field.NotSupported(field.NewPath("kind"), ns.GVK.Kind, kinds)}
		}
		return nil, field.ErrorList{field.NotSupported(field.NewPath("apiVersion"), obj.GetAPIVersion(), versions)}
	}
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	errs := make(field.ErrorList, 0, len(a.Unknown)+len(a.Invalid))
	for _, p := range a.Unknown {
		errs = append(errs, &field.Error{Type: field.ErrorTypeForbidden, Field: p, BadValue: "", Detail: UnknownField})
	}
	return a.Object, append(errs, a.Invalid...)
}
