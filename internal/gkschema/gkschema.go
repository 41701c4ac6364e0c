// Package gkschema stands in for the Kubernetes API server's handling of Gatekeeper's mutator
// custom resources before Gatekeeper ever sees them: decoding with strict field validation
// (unknown fields), pruning of unknown fields, OpenAPI defaulting (e.g. ModifySet
// spec.parameters.operation defaults to "merge") and OpenAPI schema validation (types, required
// fields, enums such as pathTests[].condition, match.source, applyTo[].operations; metadata.name
// maxLength 63).
//
// The CRDs under crds/ are copied verbatim from Gatekeeper v3.23.1
// (manifest_staging/charts/gatekeeper/crds) and processed by internal/crdschema with the API
// server's own code from k8s.io/apiextensions-apiserver.
//
// It must not re-implement what that code decides, nor depend on the rest of mapc.
package gkschema

import (
	"embed"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/internal/crdschema"
)

//go:embed crds/*.yaml
var crdFS embed.FS

var crds = crdschema.New(crdFS, "crds")

// Admission is what the API server makes of a mutator it is asked to create.
type Admission = crdschema.Admission

// NotServedError is returned for a group, version and kind no CRD serves.
type NotServedError = crdschema.NotServedError

// Field is the schema of one field of a served kind.
type Field = crdschema.Field

// Served returns every group, version and kind the CRDs serve, sorted.
func Served() ([]schema.GroupVersionKind, error) { return crds.Served() }

// Admit runs obj through the API server's handling of a create request for a mutator:
// unknown-field tracking and pruning, dropping of nulls, defaulting, then validation. The
// mutators are cluster-scoped: a namespace is dropped. obj is not modified. The error is a
// *NotServedError when no CRD serves obj's kind and version.
func Admit(obj *unstructured.Unstructured) (*Admission, error) { return crds.Admit(obj) }

// Lookup returns the schema of the field at path in gvk's CRD. path is written as field errors
// and unknown-field paths write it: "spec.applyTo[0].operations[1]". It returns false if the
// path leaves the schema (an unknown field, or a field whose contents are free).
func Lookup(gvk schema.GroupVersionKind, path string) (Field, bool) { return crds.Lookup(gvk, path) }
