package source

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// A duplicate is a mapping key that names a field an earlier key of the same mapping names
// too, as kubectl reads keys (`1`, `"1"` and `01` all name field "1").
type duplicate struct {
	path        string // of the mapping: "spec.parameters", "items[0]", "" for the document
	name        string // the field
	line, first int    // of this key and of the first one
}

// step is one part of a path: a key, or an index when key is "".
type step struct {
	key   string
	index int
}

func render(path []step) string {
	var b strings.Builder
	for _, s := range path {
		if s.key == "" {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return b.String()
}

// duplicates appends every key of a mapping at or below n that repeats a field name. Merge
// keys (<<) are left out, and so are the keys they merge: giving one again overrides it, as
// YAML means (kubectl's strict reading refuses that; the API server never sees it). Aliases are not followed: their mapping is checked
// where it is defined.
func (t *text) duplicates(n *yaml.Node, path []step, out []duplicate) []duplicate {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			out = t.duplicates(c, path, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			out = t.duplicates(c, append(path, step{index: i}), out)
		}
	case yaml.MappingNode:
		type seen struct {
			name string
			line int
		}
		var few [16]seen
		names := few[:0] // few keys: a slice is faster than a map
		var index map[string]int
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			name, ok := t.fieldName(k)
			if ok {
				first := 0
				if index != nil {
					first = index[name]
				} else {
					for _, s := range names {
						if s.name == name {
							first = s.line
							break
						}
					}
				}
				if first > 0 {
					out = append(out, duplicate{path: render(path), name: name, line: k.Line, first: first})
				} else {
					names = append(names, seen{name, k.Line})
					if index == nil && len(names) > len(few) {
						index = make(map[string]int, len(n.Content)/2)
						for _, s := range names {
							index[s.name] = s.line
						}
					} else if index != nil {
						index[name] = k.Line
					}
				}
			} else {
				name = k.Value
			}
			out = t.duplicates(v, append(path, step{key: name}), out)
		}
	}
	return out
}

// fieldName is the name of the field key k stands for, as kubectl reads it, and false for a
// key that names no field (a merge key, a null, a mapping or sequence: kubectl rejects the last
// two) or whose name could not be worked out.
func (t *text) fieldName(k *yaml.Node) (string, bool) {
	if name, ok := t.keyName(k); ok {
		return name, true
	}
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
		return "", false
	}
	if t.nonSpecific(k) {
		return k.Value, true // a string whatever it looks like
	}
	// Rare keys (floats, octal, tags, anchors): read {k: null} as kubectl does.
	key := *k
	key.Anchor = ""
	key.HeadComment, key.LineComment, key.FootComment = "", "", ""
	m := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{&key, {Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}}}
	out, err := yaml.Marshal(m)
	if err != nil {
		return "", false
	}
	js, err := sigsyaml.YAMLToJSON(out)
	if err != nil {
		return "", false
	}
	var fields map[string]any
	if utiljson.Unmarshal(js, &fields) != nil || len(fields) != 1 {
		return "", false
	}
	for name := range fields {
		return name, true
	}
	return "", false
}

// nonSpecific reports whether n is written with the non-specific tag "!" (or "!<!>"), which yaml
// v3 drops and YAML 1.1 reads as "a string": `! 1` is "1", `! ~` is "~".
func (t *text) nonSpecific(n *yaml.Node) bool {
	i, ok := t.offset(n)
	if !ok {
		return false
	}
	s := t.src[i:]
	if s[0] == '&' { // an anchor, then the tag
		for len(s) > 0 && !isBlank(s[0]) {
			s = s[1:]
		}
		for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
			s = s[1:]
		}
	}
	if bytes.HasPrefix(s, []byte("!<!>")) {
		return true
	}
	return len(s) > 0 && s[0] == '!' && (len(s) == 1 || isBlank(s[1]) || s[1] == ',' || s[1] == ']' || s[1] == '}')
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// duplicateError says where a duplicate is and what to do.
func duplicateError(file string, root *yaml.Node, d duplicate) *Error {
	var b strings.Builder
	if id := objectName(root); id != "" {
		b.WriteString(id + ": ")
	}
	if d.path != "" {
		b.WriteString(d.path + ": ")
	}
	fmt.Fprintf(&b, "duplicate key %q (also on line %d): keep only one of them (the API server rejects an object with a field given twice; kubectl would silently keep the last)", d.name, d.first)
	return &Error{File: file, Line: d.line, Msg: b.String()}
}

// objectName is "Kind/name" of a document, or "" if it has not both as plain strings.
func objectName(root *yaml.Node) string {
	kind := child(root, "kind")
	name := child(child(root, "metadata"), "name")
	if kind == nil || name == nil || kind.Kind != yaml.ScalarNode || name.Kind != yaml.ScalarNode || kind.Value == "" || name.Value == "" {
		return ""
	}
	return kind.Value + "/" + name.Value
}
