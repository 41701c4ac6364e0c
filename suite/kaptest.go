package suite

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify"
)

// kaptest (github.com/pfnet/kaptest) test manifests: policies and resources files, and per policy
// a list of tests naming objects of the resources by kind and name.
type kaptestFile struct {
	Version              string              `json:"version"`
	Policies             []string            `json:"policies"`
	Resources            []string            `json:"resources"`
	CRDs                 []string            `json:"crds"`
	SchemaLocations      []string            `json:"schemaLocations"`
	SkipSchemaValidation bool                `json:"skipSchemaValidation"`
	VapTestSuites        []kaptestPolicyTest `json:"vapTestSuites"`
	MapTestSuites        []kaptestPolicyTest `json:"mapTestSuites"`
}

type kaptestPolicyTest struct {
	Policy  string        `json:"policy"`
	Binding string        `json:"binding"`
	Tests   []kaptestCase `json:"tests"`
}

type kaptestCase struct {
	Object               kaptestRef  `json:"object"`
	OldObject            kaptestRef  `json:"oldObject"`
	Param                kaptestRef  `json:"param"`
	Expect               string      `json:"expect"`
	ExpectObject         kaptestRef  `json:"expectObject"`
	UserInfo             kaptestUser `json:"userInfo"`
	DisableNameOverwrite bool        `json:"disableNameOverwrite"`
	DeniedMessage        string      `json:"deniedMessage"`
}

type kaptestRef struct {
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type kaptestUser struct {
	Name   string              `json:"name"`
	Groups []string            `json:"groups"`
	Extra  map[string][]string `json:"extra"`
}

func (r kaptestRef) set() bool { return r.Name != "" && r.Kind != "" }

func (r kaptestRef) String() string {
	if r.Namespace != "" {
		return r.Kind + ":" + r.Namespace + "/" + r.Name
	}
	return r.Kind + ":" + r.Name
}

func (r kaptestRef) matches(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	return r.Name == o.GetName() && r.Kind == gvk.Kind &&
		(r.Namespace == "" || r.Namespace == o.GetNamespace()) &&
		(r.Group == "" || r.Group == gvk.Group) &&
		(r.Group == "" || r.Version == "" || r.Version == gvk.Version)
}

func (l *loader) kaptest(s *Suite, data []byte) error {
	var f kaptestFile
	if err := l.strict(data, &f); err != nil {
		return err
	}
	if f.Version != "" && f.Version != "v1alpha1" {
		return l.errorf("version", "%q: mapc reads kaptest manifests of version v1alpha1", f.Version)
	}
	s.BindUnbound = true
	docs, err := l.read("policies", f.Policies)
	if err != nil {
		return err
	}
	err = l.sources(s, "policies", docs, func(d *source.Document) error {
		s.Notes = append(s.Notes, fmt.Sprintf("%s:%d: %s %s is not a MutatingAdmissionPolicy or binding; ignored", d.File, d.Line, d.Object.GetAPIVersion(), Identity(d.Object)))
		return nil
	})
	if err != nil {
		return err
	}
	var resources []*source.Document
	if len(f.Resources) > 0 {
		docs, err := l.read("resources", f.Resources)
		if err != nil {
			return err
		}
		resources = docs
		if s.Namespaces, err = Namespaces(docs); err != nil {
			return l.errorf("resources", "%v", err)
		}
	}
	if len(f.CRDs) > 0 {
		docs, err := l.read("crds", f.CRDs)
		if err != nil {
			return err
		}
		if s.CRDs, err = CRDs(docs); err != nil {
			return l.errorf("crds", "%v", err)
		}
	}
	if len(f.SchemaLocations) > 0 || f.SkipSchemaValidation {
		s.Notes = append(s.Notes, "schemaLocations and skipSchemaValidation are ignored: objects are decoded into their Go types (built-in kinds) or checked against --crd schemas")
	}
	for i, ps := range f.VapTestSuites {
		for j := range ps.Tests {
			s.Skipped = append(s.Skipped, verify.Skip{Case: fmt.Sprintf("%s: vapTestSuites[%d].tests[%d]", ps.Policy, i, j), Reason: "ValidatingAdmissionPolicy tests are not run by mapc"})
		}
	}
	findDoc := func(field string, r kaptestRef) (*source.Document, error) {
		var found *source.Document
		for _, d := range resources {
			if r.matches(d.Object) {
				if found != nil {
					return nil, l.errorf(field, "several resources are %s", r)
				}
				found = d
			}
		}
		if found == nil {
			return nil, l.errorf(field, "no resource is %s", r)
		}
		return found, nil
	}
	find := func(field string, r kaptestRef) (*unstructured.Unstructured, error) {
		d, err := findDoc(field, r)
		if err != nil {
			return nil, err
		}
		return d.Object.DeepCopy(), nil
	}
	// kaptest gives a test's param to the policy directly: the resource of the policy's
	// paramKind with the param's name (and namespace).
	paramKinds := map[string]*kaptestRef{}
	for _, d := range s.Policies {
		if d.Object.GetKind() != KindPolicy {
			continue
		}
		apiVersion, _, _ := unstructured.NestedString(d.Object.Object, "spec", "paramKind", "apiVersion")
		kind, _, _ := unstructured.NestedString(d.Object.Object, "spec", "paramKind", "kind")
		if kind != "" {
			gv, _ := schema.ParseGroupVersion(apiVersion)
			paramKinds[d.Object.GetName()] = &kaptestRef{Group: gv.Group, Version: gv.Version, Kind: kind}
		}
	}
	params := map[*source.Document]bool{}
	for i, ps := range f.MapTestSuites {
		if ps.Policy == "" {
			return l.errorf(fmt.Sprintf("mapTestSuites[%d].policy", i), "name the policy under test")
		}
		for j, t := range ps.Tests {
			field := fmt.Sprintf("mapTestSuites[%d].tests[%d]", i, j)
			c := &Case{Where: l.where(field), Policies: []string{ps.Policy}, Binding: ps.Binding, OwnBinding: ps.Binding == "", User: t.UserInfo.Name}
			op := "CREATE"
			if t.OldObject.set() {
				op = "UPDATE"
			}
			ref := t.Object
			if !ref.set() {
				ref = t.OldObject
				op = "DELETE"
			}
			c.Name = fmt.Sprintf("%s: (%s) %s", ps.Policy, op, ref)
			if t.Expect != "" {
				c.Name += " - " + strings.ToUpper(t.Expect)
			}
			skip := func(reason string) { s.Skipped = append(s.Skipped, verify.Skip{Case: c.Name, Reason: reason}) }
			switch {
			case !ref.set():
				return l.errorf(field, "object or oldObject must be given")
			case op == "DELETE":
				skip("DELETE: MutatingAdmissionPolicies do not run on DELETE")
				continue
			}
			switch pk := paramKinds[ps.Policy]; {
			case pk != nil && t.Param.Name != "":
				ref := *pk
				ref.Name, ref.Namespace = t.Param.Name, t.Param.Namespace
				d, err := findDoc(field+".param", ref)
				if err != nil {
					return err
				}
				c.Param = d.Object
				c.Name += " with param " + t.Param.Name
				if t.Param.Namespace != "" {
					c.Name += " in " + t.Param.Namespace
				}
				if !params[d] {
					params[d] = true
					s.Params = append(s.Params, d)
				}
			case pk != nil:
				s.Notes = append(s.Notes, fmt.Sprintf("%s: policy %s has a paramKind but the test gives no param (kaptest fails such a test): it runs with the binding's paramRef, or with params null", c.Where, ps.Policy))
			case t.Param.Name != "":
				s.Notes = append(s.Notes, fmt.Sprintf("%s: param is ignored: policy %s has no paramKind", c.Where, ps.Policy))
			}
			if len(t.UserInfo.Groups) > 0 || len(t.UserInfo.Extra) > 0 {
				s.Notes = append(s.Notes, fmt.Sprintf("%s: userInfo groups and extra are not passed (the request's user is in group system:authenticated only)", c.Where))
			}
			if c.Object, err = find(field+".object", t.Object); err != nil {
				return err
			}
			c.Operation = admissionv1.Create
			if op == "UPDATE" {
				c.Operation = admissionv1.Update
				if c.OldObject, err = find(field+".oldObject", t.OldObject); err != nil {
					return err
				}
			}
			switch t.Expect {
			case "mutate":
				if !t.ExpectObject.set() {
					return l.errorf(field+".expectObject", "expectObject must be given when mutate is expected")
				}
				if c.Expect, err = find(field+".expectObject", t.ExpectObject); err != nil {
					return err
				}
				if !t.DisableNameOverwrite {
					// As kaptest does: the expected object is a resource of another name.
					c.Expect.SetName(c.Object.GetName())
				}
			case "skip":
				c.ExpectUnchanged = true
			case "error", "deny":
				anyErr := ""
				c.ExpectError = &anyErr
			case "admit":
				c.ExpectAdmitted = true
			default:
				return l.errorf(field+".expect", "%q: use mutate, skip, admit or error", t.Expect)
			}
			s.Cases = append(s.Cases, c)
		}
	}
	return nil
}
