package admission

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ---- params used by the tests ----

func configMap(namespace, name string, labels map[string]string, data map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": name},
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	if labels != nil {
		u.SetLabels(labels)
	}
	d := map[string]interface{}{}
	for k, v := range data {
		d[k] = v
	}
	u.Object["data"] = d
	return u
}

func custom(kind, namespace, name string, spec map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "params.example.com/v1", "kind": kind,
		"metadata": map[string]interface{}{"name": name},
		"spec":     spec,
	}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}

// paramCRD is a CRD of group params.example.com with a free-form spec; its plural is not the
// one meta.UnsafeGuessKindToResource would guess, so a param stored under a guessed resource
// would not be found.
func paramCRD(kind, plural string, scope apiextensionsv1.ResourceScope) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".params.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "params.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: ptr(true)},
					},
				}},
			}},
		},
	}
}

var paramCRDs = []*apiextensionsv1.CustomResourceDefinition{
	paramCRD("Tier", "tierz", apiextensionsv1.ClusterScoped),
	paramCRD("Sidecar", "sidecarz", apiextensionsv1.NamespaceScoped),
}

var testParams = []*unstructured.Unstructured{
	configMap("prod", "team", map[string]string{"param": "team"}, map[string]string{"team": "payments"}),
	configMap("prod", "extra", map[string]string{"param": "team"}, map[string]string{"team": "extra"}),
	configMap("dev", "team", nil, map[string]string{"team": "dev-team"}),
	configMap("", "in-default", nil, map[string]string{"team": "default-team"}),
	custom("Tier", "", "gold", map[string]interface{}{"level": "gold"}),
	custom("Sidecar", "prod", "proxy", map[string]interface{}{"image": "mesh/proxy:v1"}),
}

func paramPolicy(name, apiVersion, kind, labels string, ref *admissionregistrationv1.ParamRef, opts ...policyOpt) PolicySet {
	set := policy(name, applyConfig(`Object{metadata: Object.metadata{labels: `+labels+`}}`), opts...)
	set.Policy.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: apiVersion, Kind: kind}
	set.Bindings[0].Spec.ParamRef = ref
	return set
}

func byName(name, namespace string, notFound admissionregistrationv1.ParameterNotFoundActionType) *admissionregistrationv1.ParamRef {
	return &admissionregistrationv1.ParamRef{Name: name, Namespace: namespace, ParameterNotFoundAction: &notFound}
}

func bySelector(labels map[string]string, namespace string, notFound admissionregistrationv1.ParameterNotFoundActionType) *admissionregistrationv1.ParamRef {
	return &admissionregistrationv1.ParamRef{
		Selector:                &metav1.LabelSelector{MatchLabels: labels},
		Namespace:               namespace,
		ParameterNotFoundAction: &notFound,
	}
}

func namespaceObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]interface{}{"name": name},
	}}
}

// TestParams: the param objects given in Options are what the API server's own param code
// (the policy source's informers, CollectParams) resolves paramRefs against. Expected results
// and error messages are the API server's (k8s.io/apiserver generic.CollectParams and
// policySource.ensureParamsForPolicyLocked).
func TestParams(t *testing.T) {
	e, err := New(Options{Namespaces: testNamespaces, CRDs: paramCRDs, Params: testParams})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	const (
		deny  = admissionregistrationv1.DenyAction
		allow = admissionregistrationv1.AllowAction
	)
	teamLabel := `{"team": params.data.team}`
	perParam := `{"team-" + params.metadata.name: params.data.team}`
	cm := func(name string, ref *admissionregistrationv1.ParamRef, opts ...policyOpt) PolicySet {
		return paramPolicy(name, "v1", "ConfigMap", teamLabel, ref, opts...)
	}
	noRef := cm("no-ref", nil)
	defaulted := cm("defaulted-not-found-action", &admissionregistrationv1.ParamRef{Name: "missing"})
	namespaces := cm("namespaces", byName("team", "", deny), withResources("", "v1", "namespaces"))

	tests := []struct {
		name       string
		set        PolicySet
		object     *unstructured.Unstructured
		wantLabels map[string]string
		wantErr    string
	}{
		{
			name:       "name in the request's namespace",
			set:        cm("by-name", byName("team", "", deny)),
			object:     pod("prod", nil),
			wantLabels: map[string]string{"team": "payments"},
		},
		{
			name:       "name in the request's namespace, another namespace",
			set:        cm("by-name", byName("team", "", deny)),
			object:     pod("dev", nil),
			wantLabels: map[string]string{"team": "dev-team"},
		},
		{
			name:       "name in the binding's namespace",
			set:        cm("by-name-in-dev", byName("team", "dev", deny)),
			object:     pod("prod", nil),
			wantLabels: map[string]string{"team": "dev-team"},
		},
		{
			name:       "a namespaced param given without namespace is in default",
			set:        cm("in-default", byName("in-default", "default", deny)),
			object:     pod("prod", nil),
			wantLabels: map[string]string{"team": "default-team"},
		},
		{
			name:       "selector: one evaluation per matching param",
			set:        paramPolicy("selector", "v1", "ConfigMap", perParam, bySelector(map[string]string{"param": "team"}, "", deny)),
			object:     pod("prod", nil),
			wantLabels: map[string]string{"team-team": "payments", "team-extra": "extra"},
		},
		{
			name:       "selector in the binding's namespace",
			set:        paramPolicy("selector-in-dev", "v1", "ConfigMap", perParam, &admissionregistrationv1.ParamRef{Selector: &metav1.LabelSelector{}, Namespace: "dev", ParameterNotFoundAction: ptr(deny)}),
			object:     pod("prod", nil),
			wantLabels: map[string]string{"team-team": "dev-team"},
		},
		{
			name:       "selector matching nothing, Allow: the policy does not run",
			set:        cm("selector-allow", bySelector(map[string]string{"param": "none"}, "", allow)),
			object:     pod("prod", nil),
			wantLabels: nil,
		},
		{
			name:    "selector matching nothing, Deny",
			set:     cm("selector-deny", bySelector(map[string]string{"param": "none"}, "", deny)),
			object:  pod("prod", nil),
			wantErr: "no params found for policy binding with `Deny` parameterNotFoundAction",
		},
		{
			name:       "name not found, Allow: the policy does not run",
			set:        cm("missing-allow", byName("missing", "", allow)),
			object:     pod("prod", nil),
			wantLabels: nil,
		},
		{
			name:    "name not found, Deny",
			set:     cm("missing-deny", byName("missing", "", deny)),
			object:  pod("prod", nil),
			wantErr: "policy 'missing-deny' with binding 'missing-deny' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
		},
		{
			name:    "name not in the request's namespace, Deny",
			set:     cm("extra-deny", byName("extra", "", deny)),
			object:  pod("dev", nil),
			wantErr: "no params found for policy binding with `Deny` parameterNotFoundAction",
		},
		{
			name:       "name not found, Deny, failurePolicy Ignore",
			set:        cm("missing-deny-ignore", byName("missing", "", deny), withFailurePolicy(admissionregistrationv1.Ignore)),
			object:     pod("prod", nil),
			wantLabels: nil,
		},
		{
			// v1 requires parameterNotFoundAction (the create-time checks report it); the
			// API server's param code denies only on an explicit Deny.
			name:       "parameterNotFoundAction left out: not Deny",
			set:        defaulted,
			object:     pod("prod", nil),
			wantLabels: nil,
		},
		{
			name:    "paramKind naming no kind",
			set:     paramPolicy("no-kind", "params.example.com/v1", "Missing", teamLabel, byName("x", "", allow)),
			object:  pod("prod", nil),
			wantErr: "failed to configure policy: failed to find resource referenced by paramKind: 'params.example.com/v1, Kind=Missing'",
		},
		{
			// Not a configuration error: the policy runs once with params null, so reading
			// a field of it fails like any failing expression.
			name:    "binding without paramRef: params is null",
			set:     noRef,
			object:  pod("prod", nil),
			wantErr: "policy 'no-ref' with binding 'no-ref' denied request: expression 'Object{metadata: Object.metadata{labels: {\"team\": params.data.team}}}' resulted in error: no such key: data",
		},
		{
			name:       "binding without paramRef: an expression can test params for null",
			set:        paramPolicy("no-ref-null", "v1", "ConfigMap", `{"team": params == null ? "none" : params.data.team}`, nil),
			object:     pod("prod", nil),
			wantLabels: map[string]string{"team": "none"},
		},
		{
			name:    "namespaced paramKind without namespace for a cluster-scoped request",
			set:     namespaces,
			object:  namespaceObject("prod"),
			wantErr: "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources",
		},
		{
			name:       "custom resource, cluster-scoped, by name",
			set:        paramPolicy("tier", "params.example.com/v1", "Tier", `{"tier": params.spec.level}`, byName("gold", "", deny)),
			object:     pod("dev", nil),
			wantLabels: map[string]string{"tier": "gold"},
		},
		{
			name:       "custom resource, cluster-scoped, by selector",
			set:        paramPolicy("tier-all", "params.example.com/v1", "Tier", `{"tier": params.spec.level}`, bySelector(nil, "", deny)),
			object:     pod("dev", nil),
			wantLabels: map[string]string{"tier": "gold"},
		},
		{
			name:    "custom resource, cluster-scoped, with a namespace in paramRef",
			set:     paramPolicy("tier-ns", "params.example.com/v1", "Tier", `{"tier": params.spec.level}`, byName("gold", "prod", deny)),
			object:  pod("dev", nil),
			wantErr: "paramRef.namespace must not be provided for a cluster-scoped `paramKind`",
		},
		{
			name:       "custom resource, namespaced, in the request's namespace",
			set:        paramPolicy("sidecar", "params.example.com/v1", "Sidecar", `{"proxy": params.spec.image.split(":")[1]}`, byName("proxy", "", deny)),
			object:     pod("prod", nil),
			wantLabels: map[string]string{"proxy": "v1"},
		},
		{
			name:    "custom resource, namespaced, not in the request's namespace",
			set:     paramPolicy("sidecar-dev", "params.example.com/v1", "Sidecar", `{"proxy": "x"}`, byName("proxy", "", deny)),
			object:  pod("dev", nil),
			wantErr: "no params found for policy binding with `Deny` parameterNotFoundAction",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Admit(context.Background(), []PolicySet{tt.set}, Request{Object: tt.object})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(labels(got), tt.wantLabels) {
				t.Errorf("labels = %v, want %v", labels(got), tt.wantLabels)
			}
		})
	}
}

// TestParamsNotGiven: without Options.Params, a param-reading policy finds none (the API server
// with no such object).
func TestParamsNotGiven(t *testing.T) {
	e := evaluator(t)
	set := paramPolicy("nothing-given", "v1", "ConfigMap", `{"team": params.data.team}`, byName("team", "", admissionregistrationv1.DenyAction))
	_, err := e.Admit(context.Background(), []PolicySet{set}, Request{Object: pod("prod", nil)})
	if err == nil || !strings.Contains(err.Error(), "no params found") {
		t.Fatalf("error = %v, want no params found", err)
	}
}

// TestParamsRefused: params the API server would not store are refused by New.
func TestParamsRefused(t *testing.T) {
	tests := []struct {
		name    string
		params  []*unstructured.Unstructured
		wantErr string
	}{
		{
			name:    "custom kind without its CRD",
			params:  []*unstructured.Unstructured{custom("Unknown", "prod", "x", nil)},
			wantErr: `param Unknown "x": params.example.com/v1 Unknown is neither a built-in kind nor a kind of the CRDs given: give its CustomResourceDefinition with --crd`,
		},
		{
			name:    "no name",
			params:  []*unstructured.Unstructured{configMap("prod", "", nil, nil)},
			wantErr: "param 0: ConfigMap without metadata.name",
		},
		{
			name:    "no kind",
			params:  []*unstructured.Unstructured{{Object: map[string]interface{}{"metadata": map[string]interface{}{"name": "x"}}}},
			wantErr: "param 0: no apiVersion/kind",
		},
		{
			name: "given twice (default namespace)",
			params: []*unstructured.Unstructured{
				configMap("", "team", nil, nil),
				configMap("default", "team", nil, nil),
			},
			wantErr: `param ConfigMap "team": given twice in namespace default`,
		},
		{
			name: "given twice (cluster-scoped, namespace dropped)",
			params: []*unstructured.Unstructured{
				custom("Tier", "", "gold", nil),
				custom("Tier", "prod", "gold", nil),
			},
			wantErr: `param Tier "gold": given twice`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(Options{CRDs: paramCRDs, Params: tt.params, GiveCRDsWith: "with --crd"})
			if err == nil {
				e.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
			}
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Index != len(tt.params)-1 {
				t.Errorf("error %v: want a *ParamError for the last param", err)
			}
		})
	}
}

func TestParamRefTo(t *testing.T) {
	e, err := New(Options{CRDs: paramCRDs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tests := []struct {
		param         *unstructured.Unstructured
		wantNamespace string
	}{
		{configMap("prod", "team", nil, nil), "prod"},
		{configMap("", "team", nil, nil), "default"},
		{custom("Tier", "prod", "gold", nil), ""},
		{custom("Sidecar", "", "proxy", nil), "default"},
	}
	for _, tt := range tests {
		ref := e.ParamRefTo(tt.param)
		if ref.Name != tt.param.GetName() || ref.Namespace != tt.wantNamespace || ref.Selector != nil ||
			ref.ParameterNotFoundAction == nil || *ref.ParameterNotFoundAction != admissionregistrationv1.DenyAction {
			t.Errorf("%s %s/%s: paramRef %+v, want name %s, namespace %q, Deny", tt.param.GetKind(), tt.param.GetNamespace(), tt.param.GetName(), ref, tt.param.GetName(), tt.wantNamespace)
		}
	}
}
