package admission

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/internal/quiet"
)

func TestMain(m *testing.M) {
	quiet.Klog() // the API server code logs through klog; keep test output readable
	os.Exit(m.Run())
}

// ---- helpers to write MAPs by hand ----

type policyOpt func(*admissionregistrationv1.MutatingAdmissionPolicy)

func withFailurePolicy(fp admissionregistrationv1.FailurePolicyType) policyOpt {
	return func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.FailurePolicy = &fp }
}

func withReinvocation(r admissionregistrationv1.ReinvocationPolicyType) policyOpt {
	return func(p *admissionregistrationv1.MutatingAdmissionPolicy) { p.Spec.ReinvocationPolicy = r }
}

func withMatchConditions(exprs ...string) policyOpt {
	return func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
		for i, e := range exprs {
			p.Spec.MatchConditions = append(p.Spec.MatchConditions, admissionregistrationv1.MatchCondition{Name: fmt.Sprintf("c%d", i), Expression: e})
		}
	}
}

func withNamespaceSelector(sel *metav1.LabelSelector) policyOpt {
	return func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
		p.Spec.MatchConstraints.NamespaceSelector = sel
	}
}

func withResources(group, version, resource string) policyOpt {
	return func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
		p.Spec.MatchConstraints.ResourceRules[0].Rule.APIGroups = []string{group}
		p.Spec.MatchConstraints.ResourceRules[0].Rule.APIVersions = []string{version}
		p.Spec.MatchConstraints.ResourceRules[0].Rule.Resources = []string{resource}
	}
}

func applyConfig(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{
		PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
		ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: expr},
	}
}

func jsonPatch(expr string) admissionregistrationv1.Mutation {
	return admissionregistrationv1.Mutation{
		PatchType: admissionregistrationv1.PatchTypeJSONPatch,
		JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr},
	}
}

// policy returns a MAP matching CREATE and UPDATE of pods, with one binding
// of the same name.
func policy(name string, m admissionregistrationv1.Mutation, opts ...policyOpt) PolicySet {
	fail := admissionregistrationv1.Fail
	p := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      &fail,
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups:   []string{""},
							APIVersions: []string{"v1"},
							Resources:   []string{"pods"},
						},
					},
				}},
			},
			Mutations: []admissionregistrationv1.Mutation{m},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return PolicySet{Policy: p, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding(name, nil)}}
}

func binding(policyName string, objectSelector *metav1.LabelSelector) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: policyName},
	}
	if objectSelector != nil {
		b.Spec.MatchResources = &admissionregistrationv1.MatchResources{ObjectSelector: objectSelector}
	}
	return b
}

func pod(namespace string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]interface{}{"name": "p", "namespace": namespace},
		"spec": map[string]interface{}{
			"containers": []interface{}{map[string]interface{}{"name": "c", "image": "nginx"}},
		},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

func podWithArgs(a ...interface{}) *unstructured.Unstructured {
	u := pod("prod", nil)
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "containers")
	cs[0].(map[string]interface{})["args"] = a
	_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "containers")
	return u
}

var testNamespaces = []*corev1.Namespace{
	{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
	{ObjectMeta: metav1.ObjectMeta{Name: "dev", Labels: map[string]string{"env": "dev"}}},
}

var (
	evalOnce   sync.Once
	evalShared *Evaluator
	evalErr    error
)

func evaluator(t testing.TB) *Evaluator {
	t.Helper()
	evalOnce.Do(func() { evalShared, evalErr = New(Options{Namespaces: testNamespaces}) })
	if evalErr != nil {
		t.Fatal(evalErr)
	}
	return evalShared
}

func labels(u *unstructured.Unstructured) map[string]string {
	if u == nil {
		return nil
	}
	return u.GetLabels()
}

func args(t *testing.T, u *unstructured.Unstructured) []interface{} {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("no containers in %v", u.Object)
	}
	a, _, _ := unstructured.NestedSlice(cs[0].(map[string]interface{}), "args")
	return a
}

// ---- policies used by the tests ----

var (
	setLabelTeam = policy("set-team", applyConfig(`Object{metadata: Object.metadata{labels: {"team": "payments"}}}`))
	addArgX      = policy("add-arg", jsonPatch(`[JSONPatch{op: "add", path: "/spec/containers/0/args/-", value: "x"}]`))
	addArgsArray = policy("add-args", jsonPatch(`[JSONPatch{op: "add", path: "/spec/containers/0/args", value: ["init"]}]`))

	// Two policies whose combined result depends on the order: each one
	// writes the label "winner" and "seen" records what the other left.
	writeA = policy("write-a", applyConfig(
		`Object{metadata: Object.metadata{labels: {"winner": "a", "a-saw": has(object.metadata.labels) && "winner" in object.metadata.labels ? string(object.metadata.labels["winner"]) : "none"}}}`))
	writeB = policy("write-b", applyConfig(
		`Object{metadata: Object.metadata{labels: {"winner": "b", "b-saw": has(object.metadata.labels) && "winner" in object.metadata.labels ? string(object.metadata.labels["winner"]) : "none"}}}`))
)

func TestAdmit(t *testing.T) {
	e := evaluator(t)
	ctx := context.Background()

	prodOnly := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	nsPolicy := policy("ns-team", applyConfig(`Object{metadata: Object.metadata{labels: {"ns-policy": "yes"}}}`), withNamespaceSelector(prodOnly))
	skipIfOptOut := policy("skip-opt-out", applyConfig(`Object{metadata: Object.metadata{labels: {"mc": "applied"}}}`),
		withMatchConditions(`!has(object.metadata.labels) || !("opt-out" in object.metadata.labels)`))
	selected := policy("selected", applyConfig(`Object{metadata: Object.metadata{labels: {"selected": "yes"}}}`))
	selected.Bindings = []*admissionregistrationv1.MutatingAdmissionPolicyBinding{
		binding("selected", &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "true"}}),
	}
	noBinding := policy("no-binding", applyConfig(`Object{metadata: Object.metadata{labels: {"unbound": "yes"}}}`))
	noBinding.Bindings = nil
	onlyDeployments := policy("only-deployments", applyConfig(`Object{metadata: Object.metadata{labels: {"deploy": "yes"}}}`),
		withResources("apps", "v1", "deployments"))
	usesNamespaceObject := policy("ns-object", applyConfig(
		`Object{metadata: Object.metadata{labels: {"ns-env": namespaceObject.metadata.labels["env"]}}}`))
	usesRequest := policy("request", applyConfig(
		`Object{metadata: Object.metadata{labels: {"op": request.operation, "user": request.userInfo.username, "res": request.resource.resource}}}`))

	tests := []struct {
		name       string
		sets       []PolicySet
		req        Request
		wantLabels map[string]string // labels expected on the result (exactly)
		wantArgs   []interface{}     // if non-nil, args of container 0
		wantErr    string
	}{
		{
			name:       "apply configuration sets a label",
			sets:       []PolicySet{setLabelTeam},
			req:        Request{Object: pod("prod", nil)},
			wantLabels: map[string]string{"team": "payments"},
		},
		{
			name:       "apply configuration keeps other labels",
			sets:       []PolicySet{setLabelTeam},
			req:        Request{Object: pod("prod", map[string]string{"app": "web"})},
			wantLabels: map[string]string{"app": "web", "team": "payments"},
		},
		{
			name:     "json patch appends a container arg",
			sets:     []PolicySet{addArgsArray, addArgX},
			req:      Request{Object: pod("prod", nil)},
			wantArgs: []interface{}{"init", "x"},
		},
		{
			name:     "json patch appends to existing args",
			sets:     []PolicySet{addArgX},
			req:      Request{Object: podWithArgs("a")},
			wantArgs: []interface{}{"a", "x"},
		},
		{
			name:    "json patch fails without args",
			sets:    []PolicySet{addArgX},
			req:     Request{Object: pod("prod", nil)},
			wantErr: "missing value",
		},
		{
			name:       "namespaceSelector matches labelled namespace",
			sets:       []PolicySet{nsPolicy},
			req:        Request{Object: pod("prod", nil)},
			wantLabels: map[string]string{"ns-policy": "yes"},
		},
		{
			name:       "namespaceSelector skips other namespace",
			sets:       []PolicySet{nsPolicy},
			req:        Request{Object: pod("dev", nil)},
			wantLabels: nil,
		},
		{
			name:    "namespaceSelector on a namespace not given is refused",
			sets:    []PolicySet{nsPolicy},
			req:     Request{Object: pod("elsewhere", nil)},
			wantErr: "namespace elsewhere is not given",
		},
		{
			name:       "matchConditions true applies",
			sets:       []PolicySet{skipIfOptOut},
			req:        Request{Object: pod("dev", map[string]string{"app": "web"})},
			wantLabels: map[string]string{"app": "web", "mc": "applied"},
		},
		{
			name:       "matchConditions false skips",
			sets:       []PolicySet{skipIfOptOut},
			req:        Request{Object: pod("dev", map[string]string{"opt-out": "1"})},
			wantLabels: map[string]string{"opt-out": "1"},
		},
		{
			name:       "binding objectSelector matches",
			sets:       []PolicySet{selected},
			req:        Request{Object: pod("dev", map[string]string{"inject": "true"})},
			wantLabels: map[string]string{"inject": "true", "selected": "yes"},
		},
		{
			name:       "binding objectSelector does not match",
			sets:       []PolicySet{selected},
			req:        Request{Object: pod("dev", map[string]string{"inject": "false"})},
			wantLabels: map[string]string{"inject": "false"},
		},
		{
			name:       "policy without binding does nothing",
			sets:       []PolicySet{noBinding},
			req:        Request{Object: pod("dev", nil)},
			wantLabels: nil,
		},
		{
			name:       "resource rules do not match pods",
			sets:       []PolicySet{onlyDeployments},
			req:        Request{Object: pod("dev", nil)},
			wantLabels: nil,
		},
		{
			name:       "namespaceObject is the namespace from Options",
			sets:       []PolicySet{usesNamespaceObject},
			req:        Request{Object: pod("prod", nil)},
			wantLabels: map[string]string{"ns-env": "prod"},
		},
		{
			name:       "request variables",
			sets:       []PolicySet{usesRequest},
			req:        Request{Object: pod("dev", nil), UserName: "alice"},
			wantLabels: map[string]string{"op": "CREATE", "user": "alice", "res": "pods"},
		},
		{
			name: "update operation",
			sets: []PolicySet{usesRequest},
			req: Request{Object: pod("dev", nil), OldObject: pod("dev", nil),
				Operation: admissionv1.Update},
			wantLabels: map[string]string{"op": "UPDATE", "user": "mapc", "res": "pods"},
		},
		{
			name:       "no policies",
			sets:       nil,
			req:        Request{Object: pod("dev", map[string]string{"a": "b"})},
			wantLabels: map[string]string{"a": "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.req.Object.DeepCopy()
			got, err := e.Admit(ctx, tc.sets, tc.req)
			if !reflect.DeepEqual(in, tc.req.Object) {
				t.Errorf("input object was modified")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Admit error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if gl := labels(got); !(len(gl) == 0 && len(tc.wantLabels) == 0) && !reflect.DeepEqual(gl, tc.wantLabels) {
				t.Errorf("labels = %v, want %v", gl, tc.wantLabels)
			}
			if tc.wantArgs != nil {
				if ga := args(t, got); !reflect.DeepEqual(ga, tc.wantArgs) {
					t.Errorf("args = %v, want %v", ga, tc.wantArgs)
				}
			}
			if got.GetKind() != "Pod" || got.GetAPIVersion() != "v1" {
				t.Errorf("result kind = %s %s", got.GetAPIVersion(), got.GetKind())
			}
		})
	}
}

// TestAdmitOrder proves the order of the policy sets is the order in which
// the policies run: the two orders give different objects.
func TestAdmitOrder(t *testing.T) {
	e := evaluator(t)
	tests := []struct {
		name string
		sets []PolicySet
		want map[string]string
	}{
		{"a then b", []PolicySet{writeA, writeB}, map[string]string{"winner": "b", "a-saw": "none", "b-saw": "a"}},
		{"b then a", []PolicySet{writeB, writeA}, map[string]string{"winner": "a", "b-saw": "none", "a-saw": "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Repeat: the API server would order policies in one plugin by map
			// iteration; here the order must be stable.
			for i := 0; i < 5; i++ {
				got, err := e.Admit(context.Background(), tc.sets, Request{Object: pod("dev", nil)})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.GetLabels(), tc.want) {
					t.Fatalf("run %d: labels = %v, want %v", i, got.GetLabels(), tc.want)
				}
			}
		})
	}
}

// TestReinvocation checks the real reinvocation bookkeeping: an IfNeeded
// policy runs again (once) after a later policy changed the object; a Never
// policy does not.
func TestReinvocation(t *testing.T) {
	e := evaluator(t)
	setB := policy("set-b", applyConfig(`Object{metadata: Object.metadata{labels: {"b": "x"}}}`))
	// copyB does nothing unless label b is present, then copies it.
	copyB := func(r admissionregistrationv1.ReinvocationPolicyType) PolicySet {
		return policy("copy-b-"+strings.ToLower(string(r)), jsonPatch(
			`has(object.metadata.labels) && "b" in object.metadata.labels ? [JSONPatch{op: "add", path: "/metadata/labels/saw-b", value: object.metadata.labels["b"]}] : []`),
			withReinvocation(r))
	}
	// count increments label "runs" every time it runs.
	count := func(r admissionregistrationv1.ReinvocationPolicyType) PolicySet {
		return policy("count-"+strings.ToLower(string(r)), applyConfig(
			`Object{metadata: Object.metadata{labels: {"runs": has(object.metadata.labels) && "runs" in object.metadata.labels ? string(int(object.metadata.labels["runs"]) + 1) : "1"}}}`),
			withReinvocation(r))
	}
	ifNeeded, never := admissionregistrationv1.IfNeededReinvocationPolicy, admissionregistrationv1.NeverReinvocationPolicy

	tests := []struct {
		name string
		sets []PolicySet
		want map[string]string
	}{
		{"IfNeeded re-run after later change", []PolicySet{copyB(ifNeeded), setB}, map[string]string{"b": "x", "saw-b": "x"}},
		{"Never not re-run", []PolicySet{copyB(never), setB}, map[string]string{"b": "x"}},
		{"IfNeeded sees change in first round", []PolicySet{setB, copyB(never)}, map[string]string{"b": "x", "saw-b": "x"}},
		{"IfNeeded runs exactly twice", []PolicySet{count(ifNeeded), setB}, map[string]string{"b": "x", "runs": "2"}},
		{"Never runs once", []PolicySet{count(never), setB}, map[string]string{"b": "x", "runs": "1"}},
		// As in the API server, a mutating IfNeeded policy marks the object
		// dirty itself and is re-run even when nothing after it changes it.
		{"IfNeeded alone re-runs after its own change", []PolicySet{count(ifNeeded)}, map[string]string{"runs": "2"}},
		// A non-mutating IfNeeded policy with no later change is not re-run.
		{"IfNeeded without change not re-run", []PolicySet{copyB(ifNeeded), count(never)}, map[string]string{"runs": "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Admit(context.Background(), tc.sets, Request{Object: pod("dev", nil)})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.GetLabels(), tc.want) {
				t.Errorf("labels = %v, want %v", got.GetLabels(), tc.want)
			}
		})
	}
}

// TestFailurePolicy checks that an expression error fails the request with
// failurePolicy Fail and leaves the object unchanged with Ignore.
func TestFailurePolicy(t *testing.T) {
	e := evaluator(t)
	badExpr := `Object{metadata: Object.metadata{labels: {"x": object.metadata.labels["missing"]}}}` // no such key: runtime error
	compileErr := `Object{metadata: Object.metadata{labels: {"x": nosuchvariable}}}`
	badMatch := `object.metadata.labels["missing"] == "x"`
	tests := []struct {
		name    string
		set     PolicySet
		wantErr string
	}{
		{"runtime error Fail", policy("bad-fail", applyConfig(badExpr), withFailurePolicy(admissionregistrationv1.Fail)), "no such key"},
		{"runtime error Ignore", policy("bad-ignore", applyConfig(badExpr), withFailurePolicy(admissionregistrationv1.Ignore)), ""},
		{"compile error Fail", policy("cbad-fail", applyConfig(compileErr), withFailurePolicy(admissionregistrationv1.Fail)), "nosuchvariable"},
		{"compile error Ignore", policy("cbad-ignore", applyConfig(compileErr), withFailurePolicy(admissionregistrationv1.Ignore)), ""},
		{"match condition error Fail", policy("mbad-fail", applyConfig(`Object{}`), withMatchConditions(badMatch), withFailurePolicy(admissionregistrationv1.Fail)), "no such key"},
		{"match condition error Ignore", policy("mbad-ignore", applyConfig(`Object{}`), withMatchConditions(badMatch), withFailurePolicy(admissionregistrationv1.Ignore)), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := pod("dev", map[string]string{"app": "web"})
			got, err := e.Admit(context.Background(), []PolicySet{tc.set, setLabelTeam}, Request{Object: in})
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Admit succeeded with %v, want error containing %q", got.GetLabels(), tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			// The failing policy is ignored, the next one still runs.
			want := map[string]string{"app": "web", "team": "payments"}
			if !reflect.DeepEqual(got.GetLabels(), want) {
				t.Errorf("labels = %v, want %v", got.GetLabels(), want)
			}
		})
	}
	t.Run("Ignore alone leaves object unchanged", func(t *testing.T) {
		in := pod("dev", map[string]string{"app": "web"})
		before, err := e.Admit(context.Background(), nil, Request{Object: in})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Admit(context.Background(), []PolicySet{policy("bad-ignore", applyConfig(badExpr), withFailurePolicy(admissionregistrationv1.Ignore))}, Request{Object: in})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(before, got) {
			t.Errorf("object changed:\n%v\n%v", before.Object, got.Object)
		}
	})
}

func TestCustomResource(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"size": {Type: "string"},
							"ports": {
								Type:         "array",
								XListType:    ptr("map"),
								XListMapKeys: []string{"name"},
								Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
									Type:     "object",
									Required: []string{"name"},
									Properties: map[string]apiextensionsv1.JSONSchemaProps{
										"name": {Type: "string"},
										"port": {Type: "integer"},
									},
								}},
							},
						}},
					},
				}},
			}},
		},
	}
	e, err := New(Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	widget := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]interface{}{"name": "w", "namespace": "dev"},
			"spec": map[string]interface{}{"ports": []interface{}{
				map[string]interface{}{"name": "http", "port": int64(80)},
			}},
		}}
	}
	// listType=map: applying a list entry with a new key merges (with the
	// deduced schema the list would be replaced).
	addPort := policy("add-port", applyConfig(
		`Object{spec: Object.spec{size: "big", ports: [Object.spec.ports{name: "metrics", port: 9090}]}}`),
		withResources("example.com", "v1", "widgets"))
	got, err := e.Admit(context.Background(), []PolicySet{addPort}, Request{Object: widget()})
	if err != nil {
		t.Fatal(err)
	}
	ports, _, _ := unstructured.NestedSlice(got.Object, "spec", "ports")
	size, _, _ := unstructured.NestedString(got.Object, "spec", "size")
	if len(ports) != 2 || size != "big" {
		t.Errorf("spec = %v, want two ports and size big", got.Object["spec"])
	}

	// A kind without CRD has no schema: the API server fails the mutation.
	gadget := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]interface{}{"name": "g", "namespace": "dev"},
	}}
	addLabel := policy("gadget-label", applyConfig(`Object{metadata: Object.metadata{labels: {"a": "b"}}}`),
		withResources("example.com", "v1", "gadgets"))
	if _, err := e.Admit(context.Background(), []PolicySet{addLabel}, Request{Object: gadget}); err == nil {
		t.Errorf("mutating a kind without schema succeeded")
	}
}

func ptr[T any](v T) *T { return &v }

func TestCachedAdmitIsFast(t *testing.T) {
	e := evaluator(t)
	sets := []PolicySet{setLabelTeam, addArgsArray, addArgX, writeA, writeB}
	if _, err := e.Admit(context.Background(), sets, Request{Object: pod("dev", nil)}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := e.Admit(context.Background(), sets, Request{Object: pod("dev", nil)}); err != nil {
			t.Fatal(err)
		}
	}
	per := time.Since(start) / n
	t.Logf("%v per Admit of %d policies (warm)", per, len(sets))
	if per > 50*time.Millisecond {
		t.Errorf("warm Admit takes %v", per)
	}
}

func BenchmarkAdmitWarm(b *testing.B) {
	e := evaluator(b)
	sets := []PolicySet{setLabelTeam, addArgsArray, addArgX}
	ctx := context.Background()
	if _, err := e.Admit(ctx, sets, Request{Object: pod("dev", nil)}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Admit(ctx, sets, Request{Object: pod("dev", nil)}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdmitNoPolicies(b *testing.B) {
	e := evaluator(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if _, err := e.Admit(ctx, nil, Request{Object: pod("dev", nil)}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrentAdmit admits from several goroutines in both orders, with
// new plugin instances being built at the same time.
func TestConcurrentAdmit(t *testing.T) {
	e, err := New(Options{Namespaces: testNamespaces})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	orders := []struct {
		sets   []PolicySet
		winner string
	}{
		{[]PolicySet{writeA, writeB}, "b"},
		{[]PolicySet{writeB, writeA}, "a"},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				o := orders[(g+i)%2]
				got, err := e.Admit(context.Background(), o.sets, Request{Object: pod("dev", nil)})
				if err != nil {
					errs <- err
					return
				}
				if w := got.GetLabels()["winner"]; w != o.winner {
					errs <- fmt.Errorf("winner = %q, want %q", w, o.winner)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestAdmitErrors(t *testing.T) {
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	noName := setLabelTeam
	noName.Policy = noName.Policy.DeepCopy()
	noName.Policy.Name = ""
	tests := []struct {
		name string
		sets []PolicySet
		req  Request
	}{
		{"no object", nil, Request{}},
		{"no kind", nil, Request{Object: &unstructured.Unstructured{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "x"}}}}},
		{"nil policy", []PolicySet{{}}, Request{Object: pod("dev", nil)}},
		{"policy without name", []PolicySet{noName}, Request{Object: pod("dev", nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.Admit(ctx, tc.sets, tc.req); err == nil {
				t.Errorf("Admit succeeded")
			}
		})
	}
	e.Close()
	e.Close() // idempotent
	if _, err := e.Admit(ctx, []PolicySet{setLabelTeam}, Request{Object: pod("dev", nil)}); err == nil {
		t.Errorf("Admit after Close succeeded")
	}
}

// BenchmarkPatchShapes compares ways of writing the same changes as
// mutations, through the API server's plugin: many JSONPatch operations or
// one with a larger value, values as typed Objects or as plain maps, and an
// ApplyConfiguration. The planner's choices to write each change as its own
// operation, with maps for values, rest on these figures (bench/README.md,
// "Where the cost goes").
func BenchmarkPatchShapes(b *testing.B) {
	ctx := context.Background()
	e := evaluator(b)
	env := func(i int) string { return fmt.Sprintf(`Object.spec.containers.env{name: "E%d", value: "v"}`, i) }
	envMap := func(i int) string { return fmt.Sprintf(`{"name": "E%d", "value": "v"}`, i) }
	repeat := func(n int, f func(int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = f(i)
		}
		return strings.Join(parts, ", ")
	}
	cases := []struct {
		name string
		m    admissionregistrationv1.Mutation
	}{
		{"labels-1-op", jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels", value: {"l0": "v"}}]`)},
		{"labels-100-ops", jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels", value: {"l0": "v"}}, ` +
			repeat(99, func(i int) string {
				return fmt.Sprintf(`JSONPatch{op: "add", path: "/metadata/labels/l%d", value: "v"}`, i+1)
			}) + `]`)},
		{"labels-1-op-100-entries", jsonPatch(`[JSONPatch{op: "add", path: "/metadata/labels", value: {` +
			repeat(100, func(i int) string { return fmt.Sprintf(`"l%d": "v"`, i) }) + `}}]`)},
		{"image-100-ops", jsonPatch(`[` + repeat(100, func(int) string {
			return `JSONPatch{op: "replace", path: "/spec/containers/0/image", value: "x"}`
		}) + `]`)},
		{"env-100-ops", jsonPatch(`[JSONPatch{op: "add", path: "/spec/containers/0/env", value: []}, ` +
			repeat(100, func(i int) string {
				return `JSONPatch{op: "add", path: "/spec/containers/0/env/-", value: ` + env(i) + `}`
			}) + `]`)},
		{"env-1-op-100-entries", jsonPatch(`[JSONPatch{op: "add", path: "/spec/containers/0/env", value: [` + repeat(100, env) + `]}]`)},
		{"env-1-op-100-entries-maps", jsonPatch(`[JSONPatch{op: "add", path: "/spec/containers/0/env", value: [` + repeat(100, envMap) + `]}]`)},
		{"env-100-ops-maps", jsonPatch(`[JSONPatch{op: "add", path: "/spec/containers/0/env", value: []}, ` +
			repeat(100, func(i int) string {
				return `JSONPatch{op: "add", path: "/spec/containers/0/env/-", value: ` + envMap(i) + `}`
			}) + `]`)},
		{"env-apply-configuration-100-entries", applyConfig(`Object{spec: Object.spec{containers: [Object.spec.containers{name: "c", env: [` +
			repeat(100, env) + `]}]}}`)},
	}
	for _, c := range cases {
		sets := []PolicySet{policy("p", c.m)}
		if _, err := e.Admit(ctx, sets, Request{Object: pod("dev", nil)}); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Admit(ctx, sets, Request{Object: pod("dev", nil)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
