package admission

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// bound gives a set's binding a namespaceSelector.
func bound(set PolicySet, sel *metav1.LabelSelector) PolicySet {
	b := set.Bindings[0].DeepCopy()
	if b.Spec.MatchResources == nil {
		b.Spec.MatchResources = &admissionregistrationv1.MatchResources{}
	}
	b.Spec.MatchResources.NamespaceSelector = sel
	set.Bindings = []*admissionregistrationv1.MutatingAdmissionPolicyBinding{b}
	return set
}

func TestNamespaceNotGiven(t *testing.T) {
	e := evaluator(t) // namespaces prod and dev are given
	label := applyConfig(`Object{metadata: Object.metadata{labels: {"hit": "yes"}}}`)
	envProd := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	byName := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "elsewhere"}}}}
	notIgnored := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: GatekeeperIgnoreLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	notIgnoredEnv := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}, MatchExpressions: notIgnored.MatchExpressions}
	ignoredIn := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: GatekeeperIgnoreLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"yes"}}}}
	namespaceObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "elsewhere"}}}
	clusterRole := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "r"}}}
	allResources := func(p *admissionregistrationv1.MutatingAdmissionPolicy) {
		r := &p.Spec.MatchConstraints.ResourceRules[0].Rule
		r.APIGroups, r.APIVersions, r.Resources = []string{"*"}, []string{"*"}, []string{"*"}
	}

	tests := []struct {
		name        string
		set         PolicySet
		obj         *unstructured.Unstructured
		wantErr     []string // substrings; nil: admitted
		wantHit     bool
		wantAssumed []string
		wantReads   []string
	}{
		{name: "policy selector on env, namespace not given",
			set: policy("p", label, withNamespaceSelector(envProd)), obj: pod("elsewhere", nil),
			wantErr: []string{"namespace elsewhere is not given", "policy p: spec.matchConstraints.namespaceSelector on env", "kubectl get namespace elsewhere -o yaml"}},
		{name: "binding selector on env, namespace not given",
			set: bound(policy("p", label), envProd), obj: pod("elsewhere", nil),
			wantErr: []string{"namespace elsewhere is not given", "binding p: spec.matchResources.namespaceSelector on env"}},
		{name: "policy selector on env, namespace given",
			set: policy("p", label, withNamespaceSelector(envProd)), obj: pod("prod", nil), wantHit: true},
		{name: "binding selector on env, namespace given, not matching",
			set: bound(policy("p", label), envProd), obj: pod("dev", nil)},
		{name: "selector on the name only",
			set: bound(policy("p", label), byName), obj: pod("elsewhere", nil), wantHit: true},
		{name: "ignore label DoesNotExist is assumed",
			set: bound(policy("p", label), notIgnored), obj: pod("elsewhere", nil), wantHit: true, wantAssumed: []string{"elsewhere"}},
		{name: "ignore label DoesNotExist, namespace given",
			set: bound(policy("p", label), notIgnored), obj: pod("prod", nil), wantHit: true},
		{name: "ignore label and env",
			set: bound(policy("p", label), notIgnoredEnv), obj: pod("elsewhere", nil),
			wantErr: []string{"binding p: spec.matchResources.namespaceSelector on env"}},
		{name: "ignore label In is a label like any other",
			set: bound(policy("p", label), ignoredIn), obj: pod("elsewhere", nil),
			wantErr: []string{"namespaceSelector on admission.gatekeeper.sh/ignore"}},
		{name: "policy not for pods: the selector does not matter",
			set: policy("p", label, withNamespaceSelector(envProd), withResources("apps", "v1", "deployments")), obj: pod("elsewhere", nil)},
		{name: "binding's object selector does not match: the selector does not matter",
			set: bound(PolicySet{Policy: policy("p", label).Policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{
				binding("p", &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "true"}})}}, envProd),
			obj: pod("elsewhere", nil)},
		{name: "binding's object selector matches: the selector matters",
			set: bound(PolicySet{Policy: policy("p", label).Policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{
				binding("p", &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "true"}})}}, envProd),
			obj: pod("elsewhere", map[string]string{"inject": "true"}), wantErr: []string{"binding p: spec.matchResources.namespaceSelector on env"}},
		{name: "the Namespace object itself is matched on its own labels",
			set: policy("p", label, withNamespaceSelector(envProd), allResources), obj: namespaceObj},
		{name: "cluster-scoped object",
			set: policy("p", label, withNamespaceSelector(envProd), allResources), obj: clusterRole, wantHit: true},
		{name: "expression reads the namespace's labels: noted",
			set:       policy("p", applyConfig(`Object{metadata: Object.metadata{labels: {"e": namespaceObject.metadata.?labels.env.orValue("none")}}}`)),
			obj:       pod("elsewhere", nil),
			wantReads: []string{"policy p: spec.mutations[0].applyConfiguration.expression reads namespaceObject.metadata.labels.env"}},
		{name: "expression reads a label of a namespace given: nothing noted",
			set: policy("p", applyConfig(`Object{metadata: Object.metadata{labels: {"e": namespaceObject.metadata.labels["env"]}}}`)),
			obj: pod("prod", nil)},
		{name: "expression reads the namespace's name label",
			set: policy("p", applyConfig(`Object{metadata: Object.metadata{labels: {"hit": namespaceObject.metadata.labels["kubernetes.io/metadata.name"] == "elsewhere" ? "yes" : "no"}}}`)),
			obj: pod("elsewhere", nil), wantHit: true},
		{name: "match conditions see no namespace",
			set: policy("p", label, withMatchConditions(`namespaceObject == null`)), obj: pod("elsewhere", nil), wantHit: true},
		{name: "match conditions see no namespace, even one given",
			set: policy("p", label, withMatchConditions(`namespaceObject == null`)), obj: pod("prod", nil), wantHit: true},
		{name: "match condition false: the selector does not matter",
			set: policy("p", label, withNamespaceSelector(envProd), withMatchConditions(`object.metadata.name != "p"`)), obj: pod("elsewhere", nil)},
		{name: "match condition true: the selector matters",
			set: policy("p", label, withNamespaceSelector(envProd), withMatchConditions(`object.metadata.name == "p"`)), obj: pod("elsewhere", nil),
			wantErr: []string{"policy p: spec.matchConstraints.namespaceSelector on env"}},
		{name: "variable reads the namespace's labels",
			set: func() PolicySet {
				s := policy("p", applyConfig(`Object{metadata: Object.metadata{labels: {"e": variables.env}}}`))
				s.Policy.Spec.Variables = []admissionregistrationv1.Variable{{Name: "env", Expression: `namespaceObject.metadata.labels[?"env"].orValue("none")`}}
				return s
			}(),
			obj:       pod("elsewhere", nil),
			wantReads: []string{`policy p: spec.variables[0].expression reads namespaceObject.metadata.labels["env"]`}},
		{name: "expression reads the namespace's name",
			set: policy("p", applyConfig(`Object{metadata: Object.metadata{labels: {"hit": namespaceObject == null ? "no" : namespaceObject.metadata.name == "elsewhere" ? "yes" : "no"}}}`)),
			obj: pod("elsewhere", nil), wantHit: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Trace{}
			got, err := e.Admit(WithTrace(context.Background(), tr), []PolicySet{tc.set}, Request{Object: tc.obj})
			if tc.wantErr != nil {
				var nerr *NamespaceNotGivenError
				if !errors.As(err, &nerr) {
					t.Fatalf("Admit error = %v, want a NamespaceNotGivenError", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if hit := got.GetLabels()["hit"] == "yes"; hit != tc.wantHit {
				t.Errorf("policy applied = %v, want %v (labels %v)", hit, tc.wantHit, got.GetLabels())
			}
			if a := tr.AssumedNamespaces(); !reflect.DeepEqual(a, tc.wantAssumed) {
				t.Errorf("assumed namespaces = %v, want %v", a, tc.wantAssumed)
			}
			if r := tr.NamespaceReads()["elsewhere"]; !reflect.DeepEqual(r, tc.wantReads) {
				t.Errorf("reads = %q, want %q", r, tc.wantReads)
			}
			if len(tr.NamespaceReads()) > 1 || len(tr.NamespaceReads()) == 1 && tc.wantReads == nil {
				t.Errorf("reads = %q", tr.NamespaceReads())
			}
		})
	}
}

func TestNamespaceNotGivenAdvice(t *testing.T) {
	e, err := New(Options{GiveNamespacesWith: "with --namespaces or -f"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	set := policy("p", applyConfig(`Object{}`), withNamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}))
	_, err = e.Admit(context.Background(), []PolicySet{set}, Request{Object: pod("prod", nil)})
	want := "namespace prod is not given, but its labels matter (policy p: spec.matchConstraints.namespaceSelector on env): give the Namespace object (kubectl get namespace prod -o yaml) with --namespaces or -f"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant %s", err, want)
	}
}

func TestNamespaceReads(t *testing.T) {
	const labels = `namespaceObject.metadata.labels`
	const mapcLabels = `(has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {})`
	tests := []struct {
		expr string
		want []string
	}{
		{`object.metadata.name`, nil},
		{`namespaceObject.metadata.name == "x"`, nil},
		{`namespaceObject == null || namespaceObject.metadata.name.startsWith("kube-")`, nil},
		{`null != namespaceObject`, nil},
		{`has(namespaceObject.metadata.labels)`, nil},
		{labels + `["kubernetes.io/metadata.name"] == "x"`, nil},
		{`"kubernetes.io/metadata.name" in ` + mapcLabels + ` && ` + mapcLabels + `["kubernetes.io/metadata.name"] in ["prod"]`, nil},
		{`namespaceObject.?metadata.?name.orValue("") == "x"`, nil},
		{labels + `["env"] == "prod"`, []string{labels + `["env"]`}},
		{`namespaceObject == null || "env" in ` + mapcLabels + ` && ` + mapcLabels + `["tier"] == "a"`, []string{labels + `["env"]`, labels + `["tier"]`}},
		{labels + `.size() > 1`, []string{labels}},
		{`has(namespaceObject.metadata.name)`, nil},
		{`namespaceObject.metadata.annotations`, []string{"namespaceObject.metadata.annotations"}},
		{`[namespaceObject].size() == 1`, []string{"namespaceObject"}},
		{`"env" in namespaceObject.metadata.?labels.orValue({})`, []string{labels}},
		{`object.spec.containers.all(namespaceObject, namespaceObject.name != "")`, nil},
		{`object.spec.containers.all(c, ` + labels + `["env"] != "")`, []string{labels + `["env"]`}},
		{`namespaceObject.(`, []string{"namespaceObject"}},
	}
	for _, tc := range tests {
		if got := namespaceReads(tc.expr); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("namespaceReads(%s) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestSelectorLabels(t *testing.T) {
	sel := &metav1.LabelSelector{
		MatchLabels: map[string]string{"kubernetes.io/metadata.name": "a", "tier": "x"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod"}},
			{Key: GatekeeperIgnoreLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b"}},
		},
	}
	keys, ignore := SelectorLabels(sel)
	if !reflect.DeepEqual(keys, []string{"env", "tier"}) || !ignore {
		t.Errorf("SelectorLabels = %v, %v; want [env tier], true", keys, ignore)
	}
	if keys, ignore := SelectorLabels(nil); keys != nil || ignore {
		t.Errorf("SelectorLabels(nil) = %v, %v", keys, ignore)
	}
}
