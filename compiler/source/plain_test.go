package source

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// agree checks data against kubectl's reading of it (k8s.io/apimachinery's YAMLReader cuts the
// stream, sigs.k8s.io/yaml reads each part): split cuts the same sections; every document Parse
// returns holds what kubectl reads from its section (a List's items, each); a section kubectl
// reads as an object gives a document unless Parse reports why not; a section whose keys
// kubectl's strict reading finds twice is refused as a duplicate; and plainValue, where it reads
// a section directly, reads the same. It returns how many sections plainValue read.
func agree(t *testing.T, name string, data []byte) int {
	t.Helper()
	secs, seps, _ := split(data)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for k := 0; ; k++ {
		text, err := r.Read()
		if errors.Is(err, io.EOF) {
			if k != len(secs) {
				t.Errorf("%s: kubectl cuts %d sections, split %d", name, k, len(secs))
			}
			break
		}
		if err != nil {
			if len(seps) == 0 || !strings.Contains(err.Error(), seps[0].rest) {
				t.Errorf("%s: kubectl: %v; split: %v", name, err, seps)
			}
			break
		}
		if k >= len(secs) || !bytes.Equal(text, secs[k].text) {
			var got []byte
			if k < len(secs) {
				got = secs[k].text
			}
			t.Errorf("%s: kubectl's section %d is %q, split's %q", name, k, short(text), short(got))
			break
		}
	}

	fast := 0
	var all []*Document
	for i, sec := range secs {
		docs, errs := parseSection("f", sec, i)
		all = append(all, docs...)
		for _, d := range docs {
			_ = d.LineOf("metadata", "name")
			if d.index/100000 != i {
				t.Errorf("%s: document %d of section %d", name, d.index, i)
			}
		}
		var want map[string]any
		js, kerr := sigsyaml.YAMLToJSON(sec.text)
		if kerr == nil {
			kerr = utiljson.Unmarshal(js, &want)
		}
		if kerr == nil && want == nil {
			kerr = errors.New("not an object")
		}
		if kerr != nil {
			if len(docs) > 0 {
				t.Errorf("%s: section %d (%q): kubectl: %v; Parse: %#v", name, i, short(sec.text), kerr, docs[0].Object.Object)
			}
			continue
		}
		if _, serr := sigsyaml.YAMLToJSONStrict(sec.text); serr != nil && !hasError(errs, "duplicate key", "not valid YAML") && !hasMerge(sec.text) {
			t.Errorf("%s: section %d (%q): kubectl's strict reading: %v; Parse: %v", name, i, short(sec.text), serr, errs)
		}
		var objs []any
		if u := (&unstructured.Unstructured{Object: want}); u.IsList() {
			objs, _, _ = unstructured.NestedSlice(want, "items")
		} else {
			objs = []any{want}
		}
		if len(errs) == 0 && len(docs) != len(objs) {
			t.Errorf("%s: section %d (%q): kubectl reads %d objects, Parse %d and no error", name, i, short(sec.text), len(objs), len(docs))
		}
		for j, d := range docs {
			if j >= len(objs) || !reflect.DeepEqual(d.Object.Object, objs[d.index%100000]) {
				t.Errorf("%s: section %d (%q): Parse reads\n%#v\nkubectl reads:\n%#v", name, i, short(sec.text), d.Object.Object, want)
				break
			}
		}

		var n yaml.Node
		if err := yaml.Unmarshal(sec.text, &n); err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode {
			continue
		}
		if v, ok := newText(sec.text).plainValue(n.Content[0]); ok {
			fast++
			if !reflect.DeepEqual(v, want) {
				t.Errorf("%s: section %d (%q): read directly as\n%#v\nkubectl reads:\n%#v", name, i, short(sec.text), v, want)
			}
		}
	}

	docs, _ := Parse("f", data)
	if len(docs) != len(all) {
		t.Errorf("%s: Parse returns %d documents, its sections %d", name, len(docs), len(all))
	}
	return fast
}

// short is the start of a text, for messages.
func short(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// hasMerge reports whether text holds a merge key (<<): a key it merges may be given again, to
// override it, which kubectl's strict reading refuses and Parse does not.
func hasMerge(text []byte) bool {
	var n yaml.Node
	if yaml.Unmarshal(text, &n) != nil {
		return false
	}
	var walk func(*yaml.Node) bool
	walk = func(n *yaml.Node) bool {
		if n.Tag == "!!merge" {
			return true
		}
		for _, c := range n.Content {
			if walk(c) {
				return true
			}
		}
		return false
	}
	return walk(&n)
}

// hasError reports whether one of errs says one of the things.
func hasError(errs []*Error, things ...string) bool {
	for _, e := range errs {
		for _, s := range things {
			if strings.Contains(e.Msg, s) {
				return true
			}
		}
	}
	return false
}

// readings are streams whose reading is easy to get wrong; FuzzParse starts from them too.
var readings = []string{
	"a: yes\nb: Yes\nc: y\nd: on\ne: OFF\nf: n\ng: 'on'\nh: \"yes\"\n",
	"a: oN\nb: yess\nc: nginx\nd: Nginx\ne: trueish\nf: o\ng: t\n",
	"a: 0\nb: 10\nc: 123456789012345678\nd: 1234567890123456789\ne: 0777\nf: -1\ng: +1\nh: 1.5\ni: 1e3\nj: 0x1F\nk: 1_000\n",
	"a: ~\nb:\nc: null\nd: Null\ne: NULL\nf: nul\n",
	"a: [1, two, 'three', {x: y}]\nb: |\n  text\n  more\nc: >\n  folded\n  text\n",
	"on: x\n", "1: x\n", "~: x\n", "a: !!str 1\n", "a: &x {b: 1}\nc: *x\n", "<<: {a: 1}\nb: 2\n",
	"a: 2026-11-23\nb: .inf\nc: -.inf\nd: .nan\ne: 12:30\n",
	"a: b\na: c\n", "a: /usr/bin\nb: :colon\nc: '#x'\nd: a b c\ne: \u00fc\n",
	`{"apiVersion": "v1", "kind": "X", "n": 3, "f": 1.5, "b": true, "z": null}`,
	// The non-specific tag "!" makes a string, which yaml v3 does not say.
	"\n---\nA0:\nA12: !\nA:", "a: ! 1\nb: [! 1, !  , ! ]\nc: ! {a: 1}\nd: &x ! y\ne: !<!> 2\n",
	"\ufeffa: ! x\nb: 1\n", "a: 1\r\nb: ! 2\r\n", "a: 1\rb: ! 2\n", "a: \u2028b: ! 2\n",
	// Sections as kubectl cuts them.
	"---\na: 1\n---\n---\nb: 2\n", "a: 1\nb: " + strings.Repeat("x", 4093), "a: 1\nb: " + strings.Repeat("x", 4093) + "\n",
	"a: 1\nb: " + strings.Repeat("x", 5000), "a: " + strings.Repeat("x", 4092) + "\r\nb: 1", "a: 1\n--- x\nb: 2\n", "a: 1\n---\n\n---\n# c\n---\nkind: List\nitems: [{a: 1}, 2]\n",
	// Keys given twice, as kubectl names fields.
	"a: 1\nb: {c: 1, c: 2}\n", "1: a\n'1': b\n", "! 1: a\n1: b\n", "d:\n  <<: {a: 1}\n  <<: {b: 1}\n", "<<: {a}\na:\n", "1.0: a\n1: b\n", "y: a\ntrue: b\n", "a: [{b: 1, b: 2}]\n",
}

// TestPlainValueAgrees: documents are cut and read as kubectl cuts and reads them, on YAML
// 1.1's special cases and on every YAML file of the repository; and the direct reading reads
// most of the repository's documents.
func TestPlainValueAgrees(t *testing.T) {
	for _, c := range readings {
		agree(t, c, []byte(c))
	}
	root := filepath.Join("..", "..")
	files, converted := 0, 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			converted += agree(t, p, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d YAML files, %d documents read directly", files, converted)
	if converted < 100 {
		t.Errorf("only %d documents read directly: the fast path hardly runs", converted)
	}
}
