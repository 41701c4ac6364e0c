package gatekeeper

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mapc-dev/mapc/internal/gkschema"
)

// crdErrors lists everything the API server would refuse in a mutator, given what it made of it
// (adm), plus the fields of raw that look meaningful but that no translation can honour. Each
// names its field and says what to do.
func crdErrors(gvk schema.GroupVersionKind, adm *gkschema.Admission, raw map[string]any) FieldErrors {
	var errs FieldErrors
	ext := extensionErrors(raw)
	for _, p := range adm.Unknown {
		if fe, ok := ext[p]; ok {
			errs = append(errs, fe)
			delete(ext, p)
			continue
		}
		errs = append(errs, unknownField(gvk, p))
	}
	for _, fe := range ext {
		errs = append(errs, fe)
	}
	for _, e := range adm.Invalid {
		errs = append(errs, invalidField(gvk, e))
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

const dropped = "Gatekeeper's CRD has no such field: the API server refuses it (strict field validation) or drops it, and the mutator then acts as if it were absent"

// unknownField explains a field pruning would drop, with the field meant when it looks like a
// misspelling of one.
func unknownField(gvk schema.GroupVersionKind, path string) *FieldError {
	parent, key := splitUnknown(gvk, path)
	var known []string
	if parent == "metadata" {
		known = objectMetaFields()
	} else if f, ok := gkschema.Lookup(gvk, parent); ok {
		known = f.Properties()
	}
	if c, ok := closest(key, known); ok {
		return &FieldError{Field: path, Msg: fmt.Sprintf("unknown field; did you mean %s? %s", c, dropped)}
	}
	msg := "unknown field: " + dropped + "; remove it"
	if len(known) > 0 && len(known) <= 12 {
		msg += fmt.Sprintf(" or use one of the fields allowed here (%s)", strings.Join(known, ", "))
	}
	return &FieldError{Field: path, Msg: msg}
}

// splitUnknown splits an unknown field's path into the path of the object that holds it and its
// key, which may itself contain dots.
func splitUnknown(gvk schema.GroupVersionKind, path string) (parent, key string) {
	parent, key = "", path
	for i := 0; i < len(path); i++ {
		if path[i] != '.' {
			continue
		}
		if _, ok := gkschema.Lookup(gvk, path[:i]); !ok {
			break
		}
		parent, key = path[:i], path[i+1:]
	}
	return parent, key
}

// objectMetaFields lists the fields of metadata (ObjectMeta), which the CRDs leave to the API
// server.
var objectMetaFields = sync.OnceValue(func() []string {
	t := reflect.TypeFor[metav1.ObjectMeta]()
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
})

// typeNames says what a value of an OpenAPI type is, and how to write one.
var typeNames = map[string][2]string{
	"string":  {"a string", "quote the value"},
	"array":   {"a list", "write a list, e.g. [a, b]"},
	"object":  {"an object", "write an object of fields"},
	"integer": {"an integer", "write a whole number"},
	"number":  {"a number", "write a number"},
	"boolean": {"a boolean", "write true or false"},
	"null":    {"null", ""},
}

// invalidField explains one error of the API server's validation of a mutator.
func invalidField(gvk schema.GroupVersionKind, e *field.Error) *FieldError {
	f, _ := gkschema.Lookup(gvk, e.Field)
	const refuses = "the API server refuses it with Gatekeeper's CRD"
	switch e.Type {
	case field.ErrorTypeNotSupported:
		var allowed []string
		for _, v := range f.Enum() {
			if s, ok := v.(string); ok {
				allowed = append(allowed, s)
			}
		}
		bad := fmt.Sprintf("%v", e.BadValue)
		if s, ok := e.BadValue.(string); ok {
			bad = fmt.Sprintf("%q", s)
		}
		quoted := make([]string, len(allowed))
		for i, a := range allowed {
			quoted[i] = fmt.Sprintf("%q", a)
		}
		if len(allowed) == 0 {
			return &FieldError{Field: e.Field, Msg: fmt.Sprintf("%s is not allowed: %s; %s", bad, e.Detail, refuses)}
		}
		if s, ok := e.BadValue.(string); ok {
			if c, ok := closest(s, allowed); ok {
				return &FieldError{Field: e.Field, Msg: fmt.Sprintf("%s is not allowed; did you mean %q? Gatekeeper's CRD allows only %s", bad, c, strings.Join(quoted, ", "))}
			}
		}
		return &FieldError{Field: e.Field, Msg: fmt.Sprintf("%s is not allowed: Gatekeeper's CRD allows only %s; use one of them", bad, strings.Join(quoted, ", "))}
	case field.ErrorTypeRequired:
		return &FieldError{Field: e.Field, Msg: "is required by Gatekeeper's CRD; add it"}
	case field.ErrorTypeInvalid, field.ErrorTypeTypeInvalid:
		if got, ok := e.BadValue.(string); ok && strings.Contains(e.Detail, "must be of type") {
			want, ok := typeNames[f.Type()]
			have, ok2 := typeNames[got]
			if ok && ok2 {
				return &FieldError{Field: e.Field, Msg: fmt.Sprintf("is %s, but Gatekeeper's CRD wants %s here: %s", have[0], want[0], want[1])}
			}
		}
		if e.Field == "metadata.name" {
			return &FieldError{Field: e.Field, Msg: fmt.Sprintf("%q is not a valid name: %s; %s: rename the mutator", e.BadValue, e.Detail, refuses)}
		}
	case field.ErrorTypeTooLong, field.ErrorTypeTooMany:
		return &FieldError{Field: e.Field, Msg: fmt.Sprintf("is too long: %s; %s: shorten it", e.Detail, refuses)}
	}
	return &FieldError{Field: e.Field, Msg: fmt.Sprintf("%s; %s: correct the value", e.ErrorBody(), refuses)}
}

// extensionErrors refuses fields, by path, that Gatekeeper's CRDs do not have or that no
// translation can honour but that look meaningful: said generically, "unknown field" would not
// tell the author why.
func extensionErrors(raw map[string]any) map[string]*FieldError {
	out := map[string]*FieldError{}
	spec, _ := raw["spec"].(map[string]any)
	params, _ := spec["parameters"].(map[string]any)
	if _, ok := params["assignIf"]; ok {
		out["spec.parameters.assignIf"] = &FieldError{Field: "spec.parameters.assignIf", Msg: "assignIf is a Policy Controller extension that Gatekeeper v3.23.1 does not have: " +
			"its CRD prunes the field and its engine assigns unconditionally, so no translation can match both; " +
			"remove assignIf (to get Gatekeeper's behaviour) or express the condition with pathTests or match"}
	}
	const noCallOut = "externalData calls an external provider at admission time; a MutatingAdmissionPolicy cannot call out, so it has no equivalent"
	if _, ok := params["externalData"]; ok {
		out["spec.parameters.externalData"] = &FieldError{Field: "spec.parameters.externalData", Msg: noCallOut}
	}
	if a, ok := params["assign"].(map[string]any); ok {
		if _, ok := a["externalData"]; ok {
			out["spec.parameters.assign.externalData"] = &FieldError{Field: "spec.parameters.assign.externalData", Msg: noCallOut}
		}
	}
	return out
}
