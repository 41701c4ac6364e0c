package source

import (
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
		"a: [":                     "f.yaml:1: not valid YAML or JSON: did not find expected node content",
		"a: 1\nb: 2\n---\nc: [\n":  "f.yaml:4: not valid YAML or JSON",
		"a: 1\n--- b: 2\n":         `f.yaml:2: "b: 2" after ---: a line that starts with --- separates documents`,
		"a: 1\n...\nb: 2\n":        "f.yaml:2: not valid YAML or JSON: did not find expected <document start>",
		"- a\n- b\n":               "f.yaml:1: a document must be a mapping",
		`{"kind": 1`:               "not valid YAML or JSON",
		"kind: List\nitems: [1]\n": "items[0] is not an object",
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
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, "fuzz input", data)
	})
}
