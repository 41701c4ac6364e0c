package suite

import (
	"fmt"
	"os"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify"
)

// kyverno-test.yaml (the Kyverno CLI's `kyverno test`): policies and resources files, and results
// naming a policy, resources by name and the file of the patched resources.
type kyvernoFile struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Policies   []string        `json:"policies"`
	Resources  []string        `json:"resources"`
	Variables  string          `json:"variables"`
	UserInfo   string          `json:"userinfo"`
	Results    []kyvernoResult `json:"results"`
	Checks     []any           `json:"checks"`
	Context    string          `json:"context"`
	Target     any             `json:"target"`
	Exceptions []string        `json:"exceptions"`
}

type kyvernoResult struct {
	Policy                      string   `json:"policy"`
	Rule                        string   `json:"rule"`
	Resources                   []string `json:"resources"`
	Resource                    string   `json:"resource"`
	Namespace                   string   `json:"namespace"`
	Kind                        string   `json:"kind"`
	Operation                   string   `json:"operation"`
	PatchedResources            string   `json:"patchedResources"`
	PatchedResource             string   `json:"patchedResource"`
	GeneratedResource           string   `json:"generatedResource"`
	CloneSourceResource         string   `json:"cloneSourceResource"`
	Result                      string   `json:"result"`
	Status                      string   `json:"status"`
	FailOnMissingResources      bool     `json:"failOnMissingResources"`
	IsMutatingAdmissionPolicy   bool     `json:"isMutatingAdmissionPolicy"`
	IsValidatingAdmissionPolicy bool     `json:"isValidatingAdmissionPolicy"`
	IsMutatingPolicy            bool     `json:"isMutatingPolicy"`
	IsValidatingPolicy          bool     `json:"isValidatingPolicy"`
	IsImageValidatingPolicy     bool     `json:"isImageValidatingPolicy"`
	IsDeletingPolicy            bool     `json:"isDeletingPolicy"`
	IsGeneratingPolicy          bool     `json:"isGeneratingPolicy"`
}

// kyvernoValues is a Values file (kind: Value): namespace labels and Namespace objects, the
// request's operation, and the values of variables, which only Kyverno's engine can take.
type kyvernoValues struct {
	GlobalValues map[string]any `json:"globalValues"`
	Policies     []struct {
		Name      string `json:"name"`
		Resources []struct {
			Name   string         `json:"name"`
			Values map[string]any `json:"values"`
		} `json:"resources"`
		Rules []struct {
			Name          string           `json:"name"`
			Values        map[string]any   `json:"values"`
			ForeachValues map[string][]any `json:"foreachValues"`
		} `json:"rules"`
	} `json:"policies"`
	NamespaceSelector []struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"namespaceSelector"`
	Namespaces   []corev1.Namespace `json:"namespaces"`
	Subresources []any              `json:"subresources"`
}

// KyvernoResult is a kyverno-test.yaml result for a Kyverno policy, which the case runs through
// the policy compiled from it (see Run).
type KyvernoResult struct {
	// Policy is the Kyverno policy: "name" for a ClusterPolicy, "namespace/name" for a Policy.
	Policy string
	// Before are the Kyverno policies with mutate rules kyverno test applies to the object before
	// Policy (those ahead of it among the test's policies), in its order: the object Policy
	// mutates, and the patched resource it reports, carry their changes.
	Before []string
	// Rule is the result's rule, or "" for the whole policy.
	Rule string
	// Result is Kyverno's expected rule status: pass, skip, fail or error.
	Result string
	// Rules counts the policy's mutate rules (as written, before autogen).
	Rules int
}

// kyvernoPolicy is a Kyverno policy among a test's policies, as kyverno test names it.
type kyvernoPolicy struct {
	id        string // "name" or "namespace/name"
	namespace string // "" for a ClusterPolicy
	name      string
	mutate    map[string]bool // the rules (as written) by name: mutate or not
	nMutate   int
	others    []string // rules that are not mutate rules
}

func readKyvernoPolicy(d *source.Document) *kyvernoPolicy {
	o := d.Object
	p := &kyvernoPolicy{name: o.GetName(), id: o.GetName(), mutate: map[string]bool{}}
	if o.GetKind() == "Policy" {
		p.namespace = o.GetNamespace()
		if p.namespace == "" {
			p.namespace = "default" // created in the request's namespace, as kubectl sends it
		}
		p.id = p.namespace + "/" + p.name
	}
	rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		name, _ := rule["name"].(string)
		_, m := rule["mutate"]
		p.mutate[name] = m
		if m {
			p.nMutate++
		} else {
			p.others = append(p.others, name)
		}
	}
	return p
}

func (l *loader) kyverno(s *Suite, data []byte) error {
	var f kyvernoFile
	// Not strict: the Kyverno format has many fields about Kyverno's own policies.
	if err := sigsyaml.Unmarshal(firstDocument(data), &f); err != nil {
		return l.errorf("", "%v", err)
	}
	if f.Metadata.Name != "" {
		s.Name = f.Metadata.Name
	}
	s.BindUnbound = true
	// Path by path, as kyverno test loads them: the order of the Kyverno policies is the order in
	// which it applies them to each resource.
	var docs []*source.Document
	seen := map[string]bool{}
	for _, p := range f.Policies {
		ds, err := l.read("policies", []string{p})
		if err != nil {
			return err
		}
		for _, d := range ds {
			if at := fmt.Sprintf("%s:%d", d.File, d.Line); !seen[at] {
				seen[at] = true
				docs = append(docs, d)
			}
		}
	}
	err := l.sources(s, "policies", docs, func(d *source.Document) error {
		s.Notes = append(s.Notes, fmt.Sprintf("%s:%d: %s %s is not a Kyverno policy, MutatingAdmissionPolicy or binding; ignored", d.File, d.Line, d.Object.GetAPIVersion(), Identity(d.Object)))
		return nil
	})
	if err != nil {
		return err
	}
	mapNames := map[string]bool{}
	for _, d := range s.Policies {
		if d.Object.GetKind() == KindPolicy {
			mapNames[d.Object.GetName()] = true
		}
	}
	var kps []*kyvernoPolicy
	for _, d := range s.Kyverno {
		kps = append(kps, readKyvernoPolicy(d))
	}
	var resources []*unstructured.Unstructured
	if len(f.Resources) > 0 {
		docs, err := l.read("resources", f.Resources)
		if err != nil {
			return err
		}
		for _, d := range docs {
			resources = append(resources, d.Object)
		}
		if s.Namespaces, err = Namespaces(docs); err != nil {
			return l.errorf("resources", "%v", err)
		}
	}
	globalOp, err := l.kyvernoValues(s, f.Variables, len(kps) > 0)
	if err != nil {
		return err
	}
	if len(kps) > 0 {
		cannot := "mapc runs the compiled policies on requests as the API server sends them; test what depends on it with kyverno test"
		switch {
		case f.UserInfo != "":
			return l.errorf("userinfo", "the Kyverno policies would see this user's name, groups and roles, which mapc cannot give them: %s", cannot)
		case len(f.Exceptions) > 0:
			return l.errorf("exceptions", "PolicyExceptions change what Kyverno's policies do, and the compiled policies do not read them: %s", cannot)
		}
	} else if f.UserInfo != "" {
		s.Notes = append(s.Notes, "userinfo is ignored: requests are made by user mapc")
	}
	for i, r := range f.Results {
		field := fmt.Sprintf("results[%d]", i)
		names := append([]string(nil), r.Resources...)
		if r.Resource != "" {
			names = append(names, r.Resource)
		}
		result := r.Result
		if result == "" {
			result = r.Status
		}
		patched := r.PatchedResources
		if patched == "" {
			patched = r.PatchedResource
		}
		if len(names) == 0 {
			s.Skipped = append(s.Skipped, verify.Skip{Case: fmt.Sprintf("%s: %s - %s", r.Policy, r.Kind, strings.ToUpper(result)),
				Reason: field + " names no resources: mapc runs the resources a result names"})
			continue
		}
		op := r.Operation
		if op == "" {
			op = globalOp
		}
		kp, kerr := findKyvernoPolicy(kps, r.Policy)
		for _, name := range names {
			c := &Case{Where: l.where(field), Policies: []string{r.Policy}, Operation: admissionv1.Create, Tidy: true}
			c.Name = fmt.Sprintf("%s: %s %s - %s", r.Policy, r.Kind, name, strings.ToUpper(result))
			if r.Rule != "" {
				c.Name = fmt.Sprintf("%s/%s: %s %s - %s", r.Policy, r.Rule, r.Kind, name, strings.ToUpper(result))
			}
			skip := func(reason string) { s.Skipped = append(s.Skipped, verify.Skip{Case: c.Name, Reason: reason}) }
			if r.IsValidatingAdmissionPolicy || r.IsMutatingPolicy || r.IsValidatingPolicy ||
				r.IsImageValidatingPolicy || r.IsDeletingPolicy || r.IsGeneratingPolicy {
				skip("not a MutatingAdmissionPolicy or Kyverno ClusterPolicy or Policy: mapc runs only those")
				continue
			}
			isMAP := mapNames[r.Policy] && (r.IsMutatingAdmissionPolicy || kp == nil)
			if !isMAP && r.IsMutatingAdmissionPolicy {
				skip("no MutatingAdmissionPolicy among the policies is named " + r.Policy)
				continue
			}
			if !isMAP {
				switch {
				case kerr != nil:
					return l.errorf(field+".policy", "%v", kerr)
				case kp == nil:
					skip("not a MutatingAdmissionPolicy or Kyverno ClusterPolicy or Policy among the policies")
					continue
				case kp.nMutate == 0:
					skip(fmt.Sprintf("%s has no mutate rules: mapc compiles only mutate rules", kp.id))
					continue
				case r.Rule != "" && !hasRule(kp, r.Rule):
					skip(fmt.Sprintf("%s has no rule %s (kyverno test passes such a result as excluded): check the rule's name", kp.id, r.Rule))
					continue
				case r.Rule != "" && !kp.mutate[r.Rule]:
					skip(fmt.Sprintf("rule %s of %s is not a mutate rule: mapc compiles only mutate rules", r.Rule, kp.id))
					continue
				case r.Rule == "" && len(kp.others) > 0:
					skip(fmt.Sprintf("%s also has rules that are not mutate rules (%s), which kyverno test checks under this result and mapc does not compile: give rule: to test a mutate rule",
						kp.id, strings.Join(kp.others, ", ")))
					continue
				}
				c.Policies = nil
				c.Kyverno = &KyvernoResult{Policy: kp.id, Rule: r.Rule, Result: result, Rules: kp.nMutate}
				for _, b := range kps {
					if b == kp {
						break
					}
					if b.nMutate > 0 {
						c.Kyverno.Before = append(c.Kyverno.Before, b.id)
					}
				}
			}
			switch op {
			case "", "CREATE":
			case "UPDATE":
				// As kyverno test sends it: object and oldObject are both the resource.
				c.Operation = admissionv1.Update
			case "DELETE":
				skip("operation DELETE: MutatingAdmissionPolicies do not run on DELETE")
				continue
			default:
				return l.errorf(field+".operation", "%q: use CREATE, UPDATE or DELETE", op)
			}
			ns, n := r.Namespace, name
			if i := strings.Index(name, "/"); i >= 0 {
				ns, n = name[:i], name[i+1:]
			}
			var found *unstructured.Unstructured
			for _, o := range resources {
				if o.GetName() == n && (r.Kind == "" || o.GetKind() == r.Kind) && (ns == "" || o.GetNamespace() == ns) {
					if found != nil {
						return l.errorf(field, "several resources are %s %s; give kind and namespace", r.Kind, name)
					}
					found = o
				}
			}
			if found == nil {
				return l.errorf(field, "no resource is %s %s", r.Kind, name)
			}
			c.Object = found.DeepCopy()
			if c.Operation == admissionv1.Update {
				c.OldObject = found.DeepCopy()
			}
			if c.Kyverno != nil {
				if patched != "" {
					objs, err := l.objects(field+".patchedResources", &ObjectRef{Path: patched})
					if err != nil {
						return err
					}
					// As kyverno test finds it: by apiVersion, kind, namespace and name.
					if c.Expect = pickExact(c.Object, objs); c.Expect == nil {
						if r.FailOnMissingResources {
							return l.errorf(field+".patchedResources", "%s has no %s %s", patched, c.Object.GetAPIVersion(), Identity(c.Object))
						}
						skip(fmt.Sprintf("%s has no %s %s: kyverno test skips the result (failOnMissingResources is false)", patched, c.Object.GetAPIVersion(), Identity(c.Object)))
						continue
					}
				}
				switch result {
				case "pass", "skip", "fail", "error":
				default:
					skip(fmt.Sprintf("result %q has no meaning for a mutate rule", result))
					continue
				}
				s.Cases = append(s.Cases, c)
				continue
			}
			switch result {
			case "pass":
				if patched == "" {
					c.ExpectAdmitted = true
					break
				}
				objs, err := l.objects(field+".patchedResources", &ObjectRef{Path: patched})
				if err != nil {
					return err
				}
				if c.Expect, err = Pick(c.Object, objs); err != nil {
					return l.errorf(field+".patchedResources", "%v", err)
				}
			case "skip":
				c.ExpectUnchanged = true
			case "fail", "error":
				anyErr := ""
				c.ExpectError = &anyErr
			default:
				skip(fmt.Sprintf("result %q has no meaning for a MutatingAdmissionPolicy", result))
				continue
			}
			s.Cases = append(s.Cases, c)
		}
	}
	return nil
}

// kyvernoValues reads the values file: namespace labels and Namespace objects join the suite's
// namespaces; request.operation is returned. With Kyverno policies, values of variables are
// refused (a compiled policy computes its variables from the request); without, they are noted.
func (l *loader) kyvernoValues(s *Suite, file string, withKyverno bool) (string, error) {
	if file == "" {
		return "", nil
	}
	raw, err := os.ReadFile(l.path(file))
	if err != nil {
		return "", l.errorf("variables", "%v", err)
	}
	var v kyvernoValues
	if err := sigsyaml.Unmarshal(raw, &v); err != nil {
		return "", l.errorf("variables", "%s: %v", file, err)
	}
	for _, ns := range v.NamespaceSelector {
		s.Namespaces = append(s.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels}})
	}
	for i := range v.Namespaces {
		s.Namespaces = append(s.Namespaces, &v.Namespaces[i])
	}
	op := ""
	if x, ok := v.GlobalValues["request.operation"]; ok {
		op, _ = x.(string)
		switch op {
		case "CREATE", "UPDATE", "DELETE":
		case "CONNECT":
			return "", l.errorf("variables", "%s: globalValues: request.operation CONNECT: kyverno test sends such a request as a CREATE, which the API server never does; use CREATE or UPDATE", file)
		default:
			return "", l.errorf("variables", "%s: globalValues: request.operation %v: use CREATE, UPDATE or DELETE", file, x)
		}
	}
	var others []string
	for k := range v.GlobalValues {
		if k != "request.operation" {
			others = append(others, "globalValues."+k)
		}
	}
	sort.Strings(others)
	for _, p := range v.Policies {
		for _, r := range p.Resources {
			if len(r.Values) > 0 {
				others = append(others, fmt.Sprintf("values for policy %s, resource %s", p.Name, r.Name))
			}
		}
		for _, r := range p.Rules {
			if len(r.Values) > 0 || len(r.ForeachValues) > 0 {
				others = append(others, fmt.Sprintf("values for policy %s, rule %s", p.Name, r.Name))
			}
		}
	}
	if len(v.Subresources) > 0 {
		others = append(others, "subresources")
	}
	if len(others) == 0 {
		return op, nil
	}
	if withKyverno {
		return "", l.errorf("variables", "%s: %s: mapc runs the policies compiled from the Kyverno policies on requests as the API server sends them, and they compute their variables from it: values cannot be given to them; test what depends on them with kyverno test",
			file, strings.Join(others, "; "))
	}
	s.Notes = append(s.Notes, fmt.Sprintf("variables: %s ignored: only namespace labels and request.operation are used", strings.Join(others, "; ")))
	return op, nil
}

// findKyvernoPolicy finds the Kyverno policy a result names, as kyverno test does:
// "namespace/name" is a Policy; "name" is the ClusterPolicy, or the Policy, of that name.
func findKyvernoPolicy(kps []*kyvernoPolicy, ref string) (*kyvernoPolicy, error) {
	ns, name, namespaced := strings.Cut(ref, "/")
	if !namespaced {
		ns, name = "", ref
	}
	var found []*kyvernoPolicy
	for _, p := range kps {
		if p.name == name && (!namespaced || p.namespace == ns) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	for _, p := range found {
		if p.namespace == "" {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s names Kyverno Policies in several namespaces; write namespace/name", ref)
}

func hasRule(p *kyvernoPolicy, name string) bool {
	_, ok := p.mutate[name]
	return ok
}

// pickExact is the object among objs with o's apiVersion, kind, namespace and name, as kyverno
// test finds a patched resource; nil if none.
func pickExact(o *unstructured.Unstructured, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	for _, c := range objs {
		if c.GetAPIVersion() == o.GetAPIVersion() && c.GetKind() == o.GetKind() && c.GetNamespace() == o.GetNamespace() && c.GetName() == o.GetName() {
			return c
		}
	}
	return nil
}

// tidy removes nulls, empty maps and empty lists, recursively, as kyverno test does before it
// compares a patched resource (resource.Tidy in Kyverno's CLI).
func tidy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			if x = tidy(x); x != nil {
				out[k] = x
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		var out []any
		for _, x := range t {
			if x = tidy(x); x != nil {
				out = append(out, x)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

// tidied is a copy of o tidied (an empty object stays empty).
func tidied(o *unstructured.Unstructured) *unstructured.Unstructured {
	if o == nil {
		return nil
	}
	m, _ := tidy(o.DeepCopy().Object).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return &unstructured.Unstructured{Object: m}
}
