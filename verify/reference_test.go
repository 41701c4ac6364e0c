package verify

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/cel/admission"
)

// labeller is a Reference that labels every Pod team=<value>, or denies it.
type labeller struct {
	name  string
	value string
	deny  bool
	// uses is what it says looks at the labels of a namespace not given.
	uses []string
	// namespaces records the namespace of each request ("" for none).
	namespaces []string
}

func (l *labeller) Name() string { return l.name }

func (l *labeller) Admit(_ context.Context, req RefRequest) (*unstructured.Unstructured, error) {
	ns := ""
	if req.Namespace != nil {
		ns = req.Namespace.Name
	}
	l.namespaces = append(l.namespaces, ns)
	if l.deny {
		return nil, errors.New("denied by the labeller")
	}
	out := req.Object.DeepCopy()
	labels := out.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["team"] = l.value
	out.SetLabels(labels)
	return out, nil
}

func (l *labeller) NamespaceUses(*unstructured.Unstructured, admissionv1.Operation) ([]string, bool) {
	return l.uses, false
}

// labelTeamPolicy is a hand-written MAP that labels Pods team=payments.
const labelTeamPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: label-team
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [pods]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"team": "payments"}}}'
`

func labelTeamSets(t *testing.T) []admission.PolicySet {
	t.Helper()
	p := &admissionregistrationv1.MutatingAdmissionPolicy{}
	if err := yaml.UnmarshalStrict([]byte(labelTeamPolicy), p); err != nil {
		t.Fatal(err)
	}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: p.Name},
	}
	return []admission.PolicySet{{Policy: p, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{b}}}
}

func TestOtherReference(t *testing.T) {
	given := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "dev"}}}
	tests := []struct {
		name      string
		ref       *labeller
		namespace string
		// wantReport are lines of the text report; none with "FAIL" means the case passes.
		wantReport []string
	}{{
		name:       "agrees",
		ref:        &labeller{name: "Labeller", value: "payments"},
		namespace:  "default",
		wantReport: []string{"PASS Pod/default/web (1 policy orders)"},
	}, {
		name:      "mutates differently",
		ref:       &labeller{name: "Labeller", value: "platform"},
		namespace: "default",
		wantReport: []string{
			"FAIL Pod/default/web: the policies mutate the object differently from Labeller",
			"  --- labeller", "  +++ policies", "  -    team: platform", "  +    team: payments",
		},
	}, {
		name:      "denies",
		ref:       &labeller{name: "Labeller", deny: true},
		namespace: "default",
		wantReport: []string{
			"FAIL Pod/default/web: Labeller denies the request but the policies admit it",
			"  Labeller: denied by the labeller",
		},
	}, {
		name:       "namespace not given, labels not looked at",
		ref:        &labeller{name: "Labeller", value: "payments"},
		namespace:  "prod",
		wantReport: []string{"PASS Pod/prod/web (1 policy orders)"},
	}, {
		name:      "namespace not given, labels looked at",
		ref:       &labeller{name: "Labeller", value: "payments", uses: []string{"Rule/team: env"}},
		namespace: "prod",
		wantReport: []string{
			"FAIL Pod/prod/web: namespace prod is not given, but its labels matter (Rule/team: env)",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewSets(nil, labelTeamSets(t), Options{Reference: tc.ref, Namespaces: []*corev1.Namespace{given}, Idempotence: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			r := v.Check(context.Background(), Case{Object: podIn(t, tc.namespace)})
			rep := Report([]Result{r})
			wantPass := !strings.Contains(strings.Join(tc.wantReport, "\n"), "FAIL")
			if r.Pass != wantPass {
				t.Errorf("pass = %v, want %v:\n%s", r.Pass, wantPass, rep)
			}
			for _, l := range tc.wantReport {
				if !strings.Contains(rep, l) {
					t.Errorf("report lacks %q:\n%s", l, rep)
				}
			}
			if strings.Contains(rep, "Gatekeeper") || strings.Contains(rep, "gatekeeper") {
				t.Errorf("report names Gatekeeper, not the reference given:\n%s", rep)
			}
			if r.Reference != "Labeller" {
				t.Errorf("Reference = %q, want Labeller", r.Reference)
			}
			if len(tc.ref.uses) == 0 && (len(tc.ref.namespaces) == 0 || tc.ref.namespaces[0] != tc.namespace) {
				t.Errorf("the reference was asked in namespaces %q, want %q", tc.ref.namespaces, tc.namespace)
			}
		})
	}
}

func TestReferenceWithMutators(t *testing.T) {
	muts := []*unstructured.Unstructured{mutatorDocs(t, `"Pod"`, "{}")[0].Object}
	_, err := NewSets(muts, labelTeamSets(t), Options{Reference: &labeller{name: "Labeller"}})
	if err == nil || !strings.Contains(err.Error(), "Labeller") {
		t.Fatalf("NewSets with mutators and a Reference: err = %v, want one naming the reference", err)
	}
}
