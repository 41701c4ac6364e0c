package gkschema

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

func TestAdmit(t *testing.T) {
	cases := []struct {
		name    string
		obj     string
		unknown []string
		invalid []string // field: type of each validation error
		stored  map[string]any
	}{{
		name: "valid Assign is stored as given",
		obj: `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: a}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.dnsPolicy
  parameters: {assign: {value: {any: [thing]}}}`,
		stored: map[string]any{"location": "spec.dnsPolicy"},
	}, {
		name: "unknown fields at every depth, metadata included, are reported and pruned",
		obj: `apiVersion: mutations.gatekeeper.sh/v1beta1
kind: Assign
metadata: {name: a, lables: {x: y}}
specs: {}
spec:
  applyTo: [{groups: [""], kind: [Pod]}]
  match: {excludeNamespaces: [kube-system], namespaces: [a]}
  location: spec.dnsPolicy
  parameters: {assignIf: {}, assign: {value: x}}`,
		unknown: []string{"metadata.lables", "spec.applyTo[0].kind", "spec.match.excludeNamespaces", "spec.parameters.assignIf", "specs"},
		stored:  map[string]any{"match": map[string]any{"namespaces": []any{"a"}}},
	}, {
		name: "ModifySet operation defaults to merge",
		obj: `apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: m}
spec:
  location: spec.containers[name:*].args
  parameters: {values: {fromList: [a]}}`,
		stored: map[string]any{"parameters": map[string]any{"operation": "merge", "values": map[string]any{"fromList": []any{"a"}}}},
	}, {
		name: "enum, type, required and length errors",
		obj: `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: ` + strings.Repeat("a", 64) + `}
spec:
  applyTo: [{operations: [CREATE, DELETE]}]
  match: {source: Alll, labelSelector: {matchExpressions: [{key: k}]}}
  location: 5
  parameters: {pathTests: [{subPath: spec, condition: MustExists}]}`,
		invalid: []string{
			"metadata.name: FieldValueTooLong",
			"spec.applyTo[0].operations[1]: FieldValueNotSupported",
			"spec.location: FieldValueTypeInvalid",
			"spec.match.labelSelector.matchExpressions[0].operator: FieldValueRequired",
			"spec.match.source: FieldValueNotSupported",
			"spec.parameters.pathTests[0].condition: FieldValueNotSupported",
		},
	}, {
		name: "the name must be a DNS subdomain; a namespace is dropped",
		obj: `apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignMetadata
metadata: {name: Bad_Name, namespace: default}
spec: {location: metadata.labels.a, parameters: {assign: {value: b}}}`,
		invalid: []string{"metadata.name: FieldValueInvalid"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := object(t, c.obj)
			before := obj.DeepCopy()
			a, err := Admit(obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(obj, before) {
				t.Errorf("Admit modified its argument")
			}
			if !reflect.DeepEqual(a.Unknown, c.unknown) {
				t.Errorf("unknown fields %q, want %q", a.Unknown, c.unknown)
			}
			var invalid []string
			for _, e := range a.Invalid {
				invalid = append(invalid, e.Field+": "+string(e.Type))
			}
			slices.Sort(invalid)
			if !slices.Equal(invalid, c.invalid) {
				t.Errorf("validation errors\n%s\nwant\n%s\n(%v)", strings.Join(invalid, "\n"), strings.Join(c.invalid, "\n"), a.Invalid)
			}
			if ns := a.Object.GetNamespace(); ns != "" {
				t.Errorf("stored with namespace %q", ns)
			}
			spec, _ := a.Object.Object["spec"].(map[string]any)
			for k, v := range c.stored {
				if !reflect.DeepEqual(spec[k], v) {
					t.Errorf("stored spec.%s = %#v, want %#v", k, spec[k], v)
				}
			}
			for _, u := range c.unknown {
				if f, _, _ := strings.Cut(u, "."); f != "metadata" {
					if _, found, _ := unstructured.NestedFieldNoCopy(a.Object.Object, strings.Split(u, ".")...); found {
						t.Errorf("%s not pruned", u)
					}
				}
			}
		})
	}
}

func TestAdmitNotServed(t *testing.T) {
	for _, av := range []string{"mutations.gatekeeper.sh/v2", "mutation.gatekeeper.sh/v1"} {
		_, err := Admit(object(t, "apiVersion: "+av+"\nkind: Assign\nmetadata: {name: a}\n"))
		var ns *NotServedError
		if !errors.As(err, &ns) || !strings.Contains(err.Error(), `no matches for kind "Assign"`) {
			t.Errorf("%s: err = %v, want a NotServedError", av, err)
		}
	}
	if _, err := Admit(object(t, "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignImage\nmetadata: {name: a}\n")); err == nil {
		t.Errorf("AssignImage v1 admitted; Gatekeeper v3.23.1 serves it only as v1alpha1")
	}
}

func TestServed(t *testing.T) {
	served, err := Served()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, gvk := range served {
		got = append(got, gvk.Version+"/"+gvk.Kind)
	}
	want := "v1/Assign v1/AssignMetadata v1/ModifySet v1alpha1/Assign v1alpha1/AssignImage v1alpha1/AssignMetadata v1alpha1/ModifySet v1beta1/Assign v1beta1/AssignMetadata v1beta1/ModifySet"
	if strings.Join(got, " ") != want {
		t.Errorf("served %s\nwant   %s", strings.Join(got, " "), want)
	}
}

func TestLookup(t *testing.T) {
	assign := schema.GroupVersionKind{Group: "mutations.gatekeeper.sh", Version: "v1", Kind: "Assign"}
	cases := []struct {
		path  string
		ok    bool
		typ   string
		enum  []any
		props string
	}{
		{path: "", ok: true, typ: "object", props: "apiVersion kind metadata spec status"},
		{path: "spec.match", ok: true, typ: "object", props: "excludedNamespaces kinds labelSelector name namespaceSelector namespaces scope source"},
		{path: "spec.applyTo[3].operations[0]", ok: true, typ: "string", enum: []any{"CREATE", "UPDATE", "*"}},
		{path: "spec.parameters.pathTests[0].condition", ok: true, typ: "string", enum: []any{"MustExist", "MustNotExist"}},
		{path: "spec.parameters.assign.value", ok: true},
		{path: "spec.match.excludeNamespaces", ok: false},
		{path: "spec.applyTo.kinds", ok: false},
		{path: "spec.location[0]", ok: false},
		{path: "spec.applyTo[x]", ok: false},
	}
	for _, c := range cases {
		f, ok := Lookup(assign, c.path)
		if ok != c.ok {
			t.Errorf("Lookup(%q) ok = %v", c.path, ok)
			continue
		}
		if f.Type() != c.typ || fmt.Sprint(f.Enum()) != fmt.Sprint(c.enum) || strings.Join(f.Properties(), " ") != c.props {
			t.Errorf("Lookup(%q) = type %q enum %v properties %q", c.path, f.Type(), f.Enum(), f.Properties())
		}
	}
}
