package suite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify"
)

// Format names.
const (
	FormatMapc    = "mapc"
	FormatKaptest = "kaptest"
	FormatKyverno = "kyverno"
)

// APIVersion and Kind of mapc's own suite format.
const (
	APIVersion = "mapc.dev/v1alpha1"
	Kind       = "Test"
)

// kyvernoAPIVersions are the apiVersions of kyverno-test.yaml files (kind Test).
var kyvernoAPIVersions = map[string]bool{"cli.kyverno.io/v1alpha1": true, "kyverno.io/v1": true, "kyverno.io/v1alpha1": true}

// Suite is a test suite read from a file in any of the supported formats.
type Suite struct {
	File   string
	Name   string
	Format string
	// KubernetesVersion is the target version: CEL environment and create-time checks.
	KubernetesVersion *version.Version
	// Mutators are Gatekeeper mutators, compiled when the suite runs.
	Mutators []*source.Document
	// Kyverno are Kyverno ClusterPolicies and Policies, compiled when the suite runs; in a
	// kyverno-test.yaml, in the order kyverno test applies them.
	Kyverno []*source.Document
	// Policies are ready MutatingAdmissionPolicy and binding documents.
	Policies []*source.Document
	// BindUnbound gives each policy that has no binding a binding matching everything the policy
	// matches (kaptest and the Kyverno CLI evaluate policies without bindings).
	BindUnbound bool
	Namespaces  []*corev1.Namespace
	CRDs        []*apiextensionsv1.CustomResourceDefinition
	// Params are the param objects policies with a paramKind read through their bindings'
	// paramRef (admission.Options.Params), where they were read.
	Params []*source.Document
	Cases  []*Case
	// Skipped are cases of the file that cannot be run, with the reason.
	Skipped []verify.Skip
	// Notes are parts of the file that were ignored.
	Notes []string
}

// Case is one admission request and what should come of it. Exactly one of Expect,
// ExpectUnchanged, ExpectError and ExpectAdmitted is set.
type Case struct {
	Name      string
	Where     string // file:line of the case
	Object    *unstructured.Unstructured
	OldObject *unstructured.Unstructured
	Operation admissionv1.Operation
	User      string
	// Policies, when set, restricts the case to the policies of these names.
	Policies []string
	// Binding, when set, is the only binding used for the case (by name); with OwnBinding the
	// policies get a binding matching everything instead of theirs.
	Binding    string
	OwnBinding bool
	// Param, when set, is the param the case gives its policies directly (kaptest's param): the
	// bindings of the policies with a paramKind get a paramRef naming exactly this object
	// (admission.Evaluator.ParamRefTo) instead of theirs.
	Param *unstructured.Unstructured

	Expect          *unstructured.Unstructured
	ExpectUnchanged bool
	ExpectError     *string // a substring of the error; "" for any error
	ExpectAdmitted  bool    // admitted, whatever the result
	// Tidy compares Expect with the result as kyverno test compares a patched resource: nulls,
	// empty maps and empty lists removed on both sides.
	Tidy bool
	// Kyverno, when set, makes the case a kyverno-test.yaml result for a Kyverno policy: it runs
	// through the policy compiled from it, and Expect (if set) is its patched resource.
	Kyverno *KyvernoResult
}

// Detect says which format a suite file is written in, or "" if it is none.
func Detect(data []byte) string {
	var top map[string]any
	if err := sigsyaml.Unmarshal(firstDocument(data), &top); err != nil || top == nil {
		return ""
	}
	apiVersion, _ := top["apiVersion"].(string)
	kind, _ := top["kind"].(string)
	switch {
	case apiVersion == APIVersion && kind == Kind:
		return FormatMapc
	case kyvernoAPIVersions[apiVersion] && kind == "Test":
		return FormatKyverno
	case apiVersion == "" && (top["mapTestSuites"] != nil || top["vapTestSuites"] != nil):
		return FormatKaptest
	}
	return ""
}

// firstDocument cuts a YAML stream at its second document.
func firstDocument(data []byte) []byte {
	if bytes.HasPrefix(data, []byte("---\n")) {
		data = data[4:]
	}
	if i := bytes.Index(data, []byte("\n---")); i >= 0 {
		return data[:i+1]
	}
	return data
}

// Find expands the arguments of `mapc test`: a file is a suite; a directory is searched
// recursively for files (.yaml, .yml) in one of the formats. Files come back sorted.
func Find(paths []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: no such file or directory", p)
		}
		if !st.IsDir() {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if Detect(data) != "" && !seen[path] {
				seen[path] = true
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no test suite found (files with apiVersion %s kind %s, kaptest files, kyverno-test.yaml)", p, APIVersion, Kind)
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// Load reads a suite file in any supported format. File and object paths in it are relative to
// the directory of the file.
func Load(path string) (*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l := &loader{file: path, dir: filepath.Dir(path), lines: newLineFinder()}
	docs, err := source.Parse(path, data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: empty", path)
	}
	l.doc = docs[0]
	s := &Suite{File: path, Name: path}
	switch Detect(data) {
	case FormatMapc:
		s.Format = FormatMapc
		err = l.mapc(s, data)
	case FormatKaptest:
		s.Format = FormatKaptest
		err = l.kaptest(s, data)
	case FormatKyverno:
		s.Format = FormatKyverno
		err = l.kyverno(s, data)
	default:
		return nil, fmt.Errorf("%s: not a test suite: want apiVersion: %s, kind: %s (or a kaptest or kyverno-test.yaml file)", path, APIVersion, Kind)
	}
	if err != nil {
		return nil, err
	}
	if s.KubernetesVersion == nil {
		s.KubernetesVersion = defaultVersion()
	}
	return s, nil
}

// loader resolves the paths and objects of one suite file and positions its errors.
type loader struct {
	file  string
	dir   string
	doc   *source.Document // the suite document, for lines
	lines *lineFinder
}

// errorf is an error at a field of the suite file: "file:line: field: message".
func (l *loader) errorf(field string, format string, a ...any) error {
	line := l.doc.Line
	if field != "" {
		line = l.lines.line(l.doc, field)
		format = field + ": " + format
	}
	return &source.Error{File: l.file, Line: line, Msg: fmt.Sprintf(format, a...)}
}

func (l *loader) where(field string) string {
	return fmt.Sprintf("%s:%d", l.file, l.lines.line(l.doc, field))
}

// path resolves a path written in the suite file.
func (l *loader) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(l.dir, p)
}

// read reads files or directories named in the suite file.
func (l *loader) read(field string, paths []string) ([]*source.Document, error) {
	var full []string
	for _, p := range paths {
		full = append(full, l.path(p))
	}
	docs, err := source.ReadPaths(full, nil)
	if err != nil {
		return nil, l.errorf(field, "%v", err)
	}
	return docs, nil
}

// sources sorts documents into Gatekeeper mutators, Kyverno policies and ready policies; others
// go to others.
func (l *loader) sources(s *Suite, field string, docs []*source.Document, others func(*source.Document) error) error {
	sorted := compiler.Sort(docs)
	s.Mutators = append(s.Mutators, sorted.Inputs[compiler.Gatekeeper]...)
	s.Kyverno = append(s.Kyverno, sorted.Inputs[compiler.Kyverno]...)
	s.Policies = append(s.Policies, sorted.Policies...)
	rest := map[*source.Document]bool{}
	for _, d := range append(append([]*source.Document(nil), sorted.Related...), sorted.Objects...) {
		rest[d] = true
	}
	for _, d := range docs { // in input order
		if rest[d] {
			if err := others(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// strict decodes the suite document into out, reporting a misspelt or unknown field with its
// line.
func (l *loader) strict(data []byte, out any) error {
	js, err := sigsyaml.YAMLToJSON(firstDocument(data))
	if err != nil {
		return l.errorf("", "%v", err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(js, out)
	if err != nil {
		return l.errorf("", "%v", err)
	}
	if len(strictErrs) == 0 {
		return nil
	}
	// The first strict error is reported.
	msg := strictErrs[0].Error()
	if i := strings.Index(msg, `unknown field "`); i >= 0 {
		field := strings.TrimSuffix(msg[i+len(`unknown field "`):], `"`)
		return l.errorf(field, "unknown field")
	}
	return l.errorf("", "%s", msg)
}

// ObjectRef is a Kubernetes object written inline, or the path of a file holding it.
type ObjectRef struct {
	Path   string
	Inline map[string]any
}

// UnmarshalJSON reads a string (a path) or a mapping (the object).
func (r *ObjectRef) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.HasPrefix(data, []byte(`"`)):
		return json.Unmarshal(data, &r.Path)
	case bytes.HasPrefix(data, []byte(`{`)):
		return json.Unmarshal(data, &r.Inline)
	}
	return fmt.Errorf("want a file name or an inline object, not %s", data)
}

func (r *ObjectRef) set() bool { return r != nil && (r.Path != "" || r.Inline != nil) }

// objects returns the objects r stands for.
func (l *loader) objects(field string, r *ObjectRef) ([]*unstructured.Unstructured, error) {
	if r.Inline != nil {
		u := &unstructured.Unstructured{Object: r.Inline}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, l.errorf(field, "an inline object needs apiVersion and kind")
		}
		return []*unstructured.Unstructured{u}, nil
	}
	docs, err := l.read(field, []string{r.Path})
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, l.errorf(field, "%s holds no object", r.Path)
	}
	var out []*unstructured.Unstructured
	for _, d := range docs {
		out = append(out, d.Object)
	}
	return out, nil
}

// docs returns the objects r stands for as documents: those of its file, or the inline object
// placed at the field.
func (l *loader) docs(field string, r *ObjectRef) ([]*source.Document, error) {
	if r.Inline != nil {
		objs, err := l.objects(field, r)
		if err != nil {
			return nil, err
		}
		return []*source.Document{{File: l.file, Line: l.lines.line(l.doc, field), Object: objs[0]}}, nil
	}
	docs, err := l.read(field, []string{r.Path})
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, l.errorf(field, "%s holds no object", r.Path)
	}
	return docs, nil
}

// object returns the one object r stands for.
func (l *loader) object(field string, r *ObjectRef) (*unstructured.Unstructured, error) {
	objs, err := l.objects(field, r)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, l.errorf(field, "%s holds %d objects; give one", r.Path, len(objs))
	}
	return objs[0], nil
}

// --- mapc's own format ---

type mapcFile struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	KubernetesVersion string      `json:"kubernetesVersion"`
	Sources           []string    `json:"sources"`
	Namespaces        []ObjectRef `json:"namespaces"`
	CRDs              []string    `json:"crds"`
	Params            []ObjectRef `json:"params"`
	User              string      `json:"user"`
	Cases             []mapcCase  `json:"cases"`
}

type mapcCase struct {
	Name            string     `json:"name"`
	Object          *ObjectRef `json:"object"`
	Operation       string     `json:"operation"`
	OldObject       *ObjectRef `json:"oldObject"`
	User            string     `json:"user"`
	Policies        []string   `json:"policies"`
	Expect          *ObjectRef `json:"expect"`
	ExpectUnchanged bool       `json:"expectUnchanged"`
	ExpectError     *string    `json:"expectError"`
}

func (l *loader) mapc(s *Suite, data []byte) error {
	var f mapcFile
	if err := l.strict(data, &f); err != nil {
		return err
	}
	if f.Metadata.Name != "" {
		s.Name = f.Metadata.Name
	}
	if f.KubernetesVersion != "" {
		v, err := compiler.ParseVersion(f.KubernetesVersion)
		if err != nil {
			return l.errorf("kubernetesVersion", "%v", err)
		}
		s.KubernetesVersion = v
	}
	if len(f.Sources) == 0 {
		return l.errorf("sources", "list the Gatekeeper mutators, Kyverno policies or MutatingAdmissionPolicy files to test")
	}
	docs, err := l.read("sources", f.Sources)
	if err != nil {
		return err
	}
	err = l.sources(s, "sources", docs, func(d *source.Document) error {
		return l.errorf("sources", "%s:%d: %s %s is neither a Gatekeeper mutator, a Kyverno policy nor a MutatingAdmissionPolicy or binding", d.File, d.Line, d.Object.GetAPIVersion(), Identity(d.Object))
	})
	if err != nil {
		return err
	}
	for i := range f.Namespaces {
		field := fmt.Sprintf("namespaces[%d]", i)
		objs, err := l.objects(field, &f.Namespaces[i])
		if err != nil {
			return err
		}
		for _, o := range objs {
			if !IsNamespace(o) {
				return l.errorf(field, "%s is not a v1 Namespace", Identity(o))
			}
		}
		nss, err := Namespaces(docsOf(objs))
		if err != nil {
			return l.errorf(field, "%v", err)
		}
		s.Namespaces = append(s.Namespaces, nss...)
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
	for i := range f.Params {
		field := fmt.Sprintf("params[%d]", i)
		docs, err := l.docs(field, &f.Params[i])
		if err != nil {
			return err
		}
		for _, d := range docs {
			switch {
			case IsCRD(d.Object):
				return l.errorf(field, "%s:%d: a CustomResourceDefinition is not a param; list it under crds", d.File, d.Line)
			case d.Object.GetName() == "":
				return l.errorf(field, "%s:%d: %s without metadata.name: paramRef finds params by name or labels, and the API server stores none without a name", d.File, d.Line, d.Object.GetKind())
			}
		}
		s.Params = append(s.Params, docs...)
	}
	if len(f.Cases) == 0 {
		return l.errorf("cases", "a suite needs cases")
	}
	names := map[string]bool{}
	for i, fc := range f.Cases {
		field := fmt.Sprintf("cases[%d]", i)
		c := &Case{Name: fc.Name, Where: l.where(field), User: fc.User, Policies: fc.Policies}
		if c.User == "" {
			c.User = f.User
		}
		if !fc.Object.set() {
			return l.errorf(field+".object", "a case needs the object to admit")
		}
		if c.Object, err = l.object(field+".object", fc.Object); err != nil {
			return err
		}
		if c.Name == "" {
			c.Name = Identity(c.Object)
		}
		if names[c.Name] {
			return l.errorf(field+".name", "two cases are named %q; name them", c.Name)
		}
		names[c.Name] = true
		switch strings.ToUpper(fc.Operation) {
		case "", "CREATE":
			c.Operation = admissionv1.Create
			if fc.OldObject.set() {
				return l.errorf(field+".oldObject", "oldObject is for operation: UPDATE")
			}
		case "UPDATE":
			c.Operation = admissionv1.Update
			c.OldObject = c.Object
			if fc.OldObject.set() {
				olds, err := l.objects(field+".oldObject", fc.OldObject)
				if err != nil {
					return err
				}
				if c.OldObject, err = Pick(c.Object, olds); err != nil {
					return l.errorf(field+".oldObject", "%v", err)
				}
			}
		default:
			return l.errorf(field+".operation", "%q: use CREATE or UPDATE (MutatingAdmissionPolicies do not run on DELETE or CONNECT)", fc.Operation)
		}
		n := 0
		if fc.Expect.set() {
			n++
			exps, err := l.objects(field+".expect", fc.Expect)
			if err != nil {
				return err
			}
			if c.Expect, err = Pick(c.Object, exps); err != nil {
				return l.errorf(field+".expect", "%v", err)
			}
		}
		if fc.ExpectUnchanged {
			n++
			c.ExpectUnchanged = true
		}
		if fc.ExpectError != nil {
			n++
			c.ExpectError = fc.ExpectError
		}
		if n != 1 {
			return l.errorf(field, "give exactly one of expect, expectUnchanged, expectError")
		}
		s.Cases = append(s.Cases, c)
	}
	return nil
}

func docsOf(objs []*unstructured.Unstructured) []*source.Document {
	out := make([]*source.Document, len(objs))
	for i, o := range objs {
		out[i] = &source.Document{Object: o}
	}
	return out
}
