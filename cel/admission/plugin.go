package admission

import (
	"errors"
	"fmt"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

// mutatingPlugin is the API server's MutatingAdmissionPolicy plugin type.
type mutatingPlugin = mutating.Plugin

// pluginEntry is one cached plugin instance, serving one PolicySet.
type pluginEntry struct {
	ready  chan struct{} // closed when plugin or err is set
	plugin *mutatingPlugin
	// namespaceUse is what the set needs to know of a request's namespace.
	namespaceUse *namespaceUse
	err          error
	stop         chan struct{}
	closeOnce    sync.Once
}

func (p *pluginEntry) close() { p.closeOnce.Do(func() { close(p.stop) }) }

// build creates the plugin instance for one PolicySet the way
// mutating.NewPlugin does, except for the places where NewPlugin needs a
// live API server:
//   - the policy source watches informers over a fake clientset that holds
//     only this set's policy and bindings (so the instance evaluates exactly
//     this policy),
//   - the dispatcher gets a static type converter manager instead of one
//     reading /openapi/v3 through discovery.
//
// Everything else (generic.Plugin, generic.NewPolicySource with its param
// informers, the real mutating dispatcher, matcher, param collection, patchers
// and CEL) is the API server's code.
func (e *Evaluator) build(entry *pluginEntry, set PolicySet) {
	defer close(entry.ready)
	defer func() {
		if entry.err != nil {
			entry.close()
		}
	}()

	policy := set.Policy.DeepCopy()
	DefaultPolicy(policy)
	objs := []runtime.Object{policy}
	var bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	for _, b := range set.Bindings {
		b = b.DeepCopy()
		DefaultBinding(b)
		objs = append(objs, b)
		if b.Spec.PolicyName == policy.Name {
			bindings = append(bindings, b)
		}
	}
	entry.namespaceUse = newNamespaceUse(policy, bindings)
	e.startParamInformer(policy.Spec.ParamKind)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	policyInformer := factory.Admissionregistration().V1().MutatingAdmissionPolicies().Informer()
	bindingInformer := factory.Admissionregistration().V1().MutatingAdmissionPolicyBindings().Informer()
	factory.Start(entry.stop)
	if entry.err = waitFor(func() bool { return policyInformer.HasSynced() && bindingInformer.HasSynced() }); entry.err != nil {
		return
	}

	var source generic.Source[mutating.PolicyHook]
	handler := admission.NewHandler(admission.Create, admission.Update, admission.Connect) // as in mutating.NewPlugin
	gp := generic.NewPlugin(
		handler,
		func(f informers.SharedInformerFactory, _ kubernetes.Interface, dynamicClient dynamic.Interface, restMapper meta.RESTMapper) generic.Source[mutating.PolicyHook] {
			source = generic.NewPolicySource(
				policyInformer,
				bindingInformer,
				mutating.NewMutatingAdmissionPolicyAccessor,
				mutating.NewMutatingAdmissionPolicyBindingAccessor,
				compilePolicy,
				f,
				dynamicClient,
				restMapper,
			)
			return source
		},
		func(a authorizer.UnconditionalAuthorizer, m *matching.Matcher, _ kubernetes.Interface) generic.Dispatcher[mutating.PolicyHook] {
			return mutating.NewDispatcher(a, m, e.tcm)
		},
	)
	p := &mutating.Plugin{Plugin: gp}
	p.SetEnabled(true)
	p.SetExternalKubeInformerFactory(e.kubeFactory)
	p.SetExternalKubeClientSet(e.kubeClient)
	p.SetRESTMapper(e.mapper)
	p.SetDynamicClient(e.dynClient)
	p.SetDrainedNotification(entry.stop)
	p.SetUnconditionalAuthorizer(e.authorizer)
	if entry.err = p.ValidateInitialization(); entry.err != nil {
		return
	}
	// Informers registered by ValidateInitialization (namespaces) start now.
	e.kubeFactory.Start(e.stop)
	// The policy source compiles the policies right after its informers
	// have synced; wait for that (finer-grained than WaitForReady's 100 ms
	// polling), then for the plugin's own readiness.
	if entry.err = waitFor(source.HasSynced); entry.err != nil {
		return
	}
	// The policy source starts the informer of a policy's paramKind when it compiles the policy
	// but does not wait for it: the dispatcher waits up to a second per request, then fails the
	// request as not yet synced. Params here never change, so wait once for them to be listed.
	for _, hook := range source.Hooks() {
		if hook.ParamInformer != nil {
			if entry.err = waitFor(hook.ParamInformer.Informer().HasSynced); entry.err != nil {
				entry.err = fmt.Errorf("param informer for %s: %w", policy.Spec.ParamKind, entry.err)
				return
			}
		}
	}
	if !p.WaitForReady() {
		entry.err = errNotReady
		return
	}
	entry.plugin = p
}

var errNotReady = errors.New("plugin did not become ready")
