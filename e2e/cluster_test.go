package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/emit"
)

// EnvKubeconfig names the kubeconfig of the throw-away API server the tests run against.
const EnvKubeconfig = "MAPC_E2E_KUBECONFIG"

// EnvCompileVersion, when set, is the Kubernetes version every case is compiled for (the
// policies are still written in the API version the server serves).
const EnvCompileVersion = "MAPC_E2E_COMPILE_VERSION"

const (
	// probeNamespace holds the probe objects used to see which policies the API server runs.
	probeNamespace = "mapc-e2e"
	// sentinelPrefix begins the name of the policy (and binding) created after a case's policies,
	// which ends in the sync's token: once it mutates the probe object, every policy and binding
	// created before it is active (see sync). labelSentinel marks them.
	sentinelPrefix = "mapc-e2e-sentinel-"
	labelSentinel  = "e2e.mapc.dev/sentinel"
	// labelSync is the label of the probe namespace that the sentinel's binding selects: its
	// value is each sync's token (see sync).
	labelSync          = "e2e.mapc.dev/sync"
	probeAnnotation    = "e2e.mapc.dev/probe"
	updateKey          = "e2e.mapc.dev/update" // the annotation (or label) each update adds
	labelE2E           = "e2e.mapc.dev/owned"
	activationTimeout  = 60 * time.Second
	deletionTimeout    = 60 * time.Second
	namespaceRetryTime = 30 * time.Second
)

// immortal namespaces cannot be deleted (the NamespaceLifecycle plugin refuses it).
var immortal = map[string]bool{"default": true, "kube-system": true, "kube-public": true}

// cluster is the API server under test.
type cluster struct {
	dyn    dynamic.Interface
	cs     kubernetes.Interface
	mapper meta.RESTMapper
	// version is the server's major.minor; mapAPI the admissionregistration.k8s.io version that
	// serves MutatingAdmissionPolicies there.
	version *version.Version
	mapAPI  string
	policy  schema.GroupVersionResource
	binding schema.GroupVersionResource
}

var (
	clusterOnce sync.Once
	theCluster  *cluster
	clusterErr  error
)

// connect returns the cluster, skipping the test when no kubeconfig is given.
func connect(t *testing.T) *cluster {
	t.Helper()
	path := os.Getenv(EnvKubeconfig)
	if path == "" {
		t.Skipf("%s is not set: run `make e2e` to test against a real API server", EnvKubeconfig)
	}
	clusterOnce.Do(func() { theCluster, clusterErr = newCluster(path) })
	if clusterErr != nil {
		t.Fatalf("connecting to the API server of %s: %v", path, clusterErr)
	}
	return theCluster
}

func newCluster(kubeconfig string) (*cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.UserAgent = "mapc-e2e"
	c := &cluster{}
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.cs.Discovery()))
	info, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("server version %q: %v", info.GitVersion, err)
	}
	c.version = version.MajorMinor(v.Major(), v.Minor())
	c.mapAPI = emit.APIVersion(c.version)
	gv, _ := schema.ParseGroupVersion(c.mapAPI)
	c.policy = gv.WithResource("mutatingadmissionpolicies")
	c.binding = gv.WithResource("mutatingadmissionpolicybindings")
	if _, err := c.dyn.Resource(c.policy).List(context.Background(), metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("the server (%s) does not serve %s: %v (1.34 and 1.35 need --feature-gates=MutatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true)", info.GitVersion, c.policy, err)
	}
	ctx := context.Background()
	_, err = c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return c, nil
}

// compileVersion is the Kubernetes version to compile for: the case's own when it names one
// that the server is at least, else the server's.
func (c *cluster) compileVersion(want string) (*version.Version, error) {
	if v := os.Getenv(EnvCompileVersion); v != "" {
		return compiler.ParseVersion(v)
	}
	if want == "" {
		return c.version, nil
	}
	v, err := compiler.ParseVersion(want)
	if err != nil {
		return nil, err
	}
	if v.GreaterThan(c.version) {
		return c.version, nil
	}
	return v, nil
}

// resourceFor maps an object's kind to its resource and scope on the server.
func (c *cluster) resourceFor(o *unstructured.Unstructured) (schema.GroupVersionResource, bool, error) {
	gvk := o.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (c *cluster) client(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return c.dyn.Resource(gvr)
	}
	return c.dyn.Resource(gvr).Namespace(namespace)
}

var dryRun = []string{metav1.DryRunAll}

// create creates an object (dry run or not), retrying while the namespace it goes to is still
// being deleted or not yet known to the NamespaceLifecycle plugin's cache.
func (c *cluster) create(ctx context.Context, gvr schema.GroupVersionResource, o *unstructured.Unstructured, dry bool) (*unstructured.Unstructured, error) {
	opts := metav1.CreateOptions{FieldManager: "mapc-e2e"}
	if dry {
		opts.DryRun = dryRun
	}
	var out *unstructured.Unstructured
	err := retryNamespace(ctx, func() error {
		var err error
		out, err = c.client(gvr, o.GetNamespace()).Create(ctx, o.DeepCopy(), opts)
		return err
	})
	return out, err
}

func (c *cluster) update(ctx context.Context, gvr schema.GroupVersionResource, o *unstructured.Unstructured, dry bool) (*unstructured.Unstructured, error) {
	opts := metav1.UpdateOptions{FieldManager: "mapc-e2e"}
	if dry {
		opts.DryRun = dryRun
	}
	return c.client(gvr, o.GetNamespace()).Update(ctx, o.DeepCopy(), opts)
}

// updateSubresource updates a subresource of an object (dry run or not).
func (c *cluster) updateSubresource(ctx context.Context, gvr schema.GroupVersionResource, o *unstructured.Unstructured, sub string, dry bool) (*unstructured.Unstructured, error) {
	opts := metav1.UpdateOptions{FieldManager: "mapc-e2e"}
	if dry {
		opts.DryRun = dryRun
	}
	return c.client(gvr, o.GetNamespace()).Update(ctx, o.DeepCopy(), opts, sub)
}

// createSubresource creates o on the subresource sub of the object named as o (a Binding on
// pods/binding).
func (c *cluster) createSubresource(ctx context.Context, gvr schema.GroupVersionResource, namespace string, o *unstructured.Unstructured, sub string) (*unstructured.Unstructured, error) {
	return c.client(gvr, namespace).Create(ctx, o.DeepCopy(), metav1.CreateOptions{FieldManager: "mapc-e2e"}, sub)
}

func (c *cluster) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return c.client(gvr, namespace).Get(ctx, name, metav1.GetOptions{})
}

// retryNamespace retries f while it fails because a namespace is terminating or not yet seen.
func retryNamespace(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(namespaceRetryTime)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		msg := err.Error()
		if !(apierrors.IsForbidden(err) && strings.Contains(msg, "because it is being terminated")) &&
			!(apierrors.IsNotFound(err) && strings.Contains(msg, "namespaces")) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deleteObject deletes an object at once and waits until it is gone.
func (c *cluster) deleteObject(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) error {
	zero := int64(0)
	bg := metav1.DeletePropagationBackground
	err := c.client(gvr, namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, PropagationPolicy: &bg})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, deletionTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.get(ctx, gvr, namespace, name)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// deleteNamespace deletes a namespace and, as there is no namespace controller, finalizes it
// itself (its content must have been deleted first). Immortal namespaces are left alone.
func (c *cluster) deleteNamespace(ctx context.Context, name string) error {
	if immortal[name] {
		return nil
	}
	nss := c.cs.CoreV1().Namespaces()
	err := nss.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, deletionTimeout, true, func(ctx context.Context) (bool, error) {
		ns, err := nss.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if ns.DeletionTimestamp == nil {
			return false, fmt.Errorf("namespace %s is not being deleted", name)
		}
		if len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = nil
			if _, err := nss.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return false, err
			}
			return false, nil
		}
		// Finalized: the second delete removes it.
		if err := nss.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, err
		}
		return false, nil
	})
}

// applyPolicies creates policies and bindings, each first as a server-side dry run.
func (c *cluster) applyPolicies(ctx context.Context, ps []*emit.Policy) error {
	var objs []any
	for _, p := range ps {
		objs = append(objs, p.Policy, p.Binding)
	}
	return c.applyObjects(ctx, objs)
}

// applyObjects creates MutatingAdmissionPolicy and binding objects in the API version the server
// serves, each first as a server-side dry run.
func (c *cluster) applyObjects(ctx context.Context, objs []any) error {
	for _, obj := range objs {
		m, err := emit.Versioned(obj, c.mapAPI)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		gvr := c.policy
		if u.GetKind() == "MutatingAdmissionPolicyBinding" {
			gvr = c.binding
		}
		for _, dry := range []bool{true, false} {
			if _, err := c.create(ctx, gvr, u, dry); err != nil {
				what := "creating"
				if dry {
					what = "dry-run creating"
				}
				return fmt.Errorf("the API server rejects %s %s: %s %v", u.GetKind(), u.GetName(), what, err)
			}
		}
	}
	return nil
}

// sentinel is a policy that marks the probe object of one activation with its token.
func sentinel(token string) *emit.Policy {
	fail := admissionregistrationv1.Fail
	never := admissionregistrationv1.NeverReinvocationPolicy
	name := sentinelPrefix + token
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{labelE2E: "true", labelSentinel: "true"}}
	return &emit.Policy{
		Policy: &admissionregistrationv1.MutatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
			ObjectMeta: meta,
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: probeNamespace, labelSync: token}},
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"resourcequotas"}},
					}}},
				},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "probe", Expression: fmt.Sprintf("object.metadata.name == %q", probeName(token))}},
				Mutations: []admissionregistrationv1.Mutation{{
					PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
						Expression: fmt.Sprintf("Object{metadata: Object.metadata{annotations: {%q: %q}}}", probeAnnotation, token),
					},
				}},
				FailurePolicy:      &fail,
				ReinvocationPolicy: never,
			},
		},
		Binding: &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
			ObjectMeta: meta,
			Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
		},
	}
}

func probeName(token string) string { return "mapc-e2e-probe-" + token }

func newToken() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// probe dry-run creates the probe ResourceQuota of token and says whether the sentinel marked
// it. A ResourceQuota, a kind no case's policy matches: a policy of a case that fails on
// the probe (a Kyverno rule whose variable has no value, under failurePolicy Fail) denies it.
func (c *cluster) probe(ctx context.Context, token string) (bool, error) {
	rq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ResourceQuota",
		"metadata": map[string]any{"name": probeName(token), "namespace": probeNamespace},
	}}
	out, err := c.create(ctx, corev1.SchemeGroupVersion.WithResource("resourcequotas"), rq, true)
	if err != nil {
		return false, err
	}
	return out.GetAnnotations()[probeAnnotation] == token, nil
}

// bind creates the policies (dry run first) and waits until the API server runs them.
func (c *cluster) bind(ctx context.Context, ps []*emit.Policy) (time.Duration, error) {
	start := time.Now()
	if err := c.applyPolicies(ctx, ps); err != nil {
		return 0, err
	}
	if err := c.sync(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// unbind deletes every policy and binding that mapc made and waits until the API server no
// longer runs them.
func (c *cluster) unbind(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: emit.LabelManagedBy + "=" + emit.ManagedByValue}
	some := false
	for _, gvr := range []schema.GroupVersionResource{c.binding, c.policy} {
		l, err := c.dyn.Resource(gvr).List(ctx, sel)
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			continue
		}
		some = true
		if err := c.dyn.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			return err
		}
	}
	if !some {
		return nil // nothing was bound since the last sync
	}
	return c.sync(ctx)
}

// sync waits until the API server's admission sees the policies, the bindings and the
// namespaces as they are now. The API server rebuilds its set of policies from its informers'
// caches (on a 1 s timer) and matches namespaceSelectors against its namespace informer's cache;
// each informer sees the objects in the order they were written, and a namespace deleted and
// created again with other labels (a case after another, a namespace's labels set by a case) is
// seen late like any other write. So sync labels the probe namespace with a new token, replaces
// the sentinel policy and binding by new ones that mark a new probe object in namespaces with
// that label, and dry-run creates that probe object until it comes back marked: by then every
// earlier write to policies, bindings and namespaces has been seen too. The sentinel matches
// nothing but its probe object. Its policy and binding are named with the token: were the binding
// of the sentinel before still in the API server's binding cache (whose informer had then seen
// neither its deletion nor the bindings written before it), it would bind a new sentinel policy
// of the same name, which would mark the probe while bindings of the case are still unseen.
func (c *cluster) sync(ctx context.Context) error {
	old := metav1.ListOptions{LabelSelector: labelSentinel + "=true"}
	for _, gvr := range []schema.GroupVersionResource{c.binding, c.policy} {
		if err := c.dyn.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, old); err != nil {
			return err
		}
	}
	token := newToken()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, labelSync, token)
	if _, err := c.cs.CoreV1().Namespaces().Patch(ctx, probeNamespace, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling namespace %s: %v", probeNamespace, err)
	}
	if err := c.applyPolicies(ctx, []*emit.Policy{sentinel(token)}); err != nil {
		return err
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, activationTimeout, true, func(ctx context.Context) (bool, error) {
		ok, err := c.probe(ctx, token)
		last = err
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not pick up the policy changes in %v (last probe error: %v)", activationTimeout, last)
	}
	return nil
}

// errorText is an API error's message, for comparing rejections.
func errorText(err error) string {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return se.ErrStatus.Message
	}
	return err.Error()
}

// isInvalid says whether err is the API server refusing the object itself (validation,
// forbidden field changes), as opposed to a failure of the test's own requests.
func isInvalid(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}
