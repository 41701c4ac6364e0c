package verify

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
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

// TestExamplesMatchKyverno admits the Kyverno examples' objects (KyvernoCases: on CREATE, on an
// UPDATE that changes nothing, a Pod on kubectl debug's request), through Kyverno's engine and
// through the compiled policies, in every order.
func TestExamplesMatchKyverno(t *testing.T) {
	docs, err := source.ReadPaths([]string{"../examples/kyverno/policies"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, compiler.Options{})
	for _, p := range out.Problems {
		t.Fatalf("compile: %v", p)
	}
	var pols []*unstructured.Unstructured
	for _, d := range docs {
		if kyverno.IsPolicy(d.Object) {
			pols = append(pols, d.Object)
		}
	}
	if len(out.Policies) != len(pols) {
		t.Fatalf("%d policies from %d Kyverno policies: want one each", len(out.Policies), len(pols))
	}
	engine, err := kyvernobin.Path()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewKyvernoReference(engine, pols, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(nil, out.Policies, Options{Idempotence: true, Reference: ref})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	objDocs, err := source.ReadPaths([]string{"../examples/kyverno/objects"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Result
	for _, d := range objDocs {
		for _, c := range KyvernoCases(d.Object) {
			r := v.Check(context.Background(), c)
			rs = append(rs, r)
			if !r.Pass {
				t.Errorf("%s", Report([]Result{r}))
			}
		}
	}
	t.Log(Summary(rs))
}
