// Package source reads Kubernetes documents from files, directories and standard input: YAML
// streams with several documents, JSON, and kind: List. Every document keeps its file and the
// line each of its fields starts on, so that later phases can report "file:line: ...".
//
// It does not interpret the documents: which ones are policies is the front ends' business.
package source

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// Document is one Kubernetes object read from a file.
type Document struct {
	File   string
	Line   int // line the document starts on
	Object *unstructured.Unstructured
	node   *yaml.Node
	index  int // position in the file, for stable ordering
}

// LineOf returns the line of the field at path (e.g. "spec", "location"), or of the closest
// ancestor that exists, or of the document.
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
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
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

// Parse splits a YAML or JSON stream into documents; kind: List items become documents of their
// own. Empty documents are skipped. Every malformed document is reported.
func Parse(file string, data []byte) ([]*Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*Document
	var errs []error
	for i := 0; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, &Error{File: file, Msg: "not valid YAML or JSON: " + strings.TrimPrefix(err.Error(), "yaml: ")})
			break
		}
		if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
			continue
		}
		root := n.Content[0]
		line := root.Line
		if root.Kind != yaml.MappingNode {
			errs = append(errs, &Error{File: file, Line: line, Msg: "a document must be a mapping (a Kubernetes object)"})
			continue
		}
		obj, err := toObject(&n)
		if err != nil {
			errs = append(errs, &Error{File: file, Line: line, Msg: err.Error()})
			continue
		}
		if obj.IsList() {
			items, _, _ := unstructured.NestedSlice(obj.Object, "items")
			itemNodes := listItemNodes(root)
			for j, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					errs = append(errs, &Error{File: file, Line: line, Msg: fmt.Sprintf("items[%d] is not an object", j)})
					continue
				}
				d := &Document{File: file, Line: line, Object: &unstructured.Unstructured{Object: m}, index: i*100000 + j}
				if j < len(itemNodes) {
					d.node = itemNodes[j]
					d.Line = itemNodes[j].Line
				}
				docs = append(docs, d)
			}
			continue
		}
		docs = append(docs, &Document{File: file, Line: line, Object: obj, node: root, index: i * 100000})
	}
	return docs, joinErrors(errs)
}

func listItemNodes(root *yaml.Node) []*yaml.Node {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "items" && root.Content[i+1].Kind == yaml.SequenceNode {
			return root.Content[i+1].Content
		}
	}
	return nil
}

func toObject(n *yaml.Node) (*unstructured.Unstructured, error) {
	out, err := yaml.Marshal(n)
	if err != nil {
		return nil, err
	}
	js, err := sigsyaml.YAMLToJSON(out)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %v", err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(js, &m); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %v", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
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
