package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/suite"
)

const (
	paramsDir = "../examples/params"
	// paramsNS holds the param objects; noParamsNS has none.
	paramsNS   = "mapc-e2e-params"
	noParamsNS = "mapc-e2e-no-params"
	// paramsCaseLabel on a Pod names the binding that selects it, so that each binding sees only
	// its own Pods.
	paramsCaseLabel = "e2e.mapc.dev/params"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// paramsCase is one Pod created (dry run) while the parameterised policies are bound.
type paramsCase struct {
	binding, namespace string
	why                string
}

// TestParams binds parameterised policies on the API server: the examples of examples/params (a
// Sidecar custom resource param by name, ConfigMap params by selector, parameterNotFoundAction
// Allow) and a ConfigMap param by name with parameterNotFoundAction Deny, in the request's
// namespace or in a given one. Each Pod's stored object or rejection is compared with what the
// in-process evaluator (mapc eval) gives with the same param objects, as the API server stores
// that result.
func TestParams(t *testing.T) {
	c := connect(t)
	ctx := context.Background()

	crds := readObjects(t, paramsDir+"/sidecar/crd.yaml")
	var params []*unstructured.Unstructured
	for _, p := range readObjects(t, paramsDir+"/sidecar/sidecar.yaml", paramsDir+"/configmap/configmaps.yaml") {
		p.SetNamespace(paramsNS)
		params = append(params, p)
	}
	sets := paramsPolicySets(t, c)
	cases := []paramsCase{
		{"sidecar-binding.example.com", paramsNS, "a custom resource param by name: the Pod gets the sidecar"},
		{"sidecar-binding.example.com", noParamsNS, "no Sidecar, Allow: the Pod is left alone"},
		{"pod-labels.example.com", paramsNS, "ConfigMaps by selector: one evaluation each"},
		{"pod-labels.example.com", noParamsNS, "no ConfigMap selected, Allow: the Pod is left alone"},
		{"team-deny", paramsNS, "a ConfigMap by name in the request's namespace"},
		{"team-deny", noParamsNS, "no ConfigMap, Deny: the Pod is denied"},
		{"team-in-params-namespace", noParamsNS, "a ConfigMap by name in the binding's namespace"},
	}

	cleanup := func() {
		if err := c.unbind(ctx); err != nil {
			t.Errorf("removing the policies: %v", err)
		}
		for _, p := range params {
			if gvr, _, err := c.resourceFor(p); err == nil {
				if err := c.deleteObject(ctx, gvr, p.GetNamespace(), p.GetName()); err != nil {
					t.Errorf("deleting %s: %v", caseName(p), err)
				}
			}
		}
		for _, ns := range []string{paramsNS, noParamsNS} {
			if err := c.deleteNamespace(ctx, ns); err != nil {
				t.Errorf("deleting namespace %s: %v", ns, err)
			}
		}
		for _, crd := range crds {
			if err := c.deleteObject(ctx, crdGVR, "", crd.GetName()); err != nil {
				t.Errorf("deleting %s: %v", caseName(crd), err)
			}
		}
	}
	cleanup() // leftovers of an interrupted run
	defer cleanup()

	// The CRD, the namespaces and the params, with no policy bound.
	for _, crd := range crds {
		if _, err := c.create(ctx, crdGVR, crd, false); err != nil {
			t.Fatalf("creating %s: %v", caseName(crd), err)
		}
	}
	if err := c.waitServed(ctx, params); err != nil {
		t.Fatal(err)
	}
	var nss []*corev1.Namespace
	for _, name := range []string{paramsNS, noParamsNS} {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
		if _, err := c.create(ctx, nsGVR, ns, false); err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}})
	}
	for _, p := range params {
		gvr, _, err := c.resourceFor(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.create(ctx, gvr, p, false); err != nil {
			t.Fatalf("creating param %s: %v", caseName(p), err)
		}
	}

	// What the evaluator gives, as the API server would store it (dry run, no policy bound).
	crdDocs := make([]*source.Document, len(crds))
	for i, o := range crds {
		crdDocs[i] = &source.Document{Object: o}
	}
	typedCRDs, err := suite.CRDs(crdDocs)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := admission.New(admission.Options{Namespaces: nss, CRDs: typedCRDs, Params: params})
	if err != nil {
		t.Fatalf("in-process evaluator: %v", err)
	}
	defer ev.Close()
	podGVR := corev1.SchemeGroupVersion.WithResource("pods")
	pods := make([]*unstructured.Unstructured, len(cases))
	outcomes := make([]outcome, len(cases))
	for i, pc := range cases {
		pods[i] = paramsPod(pc)
		presented, err := c.create(ctx, podGVR, pods[i], true)
		if err != nil {
			t.Fatalf("%s: dry-run create with no policy bound: %v", caseName(pods[i]), err)
		}
		o := outcome{engine: engineEvaluator}
		o.raw, o.denied = ev.Admit(ctx, sets, admission.Request{Object: stripServerFields(presented)})
		if o.denied == nil {
			o.server, o.serverErr = c.create(ctx, podGVR, stripServerFields(o.raw), true)
			if o.serverErr != nil && !isInvalid(o.serverErr) {
				t.Errorf("%s: dry-run create of the evaluator's result: %v", caseName(pods[i]), o.serverErr)
			}
		}
		outcomes[i] = o
	}

	// The policies, then the Pods.
	start := time.Now()
	if err := c.applySets(ctx, sets); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d parameterised policies active after %v", len(sets), time.Since(start).Round(10*time.Millisecond))
	for i, pc := range cases {
		got, err := c.createParamsPod(ctx, podGVR, pods[i])
		what := fmt.Sprintf("%s (%s, binding %s)", caseName(pods[i]), pc.why, pc.binding)
		msg := verdict(outcomes[i], result{obj: got, err: err})
		if msg == "" && err != nil && outcomes[i].denied != nil && errorText(err) != errorText(outcomes[i].denied) {
			msg = fmt.Sprintf("both deny, differently:\n  API server: %s\n  %s: %s", errorText(err), engineEvaluator, errorText(outcomes[i].denied))
		}
		if msg != "" {
			checksFailed.Add(1)
			t.Errorf("%s: the API server and %s differ: %s", what, engineEvaluator, msg)
			continue
		}
		checksPassed.Add(1)
		t.Logf("%s: as the evaluator says", what)
	}
}

// paramsPolicySets reads the example policies, binds each binding to the Pods labelled with its
// name, and adds a policy taking a label from the ConfigMap "team" with two bindings:
// parameterNotFoundAction Deny in the request's namespace, and in paramsNS.
func paramsPolicySets(t *testing.T, c *cluster) []admission.PolicySet {
	t.Helper()
	docs := readMutators(t, paramsDir+"/sidecar/policy.yaml", paramsDir+"/configmap/policy.yaml")
	ps := suite.ReadPolicies(docs, c.version)
	if len(ps.Problems) > 0 {
		t.Fatalf("the example policies: %v", ps.Problems)
	}
	deny := admissionregistrationv1.DenyAction
	team := admission.PolicySet{Policy: ps.Sets[0].Policy.DeepCopy()}
	team.Policy.Name = "team.e2e.mapc.dev"
	team.Policy.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
	team.Policy.Spec.MatchConditions = nil
	team.Policy.Spec.ReinvocationPolicy = admissionregistrationv1.NeverReinvocationPolicy
	team.Policy.Spec.Mutations = []admissionregistrationv1.Mutation{{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{metadata: Object.metadata{labels: {"team": params.data.team}}}`},
	}}
	for _, b := range []struct{ name, namespace string }{{"team-deny", ""}, {"team-in-params-namespace", paramsNS}} {
		team.Bindings = append(team.Bindings, &admissionregistrationv1.MutatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: b.name},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
				PolicyName: team.Policy.Name,
				ParamRef:   &admissionregistrationv1.ParamRef{Name: "team", Namespace: b.namespace, ParameterNotFoundAction: &deny},
			},
		})
	}
	sets := append(ps.Sets, team)
	for i := range sets {
		sets[i].Policy = sets[i].Policy.DeepCopy()
		sets[i].Policy.Labels = map[string]string{emit.LabelManagedBy: emit.ManagedByValue}
		for j, b := range sets[i].Bindings {
			b = b.DeepCopy()
			b.Labels = map[string]string{emit.LabelManagedBy: emit.ManagedByValue}
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{paramsCaseLabel: b.Name}},
			}
			admission.DefaultBinding(b)
			sets[i].Bindings[j] = b
		}
	}
	return sets
}

func paramsPod(pc paramsCase) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name":      strings.ReplaceAll(pc.binding, ".", "-"),
			"namespace": pc.namespace,
			"labels":    map[string]any{paramsCaseLabel: pc.binding},
		},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}},
	}}
}

// applySets creates policies with any number of bindings (dry run first), in the API version the
// server serves.
func (c *cluster) applySets(ctx context.Context, sets []admission.PolicySet) error {
	var objs []any
	for _, s := range sets {
		objs = append(objs, s.Policy)
		for _, b := range s.Bindings {
			objs = append(objs, b)
		}
	}
	return c.applyObjects(ctx, objs)
}

// createParamsPod dry-run creates a Pod, retrying while the API server's param informer has not
// listed the params yet (it waits a second per request, then fails it as not yet synced): that
// lag is not what the test compares.
func (c *cluster) createParamsPod(ctx context.Context, gvr schema.GroupVersionResource, pod *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	deadline := time.Now().Add(activationTimeout)
	for {
		got, err := c.create(ctx, gvr, pod, true)
		if err == nil || !strings.Contains(err.Error(), "not yet synced to use for admission") || time.Now().After(deadline) {
			return got, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitServed waits until the API server serves the kinds of objs (a CRD just created must be
// established and discovered first).
func (c *cluster) waitServed(ctx context.Context, objs []*unstructured.Unstructured) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, activationTimeout, true, func(ctx context.Context) (bool, error) {
		if r, ok := c.mapper.(meta.ResettableRESTMapper); ok {
			r.Reset()
		}
		for _, o := range objs {
			gvr, _, err := c.resourceFor(o)
			if err != nil {
				last = err
				return false, nil
			}
			if _, err := c.client(gvr, o.GetNamespace()).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				last = err
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the API server does not serve the params' kinds after %v: %v", activationTimeout, last)
	}
	return nil
}
