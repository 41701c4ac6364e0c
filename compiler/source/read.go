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
	if len(n.Content) == 1 {
		if v, ok := plainValue(n.Content[0]); ok {
			if m, ok := v.(map[string]any); ok {
				return &unstructured.Unstructured{Object: m}, nil
			}
		}
	}
	return viaJSON(n)
}

// viaJSON converts n as kubectl reads YAML (sigs.k8s.io/yaml: YAML 1.1 scalars, then JSON), by
// encoding it again. Block scalars are encoded double-quoted: a folded one with more-indented
// lines would not read back the same.
func viaJSON(n *yaml.Node) (*unstructured.Unstructured, error) {
	quoteBlocks(n)
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

// plainValue is n's value as viaJSON would give it, for the documents nearly all inputs are:
// mappings and sequences of quoted strings, plain strings that YAML 1.1 reads as strings, the
// plain words it reads as booleans or null, and plain decimal integers. Anything else (other
// numbers, timestamps, tags, aliases, merge keys, keys that are not strings, a key given twice)
// is not ok, and viaJSON, which re-encodes the document, decides. Parsing 10,000 mutators spent
// most of its time re-encoding.
func plainValue(n *yaml.Node) (any, bool) {
	if n.Style&yaml.TaggedStyle != 0 {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, ok := plainValue(n.Content[i])
			key, isStr := k.(string)
			if !ok || !isStr || n.Content[i].Kind != yaml.ScalarNode {
				return nil, false
			}
			if _, dup := m[key]; dup {
				return nil, false
			}
			v, ok := plainValue(n.Content[i+1])
			if !ok {
				return nil, false
			}
			m[key] = v
		}
		return m, true
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, ok := plainValue(c)
			if !ok {
				return nil, false
			}
			l = append(l, v)
		}
		return l, true
	case yaml.ScalarNode:
		if n.Style != 0 {
			return n.Value, true // quoted, literal or folded: a string
		}
		return plainScalar(n.Value)
	}
	return nil, false
}

// yaml11Words are the plain scalars YAML 1.1 (go.yaml.in/yaml/v2, which sigs.k8s.io/yaml uses)
// reads as something other than a string and that start with a letter or "~".
var yaml11Words = map[string]any{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true,
	"true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true,
	"n": false, "N": false, "no": false, "No": false, "NO": false,
	"false": false, "False": false, "FALSE": false, "off": false, "Off": false, "OFF": false,
	"~": nil, "null": nil, "Null": nil, "NULL": nil,
}

// plainScalar reads a plain scalar as YAML 1.1 does, when that is simple: empty (null), a
// word of yaml11Words, a string that cannot be anything else (its first character is not one
// YAML 1.1 looks further at), a decimal integer without sign or leading zeros.
func plainScalar(s string) (any, bool) {
	if s == "" {
		return nil, true
	}
	if v, ok := yaml11Words[s]; ok {
		return v, true
	}
	c := s[0]
	switch {
	case c >= '1' && c <= '9' || c == '0' && len(s) == 1:
		if len(s) > 18 {
			return nil, false
		}
		var v int64
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return nil, false
			}
			v = v*10 + int64(s[i]-'0')
		}
		return v, true
	case c >= '0' && c <= '9', c == '+', c == '-', c == '.', c == '<':
		return nil, false // other numbers, timestamps, .inf, merge keys
	}
	return s, true
}

// quoteBlocks makes every literal or folded scalar below n double-quoted (the same string).
func quoteBlocks(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		n.Style = n.Style&^(yaml.LiteralStyle|yaml.FoldedStyle) | yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		quoteBlocks(c)
	}
}
