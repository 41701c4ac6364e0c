package source

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// A text is a section's bytes with where each of its lines starts, counted as yaml v3 counts
// lines and columns (a line break is "\r\n", "\r", "\n", U+0085, U+2028 or U+2029; a column is
// one character; a byte order mark at the start is not counted), so that the first character
// of a node can be looked at.
type text struct {
	src    []byte
	starts []int // byte offset of each line; starts[0] is after a byte order mark
	ok     bool  // false when positions cannot be trusted (UTF-16): nothing is read directly
}

func newText(src []byte) *text {
	t := &text{src: src, ok: true}
	if bytes.HasPrefix(src, []byte("\xfe\xff")) || bytes.HasPrefix(src, []byte("\xff\xfe")) {
		t.ok = false
		return t
	}
	first := 0
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		first = 3
	}
	t.starts = make([]int, 1, bytes.Count(src, []byte("\n"))+2)
	t.starts[0] = first
	for i := first; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\n':
			t.starts = append(t.starts, i+1)
		case c == '\r':
			if i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
			t.starts = append(t.starts, i+1)
		case c == 0xC2 && i+1 < len(src) && src[i+1] == 0x85:
			i++
			t.starts = append(t.starts, i+1)
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && (src[i+2] == 0xA8 || src[i+2] == 0xA9):
			i += 2
			t.starts = append(t.starts, i+1)
		}
	}
	return t
}

// offset returns the offset in the text of n's position (its first character, or the tag or
// anchor before it), and false if the position is not in the text.
func (t *text) offset(n *yaml.Node) (int, bool) {
	if !t.ok || n.Line < 1 || n.Line > len(t.starts) || n.Column < 1 {
		return 0, false
	}
	i := t.starts[n.Line-1]
	for c := 1; c < n.Column; c++ {
		if i >= len(t.src) || t.src[i] == '\n' || t.src[i] == '\r' {
			return 0, false
		}
		_, w := utf8.DecodeRune(t.src[i:])
		i += w
	}
	return i, i < len(t.src)
}

// at returns the byte at n's position, and false if the position is not in the text.
func (t *text) at(n *yaml.Node) (byte, bool) {
	i, ok := t.offset(n)
	if !ok {
		return 0, false
	}
	return t.src[i], true
}

// plainNode reports whether n carries no tag and no anchor. yaml v3 drops the non-specific
// tag "!" (`a: ! 1`, `a: !`) as if it were not written, whereas YAML 1.1, as kubectl reads it,
// makes the value a string ("1", ""): the text at n's position tells. A plain scalar that does
// not start at its position means the positions are off: not plain, to be safe.
func (t *text) plainNode(n *yaml.Node) bool {
	if n.Style&yaml.TaggedStyle != 0 || n.Anchor != "" {
		return false
	}
	c, ok := t.at(n)
	if !ok || c == '!' || c == '&' {
		return false
	}
	if n.Kind == yaml.ScalarNode && n.Style == 0 && n.Value != "" && c != n.Value[0] {
		return false
	}
	return true
}

// plainValue is n's value as kubectl reads the document (sigs.k8s.io/yaml: YAML 1.1, then
// JSON), for the documents nearly all inputs are: mappings and sequences of quoted strings,
// plain strings that YAML 1.1 reads as strings, the plain words it reads as booleans or null,
// and plain decimal integers. Anything else (other numbers, timestamps, tags, anchors, aliases,
// merge keys, keys that are not strings, a key given twice) is not ok, and kubectl's reading
// of the section's bytes decides. Parsing 10,000 mutators spent most of its time there.
func (t *text) plainValue(n *yaml.Node) (any, bool) {
	if !t.plainNode(n) {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, ok := t.plainValue(n.Content[i])
			key, isStr := k.(string)
			if !ok || !isStr || n.Content[i].Kind != yaml.ScalarNode {
				return nil, false
			}
			if _, dup := m[key]; dup {
				return nil, false
			}
			v, ok := t.plainValue(n.Content[i+1])
			if !ok {
				return nil, false
			}
			m[key] = v
		}
		return m, true
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, ok := t.plainValue(c)
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

// keyName is the name kubectl gives the field of key n (a scalar key read directly), and
// false if it is not read directly.
func (t *text) keyName(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || !t.plainNode(n) {
		return "", false
	}
	if n.Style != 0 {
		return n.Value, true
	}
	if v, ok := yaml11Words[n.Value]; ok {
		if b, ok := v.(bool); ok {
			return strconv.FormatBool(b), true
		}
		return "", false // null: not a field name kubectl accepts
	}
	if plainKind(n.Value) == 0 {
		return "", false
	}
	return n.Value, true // a string, or a decimal integer written as kubectl writes it
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
	switch plainKind(s) {
	case plainInt:
		var v int64
		for i := 0; i < len(s); i++ {
			v = v*10 + int64(s[i]-'0')
		}
		return v, true
	case plainString:
		return s, true
	}
	return nil, false
}

const (
	plainInt = 1 + iota
	plainString
)

// plainKind tells what a plain scalar that is not one of yaml11Words is, when that is simple:
// a decimal integer without sign or leading zeros (plainInt), a string that cannot be anything
// else (plainString: its first character is not one YAML 1.1 looks further at); 0 otherwise.
func plainKind(s string) int {
	if s == "" {
		return 0
	}
	c := s[0]
	switch {
	case c >= '1' && c <= '9' || c == '0' && len(s) == 1:
		if len(s) > 18 {
			return 0
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0
			}
		}
		return plainInt
	case c >= '0' && c <= '9', c == '+', c == '-', c == '.', c == '<':
		return 0 // other numbers, timestamps, .inf, merge keys
	}
	return plainString
}
