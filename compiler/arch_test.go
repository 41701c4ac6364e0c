package compiler_test

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/mapc-dev/mapc"

// TestLayering checks the rules of docs/architecture.md on the packages' non-test imports,
// direct and indirect: cel and emit know no front end (they import nothing under compiler/), the
// packages every route shares (compiler/source, compiler/diag, compiler/route,
// compiler/apidefaults) import nothing
// else under compiler/, no input language's packages (compiler/<language>/...) import another
// language's, the reference engines know nothing of the compiler, and nothing imports the
// command line.
func TestLayering(t *testing.T) {
	graph, err := moduleGraph("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := graph[module+"/cel/admission"]; !ok || len(graph) < 10 {
		t.Fatalf("the module's packages were not found (%d)", len(graph))
	}
	for _, v := range layering(graph) {
		t.Error(v)
	}
}

// TestLayeringFindsViolations: the rules catch what they are about.
func TestLayeringFindsViolations(t *testing.T) {
	p := func(s string) string { return module + "/" + s }
	cases := []struct {
		name  string
		graph map[string][]string
		want  string // in the violation; "" for none
	}{
		{"clean", map[string][]string{p("cel"): nil, p("cmd/mapc"): {p("cel")}}, ""},
		{"cel imports a front end", map[string][]string{p("cel"): {p("compiler/gatekeeper/lower")}, p("compiler/gatekeeper/lower"): nil}, "cel imports " + p("compiler/gatekeeper/lower")},
		{"cel imports one indirectly", map[string][]string{p("cel/admission"): {p("internal/x")}, p("internal/x"): {p("compiler/source")}, p("compiler/source"): nil}, "cel/admission imports " + p("compiler/source") + " (through " + p("internal/x") + ")"},
		{"emit imports the IR", map[string][]string{p("emit"): {p("compiler/gatekeeper/ir")}, p("compiler/gatekeeper/ir"): nil}, "emit imports " + p("compiler/gatekeeper/ir")},
		{"diag imports a front end", map[string][]string{p("compiler/diag"): {p("compiler/source"), p("compiler/gatekeeper")}, p("compiler/source"): nil, p("compiler/gatekeeper"): nil}, "compiler/diag imports " + p("compiler/gatekeeper") + ":"},
		{"a language imports another", map[string][]string{p("compiler/kyverno/backend"): {p("compiler/gatekeeper/lower")}, p("compiler/gatekeeper/lower"): nil}, "compiler/kyverno/backend imports " + p("compiler/gatekeeper/lower")},
		{"a language imports another's through a shared package", map[string][]string{p("compiler/kyverno"): {p("cel")}, p("cel"): {p("compiler/gatekeeper")}, p("compiler/gatekeeper"): nil}, "compiler/kyverno imports " + p("compiler/gatekeeper") + " (through " + p("cel") + ")"},
		{"the dispatcher imports every language", map[string][]string{p("compiler"): {p("compiler/gatekeeper/backend"), p("compiler/kyverno")}, p("compiler/gatekeeper/backend"): {p("compiler/route")}, p("compiler/kyverno"): {p("compiler/route")}, p("compiler/route"): nil}, ""},
		{"route imports a language", map[string][]string{p("compiler/route"): {p("compiler/gatekeeper/ir")}, p("compiler/gatekeeper/ir"): nil}, "compiler/route imports"},
		{"a reference imports the compiler", map[string][]string{p("reference/gatekeeper"): {p("compiler/gatekeeper")}, p("compiler/gatekeeper"): nil}, "reference/gatekeeper imports"},
		{"something imports the command line", map[string][]string{p("verify"): {p("cmd/mapc")}, p("cmd/mapc"): nil}, "imports " + p("cmd/mapc")},
	}
	for _, c := range cases {
		got := strings.Join(layering(c.graph), "\n")
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// shared are the packages under compiler/ that belong to no input language.
var shared = []string{"compiler/source", "compiler/diag", "compiler/route", "compiler/apidefaults"}

// language is the input language whose packages p is among (compiler/<language>/...), or "".
func language(p string) string {
	rest, ok := strings.CutPrefix(p, module+"/compiler/")
	if !ok {
		return ""
	}
	lang, _, _ := strings.Cut(rest, "/")
	for _, s := range shared {
		if "compiler/"+lang == s {
			return ""
		}
	}
	return lang
}

// layering lists the violations of the rules in graph (import path → direct imports within the
// module).
func layering(graph map[string][]string) []string {
	var out []string
	under := func(p, dir string) bool { return p == module+"/"+dir || strings.HasPrefix(p, module+"/"+dir+"/") }
	isShared := func(p string) bool {
		for _, s := range shared {
			if under(p, s) {
				return true
			}
		}
		return false
	}
	for _, p := range sortedKeys(graph) {
		deps := reach(graph, p)
		for _, d := range sortedKeys(deps) {
			via := ""
			if deps[d] != p {
				via = " (through " + deps[d] + ")"
			}
			rel := strings.TrimPrefix(p, module+"/")
			switch {
			case under(p, "cel") && under(d, "compiler"):
				out = append(out, fmt.Sprintf("%s imports %s%s: cel must know no front end", rel, d, via))
			case under(p, "reference") && under(d, "compiler"):
				out = append(out, fmt.Sprintf("%s imports %s%s: a reference engine must know nothing of the translation it checks", rel, d, via))
			case under(p, "emit") && under(d, "compiler"):
				out = append(out, fmt.Sprintf("%s imports %s%s: emit must know no front end", rel, d, via))
			case isShared(p) && under(d, "compiler") && !isShared(d):
				out = append(out, fmt.Sprintf("%s imports %s%s: the packages routes share must know no input language", rel, d, via))
			case language(p) != "" && language(d) != "" && language(p) != language(d):
				out = append(out, fmt.Sprintf("%s imports %s%s: one input language's packages must not import another's", rel, d, via))
			case under(d, "cmd"):
				out = append(out, fmt.Sprintf("%s imports %s%s: nothing imports the command line", rel, d, via))
			}
		}
	}
	return out
}

// reach is every package p imports, directly or not, each with the package that imports it on
// one way there (p itself for direct imports).
func reach(graph map[string][]string, p string) map[string]string {
	seen := map[string]string{}
	var visit func(from string)
	visit = func(from string) {
		for _, d := range graph[from] {
			if _, ok := seen[d]; ok || d == p {
				continue
			}
			seen[d] = from
			visit(d)
		}
	}
	visit(p)
	return seen
}

// moduleGraph reads every package of the module under root (testdata left out) with go/build:
// import path → its non-test imports within the module.
func moduleGraph(root string) (map[string][]string, error) {
	graph := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		ip := module
		if rel != "." {
			ip += "/" + filepath.ToSlash(rel)
		}
		var imports []string
		for _, i := range pkg.Imports {
			if i == module || strings.HasPrefix(i, module+"/") {
				imports = append(imports, i)
			}
		}
		graph[ip] = append([]string{}, imports...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, fmt.Errorf("%s is not the module's root: %v", root, err)
	}
	return graph, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
