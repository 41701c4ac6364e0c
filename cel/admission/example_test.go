package admission_test

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/cel/admission"
)

func Example() {
	e, err := admission.New(admission.Options{
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}}},
	})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	// A MAP that labels every pod in a namespace labelled env=prod.
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "label-prod-pods"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: `Object{metadata: Object.metadata{labels: {"tier": "prod"}}}`,
				},
			}},
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "label-prod-pods"},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "label-prod-pods"},
	}

	pod := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]interface{}{"name": "web", "namespace": "shop"},
		"spec":       map[string]interface{}{"containers": []interface{}{map[string]interface{}{"name": "web", "image": "nginx"}}},
	}}
	out, err := e.Admit(context.Background(),
		[]admission.PolicySet{{Policy: policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{binding}}},
		admission.Request{Object: pod})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.GetLabels())
	// Output: map[tier:prod]
}
