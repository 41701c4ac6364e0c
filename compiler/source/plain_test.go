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
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// agree checks each document of data (split as kubectl splits a stream) against kubectl's
// reading of its bytes (sigs.k8s.io/yaml): plainValue, where it converts the document, and
// (slowToo) viaJSON must give the same object, or both fail. It returns how many plainValue
// converted.
func agree(t *testing.T, name string, data []byte, slowToo bool) int {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	fast := 0
	for {
		doc, err := r.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Logf("%s: %v", name, err)
			}
			return fast
		}
		var n yaml.Node
		if err := yaml.Unmarshal(doc, &n); err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode {
			continue
		}
		var want map[string]any
		js, kerr := sigsyaml.YAMLToJSON(doc)
		if kerr == nil {
			kerr = utiljson.Unmarshal(js, &want)
		}
		if v, ok := plainValue(n.Content[0]); ok {
			fast++
			if kerr != nil || !reflect.DeepEqual(v, want) {
				t.Errorf("%s: read directly as\n%#v\nkubectl reads (%v):\n%#v", name, v, kerr, want)
			}
		}
		if !slowToo {
			continue
		}
		slow, err := viaJSON(&n)
		switch {
		case (err == nil) != (kerr == nil):
			t.Errorf("%s: re-encoded: %v; kubectl: %v", name, err, kerr)
		case err == nil && !reflect.DeepEqual(slow.Object, want):
			t.Errorf("%s: re-encoded as\n%#v\nkubectl reads:\n%#v", name, slow.Object, want)
		}
	}
}

// TestPlainValueAgrees: the direct conversion of YAML documents gives what sigs.k8s.io/yaml
// gives, on YAML 1.1's special cases and on every YAML file of the repository; documents it
// does not convert go the re-encoding way.
func TestPlainValueAgrees(t *testing.T) {
	cases := []string{
		"a: yes\nb: Yes\nc: y\nd: on\ne: OFF\nf: n\ng: 'on'\nh: \"yes\"\n",
		"a: oN\nb: yess\nc: nginx\nd: Nginx\ne: trueish\nf: o\ng: t\n",
		"a: 0\nb: 10\nc: 123456789012345678\nd: 1234567890123456789\ne: 0777\nf: -1\ng: +1\nh: 1.5\ni: 1e3\nj: 0x1F\nk: 1_000\n",
		"a: ~\nb:\nc: null\nd: Null\ne: NULL\nf: nul\n",
		"a: [1, two, 'three', {x: y}]\nb: |\n  text\n  more\nc: >\n  folded\n  text\n",
		"on: x\n", "1: x\n", "~: x\n", "a: !!str 1\n", "a: &x {b: 1}\nc: *x\n", "<<: {a: 1}\nb: 2\n",
		"a: 2026-11-23\nb: .inf\nc: -.inf\nd: .nan\ne: 12:30\n",
		"a: b\na: c\n", "a: /usr/bin\nb: :colon\nc: '#x'\nd: a b c\ne: ü\n",
		`{"apiVersion": "v1", "kind": "X", "n": 3, "f": 1.5, "b": true, "z": null}`,
	}
	for _, c := range cases {
		agree(t, c, []byte(c), true)
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
			converted += agree(t, p, data, true)
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
