package suite

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	sigsjson "sigs.k8s.io/json"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

func defaultVersion() *version.Version {
	v, err := compiler.ParseVersion(compiler.DefaultKubernetesVersion)
	if err != nil {
		panic(err)
	}
	return v
}

// Group is the API group of MutatingAdmissionPolicy and its binding.
const Group = "admissionregistration.k8s.io"

// Kinds of the policy documents ReadPolicies reads.
const (
	KindPolicy  = "MutatingAdmissionPolicy"
	KindBinding = "MutatingAdmissionPolicyBinding"
)

// servedFrom is the first Kubernetes version serving each API version of MAP (alpha versions
// behind a feature gate).
var servedFrom = map[string]*version.Version{
	"v1alpha1": version.MajorMinor(1, 32),
	"v1beta1":  version.MajorMinor(1, 34),
	"v1":       version.MajorMinor(1, 36),
}

// IsPolicy reports whether obj is a MutatingAdmissionPolicy or a MutatingAdmissionPolicyBinding of
// an API version this package reads (admissionregistration.k8s.io v1, v1beta1, v1alpha1).
func IsPolicy(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	if gvk.Group != Group || servedFrom[gvk.Version] == nil {
		return false
	}
	return gvk.Kind == KindPolicy || gvk.Kind == KindBinding
}

// Problem is a policy or binding the API server would reject, positioned:
// "file:line: Kind/name: field: message".
type Problem struct {
	File   string
	Line   int
	Object string
	Field  string
	Msg    string
}

func (p *Problem) Error() string {
	s := fmt.Sprintf("%s:%d: %s: ", p.File, p.Line, p.Object)
	if p.Field != "" {
		s += p.Field + ": "
	}
	// CEL errors span several lines (the expression and a caret): indent them under the problem.
	return s + strings.ReplaceAll(strings.TrimRight(p.Msg, "\n"), "\n", "\n    ")
}

// Policies are ready MutatingAdmissionPolicies and their bindings, read from documents.
type Policies struct {
	// Sets holds every policy with its bindings, sorted by policy name. A policy without a
	// binding has an empty Bindings (it never runs).
	Sets []admission.PolicySet
	// Where says where each policy (by name) was read: "file:line".
	Where map[string]string
	// Warnings are legal but suspicious: a policy without a binding (it silently never runs), a
	// binding that names no policy, a paramRef the policy ignores or a policy with a paramKind
	// bound without paramRef (params is null).
	Warnings []string
	// Problems are what the API server would reject when creating the objects.
	Problems []error
}

// ReadPolicies reads every MutatingAdmissionPolicy and binding among docs (other documents are
// skipped: the caller picks them), converts them to admissionregistration.k8s.io/v1 through JSON
// (the three versions have the same fields), applies the defaults the API server applies on create
// and checks each object as the API server would on create at Kubernetes version kv (see
// check.go). Bindings are paired with policies by spec.policyName.
func ReadPolicies(docs []*source.Document, kv *version.Version) *Policies {
	if kv == nil {
		kv = defaultVersion()
	}
	out := &Policies{Where: map[string]string{}}
	lines := newLineFinder()
	type bindingAt struct {
		b   *admissionregistrationv1.MutatingAdmissionPolicyBinding
		doc *source.Document
	}
	policies := map[string]*admissionregistrationv1.MutatingAdmissionPolicy{}
	var bindings []bindingAt
	seenBinding := map[string]string{}
	for _, doc := range docs {
		obj := doc.Object
		if !IsPolicy(obj) {
			continue
		}
		gvk := obj.GroupVersionKind()
		name := gvk.Kind + "/" + obj.GetName()
		where := fmt.Sprintf("%s:%d", doc.File, doc.Line)
		problem := func(fieldPath, msg string) {
			line := doc.Line
			if fieldPath != "" {
				line = lines.line(doc, fieldPath)
			}
			out.Problems = append(out.Problems, &Problem{File: doc.File, Line: line, Object: name, Field: fieldPath, Msg: msg})
		}
		if from := servedFrom[gvk.Version]; !kv.AtLeast(from) {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s: %s: %s is served from Kubernetes %d.%d on, not by %d.%d (--kubernetes-version)",
				where, name, obj.GetAPIVersion(), from.Major(), from.Minor(), kv.Major(), kv.Minor()))
		}
		switch gvk.Kind {
		case KindPolicy:
			p := &admissionregistrationv1.MutatingAdmissionPolicy{}
			if !decodeStrict(obj, p, problem) {
				continue
			}
			p.APIVersion = admissionregistrationv1.SchemeGroupVersion.String()
			admission.DefaultPolicy(p)
			for _, fe := range checkPolicy(p, kv) {
				problem(fe.Field, fe.Msg)
			}
			if prev, ok := out.Where[p.Name]; ok && p.Name != "" {
				problem("metadata.name", fmt.Sprintf("defined twice (also at %s); the API server would keep only the last one applied", prev))
				continue
			}
			out.Where[p.Name] = where
			policies[p.Name] = p
		case KindBinding:
			b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			if !decodeStrict(obj, b, problem) {
				continue
			}
			b.APIVersion = admissionregistrationv1.SchemeGroupVersion.String()
			if gvk.Version == "v1alpha1" {
				admission.DefaultParamRefV1alpha1(b)
			}
			admission.DefaultBinding(b)
			for _, fe := range checkBinding(b) {
				problem(fe.Field, fe.Msg)
			}
			if prev, ok := seenBinding[b.Name]; ok && b.Name != "" {
				problem("metadata.name", fmt.Sprintf("defined twice (also at %s); the API server would keep only the last one applied", prev))
				continue
			}
			seenBinding[b.Name] = where
			bindings = append(bindings, bindingAt{b, doc})
		}
	}
	byPolicy := map[string][]*admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	for _, ba := range bindings {
		b := ba.b
		if _, ok := policies[b.Spec.PolicyName]; !ok && b.Spec.PolicyName != "" {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s:%d: %s/%s: spec.policyName: no %s named %q among the policies; this binding does nothing",
				ba.doc.File, lines.line(ba.doc, "spec.policyName"), KindBinding, b.Name, KindPolicy, b.Spec.PolicyName))
			continue
		}
		byPolicy[b.Spec.PolicyName] = append(byPolicy[b.Spec.PolicyName], b)
		// Neither is rejected by the API server, which validates a binding without its policy:
		// the policy's paramKind decides at admission whether paramRef is read.
		p := policies[b.Spec.PolicyName]
		switch {
		case p == nil:
		case b.Spec.ParamRef != nil && p.Spec.ParamKind == nil:
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s:%d: %s/%s: spec.paramRef: %s/%s has no spec.paramKind, so the API server ignores this paramRef",
				ba.doc.File, lines.line(ba.doc, "spec.paramRef"), KindBinding, b.Name, KindPolicy, p.Name))
		case b.Spec.ParamRef == nil && p.Spec.ParamKind != nil:
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s:%d: %s/%s: spec.paramRef: none, but %s/%s has spec.paramKind: the API server runs the policy once with params null",
				ba.doc.File, ba.doc.Line, KindBinding, b.Name, KindPolicy, p.Name))
		}
	}
	sort.SliceStable(out.Problems, func(i, j int) bool {
		a, b := out.Problems[i].(*Problem), out.Problems[j].(*Problem)
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := policies[n]
		bs := byPolicy[n]
		sort.Slice(bs, func(i, j int) bool { return bs[i].Name < bs[j].Name })
		if len(bs) == 0 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s: %s/%s has no %s: it never runs", out.Where[n], KindPolicy, n, KindBinding))
		}
		out.Sets = append(out.Sets, admission.PolicySet{Policy: p, Bindings: bs})
	}
	return out
}

// decodeStrict converts obj into out through JSON, reporting unknown and duplicate fields (as
// kubectl's strict field validation would) and type errors. It returns false when out could not be
// decoded at all.
func decodeStrict(obj *unstructured.Unstructured, out any, problem func(field, msg string)) bool {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		problem("", err.Error())
		return false
	}
	strict, err := sigsjson.UnmarshalStrict(data, out)
	if err != nil {
		problem("", "cannot be decoded: "+err.Error())
		return false
	}
	for _, s := range strict {
		msg := s.Error()
		f := ""
		if i := strings.Index(msg, `unknown field "`); i >= 0 {
			f = strings.TrimSuffix(msg[i+len(`unknown field "`):], `"`)
			msg = "unknown field (the API server rejects it with strict field validation, or drops it)"
		}
		problem(f, msg)
	}
	return true
}

// BindAll gives every policy in sets that has no binding a binding that matches everything the
// policy matches, named after the policy. Tools such as kaptest and the Kyverno CLI evaluate a
// policy without a binding; suites written for them are run this way.
func BindAll(sets []admission.PolicySet) []admission.PolicySet {
	out := make([]admission.PolicySet, len(sets))
	for i, s := range sets {
		out[i] = s
		if len(s.Bindings) == 0 {
			b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: KindBinding},
				ObjectMeta: metav1.ObjectMeta{Name: s.Policy.Name},
				Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: s.Policy.Name},
			}
			out[i].Bindings = []*admissionregistrationv1.MutatingAdmissionPolicyBinding{b}
		}
	}
	return out
}

// PolicySet is a compiled policy with its binding, as the evaluator takes it.
func PolicySet(p *emit.Policy) admission.PolicySet {
	return admission.PolicySet{Policy: p.Policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{p.Binding}}
}
