// Package bench measures mapc's compiled policies against Gatekeeper's engine and against
// hand-written MutatingAdmissionPolicies, and the compiler's own throughput and memory, for
// Gatekeeper mutators and Kyverno policies.
//
// Everything is timed in process: Gatekeeper's engine (package reference/gatekeeper) and the API
// server's MutatingAdmissionPolicy plugin (package cel/admission). Kyverno's engine is the
// kyverno-engine program reached over a pipe (verify.KyvernoReference): it decides what Kyverno
// stores, and its time, IPC included, is never a ratio's base. See README.md for the command
// (make bench) and the figures.
//
// It measures and must not decide: nothing in the compiler or the policies may depend on it.
package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	frontend "github.com/mapc-dev/mapc/compiler/gatekeeper"
	kyvfront "github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/reference/gatekeeper"
	"github.com/mapc-dev/mapc/suite"
	"github.com/mapc-dev/mapc/verify"
)

// Root is the repository root, relative to this package's directory (where go test runs).
var Root = ".."

// Path joins p to the repository root.
func Path(p ...string) string { return filepath.Join(append([]string{Root}, p...)...) }

// Workload is a set of mutators (Gatekeeper's) or policies (Kyverno's) and the objects they are
// admitted with.
type Workload struct {
	Name string
	// Kyverno: the input policies are Kyverno's (ClusterPolicy, Policy), not Gatekeeper mutators.
	Kyverno    bool
	Docs       []*source.Document // the mutators' documents (for the compiler)
	Mutators   []*unstructured.Unstructured
	Namespaces []*corev1.Namespace
	// Objects are every object document (namespaces too), for correctness checks.
	Objects []*unstructured.Unstructured
	// Bench is the object whose admission is timed.
	Bench *unstructured.Unstructured
}

// Load reads the mutators under mutatorPaths and the objects under objectPaths; bench names the
// timed object ("Kind/namespace/name").
func Load(name string, mutatorPaths, objectPaths []string, bench string) (*Workload, error) {
	docs, err := source.ReadPaths(mutatorPaths, nil)
	if err != nil {
		return nil, err
	}
	return LoadDocs(name, docs, objectPaths, bench)
}

// LoadDocs is Load with the mutators' documents already read (generated ones, for instance).
func LoadDocs(name string, docs []*source.Document, objectPaths []string, bench string) (*Workload, error) {
	w := &Workload{Name: name}
	for _, d := range docs {
		if frontend.IsMutator(d.Object) || kyvfront.IsPolicy(d.Object) {
			w.Docs = append(w.Docs, d)
			w.Mutators = append(w.Mutators, d.Object)
			w.Kyverno = w.Kyverno || kyvfront.IsPolicy(d.Object)
		}
	}
	objDocs, err := source.ReadPaths(objectPaths, nil)
	if err != nil {
		return nil, err
	}
	if w.Namespaces, err = suite.Namespaces(objDocs); err != nil {
		return nil, err
	}
	for _, d := range objDocs {
		w.Objects = append(w.Objects, d.Object)
		if suite.Identity(d.Object) == bench {
			w.Bench = d.Object
		}
	}
	if w.Bench == nil {
		return nil, fmt.Errorf("%s: no object %s among %v", name, bench, objectPaths)
	}
	return w, nil
}

// Compile compiles the workload's mutators (Kyverno's route has one layout: it ignores layout); any
// refusal is an error.
func (w *Workload) Compile(layout compiler.Layout) ([]admission.PolicySet, error) {
	out := compiler.Compile(w.Docs, compiler.Options{Layout: layout})
	if len(out.Problems) > 0 {
		return nil, fmt.Errorf("%s: compiling (%s): %v", w.Name, layout, out.Problems)
	}
	return Sets(out.Policies), nil
}

// Sets pairs each compiled policy with its binding.
func Sets(ps []*emit.Policy) []admission.PolicySet {
	out := make([]admission.PolicySet, len(ps))
	for i, p := range ps {
		out[i] = admission.PolicySet{Policy: p.Policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{p.Binding}}
	}
	return out
}

// ReadPolicies reads hand-written policies and bindings, checked as the API server checks them on
// create (suite.ReadPolicies); any problem or warning is an error.
func ReadPolicies(paths ...string) ([]admission.PolicySet, error) {
	docs, err := source.ReadPaths(paths, nil)
	if err != nil {
		return nil, err
	}
	ps := suite.ReadPolicies(docs, nil)
	if len(ps.Problems) > 0 {
		return nil, fmt.Errorf("%v: %v", paths, ps.Problems)
	}
	if len(ps.Warnings) > 0 {
		return nil, fmt.Errorf("%v: %v", paths, ps.Warnings)
	}
	return ps.Sets, nil
}

// Count is the number of policies and of mutations they hold.
func Count(sets []admission.PolicySet) (policies, mutations int) {
	for _, s := range sets {
		mutations += len(s.Policy.Spec.Mutations)
	}
	return len(sets), mutations
}

// Engine admits one object and returns the stored object (normalized as verify does).
type Engine interface {
	Admit(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Close()
}

// Gatekeeper is Gatekeeper's engine driven as its webhook drives it.
type Gatekeeper struct {
	eng *gatekeeper.Engine
	ns  map[string]*corev1.Namespace
}

// NewGatekeeper builds Gatekeeper's engine for the workload's mutators.
func NewGatekeeper(w *Workload) (*Gatekeeper, error) {
	eng, err := gatekeeper.New(w.Mutators)
	if err != nil {
		return nil, err
	}
	if c := eng.Conflicts(); len(c) > 0 {
		return nil, fmt.Errorf("%s: Gatekeeper skips mutators with schema conflicts: %v", w.Name, c)
	}
	g := &Gatekeeper{eng: eng, ns: map[string]*corev1.Namespace{}}
	for _, ns := range w.Namespaces {
		g.ns[ns.Name] = ns
	}
	return g, nil
}

// Admit implements Engine (the namespace lookup is the one verify does).
func (g *Gatekeeper) Admit(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var ns *corev1.Namespace
	if name := obj.GetNamespace(); name != "" && !suite.IsNamespace(obj) {
		if ns = g.ns[name]; ns == nil {
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
		}
	}
	return g.eng.Admit(ctx, gatekeeper.Request{Object: obj, Namespace: ns})
}

// Close implements Engine.
func (g *Gatekeeper) Close() {}

// Kyverno is Kyverno's engine (the kyverno-engine program, over a pipe) driven as Kyverno's
// webhooks drive it, with the workload's policies in a given order.
type Kyverno struct {
	ref   *verify.KyvernoReference
	ns    map[string]*corev1.Namespace
	order []string // the policies' names, "namespace/name" for a Policy, in the input's order
}

// NewKyverno starts Kyverno's engine (the program at path) with the workload's policies, applied
// in the order of the input.
func NewKyverno(w *Workload, path string) (*Kyverno, error) {
	ref, err := verify.NewKyvernoReference(path, w.Mutators, nil)
	if err != nil {
		return nil, err
	}
	k := &Kyverno{ref: ref, ns: map[string]*corev1.Namespace{}}
	for _, p := range w.Mutators {
		if p.GetKind() == "Policy" && p.GetNamespace() != "" {
			k.order = append(k.order, p.GetNamespace()+"/"+p.GetName())
		} else {
			k.order = append(k.order, p.GetName())
		}
	}
	for _, ns := range w.Namespaces {
		k.ns[ns.Name] = ns
	}
	return k, nil
}

// InputOrder sorts compiled policies (stably) into the order of the Kyverno policies they come
// from, the order this engine applies them in, so that both store the same objects where the
// order of the policies matters (verify tries every order; the bench times one).
func (k *Kyverno) InputOrder(sets []admission.PolicySet) []admission.PolicySet {
	pos := func(s admission.PolicySet) int {
		names := k.ref.Order([]*admissionregistrationv1.MutatingAdmissionPolicy{s.Policy})
		if len(names) == 0 {
			return len(k.order)
		}
		return slices.Index(k.order, names[0])
	}
	out := slices.Clone(sets)
	slices.SortStableFunc(out, func(a, b admission.PolicySet) int { return pos(a) - pos(b) })
	return out
}

// Admit implements Engine (the namespace lookup is the one verify does).
func (k *Kyverno) Admit(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var ns *corev1.Namespace
	if name := obj.GetNamespace(); name != "" && !suite.IsNamespace(obj) {
		if ns = k.ns[name]; ns == nil {
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
		}
	}
	return k.ref.Admit(ctx, verify.RefRequest{Object: obj.DeepCopy(), Operation: admissionv1.Create, Namespace: ns})
}

// Close implements Engine: it stops the program.
func (k *Kyverno) Close() { _ = k.ref.Close() }

// MAP admits through the API server's MutatingAdmissionPolicy plugin, the policies in the order
// given.
type MAP struct {
	ev   *admission.Evaluator
	sets []admission.PolicySet
}

// NewMAP builds an evaluator for the policies.
func NewMAP(w *Workload, sets []admission.PolicySet) (*MAP, error) {
	ev, err := admission.New(admission.Options{Namespaces: w.Namespaces})
	if err != nil {
		return nil, err
	}
	return &MAP{ev: ev, sets: sets}, nil
}

// Admit implements Engine.
func (m *MAP) Admit(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return m.ev.Admit(ctx, m.sets, admission.Request{Object: obj})
}

// Close implements Engine.
func (m *MAP) Close() { m.ev.Close() }

// Result is what one engine stored for one object, normalized (nil and the error if it denied).
func Result(ctx context.Context, e Engine, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	in, err := verify.Normalize(obj)
	if err != nil {
		return nil, err
	}
	out, err := e.Admit(ctx, in)
	if err != nil {
		return nil, err
	}
	return verify.Normalize(out)
}

// Same reports whether a and b are the same stored object.
func Same(a, b *unstructured.Unstructured) bool {
	return apiequality.Semantic.DeepEqual(a.Object, b.Object)
}

// Mem is a snapshot of the Go runtime's memory statistics.
type Mem struct {
	HeapSys, HeapInuse, Sys, TotalAlloc uint64
}

// ReadMem reads the runtime's statistics.
func ReadMem() Mem {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return Mem{HeapSys: s.HeapSys, HeapInuse: s.HeapInuse, Sys: s.Sys, TotalAlloc: s.TotalAlloc}
}

// MiB formats a byte count.
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Check admits every object of the workload through each engine and fails on the first object
// they store differently (or that one denies and another admits).
func Check(ctx context.Context, w *Workload, engines map[string]Engine) error {
	names := sortedKeys(engines)
	for _, obj := range w.Objects {
		var first *unstructured.Unstructured
		var firstErr error
		for i, n := range names {
			got, err := Result(ctx, engines[n], obj)
			if i == 0 {
				first, firstErr = got, err
				continue
			}
			switch {
			case (err == nil) != (firstErr == nil):
				return fmt.Errorf("%s: %s: %s says %v, %s says %v", w.Name, suite.Identity(obj), names[0], firstErr, n, err)
			case err == nil && !Same(first, got):
				return fmt.Errorf("%s: %s: %s and %s store different objects:\n%s", w.Name, suite.Identity(obj), names[0], n, suite.Diff(first, got))
			}
		}
	}
	return nil
}

// WorkloadSpec names the files of a workload.
type WorkloadSpec struct {
	Name string
	// Mutators are Gatekeeper's mutators or Kyverno's policies: a directory or file, relative to
	// the repository root ("" when Generated).
	Mutators string
	// Generated, when not zero, is the number of mutators GenerateRealistic writes with Seed
	// instead of reading Mutators.
	Generated int
	Seed      int64
	Objects   string
	// MoreObjects, when not empty, holds more objects (a file relative to the repository root)
	// that every correctness check admits too: cases the objects do not have.
	MoreObjects string
	Bench       string // the timed object
	Expert      string // hand-written policies for the same mutations ("" if none)
	// ExpertPerPolicy, when not empty, holds hand-written policies for the same mutations, one
	// per input policy (Kyverno's: the shape mapc's output has, which the ratios compare with).
	ExpertPerPolicy string
}

// Experts are the workload's hand-written policy files.
func (s WorkloadSpec) Experts() []string {
	var out []string
	for _, p := range []string{s.Expert, s.ExpertPerPolicy} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Workloads are the bench's mutator sets.
func Workloads() []WorkloadSpec {
	const objs, pod = "testdata/bench/objects", "Pod/shop/checkout-7d9f8b6c5d-x2x4k"
	return []WorkloadSpec{
		{Name: "examples", Mutators: "examples/gatekeeper", Objects: "examples/objects", Bench: "Pod/default/multi-container",
			Expert: "testdata/bench/examples/expert-policies.yaml"},
		{Name: "realistic-20", Mutators: "testdata/bench/realistic-20/mutators.yaml", Objects: objs, Bench: pod,
			Expert: "testdata/bench/realistic-20/expert-policies.yaml"},
		{Name: "realistic-50", Mutators: "testdata/bench/realistic-50/mutators.yaml", Objects: objs, Bench: pod},
		{Name: "realistic-100", Mutators: "testdata/bench/realistic-100/mutators.yaml", Objects: objs, Bench: pod},
		{Name: "generated-100", Generated: 100, Seed: 1, Objects: objs, Bench: pod},
		{Name: "generated-200", Generated: 200, Seed: 1, Objects: objs, Bench: pod},
		{Name: "generated-500", Generated: 500, Seed: 1, Objects: objs, Bench: pod},
		{Name: "kyverno-examples", Mutators: "examples/kyverno/policies", Objects: "examples/kyverno/objects",
			MoreObjects: "testdata/bench/kyverno-examples/objects.yaml", Bench: "Pod/team-c/mixed",
			Expert:          "testdata/bench/kyverno-examples/expert-policies.yaml",
			ExpertPerPolicy: "testdata/bench/kyverno-examples/expert-per-policy.yaml"},
	}
}

// Load reads (or generates) the workload.
func (s WorkloadSpec) Load() (*Workload, error) {
	if s.Generated > 0 {
		docs, err := source.Parse(s.Name+".yaml", GenerateRealistic(s.Generated, s.Seed))
		if err != nil {
			return nil, err
		}
		return LoadDocs(s.Name, docs, s.objectPaths(), s.Bench)
	}
	return Load(s.Name, []string{Path(s.Mutators)}, s.objectPaths(), s.Bench)
}

func (s WorkloadSpec) objectPaths() []string {
	if s.MoreObjects != "" {
		return []string{Path(s.Objects), Path(s.MoreObjects)}
	}
	return []string{Path(s.Objects)}
}
