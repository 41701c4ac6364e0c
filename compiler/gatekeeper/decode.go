package gatekeeper

import (
	"encoding/json"
	"fmt"
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

// Decode reads one mutator of any supported version into Gatekeeper's unversioned type, as the
// API server (strict, structural schema) and Gatekeeper's controller would, and builds the
// mutator with Gatekeeper's own constructor, so that a mutator Gatekeeper rejects is rejected
// here with Gatekeeper's reason.
func Decode(obj *unstructured.Unstructured) (*Decoded, error) {
	gvk := obj.GroupVersionKind()
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, &FieldError{Msg: err.Error()}
	}
	if err := checkUnknownFields(gvk.Kind, data); err != nil {
		return nil, err
	}
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
	// The API server decodes with the CRD's schema; Gatekeeper's controller then reads the typed
	// object. sigs.k8s.io/json keeps integers as int64, as the API machinery does.
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, versioned); err != nil {
		return nil, &FieldError{Msg: "cannot decode: " + err.Error()}
	}
	if err := convert(versioned, out); err != nil {
		return nil, &FieldError{Msg: "cannot convert to Gatekeeper's internal version: " + err.Error()}
	}
	applyCRDDefaults(out)
	m, err := build(out)
	if err != nil {
		return nil, &FieldError{Field: fieldOfError(gvk.Kind, err), Msg: "Gatekeeper rejects this mutator: " + err.Error()}
	}
	return &Decoded{Object: out, Mutator: m}, nil
}

var _ conversion.Scope // conversions are called with a nil scope, as Gatekeeper's own code does

// applyCRDDefaults applies the defaults Gatekeeper's CRDs declare, which the API server would
// have filled in before Gatekeeper saw the object.
func applyCRDDefaults(obj any) {
	if ms, ok := obj.(*unversioned.ModifySet); ok && ms.Spec.Parameters.Operation == "" {
		ms.Spec.Parameters.Operation = unversioned.MergeOp
	}
}

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

// checkUnknownFields refuses fields that Gatekeeper's CRDs do not have but that look meaningful:
// the API server would prune them silently and Gatekeeper would act as if they were absent,
// which is not what the author meant.
func checkUnknownFields(kind string, data []byte) error {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return &FieldError{Msg: err.Error()}
	}
	spec, _ := raw["spec"].(map[string]any)
	params, _ := spec["parameters"].(map[string]any)
	if _, ok := params["assignIf"]; ok {
		return &FieldError{Field: "spec.parameters.assignIf", Msg: "assignIf is a Policy Controller extension that Gatekeeper v3.23.1 does not have: " +
			"its CRD prunes the field and its engine assigns unconditionally, so no translation can match both; " +
			"remove assignIf (to get Gatekeeper's behaviour) or express the condition with pathTests or match"}
	}
	if _, ok := params["externalData"]; ok {
		return &FieldError{Field: "spec.parameters.externalData", Msg: "externalData calls an external provider at admission time; a MutatingAdmissionPolicy cannot call out, so it has no equivalent"}
	}
	if a, ok := params["assign"].(map[string]any); ok {
		if _, ok := a["externalData"]; ok {
			return &FieldError{Field: "spec.parameters.assign.externalData", Msg: "externalData calls an external provider at admission time; a MutatingAdmissionPolicy cannot call out, so it has no equivalent"}
		}
	}
	return nil
}
