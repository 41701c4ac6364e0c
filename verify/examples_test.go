package verify

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
)

// load compiles the mutators under mutPaths and splits the documents under objPaths into
// namespaces and objects.
func load(t testing.TB, mutPaths, objPaths []string, layout compiler.Layout) (*Verifier, []Case) {
	t.Helper()
	docs, err := source.ReadPaths(mutPaths, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, compiler.Options{Layout: layout})
	for _, p := range out.Problems {
		t.Fatalf("compile: %v", p)
	}
	var muts []*unstructured.Unstructured
	for _, d := range docs {
		if gatekeeper.IsMutator(d.Object) {
			muts = append(muts, d.Object)
		}
	}
	objDocs, err := source.ReadPaths(objPaths, nil)
	if err != nil {
		t.Fatal(err)
	}
	var nss []*corev1.Namespace
	var cases []Case
	for _, d := range objDocs {
		if d.Object.GetKind() == "Namespace" {
			ns := &corev1.Namespace{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, ns); err != nil {
				t.Fatal(err)
			}
			nss = append(nss, ns)
		}
		cases = append(cases, Case{Object: d.Object})
	}
	v, err := New(muts, out.Policies, Options{Namespaces: nss, Idempotence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v, cases
}

func TestExamplesMatchGatekeeper(t *testing.T) {
	for _, layout := range []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator} {
		t.Run(string(layout), func(t *testing.T) {
			v, cases := load(t, []string{"../examples/gatekeeper"}, []string{"../examples/objects"}, layout)
			var rs []Result
			for _, c := range cases {
				r := v.Check(context.Background(), c)
				rs = append(rs, r)
				if !r.Pass {
					t.Errorf("%s", Report([]Result{r}))
				}
			}
			t.Log(Report(rs))
		})
	}
}
