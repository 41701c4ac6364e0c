package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := `# comment
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: b
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: c
`
	docs, err := Parse("f.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range docs {
		names = append(names, d.Object.GetName())
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("got %v", names)
	}
	if docs[0].Line != 2 || docs[0].LineOf("metadata", "name") != 5 {
		t.Errorf("lines: %d %d", docs[0].Line, docs[0].LineOf("metadata", "name"))
	}
	if docs[2].LineOf("metadata", "name") != 18 {
		t.Errorf("list item line %d", docs[2].LineOf("metadata", "name"))
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"a: [":                                  "f.yaml:1: not valid YAML or JSON: did not find expected node content",
		"a: 1\nb: 2\n---\nc: [\n":               "f.yaml:4: not valid YAML or JSON",
		"a: 1\n--- b: 2\n":                      `f.yaml:2: "b: 2" after ---: a line that starts with --- separates documents`,
		"a: 1\n...\nb: 2\n":                     "f.yaml:2: not valid YAML or JSON: did not find expected <document start>",
		"- a\n- b\n":                            "f.yaml:1: a document must be a mapping",
		"a: 1\nb: " + strings.Repeat("x", 8189): "f.yaml:2: the last line does not end with a newline and its length is a multiple of 4096 bytes",
		`{"kind": 1`:                            "not valid YAML or JSON",
		"kind: List\nitems: [1]\n":              "items[0] is not an object",
	} {
		_, err := Parse("f.yaml", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: A\n---\nkind: List\nitems: []\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"X"}`))
	for _, s := range readings {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "gatekeeper", "*.yaml"))
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, "fuzz input", data)
	})
}

// TestDuplicateKeys: a key given twice in a mapping, at any depth, in YAML or JSON, is reported
// at its line with the line of the first, and its document is not returned; other documents of
// the stream are.
func TestDuplicateKeys(t *testing.T) {
	const what = ": keep only one of them (the API server rejects an object with a field given twice; kubectl would silently keep the last)"
	cases := []struct {
		name, in string
		errs     []string
		kept     []string // names of the documents returned
	}{{
		name: "spec of a mutator",
		in: `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: a
spec:
  location: spec.x
  applyTo: []
  location: spec.y
`,
		errs: []string{`f.yaml:8: Assign/a: spec: duplicate key "location" (also on line 6)` + what},
	}, {
		name: "top level, three times, then a good document",
		in:   "kind: A\nmetadata: {name: a}\nkind: B\nkind: C\n---\nkind: D\nmetadata: {name: d}\n",
		errs: []string{
			`f.yaml:3: A/a: duplicate key "kind" (also on line 1)` + what,
			`f.yaml:4: A/a: duplicate key "kind" (also on line 1)` + what,
		},
		kept: []string{"d"},
	}, {
		name: "in a list, in every document",
		in: `kind: Assign
metadata:
  name: a
spec:
  match:
    kinds:
    - apiGroups: [""]
      kinds: [Pod]
    - kinds: [Pod]
      kinds: [Service]
---
kind: Assign
metadata: {name: b, labels: {x: "1", y: "2", x: "3"}}
`,
		errs: []string{
			`f.yaml:10: Assign/a: spec.match.kinds[1]: duplicate key "kinds" (also on line 9)` + what,
			`f.yaml:13: Assign/b: metadata.labels: duplicate key "x" (also on line 13)` + what,
		},
	}, {
		name: "JSON",
		in: `{
  "kind": "Assign",
  "metadata": {
    "name": "a",
    "name": "b"
  }
}`,
		errs: []string{`f.yaml:5: Assign/a: metadata: duplicate key "name" (also on line 4)` + what},
	}, {
		name: "spellings of one field",
		in:   "kind: A\nmetadata: {name: a}\ndata:\n  1: a\n  '1': b\n  on: c\n  \"true\": d\n  0x10: e\n  16: f\n",
		errs: []string{
			`f.yaml:5: A/a: data: duplicate key "1" (also on line 4)` + what,
			`f.yaml:7: A/a: data: duplicate key "true" (also on line 6)` + what,
			`f.yaml:9: A/a: data: duplicate key "16" (also on line 8)` + what,
		},
	}, {
		name: "a List's item",
		in:   "kind: List\nitems:\n- kind: A\n  metadata: {name: a}\n- kind: B\n  metadata:\n    name: b\n    name: c\n",
		errs: []string{`f.yaml:8: items[1].metadata: duplicate key "name" (also on line 7)` + what},
	}, {
		name: "not duplicates: other mappings, merge keys, a merged key given again, a string that looks like a tag",
		in:   "kind: A\nmetadata: {name: a}\nx: {a: 1}\ny: {a: 1}\nb: &b {p: 1}\nc: &c {q: 1}\nd:\n  <<: *b\n  <<: *c\n  p: 2\ne: {'1': x, ! 01: y}\n",
		kept: []string{"a"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs, err := Parse("f.yaml", []byte(c.in))
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(c.errs, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.errs, "\n"))
			}
			var names []string
			for _, d := range docs {
				names = append(names, d.Object.GetName())
			}
			if strings.Join(names, ",") != strings.Join(c.kept, ",") {
				t.Errorf("documents %v, want %v", names, c.kept)
			}
		})
	}
}
