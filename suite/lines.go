package suite

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"

	"github.com/mapc-dev/mapc/compiler/source"
)

// lineFinder finds the line of a field, list indices included ("spec.mutations[1].jsonPatch"),
// by parsing the document's file again: source.Document.LineOf only follows mapping keys. A file
// that cannot be read again (standard input) falls back to LineOf.
type lineFinder struct {
	mu    sync.Mutex
	files map[string][]*yaml.Node // every mapping node that starts a document or a List item
}

func newLineFinder() *lineFinder { return &lineFinder{files: map[string][]*yaml.Node{}} }

func (f *lineFinder) roots(file string) []*yaml.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.files[file]; ok {
		return r
	}
	var roots []*yaml.Node
	if data, err := os.ReadFile(file); err == nil {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				break // io.EOF or an error source.Parse has reported
			}
			if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
				continue
			}
			root := n.Content[0]
			roots = append(roots, root)
			if items := child(root, "items"); items != nil && items.Kind == yaml.SequenceNode {
				roots = append(roots, items.Content...)
			}
		}
	}
	f.files[file] = roots
	return roots
}

// line returns the line of the field at path in doc: keys separated by dots, list indices as [i].
// It returns the line of the deepest part of the path that exists.
func (f *lineFinder) line(doc *source.Document, path string) int {
	parts := splitPath(path)
	var root *yaml.Node
	for _, r := range f.roots(doc.File) {
		if r.Line == doc.Line {
			root = r
			break
		}
	}
	if root == nil {
		var keys []string
		for _, p := range parts {
			if !strings.HasPrefix(p, "[") {
				keys = append(keys, p)
			}
		}
		return doc.LineOf(keys...)
	}
	line := root.Line
	n := root
	for _, p := range parts {
		var next *yaml.Node
		if strings.HasPrefix(p, "[") {
			i, err := strconv.Atoi(strings.Trim(p, "[]"))
			if err == nil && n.Kind == yaml.SequenceNode && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		} else if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}

func child(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// splitPath turns "spec.mutations[1].jsonPatch" into ["spec", "mutations", "[1]", "jsonPatch"].
func splitPath(path string) []string {
	var parts []string
	for _, p := range strings.Split(path, ".") {
		for p != "" {
			i := strings.Index(p, "[")
			if i < 0 {
				parts = append(parts, p)
				break
			}
			if i > 0 {
				parts = append(parts, p[:i])
			}
			j := strings.Index(p[i:], "]")
			if j < 0 {
				parts = append(parts, p[i:])
				break
			}
			parts = append(parts, p[i:i+j+1])
			p = p[i+j+1:]
		}
	}
	return parts
}
