package kyschema

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name string
		obj  string
		// errs lists "field: type" of each error, sorted.
		errs []string
		// stored, when set, is the whole object as the API server stores it.
		stored string
	}{{
		name: "a valid v1 ClusterPolicy is stored with the CRD's defaults, its namespace dropped",
		obj: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: add-labels, namespace: default}
spec:
  rules:
  - name: labels
    match: {any: [{resources: {kinds: [Pod]}}]}
    preconditions: {all: [{key: "{{request.operation}}", operator: Equals, value: CREATE}]}
    mutate:
      patchStrategicMerge: {metadata: {labels: {+(team): x}}, anything: [goes, here]}
  - name: images
    match: {resources: {kinds: [Pod]}}
    context: [{name: cm, apiCall: {urlPath: /api/v1/namespaces}}]
    mutate:
      foreach:
      - list: request.object.spec.containers
        order: Descending
        patchStrategicMerge: {spec: {containers: [{name: "{{element.name}}", image: x}]}}
  - name: check
    match: {resources: {kinds: [Pod]}}
    validate: {pattern: {spec: {hostNetwork: false}}}`,
		stored: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: add-labels}
spec:
  admission: true
  background: true
  emitWarning: false
  validationFailureAction: Audit
  rules:
  - name: labels
    match: {any: [{resources: {kinds: [Pod]}}]}
    preconditions: {all: [{key: "{{request.operation}}", operator: Equals, value: CREATE}]}
    mutate:
      patchStrategicMerge: {metadata: {labels: {+(team): x}}, anything: [goes, here]}
    skipBackgroundRequests: true
  - name: images
    match: {resources: {kinds: [Pod]}}
    context: [{name: cm, apiCall: {urlPath: /api/v1/namespaces, method: GET}}]
    mutate:
      foreach:
      - list: request.object.spec.containers
        order: Descending
        patchStrategicMerge: {spec: {containers: [{name: "{{element.name}}", image: x}]}}
    skipBackgroundRequests: true
  - name: check
    match: {resources: {kinds: [Pod]}}
    validate: {pattern: {spec: {hostNetwork: false}}, allowExistingViolations: true}
    skipBackgroundRequests: true`,
	}, {
		name: "explicit values are kept over defaults",
		obj: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  background: false
  validationFailureAction: Enforce
  rules:
  - name: r
    skipBackgroundRequests: false
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate: {patchesJson6902: "- op: add\n  path: /x\n  value: 1\n"}`,
		stored: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  admission: true
  background: false
  emitWarning: false
  validationFailureAction: Enforce
  rules:
  - name: r
    skipBackgroundRequests: false
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate: {patchesJson6902: "- op: add\n  path: /x\n  value: 1\n"}`,
	}, {
		name: "unknown fields at every depth are errors naming their path, and are pruned",
		obj: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p, lables: {a: b}}
specs: {}
spec:
  backgrund: true
  rules:
  - name: r
    match: {any: [{resources: {kind: [Pod]}}]}
    mutate:
      patchStrategicMerg: {metadata: {labels: {a: b}}}
      foreEach: []
      foreach:
      - list: request.object.spec.containers
        preconditions: {any: [{key: a, operater: Equals, value: a}]}
        patchStrategicMerge: {spec: {unknownInsideAPatchIsFine: 1}}
    context: [{name: c, apiCall: {urlpath: /x, urlPath: /y}}]`,
		errs: []string{
			"metadata.lables: FieldValueForbidden",
			"spec.backgrund: FieldValueForbidden",
			"spec.rules[0].context[0].apiCall.urlpath: FieldValueForbidden",
			"spec.rules[0].match.any[0].resources.kind: FieldValueForbidden",
			"spec.rules[0].mutate.foreEach: FieldValueForbidden",
			"spec.rules[0].mutate.foreach[0].preconditions.any[0].operater: FieldValueForbidden",
			"spec.rules[0].mutate.patchStrategicMerg: FieldValueForbidden",
			"specs: FieldValueForbidden",
		},
		stored: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  admission: true
  background: true
  emitWarning: false
  validationFailureAction: Audit
  rules:
  - name: r
    match: {any: [{resources: {}}]}
    mutate:
      foreach:
      - list: request.object.spec.containers
        preconditions: {any: [{key: a, value: a}]}
        patchStrategicMerge: {spec: {unknownInsideAPatchIsFine: 1}}
    context: [{name: c, apiCall: {urlPath: /y, method: GET}}]
    skipBackgroundRequests: true`,
	}, {
		name: "wrong types, enums, required fields and lengths",
		obj: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  background: "yes"
  validationFailureAction: Auditt
  rules:
  - name: ` + strings.Repeat("r", 64) + `
    match: {any: {resources: {kinds: [Pod]}}}
    mutate: {foreach: [{list: 5, order: Random}]}
  - match: {resources: {kinds: Pod}}`,
		errs: []string{
			"spec.background: FieldValueTypeInvalid",
			// Pruning walks into a list written as an object, which has no such field.
			"spec.rules[0].match.any.resources: FieldValueForbidden",
			"spec.rules[0].match.any: FieldValueTypeInvalid",
			"spec.rules[0].mutate.foreach[0].list: FieldValueTypeInvalid",
			"spec.rules[0].mutate.foreach[0].order: FieldValueNotSupported",
			"spec.rules[0].name: FieldValueTooLong",
			"spec.rules[1].match.resources.kinds: FieldValueTypeInvalid",
			"spec.rules[1].name: FieldValueRequired",
			"spec.validationFailureAction: FieldValueNotSupported",
		},
	}, {
		name: "v2beta1 Policy keeps its namespace and has v2beta1's fields",
		obj: `apiVersion: kyverno.io/v2beta1
kind: Policy
metadata: {name: p, namespace: team-a}
spec:
  rules:
  - name: r
    match: {resources: {kinds: [Pod]}}
    preconditions: [{key: a, operator: Equals, value: a}]
    mutate: {patchStrategicMerge: {metadata: {labels: {a: b}}}}`,
		errs: []string{
			"spec.rules[0].match.resources: FieldValueForbidden",
			// v2beta1 has no list of conditions without any or all.
			"spec.rules[0].preconditions: FieldValueTypeInvalid",
			"spec.rules[0].preconditions[0].key: FieldValueForbidden",
			"spec.rules[0].preconditions[0].operator: FieldValueForbidden",
			"spec.rules[0].preconditions[0].value: FieldValueForbidden",
		},
	}, {
		name: "v2beta1 ClusterPolicy is defaulted as v1 is",
		obj: `apiVersion: kyverno.io/v2beta1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: r
    match: {all: [{resources: {kinds: [Pod]}}]}
    preconditions: {any: [{key: a, operator: Equals, value: a}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {a: b}}}}`,
		stored: `apiVersion: kyverno.io/v2beta1
kind: ClusterPolicy
metadata: {name: p}
spec:
  admission: true
  background: true
  emitWarning: false
  validationFailureAction: Audit
  rules:
  - name: r
    match: {all: [{resources: {kinds: [Pod]}}]}
    preconditions: {any: [{key: a, operator: Equals, value: a}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {a: b}}}}
    skipBackgroundRequests: true`,
	}, {
		name: "a Policy's namespace and name must be valid",
		obj: `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: Bad_Name, namespace: Bad_NS}
spec: {rules: [{name: r, match: {any: [{resources: {kinds: [Pod]}}]}, mutate: {patchStrategicMerge: {}}}]}`,
		errs: []string{"metadata.name: FieldValueInvalid", "metadata.namespace: FieldValueInvalid"},
	}, {
		name: "a kind no CRD serves",
		obj:  `{apiVersion: kyverno.io/v1, kind: ClusterPolicyy, metadata: {name: p}}`,
		errs: []string{"kind: FieldValueNotSupported"},
	}, {
		name: "a version no CRD serves",
		obj:  `{apiVersion: kyverno.io/v2, kind: ClusterPolicy, metadata: {name: p}}`,
		errs: []string{"apiVersion: FieldValueNotSupported"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := object(t, c.obj)
			before := obj.DeepCopy()
			out, errs := Decode(obj)
			if !reflect.DeepEqual(obj, before) {
				t.Errorf("Decode modified its argument")
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+": "+string(e.Type))
				if e.Type == "FieldValueForbidden" && e.Detail != UnknownField {
					t.Errorf("%s: detail %q, want UnknownField", e.Field, e.Detail)
				}
			}
			if out != nil && out.GetKind() == "Policy" && out.GetNamespace() != obj.GetNamespace() {
				t.Errorf("a Policy stored in namespace %q, want %q", out.GetNamespace(), obj.GetNamespace())
			}
			slices.Sort(got)
			if !slices.Equal(got, c.errs) {
				t.Errorf("errors\n%s\nwant\n%s\n(%v)", strings.Join(got, "\n"), strings.Join(c.errs, "\n"), errs)
			}
			if c.stored != "" {
				want := object(t, c.stored)
				// Through JSON, as Decode's result, so that numbers compare.
				data, _ := want.MarshalJSON()
				if err := want.UnmarshalJSON(data); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(out.Object, want.Object) {
					g, _ := yaml.Marshal(out.Object)
					w, _ := yaml.Marshal(want.Object)
					t.Errorf("stored\n%s\nwant\n%s", g, w)
				}
			}
		})
	}
}

func TestDecodeNotServedHasNoObject(t *testing.T) {
	out, errs := Decode(object(t, `{apiVersion: kyverno.io/v1beta1, kind: Policy, metadata: {name: p}}`))
	if out != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), `supported values: "kyverno.io/v1", "kyverno.io/v2beta1"`) {
		t.Errorf("Decode = %v, %v", out, errs)
	}
}

func TestServed(t *testing.T) {
	served, err := Served()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, gvk := range served {
		got = append(got, gvk.GroupVersion().String()+"/"+gvk.Kind)
	}
	want := "kyverno.io/v1/ClusterPolicy kyverno.io/v1/Policy kyverno.io/v2beta1/ClusterPolicy kyverno.io/v2beta1/Policy"
	if strings.Join(got, " ") != want {
		t.Errorf("served %s\nwant   %s", strings.Join(got, " "), want)
	}
}
