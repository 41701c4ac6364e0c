package verify

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/reference/gatekeeper"
)

// Reference is the engine whose results the policies must reproduce: for mutators, the input
// language's own engine, driven as its webhook drives it.
type Reference interface {
	// Name names the engine in reports ("Gatekeeper"); its lower case heads the want side of
	// diffs.
	Name() string
	// Admit admits one request and gives the object as the engine leaves it; an error is a
	// denial.
	Admit(ctx context.Context, req RefRequest) (*unstructured.Unstructured, error)
	// NamespaceUses lists, for obj (with its request namespace set) admitted by op in a namespace
	// not given, what of the engine looks at that namespace's labels (e.g. "Assign/x:
	// spec.match.namespaceSelector on env"), and says whether the engine, where it applies, was
	// taken to run in a namespace without the admission.gatekeeper.sh/ignore label.
	NamespaceUses(obj *unstructured.Unstructured, op admissionv1.Operation) (uses []string, assumedNotIgnored bool)
}

// RefRequest is one admission request to a Reference.
type RefRequest struct {
	Object    *unstructured.Unstructured
	OldObject *unstructured.Unstructured // UPDATE and DELETE
	// Namespace is the object's namespace (the one given, or one with only its
	// kubernetes.io/metadata.name label); nil for cluster-scoped objects and Namespaces.
	Namespace *corev1.Namespace
	Operation admissionv1.Operation
	// SubResource is the request's subresource ("" for the resource itself; see
	// Case.SubResource).
	SubResource string
	// Order, for a reference whose engine runs its policies in an arbitrary order (an
	// OrderedReference), names them in the order of the policies being compared (from
	// OrderedReference.Order); nil is the reference's own order.
	Order []string
	// User is who sends the request (in group system:authenticated); "" is the user "mapc", who
	// the policies' evaluator admits as by default. Gatekeeper's mutators do not look at it.
	User string
}

// OrderedReference is a Reference whose engine runs its input policies in an arbitrary order,
// as the API server runs MutatingAdmissionPolicies (Kyverno's policies): each order of the
// compiled policies is compared with the engine's result in the same order of the input
// policies they come from.
type OrderedReference interface {
	Reference
	// Order names the input policies of the compiled policies (by their emit.AnnotationSource),
	// in their order; compiled policies from none of its input policies are left out.
	Order(policies []*admissionregistrationv1.MutatingAdmissionPolicy) []string
}

// gatekeeperReference is Gatekeeper's engine (package reference/gatekeeper) as a Reference.
type gatekeeperReference struct {
	engine     *gatekeeper.Engine
	namespaces *MutatorNamespaces
	noSubs     bool // Options.NoWebhookSubresources
}

// newGatekeeperReference builds Gatekeeper's engine for the mutators, with the Config and
// webhook namespaceSelector opts describe.
func newGatekeeperReference(mutators []*unstructured.Unstructured, opts Options) (*gatekeeperReference, error) {
	gk, err := gatekeeper.New(mutators)
	if err != nil {
		return nil, fmt.Errorf("Gatekeeper's engine: %w", err)
	}
	gk.SetWebhookNamespaceSelector(!opts.MutateIgnoredNamespaces)
	if len(opts.ExcludedNamespaces) > 0 {
		var ws []any
		for _, w := range opts.ExcludedNamespaces {
			ws = append(ws, w)
		}
		cfg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config",
			"metadata": map[string]any{"name": "config", "namespace": "gatekeeper-system"},
			"spec":     map[string]any{"match": []any{map[string]any{"processes": []any{"mutation-webhook"}, "excludedNamespaces": ws}}},
		}}
		if err := gk.SetConfig(cfg); err != nil {
			return nil, fmt.Errorf("Gatekeeper's Config: %w", err)
		}
	}
	mns, err := NewMutatorNamespaces(mutators, !opts.MutateIgnoredNamespaces, opts.ExcludedNamespaces)
	if err != nil {
		return nil, fmt.Errorf("Gatekeeper's engine: %w", err)
	}
	return &gatekeeperReference{engine: gk, namespaces: mns, noSubs: opts.NoWebhookSubresources}, nil
}

func (g *gatekeeperReference) Name() string { return "Gatekeeper" }

func (g *gatekeeperReference) Admit(ctx context.Context, req RefRequest) (*unstructured.Unstructured, error) {
	// On pods/ephemeralcontainers (Case.SubResource), which Gatekeeper's Helm chart installs its
	// mutating webhook for, Gatekeeper mutates the Pod the request brings as on any update (and
	// a Binding, and a Service on its status, alike); installed for resources only, it is not
	// called.
	if req.SubResource != "" && g.noSubs {
		return req.Object.DeepCopy(), nil
	}
	return g.engine.Admit(ctx, gatekeeper.Request{Object: req.Object, OldObject: req.OldObject, Namespace: req.Namespace, Operation: req.Operation})
}

func (g *gatekeeperReference) NamespaceUses(obj *unstructured.Unstructured, op admissionv1.Operation) ([]string, bool) {
	return g.namespaces.Uses(obj, op)
}
