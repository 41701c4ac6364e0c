package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/wildcard"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/reference/gatekeeper"
)

// MutatorNamespaces tells, for an object in a namespace not given, which mutators' matches
// depend on that namespace's labels: those whose match.namespaceSelector looks at a label other
// than kubernetes.io/metadata.name, where the rest of their match and their applyTo hold
// (Gatekeeper's own matching decides, on the mutator built without its namespaceSelector). This
// is where gator fails with "namespace selector for namespace-scoped object but missing
// Namespace". A requirement that admission.gatekeeper.sh/ignore be absent (in a mutator's
// selector, or in the namespaceSelector Gatekeeper's webhook is installed with) is taken as met.
type MutatorNamespaces struct {
	excluded []string
	// mutators are read at once; uses are built from them when first needed (Gatekeeper builds
	// each mutator again, without its selector).
	mutators        []*unstructured.Unstructured
	webhookSelector bool
	once            sync.Once
	uses            []mutatorNamespaceUse
}

// mutatorNamespaceUse is a mutator whose match can depend on the labels of an object's namespace.
type mutatorNamespaceUse struct {
	name string // Kind/name
	// keys are the labels its namespaceSelector looks at (admission.SelectorLabels);
	// ignoreLabel: it, or the webhook, requires admission.gatekeeper.sh/ignore to be absent.
	keys        []string
	ignoreLabel bool
	// stripped is Gatekeeper's mutator built without its namespaceSelector.
	stripped types.Mutator
}

// NewMutatorNamespaces reads the mutators' selectors. webhookSelector: Gatekeeper's webhook is
// installed with the admission.gatekeeper.sh/ignore DoesNotExist namespaceSelector; excluded are
// the namespaces Gatekeeper's Config excludes (wildcards), where no mutator applies.
func NewMutatorNamespaces(mutators []*unstructured.Unstructured, webhookSelector bool, excluded []string) (*MutatorNamespaces, error) {
	out := &MutatorNamespaces{excluded: excluded, mutators: mutators, webhookSelector: webhookSelector}
	for _, m := range mutators {
		if _, err := selectorOf(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// selectorOf is a mutator's match.namespaceSelector, nil if it has none.
func selectorOf(m *unstructured.Unstructured) (*metav1.LabelSelector, error) {
	raw, found, err := unstructured.NestedMap(m.Object, "spec", "match", "namespaceSelector")
	if err == nil && found {
		sel := &metav1.LabelSelector{}
		if err = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, sel); err == nil {
			return sel, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%s: spec.match.namespaceSelector: %w", m.GetKind(), m.GetName(), err)
	}
	return nil, nil
}

func (m *MutatorNamespaces) build() {
	for _, obj := range m.mutators {
		u := mutatorNamespaceUse{name: obj.GetKind() + "/" + obj.GetName(), ignoreLabel: m.webhookSelector}
		sel, _ := selectorOf(obj)
		var ignore bool
		u.keys, ignore = admission.SelectorLabels(sel)
		u.ignoreLabel = u.ignoreLabel || ignore
		if len(u.keys) == 0 && !u.ignoreLabel {
			continue
		}
		stripped := obj.DeepCopy()
		unstructured.RemoveNestedField(stripped.Object, "spec", "match", "namespaceSelector")
		var err error
		if u.stripped, err = gatekeeper.NewMutator(stripped); err != nil {
			continue // Gatekeeper refuses the mutator itself; its engine says why
		}
		m.uses = append(m.uses, u)
	}
}

// Uses lists, for obj (with its request namespace set) admitted by op in a namespace not given,
// the mutators' selectors that look at that namespace's labels ("Assign/x:
// spec.match.namespaceSelector on env"), and says whether a mutator that applies requires
// admission.gatekeeper.sh/ignore to be absent. The caller checks that the namespace was not
// given; cluster-scoped objects and Namespaces have nothing to look up.
func (m *MutatorNamespaces) Uses(obj *unstructured.Unstructured, op admissionv1.Operation) (uses []string, ignoreLabel bool) {
	ns := obj.GetNamespace()
	if ns == "" || obj.GetKind() == "Namespace" && obj.GroupVersionKind().Group == "" {
		return nil, false
	}
	for _, w := range m.excluded {
		if wildcard.Wildcard(w).Matches(ns) {
			return nil, false
		}
	}
	m.once.Do(m.build)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{corev1.LabelMetadataName: ns}}}
	mutable := &types.Mutable{Object: obj.DeepCopy(), Namespace: nsObj, Source: types.SourceTypeOriginal, Operation: op}
	for _, u := range m.uses {
		if ok, err := u.stripped.Matches(mutable); err != nil || !ok {
			continue
		}
		if len(u.keys) > 0 {
			uses = append(uses, fmt.Sprintf("%s: spec.match.namespaceSelector on %s", u.name, strings.Join(u.keys, ", ")))
		} else {
			ignoreLabel = true
		}
	}
	return uses, ignoreLabel
}

// checkNamespace refuses a case in a namespace not given whose labels a mutator or a policy
// that applies looks at, naming them all; otherwise it notes namespaces taken as not labelled
// admission.gatekeeper.sh/ignore.
func (v *Verifier) checkNamespace(ctx context.Context, in, old *unstructured.Unstructured, op admissionv1.Operation) error {
	ns := in.GetNamespace()
	if ns == "" || v.nsByName[ns] != nil || in.GetKind() == "Namespace" && in.GroupVersionKind().Group == "" {
		return nil
	}
	uses, assumed := v.ref.NamespaceUses(in, op)
	tr := &admission.Trace{}
	err := v.ev.CheckNamespace(admission.WithTrace(ctx, tr), v.sets, admission.Request{Object: in.DeepCopy(), OldObject: old, Operation: op})
	var nerr *admission.NamespaceNotGivenError
	switch {
	case errors.As(err, &nerr):
		uses = append(uses, nerr.Uses...)
	case err != nil:
		return nil // Check reports it
	}
	if len(uses) > 0 {
		return &admission.NamespaceNotGivenError{Namespace: ns, Uses: uses, How: v.opts.GiveNamespacesWith}
	}
	if assumed {
		v.notes.Assume(ns)
	}
	v.notes.Merge(tr)
	return nil
}

// AssumedNamespaces lists, sorted, the namespaces of the cases checked so far that were not
// given and were taken as not labelled admission.gatekeeper.sh/ignore: a mutator, Gatekeeper's
// webhook as installed, or a policy's binding that applied requires that label to be absent.
func (v *Verifier) AssumedNamespaces() []string { return v.notes.AssumedNamespaces() }

// NamespaceReads are the reads of namespaces not given by the policies' expressions, for the
// cases checked so far (see admission.Trace.NamespaceReads).
func (v *Verifier) NamespaceReads() map[string][]string { return v.notes.NamespaceReads() }

// ignoredFailures are the failures a trace recorded that failurePolicy Ignore skipped.
func ignoredFailures(tr *admission.Trace) []string {
	var out []string
	for _, f := range tr.Ignored() {
		out = append(out, f.String())
	}
	return out
}
