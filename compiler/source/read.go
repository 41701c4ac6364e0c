// Package source reads Kubernetes documents from files, directories and standard input: YAML
// streams with several documents, JSON, and kind: List, each read as kubectl reads it, and
// refused if a mapping gives a key twice. Every document keeps its file and the line each of
// its fields starts on, so that later phases can report "file:line: ...".
//
// It does not interpret the documents: which ones are policies is the routes' business. It must
// not import anything else under compiler/.
package source

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/internal/par"
)

// Document is one Kubernetes object read from a file.
type Document struct {
	File   string
	Line   int // line the document starts on
	Object *unstructured.Unstructured
	node   *yaml.Node
	index  int // position in the file, for stable ordering
}

// LineOf returns the line of the field at path (e.g. "spec", "location"; a list item by its
// index, "0"), or of the closest ancestor that exists, or of the document.
func (d *Document) LineOf(path ...string) int {
	n := d.node
	line := d.Line
	for _, p := range path {
		if n == nil {
			break
		}
		for n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
			n = n.Content[0]
		}
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(p); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		n = next
	}
	return line
}

// Error is a problem with one input, positioned.
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Extensions lists the file endings read from directories.
var Extensions = []string{".yaml", ".yml", ".json"}

// ReadPaths reads every path in order: a file, a directory (recursively, files with one of
// Extensions, in lexical order) or "-" for stdin. Documents come back sorted by file name and
// position, so the result does not depend on the order of the paths.
func ReadPaths(paths []string, stdin io.Reader) ([]*Document, error) {
	var docs []*Document
	var errs []error
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "-" {
			if seen["-"] {
				continue
			}
			seen["-"] = true
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
			ds, err := Parse("<stdin>", data)
			if err != nil {
				errs = append(errs, err)
			}
			docs = append(docs, ds...)
			continue
		}
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if seen[f] {
				continue
			}
			seen[f] = true
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			ds, err := Parse(f, data)
			if err != nil {
				errs = append(errs, err)
			}
			docs = append(docs, ds...)
		}
	}
	sort.SliceStable(docs, func(i, j int) bool {
		if docs[i].File != docs[j].File {
			return docs[i].File < docs[j].File
		}
		return docs[i].index < docs[j].index
	})
	return docs, joinErrors(errs)
}

func expand(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("%s: no such file or directory", p)
	}
	if !st.IsDir() {
		return []string{filepath.Clean(p)}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		for _, ext := range Extensions {
			if strings.HasSuffix(d.Name(), ext) {
				files = append(files, path)
				break
			}
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// Parse splits a YAML or JSON stream into documents and reads each as kubectl does: a line
// "---" separates documents (k8s.io/apimachinery's YAMLReader), and a document's object is
// what sigs.k8s.io/yaml (YAML 1.1, then JSON) makes of its text; kind: List items become
// documents of their own. Empty documents are skipped. Every malformed document is reported,
// and so is every mapping key given twice, at any depth: kubectl would keep the last, the API
// server rejects such an object, and Parse does not return its document.
func Parse(file string, data []byte) ([]*Document, error) {
	secs, seps, lost := split(data)
	var errs []*Error
	if lost > 0 {
		errs = append(errs, &Error{File: file, Line: lost, Msg: "the last line does not end with a newline and its length is a multiple of 4096 bytes: kubectl leaves such a line out; end the file with a newline"})
	}
	for _, e := range seps {
		errs = append(errs, &Error{File: file, Line: e.line, Msg: fmt.Sprintf("%q after ---: a line that starts with --- separates documents and holds nothing else but a comment; put the document's content on the next line", e.rest)})
	}
	// Each section is a document of its own, parsed on every core and taken in order.
	parsed := make([][]*Document, len(secs))
	failed := make([][]*Error, len(secs))
	par.Do(len(secs), func(i int) { parsed[i], failed[i] = parseSection(file, secs[i], i) })
	var docs []*Document
	for i := range secs {
		docs = append(docs, parsed[i]...)
		errs = append(errs, failed[i]...)
	}
	if len(errs) == 0 {
		return docs, nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
	l := make(ErrorList, len(errs))
	for i, e := range errs {
		l[i] = e
	}
	return docs, l
}

// parseSection reads the document in one section, the i-th of its file.
func parseSection(file string, sec section, i int) ([]*Document, []*Error) {
	dec := yaml.NewDecoder(bytes.NewReader(sec.text))
	var n yaml.Node
	if err := dec.Decode(&n); err == io.EOF {
		return nil, nil
	} else if err != nil {
		return nil, []*Error{positioned(file, sec, "not valid YAML or JSON", err)}
	}
	var errs []*Error
	for {
		var more yaml.Node
		err := dec.Decode(&more)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, positioned(file, sec, "not valid YAML or JSON", err))
			break
		}
		if len(more.Content) > 0 {
			errs = append(errs, &Error{File: file, Line: sec.line + more.Line - 1, Msg: "a second document without a line --- before it: kubectl reads only the first document between two lines ---; put a line --- before this one"})
			break
		}
	}
	if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
		return nil, errs
	}
	root := n.Content[0]
	off := sec.line - 1
	if root.Kind != yaml.MappingNode {
		return nil, append(errs, &Error{File: file, Line: root.Line + off, Msg: "a document must be a mapping (a Kubernetes object)"})
	}
	t := newText(sec.text)
	if dups := t.duplicates(root, make([]step, 0, 16), nil); len(dups) > 0 {
		for _, d := range dups {
			d.line += off
			d.first += off
			errs = append(errs, duplicateError(file, root, d))
		}
		return nil, errs
	}
	m, err := t.toObject(root)
	if err != nil {
		return nil, append(errs, positioned(file, sec, "", err))
	}
	shift(root, off)
	obj := &unstructured.Unstructured{Object: m}
	if !obj.IsList() {
		return []*Document{{File: file, Line: root.Line, Object: obj, node: root, index: i * 100000}}, errs
	}
	var docs []*Document
	items, _, _ := unstructured.NestedSlice(obj.Object, "items")
	itemNodes := listItemNodes(root)
	for j, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			errs = append(errs, &Error{File: file, Line: root.Line, Msg: fmt.Sprintf("items[%d] is not an object", j)})
			continue
		}
		d := &Document{File: file, Line: root.Line, Object: &unstructured.Unstructured{Object: m}, index: i*100000 + j}
		if j < len(itemNodes) {
			d.node = itemNodes[j]
			d.Line = itemNodes[j].Line
		}
		docs = append(docs, d)
	}
	return docs, errs
}

// shift adds off to the line of every node at or below n.
func shift(n *yaml.Node, off int) {
	n.Line += off
	for _, c := range n.Content {
		shift(c, off)
	}
}

// yamlLine matches the line yaml v2 and v3 put in an error.
var yamlLine = regexp.MustCompile(`yaml: line (\d+): `)

// positioned is err, from reading sec's text, at the line of the file it names.
func positioned(file string, sec section, what string, err error) *Error {
	msg := err.Error()
	line := sec.line
	if m := yamlLine.FindStringSubmatchIndex(msg); m != nil {
		if l, err := strconv.Atoi(msg[m[2]:m[3]]); err == nil {
			line = sec.line + l - 1
		}
		msg = msg[:m[0]] + msg[m[1]:]
	}
	msg = strings.ReplaceAll(msg, "yaml: ", "")
	if what != "" {
		msg = what + ": " + msg
	}
	return &Error{File: file, Line: line, Msg: msg}
}

func listItemNodes(root *yaml.Node) []*yaml.Node {
	if items := child(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
		return items.Content
	}
	return nil
}

// child is the value of key in mapping n (the first such key), or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// toObject is the object in mapping root, read directly when plainValue can, else as kubectl
// reads the text.
func (t *text) toObject(root *yaml.Node) (map[string]any, error) {
	if v, ok := t.plainValue(root); ok {
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
	}
	return kubectlRead(t.src)
}

// kubectlRead reads a document as kubectl does: sigs.k8s.io/yaml (YAML 1.1) to JSON, then
// JSON as the API machinery reads it (integers as int64).
func kubectlRead(src []byte) (map[string]any, error) {
	js, err := sigsyaml.YAMLToJSON(src)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(js, &m); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %v", err)
	}
	if m == nil {
		return nil, fmt.Errorf("a document must be a mapping (a Kubernetes object)")
	}
	return m, nil
}

// ErrorList is every problem found, each on its own line.
type ErrorList []error

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return ErrorList(errs)
}

// CheckObjects checks that each document is an object the API server would take to create:
// apiVersion, kind, and metadata.name or generateName. The error (an ErrorList) names every
// document that is not, with its file and line.
func CheckObjects(docs []*Document) error {
	var errs ErrorList
	for _, d := range docs {
		var missing []string
		if d.Object.GetAPIVersion() == "" {
			missing = append(missing, "apiVersion")
		}
		if d.Object.GetKind() == "" {
			missing = append(missing, "kind")
		}
		if d.Object.GetName() == "" && d.Object.GetGenerateName() == "" {
			missing = append(missing, "metadata.name")
		}
		if len(missing) > 0 {
			errs = append(errs, &Error{File: d.File, Line: d.Line, Msg: fmt.Sprintf("not an object to admit: it has no %s (the API server needs apiVersion, kind and metadata.name or generateName)", strings.Join(missing, ", "))})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}
