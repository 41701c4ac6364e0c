package gatekeeper

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	mutv1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1"
	mutv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1alpha1"
	mutv1beta1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1beta1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/assign"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/assignimage"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/assignmeta"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators/modifyset"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion"
	sigsjson "sigs.k8s.io/json"

	"github.com/mapc-dev/mapc/internal/gkschema"
)

// Group is the API group of Gatekeeper's mutators.
const Group = "mutations.gatekeeper.sh"

// Kinds lists the mutator kinds this front end reads.
var Kinds = []string{"Assign", "AssignImage", "AssignMetadata", "ModifySet"}

// IsMutator reports whether obj is a Gatekeeper mutator (of any version and kind this front end
// knows).
func IsMutator(obj *unstructured.Unstructured) bool {
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

// Misnamed reports a document meant to be a mutator that neither the API server nor Gatekeeper
// would take for one: a kind the group mutations.gatekeeper.sh does not have, or a mutator kind
// in a group that misspells it. It returns the field to blame and what to do, or "" for a mutator
// or for a document that is plainly something else.
func Misnamed(obj *unstructured.Unstructured) (field, msg string) {
	gvk := obj.GroupVersionKind()
	kinds := strings.Join(Kinds, ", ")
	if gvk.Group == Group {
		if IsMutator(obj) {
			return "", ""
		}
		if c, ok := closest(gvk.Kind, Kinds); ok {
			return "kind", fmt.Sprintf("%s has no kind %q; did you mean %s? The API server refuses it and Gatekeeper never sees it (its mutator kinds are %s)", Group, gvk.Kind, c, kinds)
		}
		return "kind", fmt.Sprintf("%s has no kind %q: the API server refuses it and Gatekeeper never sees it; use one of Gatekeeper's mutator kinds: %s", Group, gvk.Kind, kinds)
	}
	group, version := gvk.Group, gvk.Version
	if group == "" {
		// "apiVersion: mutations.gatekeeper.sh" reads as a version of the core group.
		group, version = version, ""
	}
	if distance(strings.ToLower(group), Group) > 2 {
		return "", ""
	}
	kind := gvk.Kind
	if !slices.Contains(Kinds, kind) {
		c, ok := closest(kind, Kinds)
		if !ok {
			return "", ""
		}
		kind = c
	}
	want := "apiVersion: " + Group + "/" + servedVersion(kind, version)
	if kind != gvk.Kind {
		want += " and kind: " + kind
	}
	if group == Group {
		return "apiVersion", fmt.Sprintf("%q has no version; did you mean %s? The API server reads it as a version of the core group, which has no %s, so Gatekeeper would never see this mutator", obj.GetAPIVersion(), want, gvk.Kind)
	}
	return "apiVersion", fmt.Sprintf("%q is not Gatekeeper's mutator API; did you mean %s? Gatekeeper serves no %s in group %s, so it would never see this mutator", obj.GetAPIVersion(), want, gvk.Kind, group)
}

// servedVersion returns version if Gatekeeper serves kind in it, else the version to suggest.
func servedVersion(kind, version string) string {
	served, _ := gkschema.Served()
	var first string
	for _, gvk := range served {
		if gvk.Group != Group || gvk.Kind != kind {
			continue
		}
		if gvk.Version == version {
			return version
		}
		if first == "" || gvk.Version == "v1" {
			first = gvk.Version
		}
	}
	return first
}

// Decoded is a mutator as Gatekeeper's own code sees it: the unversioned API object and the
// types.Mutator its constructor built (which also validated it exactly as Gatekeeper's webhook does).
type Decoded struct {
	// Object is one of *unversioned.Assign, *unversioned.AssignMetadata, *unversioned.ModifySet,
	// *unversioned.AssignImage.
	Object  any
	Mutator types.Mutator
}

// FieldError is a problem with one field of a mutator.
type FieldError struct {
	Field string // e.g. "spec.location"; empty for the whole object
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// FieldErrors is every problem found with one mutator.
type FieldErrors []*FieldError

func (es FieldErrors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

// Decode reads one mutator of any supported version into Gatekeeper's unversioned type, as the
// API server (strict field validation against Gatekeeper's CRDs, defaulting, schema validation)
// and Gatekeeper's controller would, and builds the mutator with Gatekeeper's own constructor, so
// that a mutator the API server or Gatekeeper rejects is rejected here with their reason. When
// the API server would refuse the mutator, the error is a FieldErrors naming every field it
// refuses.
func Decode(obj *unstructured.Unstructured) (*Decoded, error) {
	gvk := obj.GroupVersionKind()
	var versioned, out any
	var convert func(in, out any) error
	switch gvk.Version + "/" + gvk.Kind {
	case "v1/Assign":
		versioned, out = &mutv1.Assign{}, &unversioned.Assign{}
		convert = func(in, o any) error {
			return mutv1.Convert_v1_Assign_To_unversioned_Assign(in.(*mutv1.Assign), o.(*unversioned.Assign), nil)
		}
	case "v1beta1/Assign":
		versioned, out = &mutv1beta1.Assign{}, &unversioned.Assign{}
		convert = func(in, o any) error {
			return mutv1beta1.Convert_v1beta1_Assign_To_unversioned_Assign(in.(*mutv1beta1.Assign), o.(*unversioned.Assign), nil)
		}
	case "v1alpha1/Assign":
		versioned, out = &mutv1alpha1.Assign{}, &unversioned.Assign{}
		convert = func(in, o any) error {
			return mutv1alpha1.Convert_v1alpha1_Assign_To_unversioned_Assign(in.(*mutv1alpha1.Assign), o.(*unversioned.Assign), nil)
		}
	case "v1/AssignMetadata":
		versioned, out = &mutv1.AssignMetadata{}, &unversioned.AssignMetadata{}
		convert = func(in, o any) error {
			return mutv1.Convert_v1_AssignMetadata_To_unversioned_AssignMetadata(in.(*mutv1.AssignMetadata), o.(*unversioned.AssignMetadata), nil)
		}
	case "v1beta1/AssignMetadata":
		versioned, out = &mutv1beta1.AssignMetadata{}, &unversioned.AssignMetadata{}
		convert = func(in, o any) error {
			return mutv1beta1.Convert_v1beta1_AssignMetadata_To_unversioned_AssignMetadata(in.(*mutv1beta1.AssignMetadata), o.(*unversioned.AssignMetadata), nil)
		}
	case "v1alpha1/AssignMetadata":
		versioned, out = &mutv1alpha1.AssignMetadata{}, &unversioned.AssignMetadata{}
		convert = func(in, o any) error {
			return mutv1alpha1.Convert_v1alpha1_AssignMetadata_To_unversioned_AssignMetadata(in.(*mutv1alpha1.AssignMetadata), o.(*unversioned.AssignMetadata), nil)
		}
	case "v1/ModifySet":
		versioned, out = &mutv1.ModifySet{}, &unversioned.ModifySet{}
		convert = func(in, o any) error {
			return mutv1.Convert_v1_ModifySet_To_unversioned_ModifySet(in.(*mutv1.ModifySet), o.(*unversioned.ModifySet), nil)
		}
	case "v1beta1/ModifySet":
		versioned, out = &mutv1beta1.ModifySet{}, &unversioned.ModifySet{}
		convert = func(in, o any) error {
			return mutv1beta1.Convert_v1beta1_ModifySet_To_unversioned_ModifySet(in.(*mutv1beta1.ModifySet), o.(*unversioned.ModifySet), nil)
		}
	case "v1alpha1/ModifySet":
		versioned, out = &mutv1alpha1.ModifySet{}, &unversioned.ModifySet{}
		convert = func(in, o any) error {
			return mutv1alpha1.Convert_v1alpha1_ModifySet_To_unversioned_ModifySet(in.(*mutv1alpha1.ModifySet), o.(*unversioned.ModifySet), nil)
		}
	case "v1alpha1/AssignImage":
		versioned, out = &mutv1alpha1.AssignImage{}, &unversioned.AssignImage{}
		convert = func(in, o any) error {
			return mutv1alpha1.Convert_v1alpha1_AssignImage_To_unversioned_AssignImage(in.(*mutv1alpha1.AssignImage), o.(*unversioned.AssignImage), nil)
		}
	default:
		if gvk.Kind == "AssignImage" {
			return nil, &FieldError{Field: "apiVersion", Msg: fmt.Sprintf("AssignImage is served only as %s/v1alpha1 in Gatekeeper v3.23.1, not %s", Group, gvk.Version)}
		}
		return nil, &FieldError{Field: "apiVersion", Msg: fmt.Sprintf("%s/%s is not a version Gatekeeper v3.23.1 serves for %s (use v1, v1beta1 or v1alpha1)", Group, gvk.Version, gvk.Kind)}
	}
	adm, err := gkschema.Admit(obj)
	if err != nil {
		return nil, &FieldError{Msg: "cannot check against Gatekeeper's CRDs: " + err.Error()}
	}
	if errs := crdErrors(gvk, adm, obj.Object); len(errs) > 0 {
		return nil, errs
	}
	// Gatekeeper's controller reads the object the API server stored (pruned, defaulted) into
	// the typed object. sigs.k8s.io/json keeps integers as int64, as the API machinery does.
	data, err := json.Marshal(adm.Object.Object)
	if err != nil {
		return nil, &FieldError{Msg: err.Error()}
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, versioned); err != nil {
		return nil, &FieldError{Msg: "cannot decode: " + err.Error()}
	}
	if err := convert(versioned, out); err != nil {
		return nil, &FieldError{Msg: "cannot convert to Gatekeeper's internal version: " + err.Error()}
	}
	m, err := build(out)
	if err != nil {
		return nil, &FieldError{Field: fieldOfError(gvk.Kind, err), Msg: "Gatekeeper rejects this mutator: " + err.Error()}
	}
	return &Decoded{Object: out, Mutator: m}, nil
}

var _ conversion.Scope // conversions are called with a nil scope, as Gatekeeper's own code does

func build(obj any) (types.Mutator, error) {
	switch o := obj.(type) {
	case *unversioned.Assign:
		return assign.MutatorForAssign(o)
	case *unversioned.AssignMetadata:
		return assignmeta.MutatorForAssignMetadata(o)
	case *unversioned.ModifySet:
		return modifyset.MutatorForModifySet(o)
	case *unversioned.AssignImage:
		return assignimage.MutatorForAssignImage(o)
	}
	return nil, fmt.Errorf("unsupported type %T", obj)
}

// fieldOfError guesses which field a Gatekeeper constructor error is about, for the message.
func fieldOfError(kind string, err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "subpath"), strings.Contains(s, "MustExist"), strings.Contains(s, "path test"):
		return "spec.parameters.pathTests"
	case strings.Contains(s, "applyTo"), strings.Contains(s, "apply to"):
		return "spec.applyTo"
	case strings.Contains(s, "location"), strings.Contains(s, "keyed list"), strings.Contains(s, "key value"),
		strings.Contains(s, "can't change metadata"), strings.Contains(s, "globbed"):
		return "spec.location"
	case kind == "AssignImage":
		return "spec.parameters"
	case strings.Contains(s, "assign"), strings.Contains(s, "value"), strings.Contains(s, "fromMetadata"), strings.Contains(s, "metadata field"):
		return "spec.parameters.assign"
	case strings.Contains(s, "name"):
		return "metadata.name"
	}
	return ""
}
