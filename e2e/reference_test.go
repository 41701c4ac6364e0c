package e2e

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	gkfront "github.com/mapc-dev/mapc/compiler/gatekeeper"
	kyfront "github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
	"github.com/mapc-dev/mapc/reference/gatekeeper"
	"github.com/mapc-dev/mapc/verify"
)

// maxOrders is how many orders of its policies an engine that runs them in an arbitrary order is
// run in: all of them up to 4 policies, else the order given, its reverse and seeded shuffles.
const maxOrders = 24

// language is an input language of a case: which documents are its policies, and its engine,
// the reference the API server's results are compared with.
type language struct {
	name    string
	isInput func(*unstructured.Unstructured) bool
	// newReference starts the language's engine; kyvernoConfig is Kyverno's ConfigMap data.
	newReference func(policies []*unstructured.Unstructured, kyvernoConfig map[string]string) (reference, error)
	// anyOrder: the compiled policies' results may depend on the order the API server runs them
	// in, which the test cannot know (Go map iteration, drawn anew when the policies change), as
	// the language's own engine runs its policies in an arbitrary order. Each engine is then run
	// in up to maxOrders orders of its policies, and a result matches when one order's does.
	anyOrder bool
}

var (
	gatekeeperLanguage = &language{name: "Gatekeeper", isInput: gkfront.IsMutator, newReference: newGatekeeperReference}
	kyvernoLanguage    = &language{name: "Kyverno", isInput: kyfront.IsPolicy, newReference: newKyvernoReference, anyOrder: true}
)

func (tc testCase) lang() *language {
	if tc.language == nil {
		return gatekeeperLanguage
	}
	return tc.language
}

// reference is a language's engine.
type reference interface {
	name() string
	// admit gives the engine's distinct results for one request: first in the order its
	// policies were given, then in the other orders tried that give another result.
	admit(ctx context.Context, req verify.RefRequest) *candidates
	// statusCase: do the policies have rules for obj's status subresource (see
	// verify.KyvernoReference.StatusCase)?
	statusCase(obj *unstructured.Unstructured) bool
	// updatesUnchanged: is each object the policies created also updated with no change (see
	// verify.UpdateOfResult)?
	updatesUnchanged() bool
	// bindsPods: is each Pod the policies created also bound to a node, as the scheduler
	// does (pods/binding)?
	bindsPods() bool
	close()
}

// candidate is an engine's result in one order of its policies.
type candidate struct {
	order  []string // the policies' names in that order; nil for an engine run in one order
	raw    *unstructured.Unstructured
	denied error
}

// candidates are an engine's distinct results, in the order of the first order giving each.
type candidates struct {
	list  []candidate
	seen  map[string]bool
	tried int // the orders tried
}

func (cs *candidates) add(c candidate) {
	cs.tried++
	key := ""
	if c.denied != nil {
		key = "denied: " + c.denied.Error()
	} else if data, err := json.Marshal(c.raw); err == nil {
		key = string(data)
	}
	if cs.seen == nil {
		cs.seen = map[string]bool{}
	}
	if cs.seen[key] {
		return
	}
	cs.seen[key] = true
	cs.list = append(cs.list, c)
}

// gatekeeperReference is Gatekeeper's engine (reference/gatekeeper), as its chart installs it.
type gatekeeperReference struct{ e *gatekeeper.Engine }

func newGatekeeperReference(mutators []*unstructured.Unstructured, _ map[string]string) (reference, error) {
	e, err := gatekeeper.New(mutators)
	if err != nil {
		return nil, err
	}
	// As installed by its chart: not called for namespaces labelled admission.gatekeeper.sh/ignore
	// (the compiled bindings skip them the same way, by default).
	e.SetWebhookNamespaceSelector(true)
	return gatekeeperReference{e}, nil
}

func (g gatekeeperReference) name() string { return gatekeeperLanguage.name }
func (g gatekeeperReference) close()       {}

// statusCase: Gatekeeper's webhook, as its Helm chart installs it, is called for a Service's
// status updates (services/status).
func (g gatekeeperReference) statusCase(obj *unstructured.Unstructured) bool {
	_, ok := verify.ServiceStatusCase(obj)
	return ok
}

// updatesUnchanged: Gatekeeper runs its mutators until the object stops changing, so they
// change nothing of what they mutated; the update with a new annotation covers updates.
func (g gatekeeperReference) updatesUnchanged() bool { return false }

// bindsPods: Gatekeeper's webhook, as its Helm chart installs it, is called for a Pod's binding
// (pods/binding), and the mutators of Bindings (of every kind) run on it.
func (g gatekeeperReference) bindsPods() bool { return true }

func (g gatekeeperReference) admit(ctx context.Context, req verify.RefRequest) *candidates {
	obj, err := g.e.Admit(ctx, gatekeeper.Request{Object: req.Object, OldObject: req.OldObject, Namespace: req.Namespace, Operation: req.Operation})
	cs := &candidates{}
	cs.add(candidate{raw: obj, denied: err})
	return cs
}

// kyvernoReference is Kyverno's engine (the kyverno-engine program, through
// verify.KyvernoReference), run in up to maxOrders orders of its policies, the first being the
// order they were given in.
type kyvernoReference struct {
	k      *verify.KyvernoReference
	names  []string // the policies as the program names them: "name", "namespace/name" for a Policy
	orders [][]int
}

func newKyvernoReference(policies []*unstructured.Unstructured, config map[string]string) (reference, error) {
	path, err := kyvernobin.Path()
	if err != nil {
		return nil, err
	}
	k, err := verify.NewKyvernoReferenceWithConfig(path, policies, nil, config)
	if err != nil {
		return nil, err
	}
	r := &kyvernoReference{k: k}
	for _, p := range policies {
		if p.GetKind() == "Policy" && p.GetNamespace() != "" {
			r.names = append(r.names, p.GetNamespace()+"/"+p.GetName())
		} else {
			r.names = append(r.names, p.GetName())
		}
	}
	r.orders = verify.Orders(len(r.names), maxOrders, maxOrders-2, 1)
	return r, nil
}

func (k *kyvernoReference) name() string { return kyvernoLanguage.name }
func (k *kyvernoReference) close()       { _ = k.k.Close() }

// updatesUnchanged: Kyverno's rules run again on every update of what they mutated, where a
// JSON patch that appends appends again.
func (k *kyvernoReference) updatesUnchanged() bool { return true }

// bindsPods: Kyverno's webhook is called for a Pod's binding only for a rule naming it, which
// mapc refuses (its request carries a Binding).
func (k *kyvernoReference) bindsPods() bool { return false }

func (k *kyvernoReference) statusCase(obj *unstructured.Unstructured) bool {
	_, ok := k.k.StatusCase(obj)
	return ok
}

func (k *kyvernoReference) admit(ctx context.Context, req verify.RefRequest) *candidates {
	cs := &candidates{}
	for _, order := range k.orders {
		names := make([]string, len(order))
		for i, j := range order {
			names[i] = k.names[j]
		}
		r := req
		r.Object, r.Order = req.Object.DeepCopy(), names
		obj, err := k.k.Admit(ctx, r)
		cs.add(candidate{order: names, raw: obj, denied: err})
	}
	return cs
}
