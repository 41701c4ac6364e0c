package admission

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Options configures an Evaluator.
type Options struct {
	// Namespaces are the namespace objects the matcher may look up
	// (namespaceSelector) and that are passed to CEL as `namespaceObject`.
	// A namespace that is not listed is looked up as a namespace that exists
	// with no labels but kubernetes.io/metadata.name; Admit refuses a request
	// in such a namespace when a policy that applies looks at its other
	// labels (NamespaceNotGivenError; see namespaces.go).
	Namespaces []*corev1.Namespace
	// GiveNamespacesWith ends NamespaceNotGivenError's advice: how the user
	// gives Namespace objects, e.g. "with --namespaces or -f".
	GiveNamespacesWith string
	// Params are the param objects policies with a paramKind read (a ConfigMap, a custom
	// resource of one of CRDs), served to the API server's param informers. A namespaced param
	// without a namespace is in "default"; a cluster-scoped param's namespace is dropped. A param
	// whose kind is neither built in nor one of CRDs is refused by New with a *ParamError.
	Params []*unstructured.Unstructured
	// GiveCRDsWith ends the advice of a ParamError for a param of an unknown kind: how the user
	// gives CRDs, e.g. "with --crd".
	GiveCRDsWith string
	// CRDs are optional; they give the schemas (and resource names and
	// scopes) of custom resources. Without its CRD a custom resource cannot
	// be mutated (as in the API server, the mutation fails because the kind
	// has no schema).
	CRDs []*apiextensionsv1.CustomResourceDefinition
}

// PolicySet is one MAP with its bindings.
type PolicySet struct {
	Policy   *admissionregistrationv1.MutatingAdmissionPolicy
	Bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// Request is one object to admit.
type Request struct {
	Object    *unstructured.Unstructured
	OldObject *unstructured.Unstructured // for UPDATE
	Operation admissionv1.Operation      // default CREATE
	// SubResource is the request's subresource ("" for the resource itself), e.g.
	// "ephemeralcontainers" for an UPDATE of a Pod's ephemeral containers: the policies whose
	// resourceRules name "pods/ephemeralcontainers" are called for it.
	SubResource string
	// Resource is the request's resource where it is not the object's kind's: a Pod's
	// binding carries a Binding to pods/binding (zero: the kind's resource).
	Resource schema.GroupVersionResource
	UserName string // default "mapc"
	DryRun   bool
}

// Evaluator admits objects through the API server's MutatingAdmissionPolicy
// admission plugin. It is safe for concurrent use.
type Evaluator struct {
	scheme      *runtime.Scheme
	objIfaces   admission.ObjectInterfaces
	mapper      meta.RESTMapper
	tcm         *staticTypeConverterManager
	kubeClient  *fake.Clientset
	kubeFactory informers.SharedInformerFactory
	dynClient   *dynamicfake.FakeDynamicClient
	authorizer  authorizer.UnconditionalAuthorizer
	stop        chan struct{}
	// given are the names of Options.Namespaces; matcher is the API server's policy matcher,
	// for checkNamespace.
	given              map[string]bool
	matcher            generic.PolicyMatcher
	giveNamespacesWith string

	mu      sync.Mutex
	closed  bool
	plugins map[string]*pluginEntry // keyed by hash of the PolicySet
	chains  map[string]*chainEntry  // keyed by the ordered plugin keys
}

// chainEntry is a chain of plugin instances with what their policy sets need to know of a
// request's namespace.
type chainEntry struct {
	chain admission.Interface
	uses  []*namespaceUse
}

// readyTimeout bounds the wait for a new plugin instance's informers, which includes the
// compilation of its policies: thousands of them (a test's matrix of Kyverno conditions, each
// policy with its variables) take well over 30 seconds on a loaded two-core machine. It only
// bounds a wait that never ends otherwise.
const readyTimeout = 5 * time.Minute

const metadataNameLabel = "kubernetes.io/metadata.name"

// New creates an Evaluator. Call Close when done with it.
func New(opts Options) (*Evaluator, error) {
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	tcm, err := newStaticTypeConverterManager(s, opts.CRDs)
	if err != nil {
		return nil, err
	}
	e := &Evaluator{
		scheme:     s,
		objIfaces:  admission.NewObjectInterfacesFromScheme(s),
		mapper:     newRESTMapper(s, opts.CRDs),
		tcm:        tcm,
		dynClient:  newDynamicClient(s, opts.CRDs),
		authorizer: authorizerfactory.NewAlwaysAllowAuthorizer(),
		stop:       make(chan struct{}),
		plugins:    map[string]*pluginEntry{},
		chains:     map[string]*chainEntry{},
		given:      map[string]bool{},

		giveNamespacesWith: opts.GiveNamespacesWith,
	}

	var nsObjs []runtime.Object
	for _, ns := range opts.Namespaces {
		if ns == nil {
			continue
		}
		e.given[ns.Name] = true
		ns = ns.DeepCopy()
		// The API server labels every namespace with its name (namespace
		// defaulting in k8s.io/kubernetes), so selectors may rely on it.
		if ns.Labels[metadataNameLabel] == "" {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[metadataNameLabel] = ns.Name
		}
		nsObjs = append(nsObjs, ns)
	}
	e.kubeClient = fake.NewClientset(nsObjs...)
	nsGVR := corev1.SchemeGroupVersion.WithResource("namespaces")
	tracker := e.kubeClient.Tracker()
	e.kubeClient.PrependReactor("get", "namespaces", func(action k8stesting.Action) (bool, runtime.Object, error) {
		name := action.(k8stesting.GetAction).GetName()
		obj, err := tracker.Get(nsGVR, "", name)
		if apierrors.IsNotFound(err) && name != "" {
			return true, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:   name,
				Labels: map[string]string{metadataNameLabel: name},
			}}, nil
		}
		return true, obj, err
	})
	if err := e.addParams(opts.Params, opts.GiveCRDsWith); err != nil {
		return nil, err
	}
	e.kubeFactory = informers.NewSharedInformerFactory(e.kubeClient, 0)
	nsInformer := e.kubeFactory.Core().V1().Namespaces().Informer()
	e.matcher = generic.NewPolicyMatcher(matching.NewMatcher(e.kubeFactory.Core().V1().Namespaces().Lister(), e.kubeClient))
	e.kubeFactory.Start(e.stop)
	if err := waitFor(nsInformer.HasSynced); err != nil {
		e.Close()
		return nil, fmt.Errorf("namespace informer: %w", err)
	}
	return e, nil
}

// Close stops all informers and plugin instances. The Evaluator must not be
// used afterwards.
func (e *Evaluator) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	close(e.stop)
	e.kubeFactory.Shutdown()
	for _, p := range e.plugins {
		p.close()
	}
}

// Admit runs the policy sets in exactly the given order as the API server's
// admission chain would, including one reinvocation round for IfNeeded
// policies, and returns the admitted object (a deep copy; the input is not
// modified) or the admission error. A request in a namespace not given whose
// labels a policy that applies looks at is refused with a
// *NamespaceNotGivenError before any policy runs. A Trace in ctx (WithTrace)
// records what the admission did silently.
func (e *Evaluator) Admit(ctx context.Context, sets []PolicySet, req Request) (*unstructured.Unstructured, error) {
	if req.Object == nil {
		return nil, errors.New("admission: request has no object")
	}
	c, err := e.chainFor(sets)
	if err != nil {
		return nil, err
	}
	attrs, err := e.attributes(req)
	if err != nil {
		return nil, err
	}
	if err := e.checkNamespace(c.uses, attrs, traceFrom(ctx)); err != nil {
		return nil, err
	}
	if err := c.chain.(admission.MutationInterface).Admit(ctx, attrs, e.objIfaces); err != nil {
		return nil, err
	}
	return e.toUnstructured(attrs.GetObject())
}

// CheckNamespace is Admit's check of the request's namespace alone: a *NamespaceNotGivenError
// when the namespace was not given but a policy of sets that applies to the request looks at its
// labels; nil otherwise (recording an assumed namespace in ctx's Trace). No policy runs.
func (e *Evaluator) CheckNamespace(ctx context.Context, sets []PolicySet, req Request) error {
	if req.Object == nil {
		return errors.New("admission: request has no object")
	}
	c, err := e.chainFor(sets)
	if err != nil {
		return err
	}
	attrs, err := e.attributes(req)
	if err != nil {
		return err
	}
	return e.checkNamespace(c.uses, attrs, traceFrom(ctx))
}

// chainFor returns the admission chain for the policy sets in this order:
// admission.Plugins.NewFromPlugins, i.e. the API server's chain handler
// wrapped in its reinvocation handler, over one plugin instance per set.
func (e *Evaluator) chainFor(sets []PolicySet) (*chainEntry, error) {
	keys := make([]string, len(sets))
	for i, set := range sets {
		k, err := setKey(set)
		if err != nil {
			return nil, fmt.Errorf("admission: policy set %d: %w", i, err)
		}
		keys[i] = k
	}
	chainKey := strings.Join(keys, ",")

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errors.New("admission: evaluator is closed")
	}
	if c, ok := e.chains[chainKey]; ok {
		e.mu.Unlock()
		return c, nil
	}
	entries := make([]*pluginEntry, len(sets))
	for i, set := range sets {
		entry, ok := e.plugins[keys[i]]
		if !ok {
			entry = &pluginEntry{ready: make(chan struct{}), stop: make(chan struct{})}
			e.plugins[keys[i]] = entry
			go e.build(entry, set)
		}
		entries[i] = entry
	}
	e.mu.Unlock()

	for i, entry := range entries {
		<-entry.ready
		if entry.err != nil {
			e.mu.Lock()
			if e.plugins[keys[i]] == entry {
				delete(e.plugins, keys[i])
			}
			e.mu.Unlock()
			return nil, fmt.Errorf("admission: policy %q: %w", sets[i].Policy.Name, entry.err)
		}
	}

	uses := make([]*namespaceUse, len(entries))
	for i, entry := range entries {
		uses[i] = entry.namespaceUse
	}
	plugins := admission.NewPlugins()
	names := make([]string, len(entries))
	for i, entry := range entries {
		names[i] = fmt.Sprintf("%s[%d]/%s", pluginNamePrefix, i, sets[i].Policy.Name)
		member := &chainMember{entry.plugin}
		plugins.Register(names[i], func(io.Reader) (admission.Interface, error) { return member, nil })
	}
	chain, err := plugins.NewFromPlugins(names, noConfig{}, admission.PluginInitializers{}, nil)
	if err != nil {
		return nil, err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("admission: evaluator is closed")
	}
	if c, ok := e.chains[chainKey]; ok {
		return c, nil
	}
	c := &chainEntry{chain: chain, uses: uses}
	e.chains[chainKey] = c
	return c, nil
}

const pluginNamePrefix = "MutatingAdmissionPolicy"

// setKey identifies a PolicySet by the hash of its serialized content.
func setKey(set PolicySet) (string, error) {
	if set.Policy == nil {
		return "", errors.New("no policy")
	}
	if set.Policy.Name == "" {
		return "", errors.New("policy has no name")
	}
	h := sha256.New()
	enc := json.NewEncoder(h)
	if err := enc.Encode(set.Policy); err != nil {
		return "", err
	}
	for i, b := range set.Bindings {
		if b == nil || b.Name == "" {
			return "", fmt.Errorf("binding %d has no name", i)
		}
		if err := enc.Encode(b); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

type noConfig struct{}

func (noConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

// chainMember hands an already initialized plugin to
// admission.Plugins.NewFromPlugins. It hides ValidateInitialization so that
// building another chain does not initialize the shared plugin again.
type chainMember struct{ p *mutatingPlugin }

func (m *chainMember) Handles(op admission.Operation) bool { return m.p.Handles(op) }
func (m *chainMember) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return m.p.Admit(ctx, a, o)
}

var _ admission.MutationInterface = &chainMember{}

// attributes builds the admission attributes the API server would build for
// the request: the object decoded into its Go type (unstructured for kinds
// the scheme does not know), the resource from the REST mapping.
func (e *Evaluator) attributes(req Request) (admission.Attributes, error) {
	gvk := req.Object.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("admission: object has no apiVersion/kind")
	}
	op := admission.Operation(req.Operation)
	if op == "" {
		op = admission.Create
	}
	var opOptions runtime.Object
	switch op {
	case admission.Create:
		opOptions = &metav1.CreateOptions{}
	case admission.Update:
		opOptions = &metav1.UpdateOptions{}
	case admission.Delete:
		opOptions = &metav1.DeleteOptions{}
	}
	userName := req.UserName
	if userName == "" {
		userName = "mapc"
	}

	gvr, namespaced, err := e.resourceFor(gvk, req.Object.GetNamespace() != "")
	if err != nil {
		return nil, err
	}
	if !req.Resource.Empty() {
		gvr = req.Resource
	}
	obj, err := e.decode(req.Object)
	if err != nil {
		return nil, err
	}
	var oldObj runtime.Object
	if req.OldObject != nil {
		if oldObj, err = e.decode(req.OldObject); err != nil {
			return nil, err
		}
	}
	objMeta, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	namespace := objMeta.GetNamespace()
	if namespaced && namespace == "" {
		// As kubectl would: the request goes to the default namespace, and
		// the API server sets the request's namespace on the object.
		namespace = metav1.NamespaceDefault
		objMeta.SetNamespace(namespace)
	}
	if !namespaced {
		namespace = ""
	}
	if gvr.GroupResource() == (schema.GroupResource{Resource: "namespaces"}) && op != admission.Create {
		// The API server's request info carries the namespace's own name
		// as namespace for requests on an existing namespace.
		namespace = objMeta.GetName()
	}

	userInfo := &user.DefaultInfo{Name: userName, Groups: []string{user.AllAuthenticated}}
	return admission.NewAttributesRecord(obj, oldObj, gvk, namespace, objMeta.GetName(), gvr, req.SubResource, op, opOptions, req.DryRun, userInfo), nil
}

// resourceFor maps a kind to its resource and scope. Kinds unknown to the
// REST mapper get the guessed plural and are namespaced iff the object has
// a namespace.
func (e *Evaluator) resourceFor(gvk schema.GroupVersionKind, hasNamespace bool) (schema.GroupVersionResource, bool, error) {
	mapping, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
	}
	if !meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, false, err
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural, hasNamespace, nil
}

// decode returns a deep copy of u as the Go type of its kind, or as
// unstructured if the scheme does not know the kind.
func (e *Evaluator) decode(u *unstructured.Unstructured) (runtime.Object, error) {
	gvk := u.GroupVersionKind()
	if !e.scheme.Recognizes(gvk) {
		return u.DeepCopy(), nil
	}
	obj, err := e.scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), obj); err != nil {
		return nil, fmt.Errorf("admission: decoding %s %q: %w", gvk.Kind, u.GetName(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

func (e *Evaluator) toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy(), nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// waitFor polls cond every millisecond until it holds.
func waitFor(cond func() bool) error {
	deadline := time.Now().Add(readyTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for informers to sync")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
