// Package kyverno is Kyverno v1.19.1's own mutation engine, driven as Kyverno's admission
// webhook drives it: the reference every policy mapc compiles from Kyverno's mutate rules is
// compared with. It must not re-implement anything Kyverno decides; it only wires Kyverno's own
// code together and stands in for the cluster around it.
//
// A request goes where the API server sends it when Kyverno v1.19.1 has installed its
// webhooks (pkg/controllers/webhook): to the mutating webhook mutate.kyverno.svc-fail, whose
// handler (/mutate/fail) applies the policies with failurePolicy Fail, then, with that patch
// applied, to mutate.kyverno.svc-ignore (/mutate/ignore) for the policies with failurePolicy
// Ignore; both are installed with reinvocationPolicy IfNeeded, so the API server calls the first
// again when the second changed the object, and the second again when that changed it. Each call
// is what Kyverno's resource handler (pkg/webhooks/resource, Mutate) does, with Kyverno's own
// parts: the request filter (pkg/webhooks/handlers: configuration exclusions and resource
// filters, Kyverno's own kinds, operations CREATE, UPDATE and CONNECT only), the policy cache
// (pkg/policycache: the policies of the request's resource, a namespaced Policy only in its own
// namespace), the policy context built from the admission request
// (pkg/webhooks/utils.PolicyContextBuilder), and the mutation handler
// (pkg/webhooks/resource/mutation: each policy on the previous one's patched resource, a policy
// that is not fully successful contributing none of its patches, a failure under Fail denying
// with Kyverno's message). The joined JSON patch is applied to the object as the API server
// applies a mutating webhook's patch (gopkg.in/evanphx/json-patch.v4).
//
// What stands in for the cluster, and is therefore chosen here rather than by Kyverno:
//
//   - The order of the policies within one handler call. Kyverno's policy cache keeps them in
//     Go maps, so its order is arbitrary (cluster-wide policies before namespaced ones); here it
//     is the order the caller gives (Request.Order, else the order of Setup.Policies), still
//     cluster-wide policies first.
//   - ConfigMaps: only those Setup.ConfigMaps gives, read by configMap context entries through
//     Kyverno's client-based resolver over a fake clientset (Kyverno's ConfigMap caching, which
//     only changes how fast a ConfigMap is found, is off).
//   - The configuration (Kyverno's ConfigMap): config.NewDefaultConfiguration, which has no
//     resource filters and no excluded users or groups, unless Setup.Config gives the ConfigMap's
//     data (then loaded as Kyverno loads it; its webhook selectors and match conditions are
//     evaluated, where the API server calls a webhook, by the API server's webhook code). The
//     Helm chart's ConfigMap filters many resources (kube-system, Events, ...) and excludes
//     system:nodes; a reference with those would say nothing about the policies for such
//     requests, so they are only what the caller gives (mapc's --kyverno-config).
//   - Discovery: the built-in kinds of client-go's scheme (plural guessed as the API server's
//     REST mapper does for them), plus Setup.Resources for custom ones.
//   - Namespaces: only the request's own (Request.Namespace, else one with only its
//     kubernetes.io/metadata.name label, as the API server labels every namespace), which
//     apiCall context entries also get by a GET of /api/v1/namespaces/<name> (namespaceClient).
//     No roles or cluster roles are bound to the user; no policy exceptions; no context loaders
//     reach a cluster or a registry but those of configMap entries and that GET; every policy
//     given is taken as ready.
//   - Defaulting: the patched object is not defaulted as the API server defaults built-in
//     types after a webhook (mapc's API server side does not default either).
//
// A ClusterPolicy with spec.webhookConfiguration.matchConditions is left out of the policy cache,
// as Kyverno's policy cache controller leaves it out, and gets a mutating webhook of its own after
// the two above (Kyverno's fine-grained webhooks: those of Ignore policies, then those of Fail
// ones, each in the order of Setup.Policies). The API server calls it for the resources the policy
// has rules for, where its match conditions hold, evaluated by the API server's own code
// (k8s.io/apiserver's webhook matchconditions, with the policy's failure policy: an error denies
// under Fail and skips the webhook under Ignore); its handler runs that policy alone.
//
// Refused rather than approximated: verifyImages rules (they reach registries).
package kyverno

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/engine"
	"github.com/kyverno/kyverno/pkg/engine/adapters"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	"github.com/kyverno/kyverno/pkg/engine/context/resolvers"
	"github.com/kyverno/kyverno/pkg/engine/factories"
	"github.com/kyverno/kyverno/pkg/engine/jmespath"
	"github.com/kyverno/kyverno/pkg/event"
	imageverifycache "github.com/kyverno/kyverno/pkg/image/verification/cache"
	"github.com/kyverno/kyverno/pkg/policycache"
	admissionutils "github.com/kyverno/kyverno/pkg/utils/admission"
	reportutils "github.com/kyverno/kyverno/pkg/utils/report"
	"github.com/kyverno/kyverno/pkg/webhooks/handlers"
	"github.com/kyverno/kyverno/pkg/webhooks/resource/mutation"
	webhookutils "github.com/kyverno/kyverno/pkg/webhooks/utils"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Setup is the first line of the protocol: the policies and the installation.
type Setup struct {
	// Policies are kyverno.io ClusterPolicy and Policy objects (v1 or v2beta1), as the API server
	// stores them.
	Policies []*unstructured.Unstructured `json:"policies"`
	// Config is the data of Kyverno's ConfigMap (resourceFilters, excludeGroups, ...); none is
	// Kyverno's default configuration, which filters nothing.
	Config map[string]string `json:"config,omitempty"`
	// Resources are custom resources for discovery (built-in kinds are known).
	Resources []Resource `json:"resources,omitempty"`
	// ConfigMaps are the ConfigMaps in the cluster, which configMap context entries read through
	// Kyverno's client-based ConfigMap resolver (pkg/engine/context/resolvers), as the API server
	// serves them. Objects of other kinds are ignored.
	ConfigMaps []*unstructured.Unstructured `json:"configMaps,omitempty"`
}

// Resource is one custom resource for discovery.
type Resource struct {
	Group      string `json:"group"`
	Version    string `json:"version"`
	Kind       string `json:"kind"`
	Resource   string `json:"resource"`
	Namespaced bool   `json:"namespaced"`
}

// Request is one admission request.
type Request struct {
	Object    *unstructured.Unstructured `json:"object,omitempty"`
	OldObject *unstructured.Unstructured `json:"oldObject,omitempty"` // UPDATE and DELETE
	// Operation is CREATE (default), UPDATE, DELETE or CONNECT.
	Operation admissionv1.Operation `json:"operation,omitempty"`
	// SubResource is the request's subresource ("" for the resource itself), e.g.
	// "ephemeralcontainers": an UPDATE of a Pod's ephemeral containers (kubectl debug), for which
	// Kyverno's webhooks are called wherever a policy has Pod rules.
	SubResource string `json:"subResource,omitempty"`
	// Namespace is the request's namespace object (for namespaceSelector); nil is a namespace
	// with only its kubernetes.io/metadata.name label.
	Namespace *corev1.Namespace `json:"namespace,omitempty"`
	// UserInfo is who sends the request; none is user "admin" in group system:authenticated.
	UserInfo *authenticationv1.UserInfo `json:"userInfo,omitempty"`
	// Order names the policies ("name" for a ClusterPolicy, "namespace/name" for a Policy) in
	// the order Kyverno is taken to apply them; policies not named come after, in Setup order.
	Order []string `json:"order,omitempty"`
}

// Response is the engine's answer to one request: the object as the API server has it after
// Kyverno's webhooks, or Kyverno's denial, or an error of the reference itself.
type Response struct {
	Object *unstructured.Unstructured `json:"object,omitempty"`
	// Denied is the API server's message for Kyverno's denial.
	Denied string `json:"denied,omitempty"`
	// Warnings are the webhooks' warnings.
	Warnings []string `json:"warnings,omitempty"`
	// Error is a failure of the reference (an invalid request); the request was not admitted.
	Error string `json:"error,omitempty"`
}

// The mutating webhooks Kyverno v1.19.1 installs for policies without match conditions of their
// own, in the order the API server calls them (sorted by name), with their handler's failure
// policy.
var webhooks = []struct{ name, failurePolicy string }{
	{"mutate.kyverno.svc-fail", "fail"},
	{"mutate.kyverno.svc-ignore", "ignore"},
}

// Engine is Kyverno's engine and webhook handler for a fixed set of policies.
type Engine struct {
	policies  []kyvernov1.PolicyInterface
	cfg       config.Configuration
	pcache    policycache.Cache
	client    dclient.Interface
	engine    engineapi.Engine
	pcBuilder webhookutils.PolicyContextBuilder
	nsIndexer cache.Indexer
	nsLister  corev1listers.NamespaceLister
	logger    logr.Logger
	// own are the webhooks of the policies with match conditions, in the order the API server
	// calls them.
	own []*ownWebhook
	// conditions are the match conditions of the general webhooks (Kyverno's configuration, its
	// matchConditions key), compiled for each webhook (nil: none).
	conditions []matchconditions.Matcher
}

// New builds the engine for the policies and the installation setup describes.
func New(setup Setup) (*Engine, error) {
	// Kyverno's reporting configuration is a global its main sets; mutation reads it.
	reportutils.NewReportingConfig(nil)
	cfg := config.NewDefaultConfiguration(false)
	if setup.Config != nil {
		cfg.Load(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.KyvernoConfigMapName(), Namespace: config.KyvernoNamespace()}, Data: setup.Config})
	}
	client, err := newClient(setup.Resources)
	if err != nil {
		return nil, err
	}
	cmResolver, err := configMapResolver(setup.ConfigMaps)
	if err != nil {
		return nil, err
	}
	jp := jmespath.New(cfg)
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nsLister := corev1listers.NewNamespaceLister(nsIndexer)
	e := &Engine{
		cfg:    cfg,
		pcache: policycache.NewCache(),
		client: client,
		engine: engine.NewEngine(cfg, jp, adapters.Client(namespaceClient{client, nsLister}), nil, imageverifycache.DisabledImageVerifyCache(),
			factories.DefaultContextLoaderFactory(cmResolver), nil, nil),
		pcBuilder: webhookutils.NewPolicyContextBuilder(cfg, jp),
		nsIndexer: nsIndexer,
		nsLister:  nsLister,
		logger:    logr.Discard(),
	}
	if conds := cfg.GetMatchConditions(); len(conds) > 0 {
		for _, w := range webhooks {
			fp := admissionregistrationv1.Fail
			if w.failurePolicy == "ignore" {
				fp = admissionregistrationv1.Ignore
			}
			m, err := compileConditions(conds, fp, w.name)
			if err != nil {
				return nil, fmt.Errorf("Kyverno's configuration: matchConditions: %v", err)
			}
			e.conditions = append(e.conditions, m)
		}
	}
	for i, u := range setup.Policies {
		p, err := decodePolicy(u)
		if err != nil {
			return nil, fmt.Errorf("policies[%d]: %w", i, err)
		}
		e.policies = append(e.policies, p)
		// As Kyverno's policy cache controller (pkg/controllers/policycache) keeps it.
		if !p.AdmissionProcessingEnabled() {
			continue
		}
		key, _ := cache.MetaNamespaceKeyFunc(p)
		if p.GetSpec().CustomWebhookMatchConditions() {
			own, err := e.ownWebhook(p, key)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", policyName(p), err)
			}
			e.own = append(e.own, own)
			continue
		}
		if err := e.pcache.Set(key, p, client.Discovery()); err != nil {
			return nil, fmt.Errorf("%s: Kyverno's policy cache: %w", policyName(p), err)
		}
	}
	// Kyverno lists the fine-grained webhooks of Ignore policies before those of Fail ones.
	slices.SortStableFunc(e.own, func(a, b *ownWebhook) int {
		if a.failurePolicy == b.failurePolicy {
			return 0
		}
		if a.failurePolicy == "ignore" {
			return -1
		}
		return 1
	})
	return e, nil
}

// ownWebhook is the mutating webhook Kyverno installs for a policy with match conditions
// (pkg/controllers/webhook, newWebhookPerPolicy): its name, its failure policy, the resources it
// is called for (a cache holding the policy alone) and its match conditions, compiled as the API
// server compiles a webhook's.
type ownWebhook struct {
	name, failurePolicy string
	policy              kyvernov1.PolicyInterface
	// namespace is a Policy's namespace (nil for a ClusterPolicy), under which the cache keeps
	// it: the webhook's rules are its kinds in every namespace (Kyverno's engine then matches
	// the Policy only in its own).
	namespace *corev1.Namespace
	rules     policycache.Cache
	matcher   matchconditions.Matcher
}

func (e *Engine) ownWebhook(p kyvernov1.PolicyInterface, key string) (*ownWebhook, error) {
	w := &ownWebhook{policy: p, rules: policycache.NewCache(), failurePolicy: "fail"}
	fp := admissionregistrationv1.Fail
	if p.GetSpec().GetFailurePolicy(context.Background()) == kyvernov1.Ignore {
		w.failurePolicy, fp = "ignore", admissionregistrationv1.Ignore
	}
	// Named as Kyverno names it (webhook.key): the namespace first for a Policy.
	w.name = "mutate.kyverno.svc-" + w.failurePolicy + "-finegrained-" + p.GetName()
	if p.IsNamespaced() {
		w.name = "mutate.kyverno.svc-" + w.failurePolicy + "-finegrained-" + p.GetNamespace() + "-" + p.GetName()
		w.namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.GetNamespace()}}
	}
	if err := w.rules.Set(key, p, e.client.Discovery()); err != nil {
		return nil, fmt.Errorf("Kyverno's policy cache: %w", err)
	}
	m, err := compileConditions(p.GetSpec().GetMatchConditions(), fp, w.name)
	if err != nil {
		return nil, fmt.Errorf("spec.webhookConfiguration.matchConditions: %v", err)
	}
	w.matcher = m
	return w, nil
}

// compileConditions compiles a mutating webhook's match conditions as the API server does
// (webhook.GetCompiledMatcher).
func compileConditions(conds []admissionregistrationv1.MatchCondition, fp admissionregistrationv1.FailurePolicyType, name string) (matchconditions.Matcher, error) {
	var exprs []plugincel.ExpressionAccessor
	for _, c := range conds {
		exprs = append(exprs, &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression})
	}
	compiler := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	filter := compiler.CompileCondition(exprs, plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}, environment.StoredExpressions)
	for _, err := range filter.CompilationErrors() {
		return nil, err
	}
	return matchconditions.NewMatcher(filter, &fp, "webhook", "admit", name), nil
}

// generalCalled: does the API server call the general webhook of failurePolicy for the request
// (the webhook's rules: the resources of every policy in the cache with that failure policy,
// wherever a namespaced one is, on CREATE and UPDATE)?
func (e *Engine) generalCalled(ctx context.Context, req admissionv1.AdmissionRequest, gvr schema.GroupVersionResource, failurePolicy string) bool {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return false
	}
	nss := []*corev1.Namespace{nil}
	for _, p := range e.policies {
		if p.IsNamespaced() {
			nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.GetNamespace()}})
		}
	}
	for _, ns := range nss {
		for _, p := range e.pcache.GetPolicies(policycache.Mutate, gvr, req.SubResource, ns) {
			fp := p.GetSpec().GetFailurePolicy(ctx)
			if failurePolicy == "fail" && fp == kyvernov1.Fail || failurePolicy == "ignore" && fp == kyvernov1.Ignore {
				return true
			}
		}
	}
	return false
}

// decodePolicy decodes a ClusterPolicy or Policy with Kyverno's types (v2beta1 has v1's schema)
// and refuses what this reference cannot run as Kyverno would.
func decodePolicy(u *unstructured.Unstructured) (kyvernov1.PolicyInterface, error) {
	if u == nil {
		return nil, errors.New("null policy")
	}
	gvk := u.GroupVersionKind()
	var p kyvernov1.PolicyInterface
	switch {
	case gvk.Group != "kyverno.io" || gvk.Version != "v1" && gvk.Version != "v2beta1":
		return nil, fmt.Errorf("%s %s is not a Kyverno policy", u.GetAPIVersion(), u.GetKind())
	case gvk.Kind == "ClusterPolicy":
		p = &kyvernov1.ClusterPolicy{}
	case gvk.Kind == "Policy":
		p = &kyvernov1.Policy{}
		if u.GetNamespace() == "" {
			return nil, fmt.Errorf("Policy/%s has no namespace", u.GetName())
		}
	default:
		return nil, fmt.Errorf("%s %s is not a Kyverno policy", u.GetAPIVersion(), u.GetKind())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, p, true); err != nil {
		return nil, fmt.Errorf("%s: %w", u.GetKind()+"/"+u.GetName(), err)
	}
	if p.GetSpec().HasVerifyImages() {
		return nil, fmt.Errorf("%s: verifyImages rules reach image registries; not reproduced by this reference", policyName(p))
	}
	return p, nil
}

func policyName(p kyvernov1.PolicyInterface) string {
	if p.IsNamespaced() {
		return "Policy/" + p.GetNamespace() + "/" + p.GetName()
	}
	return "ClusterPolicy/" + p.GetName()
}

// newClient is a Kyverno dynamic client whose discovery (Kyverno's own, over a fake API server's
// discovery document) lists the built-in kinds and the custom resources given, each with a
// status subresource (the policies it is given decide which are real), and a Pod's
// ephemeralcontainers.
func newClient(custom []Resource) (dclient.Interface, error) {
	lists := map[string]*metav1.APIResourceList{}
	add := func(gv schema.GroupVersion, r metav1.APIResource) {
		l := lists[gv.String()]
		if l == nil {
			l = &metav1.APIResourceList{GroupVersion: gv.String()}
			lists[gv.String()] = l
		}
		l.APIResources = append(l.APIResources, r)
	}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") ||
			strings.HasPrefix(t.PkgPath(), "k8s.io/apimachinery/") {
			continue
		}
		plural, singular := meta.UnsafeGuessKindToResource(gvk)
		add(gvk.GroupVersion(), metav1.APIResource{Name: plural.Resource, SingularName: singular.Resource, Kind: gvk.Kind,
			Verbs: metav1.Verbs{"create", "update", "get", "list"}})
		add(gvk.GroupVersion(), metav1.APIResource{Name: plural.Resource + "/status", Kind: gvk.Kind, Verbs: metav1.Verbs{"get", "update"}})
		if gvk == corev1.SchemeGroupVersion.WithKind("Pod") {
			add(gvk.GroupVersion(), metav1.APIResource{Name: plural.Resource + "/ephemeralcontainers", Kind: gvk.Kind, Verbs: metav1.Verbs{"get", "update"}})
		}
	}
	for _, r := range custom {
		add(schema.GroupVersion{Group: r.Group, Version: r.Version}, metav1.APIResource{Name: r.Resource, Kind: r.Kind,
			Namespaced: r.Namespaced, Verbs: metav1.Verbs{"create", "update", "get", "list"}})
		add(schema.GroupVersion{Group: r.Group, Version: r.Version}, metav1.APIResource{Name: r.Resource + "/status", Kind: r.Kind,
			Namespaced: r.Namespaced, Verbs: metav1.Verbs{"get", "update"}})
	}
	kube := kubefake.NewClientset()
	for _, gv := range sortedKeys(lists) {
		kube.Resources = append(kube.Resources, lists[gv])
	}
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	return dclient.NewClient(context.Background(), dyn, kube, 24*time.Hour, false, nil)
}

// namespaceClient is Kyverno's client with the API server's answer to a GET of a namespace
// (/api/v1/namespaces/<name>), which apiCall context entries send, served from the namespaces
// Kyverno's listers know (the request's own). Its JSON is the Namespace object with apiVersion
// and kind, as the API server serves it, but what the API server adds to a stored object
// (managed fields, resource version, uid, creation timestamp, spec.finalizers, status.phase).
// Every other call fails. A call without a method is a GET: the CRD's default, which the API
// server sets on every policy it stores.
type namespaceClient struct {
	dclient.Interface
	namespaces corev1listers.NamespaceLister
}

func (c namespaceClient) RawAbsPath(_ context.Context, path, method string, _ io.Reader) ([]byte, error) {
	name, ok := strings.CutPrefix(path, "/api/v1/namespaces/")
	if !ok || name == "" || strings.Contains(name, "/") || method != "GET" && method != "" {
		return nil, fmt.Errorf("the reference serves no %s %s: only GET /api/v1/namespaces/<name>", method, path)
	}
	ns, err := c.namespaces.Get(name)
	if err != nil {
		return nil, err
	}
	ns = ns.DeepCopy()
	ns.APIVersion, ns.Kind = "v1", "Namespace"
	return json.Marshal(ns)
}

// configMapResolver is Kyverno's client-based ConfigMap resolver over a clientset holding the
// ConfigMaps among objs, each as the API server stores and serves it (through its JSON: an
// empty data map is none).
func configMapResolver(objs []*unstructured.Unstructured) (engineapi.ConfigmapResolver, error) {
	var cms []runtime.Object
	for i, u := range objs {
		if u == nil || u.GetAPIVersion() != "v1" || u.GetKind() != "ConfigMap" {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, cm, true); err != nil {
			return nil, fmt.Errorf("configMaps[%d]: %w", i, err)
		}
		data, err := json.Marshal(cm)
		if err != nil {
			return nil, err
		}
		stored := &corev1.ConfigMap{}
		if err := json.Unmarshal(data, stored); err != nil {
			return nil, err
		}
		if stored.Namespace == "" {
			stored.Namespace = "default" // created in the request's namespace, as kubectl sends it
		}
		cms = append(cms, stored)
	}
	return resolvers.NewClientBasedResolver(kubefake.NewClientset(cms...))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Admit admits one request through Kyverno's webhooks.
func (e *Engine) Admit(ctx context.Context, req Request) (resp Response) {
	defer func() {
		if r := recover(); r != nil {
			resp = Response{Error: fmt.Sprintf("Kyverno's engine panicked: %v", r)}
		}
	}()
	op := req.Operation
	if op == "" {
		op = admissionv1.Create
	}
	obj := req.Object
	if op == admissionv1.Delete {
		obj = nil
	}
	subject := obj
	if subject == nil {
		subject = req.OldObject
	}
	if subject == nil {
		return Response{Error: "a request needs an object (an old object for DELETE)"}
	}
	gvk := subject.GroupVersionKind()
	gvr, err := e.client.Discovery().GetGVRFromGVK(gvk)
	if err != nil {
		return Response{Error: fmt.Sprintf("%s: no resource for this kind: %v", gvk, err)}
	}
	nsName := subject.GetNamespace()
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		nsName = "" // the API server sends a Namespace's requests without a namespace
	}
	if err := e.setNamespace(nsName, req.Namespace); err != nil {
		return Response{Error: err.Error()}
	}
	user := authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:authenticated"}}
	if req.UserInfo != nil {
		user = *req.UserInfo
	}
	var warnings []string
	current := obj
	// call sends the request, with the object as it is now, to one webhook and applies its patch.
	call := func(i int) (changed bool, denied string, err error) {
		ar := handlers.AdmissionRequest{
			AdmissionRequest: admissionv1.AdmissionRequest{
				UID:                types.UID(fmt.Sprintf("request-%d", i)),
				Kind:               metav1.GroupVersionKind(gvk),
				Resource:           metav1.GroupVersionResource(gvr),
				RequestKind:        ptr(metav1.GroupVersionKind(gvk)),
				RequestResource:    ptr(metav1.GroupVersionResource(gvr)),
				RequestSubResource: req.SubResource,
				Name:               subject.GetName(),
				Namespace:          nsName,
				Operation:          op,
				UserInfo:           user,
				DryRun:             ptr(false),
				SubResource:        req.SubResource,
			},
			GroupVersionKind: gvk,
		}
		if current != nil {
			if ar.Object.Raw, err = json.Marshal(current.Object); err != nil {
				return false, "", err
			}
		}
		if req.OldObject != nil {
			if ar.OldObject.Raw, err = json.Marshal(req.OldObject.Object); err != nil {
				return false, "", err
			}
		}
		var w struct{ name, failurePolicy string }
		var only kyvernov1.PolicyInterface
		if i < len(webhooks) {
			w = webhooks[i]
		} else {
			w.name = e.own[i-len(webhooks)].name
		}
		// The selectors of Kyverno's configuration are every webhook's.
		if selected, err := e.selected(w.name, ar.AdmissionRequest, current, req.OldObject, gvk, gvr); err != nil {
			return false, "", fmt.Errorf("failed calling webhook %q: %w", w.name, err)
		} else if !selected {
			return false, "", nil
		}
		if i < len(webhooks) && e.conditions != nil {
			// The match conditions of Kyverno's configuration, where the API server calls it.
			if !e.generalCalled(ctx, ar.AdmissionRequest, gvr, w.failurePolicy) {
				return false, "", nil
			}
			attrs, obj, oldObj := attributes(ar.AdmissionRequest, current, req.OldObject, gvk, gvr)
			va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: obj, VersionedOldObject: oldObj}
			res := e.conditions[i].Match(ctx, va, nil, nil)
			if res.Error != nil {
				return false, fmt.Sprintf("failed calling webhook %q: failed to evaluate match conditions: %v", w.name, res.Error), nil
			}
			if !res.Matches {
				return false, "", nil
			}
		}
		if i >= len(webhooks) {
			own := e.own[i-len(webhooks)]
			w.name, w.failurePolicy, only = own.name, own.failurePolicy, own.policy
			call, err := e.calls(ctx, own, ar.AdmissionRequest, current, req.OldObject, gvk, gvr)
			if err != nil {
				// As the API server reports it (generic webhook dispatcher, ShouldCallHook).
				return false, fmt.Sprintf("failed calling webhook %q: failed to evaluate match conditions: %v", w.name, err), nil
			}
			if !call {
				return false, "", nil
			}
		}
		handler := handlers.AdmissionHandler(func(ctx context.Context, logger logr.Logger, request handlers.AdmissionRequest, start time.Time) handlers.AdmissionResponse {
			return e.mutate(ctx, logger, request, w.failurePolicy, req.Order, only, start)
		}).WithFilter(e.cfg).WithOperationFilter(admissionv1.Create, admissionv1.Update, admissionv1.Connect)
		r := handler(ctx, e.logger, ar, time.Now())
		warnings = append(warnings, r.Warnings...)
		if !r.Allowed {
			msg := ""
			if r.Result != nil {
				msg = r.Result.Message
			}
			// As the API server reports a webhook's rejection (webhookerrors.ToStatusErr).
			return false, fmt.Sprintf("admission webhook %q denied the request: %s", w.name, msg), nil
		}
		if len(r.Patch) == 0 {
			return false, "", nil
		}
		patch, err := jsonpatch.DecodePatch(r.Patch)
		if err != nil || len(patch) == 0 {
			return false, "", err
		}
		if current == nil {
			return false, "", fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", w.name)
		}
		before, _ := json.Marshal(current.Object)
		after, err := patch.Apply(before)
		if err != nil {
			return false, "", fmt.Errorf("admission webhook %q: its patch does not apply: %w", w.name, err)
		}
		next := &unstructured.Unstructured{}
		if err := json.Unmarshal(after, &next.Object); err != nil {
			return false, "", err
		}
		changed = !apiequality.Semantic.DeepEqual(current.Object, next.Object)
		current = next
		return changed, "", nil
	}
	// The first pass calls every webhook; with reinvocationPolicy IfNeeded, the API server calls
	// each once more, in order, when the object changed after its last call.
	n := len(webhooks) + len(e.own)
	version, seen := 0, make([]int, n)
	for pass := 0; pass < 2; pass++ {
		for i := range n {
			if pass == 1 && seen[i] == version {
				continue
			}
			changed, denied, err := call(i)
			if err != nil {
				return Response{Error: err.Error()}
			}
			if denied != "" {
				return Response{Denied: denied, Warnings: warnings}
			}
			if changed {
				version++
			}
			seen[i] = version
		}
	}
	if current == nil {
		current = req.Object
	}
	return Response{Object: current, Warnings: warnings}
}

// calls: does the API server call own for the request, with the object as it is now? Only for
// the resources the policy has rules for (the webhook's rules), on CREATE and UPDATE (Kyverno's
// mutating webhooks' operations), where its match conditions hold.
func (e *Engine) calls(ctx context.Context, own *ownWebhook, req admissionv1.AdmissionRequest, current, old *unstructured.Unstructured, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) (bool, error) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return false, nil
	}
	if len(own.rules.GetPolicies(policycache.Mutate, gvr, req.SubResource, own.namespace)) == 0 {
		return false, nil
	}
	attrs, obj, oldObj := attributes(req, current, old, gvk, gvr)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: obj, VersionedOldObject: oldObj}
	res := own.matcher.Match(ctx, va, nil, nil)
	return res.Matches, res.Error
}

// attributes are the request's admission attributes, as the API server hands them to its
// webhook dispatcher.
func attributes(req admissionv1.AdmissionRequest, current, old *unstructured.Unstructured, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) (admission.Attributes, runtime.Object, runtime.Object) {
	var obj, oldObj runtime.Object
	if current != nil {
		obj = current
	}
	if old != nil {
		oldObj = old
	}
	u := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups}
	return admission.NewAttributesRecord(obj, oldObj, gvk, req.Namespace, req.Name, gvr, req.SubResource,
		admission.Operation(req.Operation), nil, false, u), obj, oldObj
}

// selected: do the namespaceSelector and objectSelector of Kyverno's configuration (its
// webhooks key), which Kyverno sets on every mutating webhook it installs, select the request?
// Evaluated by the API server's webhook predicates (an empty selector selects everything).
func (e *Engine) selected(name string, req admissionv1.AdmissionRequest, current, old *unstructured.Unstructured, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) (bool, error) {
	cfg := e.cfg.GetWebhook()
	if cfg.NamespaceSelector == nil && cfg.ObjectSelector == nil {
		return true, nil
	}
	h := &admissionregistrationv1.MutatingWebhook{Name: name, NamespaceSelector: cfg.NamespaceSelector, ObjectSelector: cfg.ObjectSelector}
	if h.NamespaceSelector == nil {
		h.NamespaceSelector = &metav1.LabelSelector{}
	}
	if h.ObjectSelector == nil {
		h.ObjectSelector = &metav1.LabelSelector{}
	}
	acc := webhook.NewMutatingWebhookAccessor(name, "kyverno-resource-mutating-webhook-cfg", h)
	attrs, _, _ := attributes(req, current, old, gvk, gvr)
	if ok, err := (&namespace.Matcher{NamespaceLister: e.nsLister}).MatchNamespaceSelector(acc, attrs); err != nil || !ok {
		if err != nil {
			return false, err
		}
		return false, nil
	}
	ok, err := (&object.Matcher{}).MatchObjectSelector(acc, attrs)
	if err != nil {
		return false, err
	}
	return ok, nil
}

// mutate is Kyverno's resource handler for the mutating webhook (pkg/webhooks/resource,
// resourceHandlers.Mutate), with the policies of the cache in the order given, or only the
// policy of a fine-grained webhook.
func (e *Engine) mutate(ctx context.Context, logger logr.Logger, request handlers.AdmissionRequest, failurePolicy string, order []string, only kyvernov1.PolicyInterface, start time.Time) handlers.AdmissionResponse {
	var namespace *corev1.Namespace
	if request.Namespace != "" {
		namespace, _ = e.nsLister.Get(request.Namespace)
	}
	gvr := schema.GroupVersionResource(request.Resource)
	candidates := e.orderPolicies(e.pcache.GetPolicies(policycache.Mutate, gvr, request.SubResource, namespace), order)
	if only != nil {
		candidates = []kyvernov1.PolicyInterface{only} // retrieveAndCategorizePolicies, by the URL's policy
	}
	var policies []kyvernov1.PolicyInterface
	for _, p := range candidates {
		// resource.filterPolicies
		fp := p.GetSpec().GetFailurePolicy(ctx)
		if failurePolicy == "fail" && fp == kyvernov1.Fail || failurePolicy == "ignore" && fp == kyvernov1.Ignore {
			policies = append(policies, p)
		}
	}
	if len(policies) == 0 {
		return admissionutils.ResponseSuccess(request.UID)
	}
	policyContext, err := e.pcBuilder.Build(request.AdmissionRequest, request.Roles, request.ClusterRoles, request.GroupVersionKind)
	if err != nil {
		return admissionutils.Response(request.UID, err)
	}
	mh := mutation.NewMutationHandler(logger, nil, e.engine, noEvents{}, e.nsLister, nil, false)
	patches, warnings, err := mh.HandleMutation(ctx, request, policies, policyContext, start, e.cfg)
	if err != nil {
		return admissionutils.Response(request.UID, err)
	}
	return admissionutils.MutationResponse(request.UID, patches, warnings...)
}

// orderPolicies sorts what Kyverno's policy cache gives (cluster-wide policies, then namespaced
// ones, each in an arbitrary order) by the order given, then the order of Setup.
func (e *Engine) orderPolicies(got []kyvernov1.PolicyInterface, order []string) []kyvernov1.PolicyInterface {
	rank := map[string]int{}
	for i, name := range order {
		if _, ok := rank[name]; !ok {
			rank[name] = i
		}
	}
	for i, p := range e.policies {
		key, _ := cache.MetaNamespaceKeyFunc(p)
		if _, ok := rank[key]; !ok {
			rank[key] = len(order) + i
		}
	}
	out := slices.Clone(got)
	slices.SortStableFunc(out, func(a, b kyvernov1.PolicyInterface) int {
		if a.IsNamespaced() != b.IsNamespaced() {
			if a.IsNamespaced() {
				return 1
			}
			return -1
		}
		ka, _ := cache.MetaNamespaceKeyFunc(a)
		kb, _ := cache.MetaNamespaceKeyFunc(b)
		return rank[ka] - rank[kb]
	})
	return out
}

// setNamespace makes ns (or, when nil, a namespace with only its kubernetes.io/metadata.name
// label) the only namespace Kyverno's listers know.
func (e *Engine) setNamespace(name string, ns *corev1.Namespace) error {
	for _, o := range e.nsIndexer.List() {
		if err := e.nsIndexer.Delete(o); err != nil {
			return err
		}
	}
	if ns == nil && name == "" {
		return nil
	}
	if ns == nil {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
	}
	if name != "" && ns.Name != name {
		return fmt.Errorf("the namespace given is %q, but the object is in %q", ns.Name, name)
	}
	return e.nsIndexer.Add(ns)
}

// noEvents drops Kyverno's events: there is no cluster to record them in.
type noEvents struct{}

func (noEvents) Add(...event.Info) {}

func ptr[T any](v T) *T { return &v }
