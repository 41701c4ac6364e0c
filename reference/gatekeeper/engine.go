package gatekeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	configv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/config/v1alpha1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/config/process"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	mutationschema "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Engine is an in-process Gatekeeper mutation webhook backed by Gatekeeper's
// own mutation.System.
type Engine struct {
	system    *mutation.System
	ids       []types.ID
	excluder  *process.Excluder
	conflicts []string
	// ignoreLabel: the webhook is installed as Gatekeeper's Helm chart and manifest install
	// it, with a namespaceSelector that skips namespaces labelled IgnoreLabel.
	ignoreLabel bool
}

// IgnoreLabel is the namespace label for which Gatekeeper's installed webhook is not called.
const IgnoreLabel = "admission.gatekeeper.sh/ignore"

// SetWebhookNamespaceSelector says whether the API server calls the webhook through the
// installed namespaceSelector (admission.gatekeeper.sh/ignore DoesNotExist): then objects in
// (and Namespaces with) that label are never mutated. New engines start without it: Admit is
// then Gatekeeper's webhook handler alone.
func (e *Engine) SetWebhookNamespaceSelector(on bool) { e.ignoreLabel = on }

// New builds a mutation.System and upserts every mutator in the given order
// (the System keeps them sorted by ID itself). A mutator that Gatekeeper would
// reject (CRD schema, MutatorFor*, non-conflict Upsert error) or a duplicate
// name makes New fail naming it. Schema conflicts do not fail New: like
// Gatekeeper, the conflicting mutators stay in the System but are skipped
// (see Conflicts).
func New(mutatorObjs []*unstructured.Unstructured) (*Engine, error) {
	ms := make([]types.Mutator, 0, len(mutatorObjs))
	names := make([]string, 0, len(mutatorObjs))
	for i, obj := range mutatorObjs {
		name := fmt.Sprintf("mutators[%d]", i)
		if obj != nil {
			name = fmt.Sprintf("%s/%s", obj.GetKind(), obj.GetName())
		}
		m, err := NewMutator(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ms = append(ms, m)
		names = append(names, name)
	}
	return newEngine(ms, names)
}

func newEngine(ms []types.Mutator, names []string) (*Engine, error) {
	e := &Engine{
		system:   mutation.NewSystem(mutation.SystemOpts{}),
		excluder: process.New(),
	}
	seen := map[types.ID]bool{}
	for i, m := range ms {
		id := m.ID()
		if seen[id] {
			return nil, fmt.Errorf("%s: duplicate mutator (the API server would answer AlreadyExists)", names[i])
		}
		seen[id] = true
		// As in pkg/controller/mutators/core.Reconciler.reconcileUpsert: a
		// schema conflict is reported as an error but the mutator is still
		// inserted; System.Mutate skips mutators with conflicts.
		if err := e.system.Upsert(m); err != nil && !errors.As(err, &mutationschema.ErrConflictingSchema{}) {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		e.ids = append(e.ids, id)
	}
	for _, id := range e.ids {
		if len(e.system.GetConflicts(id)) > 0 {
			e.conflicts = append(e.conflicts, id.Kind+"/"+id.Name)
		}
	}
	sort.Strings(e.conflicts)
	return e, nil
}

// Conflicts returns the IDs ("Kind/name", sorted) of the mutators Gatekeeper's
// schema DB marks as conflicting; Gatekeeper does not apply them.
func (e *Engine) Conflicts() []string {
	return append([]string(nil), e.conflicts...)
}

// System exposes the underlying Gatekeeper mutation system.
func (e *Engine) System() *mutation.System { return e.system }

// SetConfig loads the namespace exclusions of a Gatekeeper Config object
// (config.gatekeeper.sh/v1alpha1, spec.match[].excludedNamespaces with
// processes "mutation-webhook" or "*") into Gatekeeper's process.Excluder, as
// the config controller does. It replaces any previous exclusions.
func (e *Engine) SetConfig(cfg *unstructured.Unstructured) error {
	c := &configv1alpha1.Config{}
	if cfg != nil {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cfg.Object, c); err != nil {
			return err
		}
	}
	ex := process.New()
	ex.Add(c.Spec.Match)
	e.excluder.Replace(ex)
	return nil
}

// Request is one admission request as the API server would send it to
// Gatekeeper's mutating webhook.
type Request struct {
	Object    *unstructured.Unstructured
	OldObject *unstructured.Unstructured
	// Namespace is the object's namespace, nil for cluster-scoped objects.
	// For a Namespace object it is ignored: Gatekeeper uses the object itself.
	Namespace *corev1.Namespace
	// Operation defaults to CREATE.
	Operation admissionv1.Operation
	UserName  string
}

// AdmissionError is returned by Admit when the webhook answers with a denying
// response (admission.Errored). The API server rejects the request whatever
// the webhook's failurePolicy, because the webhook did answer.
type AdmissionError struct {
	Code    int32
	Message string
}

func (e *AdmissionError) Error() string {
	return fmt.Sprintf("admission webhook \"mutation.gatekeeper.sh\" denied the request (code %d): %s", e.Code, e.Message)
}

const namespaceKind = "Namespace"

// gatekeeperServiceAccount mirrors pkg/webhook/common.go: requests from
// Gatekeeper's own service account are never mutated.
var gatekeeperServiceAccount = fmt.Sprintf("system:serviceaccount:%s:%s", util.GetNamespace(), "gatekeeper-admin")

// isGatekeeperResource mirrors webhookHandler.isGatekeeperResource.
func isGatekeeperResource(group string) bool {
	switch group {
	case "templates.gatekeeper.sh", "constraints.gatekeeper.sh", Group, "config.gatekeeper.sh",
		"externaldata.gatekeeper.sh", "expansion.gatekeeper.sh", "status.gatekeeper.sh":
		return true
	}
	return false
}

// Admit returns what the API server stores after Gatekeeper's mutating
// webhook answered: a deep copy of the (possibly mutated) object, or an
// *AdmissionError when the webhook denies the request.
//
// Re-implemented glue (pkg/webhook/mutation.go mutationHandler.Handle and
// mutateRequest, v3.23.1), kept in the same order:
//  1. requests by Gatekeeper's service account are allowed unchanged;
//  2. operations other than CREATE/UPDATE are allowed unchanged (DELETE and
//     CONNECT are never mutated; for UPDATE only the new object is mutated and
//     OldObject is never looked at);
//  3. Gatekeeper's own resources (*.gatekeeper.sh groups) are allowed unchanged;
//  4. namespaces excluded for "mutation-webhook" by the Config are skipped;
//  5. the Mutable is built: for a Namespace object the request namespace is
//     cleared and the Namespace object itself is the Mutable's Namespace; for
//     other objects the namespace is looked up (missing => 500 error);
//     metadata.namespace is forced to the request namespace during mutation
//     and restored before the patch is computed; Source is "Original";
//  6. any System.Mutate error (matching, mutation, "mutation not converging")
//     becomes admission.Errored(500), i.e. a denial;
//  7. the result goes back as a JSON patch (admission.PatchResponseFromRaw)
//     from the original request JSON to the mutated object's JSON, which the
//     API server applies; the outcome of that round trip is the mutated JSON,
//     which is what Admit returns. (controller-runtime's admission package is
//     not imported because its gomodules.xyz/jsonpatch dependency is not in
//     mapc's go.mod.)
func (e *Engine) Admit(ctx context.Context, req Request) (*unstructured.Unstructured, error) {
	op := req.Operation
	if op == "" {
		op = admissionv1.Create
	}
	unchanged := func() (*unstructured.Unstructured, error) {
		if req.Object == nil {
			return nil, nil
		}
		return req.Object.DeepCopy(), nil
	}

	if e.ignoreLabel {
		// The API server's webhook dispatcher: a Namespace is matched by its own labels, a
		// namespaced object by its namespace's; cluster-scoped objects always match.
		var labels map[string]string
		switch {
		case req.Object != nil && req.Object.GetKind() == namespaceKind && req.Object.GroupVersionKind().Group == "":
			labels = req.Object.GetLabels()
		case req.Namespace != nil:
			labels = req.Namespace.Labels
		}
		if _, ok := labels[IgnoreLabel]; ok {
			return unchanged() // the webhook is not called
		}
	}
	if req.UserName == gatekeeperServiceAccount {
		return unchanged() // "Gatekeeper does not self-manage"
	}
	if !match.IsSupportedMutationOperation(op) {
		return unchanged() // "Mutating only on create or update"
	}
	if req.Object == nil {
		return nil, fmt.Errorf("%s request without an object", op)
	}
	kind := req.Object.GroupVersionKind()
	if isGatekeeperResource(kind.Group) {
		return unchanged() // "Not mutating gatekeeper resources"
	}

	raw, err := json.Marshal(req.Object.Object)
	if err != nil {
		return nil, err
	}

	// The AdmissionRequest's namespace: the API server has already made the
	// object's metadata.namespace agree with the request path, and it is
	// empty for cluster-scoped objects (including Namespaces).
	reqNamespace := req.Object.GetNamespace()
	isNamespace := kind.Kind == namespaceKind && kind.Group == ""
	if isNamespace {
		reqNamespace = ""
	} else if reqNamespace == "" && req.Namespace != nil {
		reqNamespace = req.Namespace.Name
	}

	// skipExcludedNamespace (pkg/webhook/common.go): decode, set the request
	// namespace, ask the process.Excluder. Errors are only logged there.
	{
		probe := &unstructured.Unstructured{}
		if err := probe.UnmarshalJSON(raw); err == nil {
			probe.SetNamespace(reqNamespace)
			if excluded, _ := e.excluder.IsNamespaceExcluded(process.Mutation, probe); excluded {
				return unchanged() // "Namespace is set to be ignored by Gatekeeper config"
			}
		}
	}

	return e.mutateRequest(ctx, raw, reqNamespace, isNamespace, req, op)
}

// errored mirrors admission.Errored(code, err): Allowed=false, Result.Code and
// Result.Message=err.Error(). The API server rejects such an answer whatever
// the webhook's failurePolicy.
func errored(code int32, err error) error {
	return &AdmissionError{Code: code, Message: err.Error()}
}

// mutateRequest mirrors mutationHandler.mutateRequest.
func (e *Engine) mutateRequest(ctx context.Context, raw []byte, reqNamespace string, isNamespace bool, req Request, op admissionv1.Operation) (*unstructured.Unstructured, error) {
	var ns *corev1.Namespace
	switch {
	case isNamespace:
		// "if the object being mutated is a namespace itself, we use it as namespace"
		ns = &corev1.Namespace{}
		if err := json.Unmarshal(raw, ns); err != nil {
			return nil, errored(http.StatusInternalServerError, err)
		}
	case reqNamespace != "":
		// Gatekeeper Gets the namespace from its cache, then from the API
		// server; if both fail the request is Errored.
		if req.Namespace == nil || req.Namespace.Name != reqNamespace {
			return nil, errored(http.StatusInternalServerError,
				k8serrors.NewNotFound(corev1.Resource("namespaces"), reqNamespace))
		}
		ns = req.Namespace.DeepCopy()
	default:
		ns = nil
	}

	obj := unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, errored(http.StatusInternalServerError, err)
	}

	// "It is possible for the namespace to not be populated on an object.
	// Assign the namespace from the request object (which will have the
	// appropriate value), then restore the original value at the end to
	// avoid sending a namespace patch."
	oldNS := obj.GetNamespace()
	obj.SetNamespace(reqNamespace)

	mutable := &types.Mutable{
		Object:    &obj,
		Namespace: ns,
		Username:  req.UserName,
		Source:    types.SourceTypeOriginal,
		Operation: op,
	}
	mutated, err := e.system.Mutate(ctx, mutable)
	if err != nil {
		return nil, errored(http.StatusInternalServerError, err)
	}
	if !mutated {
		// admission.Allowed("Resource was not mutated"): no patch.
		out := &unstructured.Unstructured{}
		if err := out.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		return out, nil
	}

	mutable.Object.SetNamespace(oldNS)

	newJSON, err := mutable.Object.MarshalJSON()
	if err != nil {
		return nil, errored(http.StatusInternalServerError, err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(newJSON); err != nil {
		return nil, err
	}
	return out, nil
}

// IsNotConverging reports whether err is Gatekeeper's "mutation not
// converging" denial.
func IsNotConverging(err error) bool {
	var ae *AdmissionError
	return errors.As(err, &ae) && strings.Contains(ae.Message, mutation.ErrNotConverging.Error())
}
