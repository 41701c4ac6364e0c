// Package gatekeeper runs Gatekeeper's own mutation engine (v3.23.1) in
// process, the way Gatekeeper's mutating admission webhook does, so that the
// result can serve as the reference for mapc's compiled
// MutatingAdmissionPolicies.
//
// Everything that decides *what* a mutation does is Gatekeeper's code:
// the versioned API types and their generated conversions to the unversioned
// types, mutators.MutatorFor{Assign,AssignMetadata,ModifySet,AssignImage},
// mutation.System (ordering by ID, schema-conflict detection, iteration until
// convergence), and process.Excluder for the Config exclusion. What is
// re-implemented here is only glue that cannot be called without a running
// cluster and controller-runtime manager:
//
//   - internal/gkschema: the API server's pruning/defaulting/validation of the
//     mutator custom resources (using the API server's own apiextensions code
//     and Gatekeeper's CRD manifests).
//   - NewMutator: the mutator controller's read + scheme.Convert + MutatorFor*
//     (pkg/controller/mutators/instances), without the status/readiness
//     bookkeeping.
//   - New: the reconciler's System.Upsert loop (pkg/controller/mutators/core).
//   - Admit: mutationHandler.Handle/mutateRequest (pkg/webhook/mutation.go)
//     and the API server's treatment of the answer (a denying answer is an
//     error; the JSON patch turns the object into the mutated object).
//
// It must not import mapc's compiler: the reference knows nothing of the translation it checks.
package gatekeeper

import (
	"encoding/json"
	"errors"
	"fmt"

	mutationsunversioned "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	mutationsv1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1"
	mutationsv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1alpha1"
	mutationsv1beta1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1beta1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/mapc-dev/mapc/internal/gkschema"
)

// Group is the API group of Gatekeeper's mutators.
const Group = "mutations.gatekeeper.sh"

// ErrExternalData is returned by NewMutator for mutators using externalData,
// which needs a live external data provider and is out of scope here.
var ErrExternalData = errors.New("externalData is not supported by the in-process reference engine (needs an external data provider)")

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		mutationsv1.AddToScheme,
		mutationsv1beta1.AddToScheme,
		mutationsv1alpha1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// controllerReadVersion is the version Gatekeeper's mutator controllers watch
// (pkg/controller/mutators/instances): v1 for Assign, AssignMetadata and
// ModifySet, v1alpha1 for AssignImage (its only version). The CRDs have no
// conversion webhook (strategy None), so the API server serves an object
// created in any version to the controller with only apiVersion rewritten.
var controllerReadVersion = map[string]string{
	"Assign":         "v1",
	"AssignMetadata": "v1",
	"ModifySet":      "v1",
	"AssignImage":    "v1alpha1",
}

// NewMutator turns one mutator object (Assign, AssignMetadata, ModifySet or
// AssignImage in any served version of mutations.gatekeeper.sh) into
// Gatekeeper's types.Mutator. The object is first pruned, defaulted and
// validated as the API server would (CRD schema), then decoded into the
// versioned Go type the controller reads, converted to the unversioned type
// through Gatekeeper's scheme conversions and handed to mutators.MutatorFor*.
// Errors from MutatorFor* are Gatekeeper's own messages, unwrapped.
func NewMutator(obj *unstructured.Unstructured) (types.Mutator, error) {
	if obj == nil {
		return nil, errors.New("nil mutator object")
	}
	gvk := obj.GroupVersionKind()
	if gvk.Group != Group {
		return nil, fmt.Errorf("%s is not a Gatekeeper mutator (group must be %s)", gvk, Group)
	}
	readVersion, ok := controllerReadVersion[gvk.Kind]
	if !ok {
		return nil, fmt.Errorf("no matches for kind %q in version %q", gvk.Kind, gvk.GroupVersion().String())
	}
	// The API server prunes, defaults and validates the object against the served CRD version.
	// Unknown fields are pruned silently, as without strict field validation.
	adm, err := gkschema.Admit(obj)
	if err != nil {
		return nil, err
	}
	if len(adm.Invalid) > 0 {
		return nil, fmt.Errorf("%s.%s %q is invalid: %v", gvk.Kind, gvk.Group, obj.GetName(), adm.Invalid.ToAggregate())
	}
	stored := adm.Object
	stored.SetAPIVersion(Group + "/" + readVersion)
	raw, err := json.Marshal(stored.Object)
	if err != nil {
		return nil, err
	}
	typed, _, err := codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}

	// The bodies below mirror the MutatorFor closures of
	// pkg/controller/mutators/instances/mutator_controllers.go.
	switch in := typed.(type) {
	case *mutationsv1.Assign:
		u := &mutationsunversioned.Assign{}
		if err := scheme.Convert(in, u, nil); err != nil {
			return nil, err
		}
		m, err := mutators.MutatorForAssign(u)
		if err != nil {
			return nil, err
		}
		if u.Spec.Parameters.Assign.ExternalData != nil {
			return nil, fmt.Errorf("Assign %s: %w", u.GetName(), ErrExternalData)
		}
		return m, nil
	case *mutationsv1.AssignMetadata:
		u := &mutationsunversioned.AssignMetadata{}
		if err := scheme.Convert(in, u, nil); err != nil {
			return nil, err
		}
		m, err := mutators.MutatorForAssignMetadata(u)
		if err != nil {
			return nil, err
		}
		if u.Spec.Parameters.Assign.ExternalData != nil {
			return nil, fmt.Errorf("AssignMetadata %s: %w", u.GetName(), ErrExternalData)
		}
		return m, nil
	case *mutationsv1.ModifySet:
		u := &mutationsunversioned.ModifySet{}
		if err := scheme.Convert(in, u, nil); err != nil {
			return nil, err
		}
		m, err := mutators.MutatorForModifySet(u)
		if err != nil {
			return nil, err
		}
		return m, nil
	case *mutationsv1alpha1.AssignImage:
		u := &mutationsunversioned.AssignImage{}
		if err := scheme.Convert(in, u, nil); err != nil {
			return nil, err
		}
		m, err := mutators.MutatorForAssignImage(u)
		if err != nil {
			return nil, err
		}
		return m, nil
	default:
		return nil, fmt.Errorf("unexpected decoded type %T for %s", typed, gvk)
	}
}
