package suite

import (
	"fmt"
	"os"
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
	PatchedResources            string   `json:"patchedResources"`
	PatchedResource             string   `json:"patchedResource"`
	GeneratedResource           string   `json:"generatedResource"`
	CloneSourceResource         string   `json:"cloneSourceResource"`
	Result                      string   `json:"result"`
	Status                      string   `json:"status"`
	IsMutatingAdmissionPolicy   bool     `json:"isMutatingAdmissionPolicy"`
	IsValidatingAdmissionPolicy bool     `json:"isValidatingAdmissionPolicy"`
	IsMutatingPolicy            bool     `json:"isMutatingPolicy"`
	IsValidatingPolicy          bool     `json:"isValidatingPolicy"`
	IsImageValidatingPolicy     bool     `json:"isImageValidatingPolicy"`
	IsDeletingPolicy            bool     `json:"isDeletingPolicy"`
	IsGeneratingPolicy          bool     `json:"isGeneratingPolicy"`
}

// kyvernoValues is the part of a Values file (kind: Value) that maps: namespace labels.
type kyvernoValues struct {
	NamespaceSelector []struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"namespaceSelector"`
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
	mapNames := map[string]bool{}
	for _, d := range s.Policies {
		if d.Object.GetKind() == KindPolicy {
			mapNames[d.Object.GetName()] = true
		}
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
	if f.Variables != "" {
		raw, err := os.ReadFile(l.path(f.Variables))
		if err != nil {
			return l.errorf("variables", "%v", err)
		}
		var v kyvernoValues
		if err := sigsyaml.Unmarshal(raw, &v); err != nil {
			return l.errorf("variables", "%v", err)
		}
		for _, ns := range v.NamespaceSelector {
			s.Namespaces = append(s.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels}})
		}
		s.Notes = append(s.Notes, "variables: only namespaceSelector (namespace labels) is used; other values are ignored")
	}
	if f.UserInfo != "" {
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
		for _, name := range names {
			c := &Case{Where: l.where(field), Policies: []string{r.Policy}, Operation: admissionv1.Create}
			c.Name = fmt.Sprintf("%s: %s %s - %s", r.Policy, r.Kind, name, strings.ToUpper(result))
			skip := func(reason string) { s.Skipped = append(s.Skipped, verify.Skip{Case: c.Name, Reason: reason}) }
			if !mapNames[r.Policy] || r.IsValidatingAdmissionPolicy || r.IsMutatingPolicy || r.IsValidatingPolicy ||
				r.IsImageValidatingPolicy || r.IsDeletingPolicy || r.IsGeneratingPolicy {
				skip("not a MutatingAdmissionPolicy among the policies: mapc runs only MutatingAdmissionPolicies")
				continue
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
