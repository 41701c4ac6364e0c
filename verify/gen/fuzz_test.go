package gen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
)

// Fuzz targets (make fuzz):
//
//	go test ./verify/gen -run '^$' -fuzz '^FuzzLocation$'
//	go test ./verify/gen -run '^$' -fuzz '^FuzzMutatorYAML$'

// FuzzLocation puts a fuzzed location (and path test) into a mutator of each kind: Gatekeeper's
// constructors (through compiler/gatekeeper.Decode) must not panic, and whenever they accept the
// mutator the compiler must not panic either, and must account for it (a policy, a refusal or a
// note).
func FuzzLocation(f *testing.F) {
	for _, loc := range []string{
		"spec.containers[name: main].image", `metadata.annotations."example.com/x"`, "spec.containers[name:*].ports[name: *].protocol",
		"spec.containers[name: foo]", `spec.nodeSelector."a b"`, "spec.containers[containerPort: 80]", `spec.'x\'y'`, "metadata.labels.team",
		"spec..x", "spec[", "spec.containers[name: main].env[name: A].value", "[name: x]", "spec.x[a:*][b:*]",
	} {
		for kind := uint8(0); kind < 4; kind++ {
			f.Add(loc, "", kind)
		}
	}
	r := newRng(1)
	for i := 0; i < 40; i++ {
		p := r.randomPath(podRoot, func(path) float64 { return 0.15 })
		sub := ""
		if i%3 == 0 {
			sub = format(r, p[:1+r.IntN(len(p))])
		}
		f.Add(format(r, p), sub, uint8(i%4))
	}
	f.Fuzz(func(t *testing.T, loc, subPath string, kind uint8) {
		obj := mutatorFor(loc, subPath, kind%4)
		if _, err := gatekeeper.Decode(obj); err != nil {
			return
		}
		docs := []*source.Document{{File: "fuzz.yaml", Line: 1, Object: obj}}
		for _, layout := range []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator} {
			out := compiler.Compile(docs, compiler.Options{Layout: layout})
			if len(out.Policies) == 0 && len(out.Problems) == 0 && len(out.Notes) == 0 {
				t.Fatalf("location %q (kind %d, layout %s): accepted by Gatekeeper, but the compiler emits no policy, refusal or note", loc, kind%4, layout)
			}
		}
	})
}

// mutatorFor builds a mutator of kind (0 Assign, 1 ModifySet, 2 AssignImage, 3 AssignMetadata)
// at location loc, with a value that suits the location where that is easy to tell.
func mutatorFor(loc, subPath string, kind uint8) *unstructured.Unstructured {
	applyTo := []any{map[string]any{"groups": []any{""}, "versions": []any{"v1"}, "kinds": []any{"Pod"}}}
	params := map[string]any{}
	if subPath != "" {
		params["pathTests"] = []any{map[string]any{"subPath": subPath, "condition": "MustExist"}}
	}
	spec := map[string]any{"location": loc, "applyTo": applyTo, "parameters": params}
	var k, version string
	switch kind {
	case 0:
		k, version = "Assign", "v1"
		var value any = "x"
		if p, err := parser.Parse(loc); err == nil && len(p.Nodes) > 0 {
			if l, ok := p.Nodes[len(p.Nodes)-1].(*parser.List); ok {
				value = map[string]any{l.KeyField: l.KeyValue}
			}
		}
		params["assign"] = map[string]any{"value": value}
	case 1:
		k, version = "ModifySet", "v1"
		params["values"] = map[string]any{"fromList": []any{"a", int64(1)}}
	case 2:
		k, version = "AssignImage", "v1alpha1"
		params["assignTag"] = ":v1"
	default:
		k, version = "AssignMetadata", "v1"
		delete(spec, "applyTo")
		params["assign"] = map[string]any{"value": "x"}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mutations.gatekeeper.sh/" + version,
		"kind":       k,
		"metadata":   map[string]any{"name": "fuzz"},
		"spec":       spec,
	}}
}

// FuzzMutatorYAML reads fuzzed bytes as a YAML stream: reading the documents and Gatekeeper's
// front end must not panic, whatever the documents hold; nor must the compiler, which runs when
// the stream holds a single mutation (compiling is slow, and FuzzLocation covers it).
func FuzzMutatorYAML(f *testing.F) {
	for s := uint64(1); s <= 20; s++ {
		f.Add([]byte(Generate(s).YAML()))
	}
	files, _ := filepath.Glob("../../examples/gatekeeper/*.yaml")
	more, _ := filepath.Glob("../testdata/diff-failures/*.yaml")
	for _, name := range append(files, more...) {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: x}\nspec: {location: 'spec.a[b: *]', parameters: {assign: {value: 1}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _ := source.Parse("fuzz.yaml", data)
		fe := gatekeeper.Compile(docs)
		if len(fe.Mutations) != 1 {
			return
		}
		compiler.Compile(docs, compiler.Options{})
	})
}
