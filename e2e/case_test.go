package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pmezard/go-difflib/difflib"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/verify"
)

// testCase is a set of input policies (Gatekeeper mutators, or Kyverno policies) and the
// objects to admit with them.
type testCase struct {
	name     string
	mutators []*source.Document
	objects  []*unstructured.Unstructured
	// language is the input language, which gives the reference engine (nil: Gatekeeper).
	language *language
	// updateLabel: the update of each object adds a label (updateKey) instead of an annotation.
	updateLabel bool
	// kubeVersion is the version the case is compiled for ("" for the server's).
	kubeVersion string
	// skipOnProblems skips the case when the compiler refuses a mutator (golden cases that
	// test refusals); otherwise a refusal fails it.
	skipOnProblems bool
	// repeat runs the case this many times per layout (default 1): each binding of the policies
	// lets the API server draw a new order for them.
	repeat int
	// kyvernoConfig is Kyverno's ConfigMap as installed (nil: its defaults), for the compiler and
	// Kyverno's engine.
	kyvernoConfig *source.Document
}

// engineEvaluator names the in-process evaluator in reports.
const engineEvaluator = "in-process evaluator"

// outcome is what one engine predicts for one request.
type outcome struct {
	engine string
	raw    *unstructured.Unstructured // the engine's result
	denied error                      // the engine denies the request
	// server is raw as the API server makes it with no policy bound (defaulted, validated);
	// serverErr is the API server's rejection of raw.
	server    *unstructured.Unstructured
	serverErr error
	// order names the engine's policies in the order that gave this result, for an engine run
	// in more than one order (see language.anyOrder); nil otherwise.
	order []string
	// others are the engine's results in the other orders tried that differ from this one,
	// and orders counts the orders tried (this one's included).
	others []outcome
	orders int
	// status: the request was for the status subresource, whose stored status is compared too
	// (clean drops it elsewhere: the API server ignores the status a create or update sends).
	status bool
}

// prediction is one request to the API server and what each engine says it will store.
type prediction struct {
	op       admissionv1.Operation
	sub      string                     // the request's subresource ("" for the resource itself)
	input    *unstructured.Unstructured // the object as the API server presents it to admission
	old      *unstructured.Unstructured
	outcomes []outcome
}

// item is one object of a case.
type item struct {
	obj        *unstructured.Unstructured // as in the file (namespace defaulted)
	gvr        schema.GroupVersionResource
	namespaced bool
	isNS       bool
	key        string
	created    *unstructured.Unstructured // created with no policy bound
	updateIn   *unstructured.Unstructured // created + the update annotation (or label)
	onCreate   *prediction
	onUpdate   *prediction
	// debugContainer is the ephemeral container added to a Pod (testCase.debug), as the API
	// server presents it to admission (defaulted).
	debugContainer map[string]any
}

// counters for the summary line.
var checksPassed, checksFailed, objectsUntouched, objectsMutated atomic.Int64

type runner struct {
	t    *testing.T
	c    *cluster
	ctx  context.Context
	ref  reference
	ev   *admission.Evaluator
	sets []admission.PolicySet
	// evOrders are the orders of sets the evaluator runs them in: the compiled order only,
	// unless the language's policies run in any order (language.anyOrder).
	evOrders    [][]int
	updateLabel bool
	nss         map[string]*corev1.Namespace // the namespaces the objects live in, as the API server has them
	items       []*item
	// saved are immortal namespaces as they were before the case changed them.
	saved map[string]*unstructured.Unstructured
	// policies are the compiled policies the case binds; deferred the updates sent with them
	// bound that are checked once they are unbound (settle).
	policies []*emit.Policy
	deferred []deferredCheck
}

var nsGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// runCase runs one case:
//
//	A. with no policy bound: for each namespace of the case, then each other object, a dry-run
//	   create shows the object as the API server presents it to admission; the language's
//	   engine (Gatekeeper's or Kyverno's) and the in-process evaluator predict the result (for
//	   Kyverno, in each order of the policies, see language.anyOrder), and a dry-run create of
//	   each prediction shows it as the API server would store it (or its rejection). The object
//	   is then created for real, unmutated, and the same is done for an update of it (a new
//	   annotation, or label).
//	B. the compiled policies are created (dry run first) and the test waits until they are active.
//	C. each object is updated, then deleted and created again (a Pod created so then gets an
//	   ephemeral container through pods/ephemeralcontainers, as kubectl debug adds one, which
//	   both engines predict from the stored Pod; for Kyverno, an object of a kind whose status
//	   a rule is for gets an update of its status, and each object an update with no change,
//	   whose predictions are taken as stored once the policies are unbound: settle); then the
//	   namespaces are updated, and deleted and created again. Every result (or rejection) is
//	   compared with both predictions (with any of an engine's orders), ignoring server-set
//	   metadata and status (but for a status update).
//	D. everything is deleted (also when the case fails).
func runCase(t *testing.T, c *cluster, tc testCase) {
	kv, err := c.compileVersion(tc.kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	var first []byte
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			out := compiler.Compile(tc.mutators, compiler.Options{KubernetesVersion: kv, Layout: layout, KyvernoConfig: tc.kyvernoConfig})
			if len(out.Problems) > 0 {
				var msgs []string
				for _, p := range out.Problems {
					msgs = append(msgs, p.Error())
				}
				if tc.skipOnProblems {
					t.Skipf("the compiler refuses part of this case (for %s): %s", kv, strings.Join(msgs, "; "))
				}
				if allNeedNewerVersion(msgs) {
					// Compiled for an older server (make e2e KUBE_VERSION=1.34): the case needs CEL
					// features that server's version does not accept, and the compiler says so.
					t.Skipf("the case needs a newer Kubernetes than %s: %s", kv, strings.Join(msgs, "; "))
				}
				t.Fatalf("compile for %s: %s", kv, strings.Join(msgs, "; "))
			}
			data, err := json.Marshal(out.Policies)
			if err != nil {
				t.Fatal(err)
			}
			if first != nil && string(data) == string(first) {
				t.Skipf("the same policies as layout %s", layouts[0])
			}
			if first == nil {
				first = data
			}
			if tc.repeat <= 1 {
				runCompiled(t, c, tc, out, kv)
				return
			}
			for i := 0; i < tc.repeat; i++ {
				t.Run(fmt.Sprintf("run-%d", i+1), func(t *testing.T) { runCompiled(t, c, tc, out, kv) })
			}
		})
	}
}

// layouts are the compiler's layouts, each tested.
var layouts = []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator}

// runCompiled runs one case with its compiled policies.
func runCompiled(t *testing.T, c *cluster, tc testCase, out *compiler.Output, kv *version.Version) {
	ctx := context.Background()
	var err error
	lang := tc.lang()
	var mutators []*unstructured.Unstructured
	for _, d := range tc.mutators {
		if lang.isInput(d.Object) {
			mutators = append(mutators, d.Object)
		}
	}
	r := &runner{t: t, c: c, ctx: ctx, nss: map[string]*corev1.Namespace{}, saved: map[string]*unstructured.Unstructured{}, updateLabel: tc.updateLabel}
	var kyvernoConfig map[string]string
	if tc.kyvernoConfig != nil {
		kyvernoConfig, _, _ = unstructured.NestedStringMap(tc.kyvernoConfig.Object.Object, "data")
	}
	if r.ref, err = lang.newReference(mutators, kyvernoConfig); err != nil {
		t.Fatalf("%s's engine: %v", lang.name, err)
	}
	defer r.ref.close()
	for _, p := range out.Policies {
		r.sets = append(r.sets, admission.PolicySet{Policy: p.Policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{p.Binding}})
	}
	compiled := make([]int, len(r.sets))
	for i := range compiled {
		compiled[i] = i
	}
	r.evOrders = [][]int{compiled}
	if lang.anyOrder {
		r.evOrders = verify.Orders(len(r.sets), maxOrders, maxOrders-2, 1)
	}
	r.load(tc.objects)
	if r.ev, err = admission.New(admission.Options{Namespaces: r.namespaceList()}); err != nil {
		t.Fatalf("in-process evaluator: %v", err)
	}
	defer r.ev.Close()

	defer r.teardown()
	r.teardown() // leftovers of an earlier, interrupted run

	// A.
	r.prepare()
	// B.
	r.policies = out.Policies
	took, err := c.bind(ctx, out.Policies)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d policies for %d %s policies (compiled for %s, %s), active after %v", len(out.Policies), len(mutators), lang.name, kv, c.mapAPI, took.Round(10e6))
	// C.
	r.exercise()
}

// load reads the objects of a case.
func (r *runner) load(objs []*unstructured.Unstructured) {
	seen := map[string]bool{}
	for _, o := range objs {
		o = o.DeepCopy()
		gvr, namespaced, err := r.c.resourceFor(o)
		if err != nil {
			r.t.Errorf("%s %s: the API server does not know this kind: %v", o.GetKind(), o.GetName(), err)
			continue
		}
		if namespaced && o.GetNamespace() == "" {
			o.SetNamespace("default")
		}
		if !namespaced {
			o.SetNamespace("")
		}
		it := &item{obj: o, gvr: gvr, namespaced: namespaced, isNS: gvr == nsGVR}
		it.key = caseName(o)
		if seen[it.key] {
			r.t.Errorf("%s appears twice", it.key)
			continue
		}
		seen[it.key] = true
		if it.isNS {
			ns := &corev1.Namespace{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ns); err != nil {
				r.t.Fatalf("%s: %v", it.key, err)
			}
			ns = &corev1.Namespace{ObjectMeta: *ns.ObjectMeta.DeepCopy()}
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
			r.nss[ns.Name] = ns
		}
		r.items = append(r.items, it)
	}
	// Namespaces first, as they are created first.
	sort.SliceStable(r.items, func(i, j int) bool { return r.items[i].isNS && !r.items[j].isNS })
	for _, it := range r.items {
		if n := it.obj.GetNamespace(); n != "" && r.nss[n] == nil {
			r.nss[n] = &corev1.Namespace{}
			r.nss[n].Name = n
			r.nss[n].Labels = map[string]string{corev1.LabelMetadataName: n}
		}
	}
}

func (r *runner) namespaceList() []*corev1.Namespace {
	var l []*corev1.Namespace
	for _, ns := range r.nss {
		l = append(l, ns)
	}
	return l
}

// prepare is phase A.
func (r *runner) prepare() {
	t, ctx, c := r.t, r.ctx, r.c
	// Namespaces of the case.
	for _, it := range r.items {
		if !it.isNS {
			continue
		}
		if immortal[it.obj.GetName()] {
			cur, err := c.get(ctx, nsGVR, "", it.obj.GetName())
			if err != nil {
				t.Fatal(err)
			}
			r.saved[cur.GetName()] = cur.DeepCopy()
			up := cur.DeepCopy()
			up.SetLabels(it.obj.GetLabels())
			up.SetAnnotations(it.obj.GetAnnotations())
			if it.created, err = c.update(ctx, nsGVR, up, false); err != nil {
				t.Fatalf("%s: updating it to the case's labels: %v", it.key, err)
			}
		} else {
			it.onCreate = r.predictCreate(it)
			var err error
			if it.created, err = c.create(ctx, nsGVR, it.obj, false); err != nil {
				t.Fatalf("%s: creating it with no policy bound: %v", it.key, err)
			}
		}
		r.checkNamespace(it.created)
	}
	// Namespaces the objects live in that the case does not list.
	for name := range r.nss {
		if r.itemByKey("Namespace/"+name) != nil || immortal[name] {
			continue
		}
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
		created, err := c.create(ctx, nsGVR, ns, false)
		if err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
		r.checkNamespace(created)
	}
	// Other objects.
	for _, it := range r.items {
		if it.isNS {
			continue
		}
		it.onCreate = r.predictCreate(it)
		var err error
		if it.created, err = c.create(ctx, it.gvr, it.obj, false); err != nil {
			t.Errorf("%s: creating it with no policy bound: %v", it.key, err)
			continue
		}
		it.onUpdate = r.predictUpdate(it)
		// Each Pod, once created with the policies, also gets an ephemeral container as kubectl
		// debug adds one (an UPDATE of pods/ephemeralcontainers), which Kyverno's webhook and
		// Gatekeeper's (as its Helm chart installs it) are called for.
		r.prepareDebug(it)
	}
	for _, it := range r.items {
		if it.isNS {
			it.onUpdate = r.predictUpdate(it)
		}
	}
}

// checkNamespace makes sure a namespace is stored with the labels the engines were given.
func (r *runner) checkNamespace(ns *unstructured.Unstructured) {
	want := r.nss[ns.GetName()]
	if want == nil {
		return
	}
	if !equalJSON(ns.GetLabels(), want.Labels) {
		r.t.Fatalf("namespace %s is stored with labels %v, the test expected %v", ns.GetName(), ns.GetLabels(), want.Labels)
	}
}

func (r *runner) itemByKey(key string) *item {
	for _, it := range r.items {
		if it.key == key {
			return it
		}
	}
	return nil
}

// predictCreate dry-run creates the object and predicts the result of creating it.
func (r *runner) predictCreate(it *item) *prediction {
	presented, err := r.c.create(r.ctx, it.gvr, it.obj, true)
	if err != nil {
		r.t.Errorf("%s: dry-run create with no policy bound: %v", it.key, err)
		return nil
	}
	return r.predict(it, admissionv1.Create, stripServerFields(presented), nil)
}

// predictUpdate dry-run updates the created object with a new annotation (or label, see
// testCase.updateLabel) and predicts the result of that update.
func (r *runner) predictUpdate(it *item) *prediction {
	if it.created == nil {
		return nil
	}
	it.updateIn = it.created.DeepCopy()
	get, set := it.updateIn.GetAnnotations, it.updateIn.SetAnnotations
	if r.updateLabel {
		get, set = it.updateIn.GetLabels, it.updateIn.SetLabels
	}
	m := get()
	if m == nil {
		m = map[string]string{}
	}
	m[updateKey] = "1"
	set(m)
	presented, err := r.c.update(r.ctx, it.gvr, it.updateIn, true)
	if err != nil {
		r.t.Errorf("%s: dry-run update with no policy bound: %v", it.key, err)
		return nil
	}
	unstructured.RemoveNestedField(presented.Object, "metadata", "managedFields")
	return r.predict(it, admissionv1.Update, presented, it.created)
}

func (r *runner) predict(it *item, op admissionv1.Operation, input, old *unstructured.Unstructured) *prediction {
	p := &prediction{op: op, input: input, old: old}
	var ns *corev1.Namespace
	if !it.isNS && it.namespaced {
		ns = r.nss[it.obj.GetNamespace()]
	}
	refs := r.ref.admit(r.ctx, verify.RefRequest{Object: input.DeepCopy(), OldObject: old, Namespace: ns, Operation: op})
	evs := r.evaluate(input, old, op)
	p.outcomes = r.outcomes(refs, evs, func(o *outcome) {
		if op == admissionv1.Create {
			o.server, o.serverErr = r.c.create(r.ctx, it.gvr, stripServerFields(o.raw), true)
		} else {
			o.server, o.serverErr = r.c.update(r.ctx, it.gvr, o.raw, true)
		}
		if o.serverErr != nil && !isInvalid(o.serverErr) {
			r.t.Errorf("%s: %s: dry-run %s of the %s prediction: %v", it.key, op, strings.ToLower(string(op)), o.engine, o.serverErr)
		}
	})
	return p
}

// outcomes are the reference's and the evaluator's predictions from their candidates, each
// engine's first result with its others; stored fills in what the API server makes of a result
// that is not a denial (outcome.server, serverErr).
func (r *runner) outcomes(refs, evs *candidates, stored func(o *outcome)) []outcome {
	var out []outcome
	for _, e := range []struct {
		engine string
		cs     *candidates
	}{{r.ref.name(), refs}, {engineEvaluator, evs}} {
		var first outcome
		for i, cand := range e.cs.list {
			o := outcome{engine: e.engine, raw: cand.raw, denied: cand.denied, order: cand.order}
			if o.denied == nil {
				stored(&o)
			}
			if i == 0 {
				first = o
			} else {
				first.others = append(first.others, o)
			}
		}
		first.orders = e.cs.tried
		out = append(out, first)
	}
	return out
}

// evaluate runs the in-process evaluator with the compiled policies in each of r.evOrders.
func (r *runner) evaluate(input, old *unstructured.Unstructured, op admissionv1.Operation) *candidates {
	return r.evaluateSub(input, old, op, "")
}

// evaluateSub is evaluate for a request on a subresource.
func (r *runner) evaluateSub(input, old *unstructured.Unstructured, op admissionv1.Operation, sub string) *candidates {
	return r.evaluateReq(admission.Request{Object: input, OldObject: old, Operation: op, SubResource: sub})
}

// evaluateReq is evaluate for any request.
func (r *runner) evaluateReq(req admission.Request) *candidates {
	cs := &candidates{}
	for _, order := range r.evOrders {
		sets := make([]admission.PolicySet, len(order))
		names := make([]string, len(order))
		for i, j := range order {
			sets[i], names[i] = r.sets[j], r.sets[j].Policy.Name
		}
		if len(r.evOrders) == 1 {
			names = nil
		}
		in := req
		in.Object = req.Object.DeepCopy()
		obj, err := r.ev.Admit(r.ctx, sets, in)
		cs.add(candidate{order: names, raw: obj, denied: err})
	}
	return cs
}

// exercise is phase C.
func (r *runner) exercise() {
	ctx, c := r.ctx, r.c
	// Updates of the objects, then creates.
	for _, it := range r.items {
		if it.isNS || it.onUpdate == nil {
			continue
		}
		got, err := c.update(ctx, it.gvr, it.updateIn, false)
		r.check(it, it.onUpdate, r.readBack(it, got, err))
	}
	for _, it := range r.items {
		if it.isNS || it.onCreate == nil {
			continue
		}
		if err := c.deleteObject(ctx, it.gvr, it.obj.GetNamespace(), it.obj.GetName()); err != nil {
			r.t.Fatalf("%s: deleting it: %v", it.key, err)
		}
		got, err := c.create(ctx, it.gvr, it.obj, false)
		res := r.readBack(it, got, err)
		r.check(it, it.onCreate, res)
		if res.err != nil {
			continue
		}
		stored := res.obj
		// The next steps each start from the object as stored by the one before.
		next := func() {
			if stored, err = r.c.get(ctx, it.gvr, it.obj.GetNamespace(), it.obj.GetName()); err != nil {
				r.t.Fatalf("%s: reading it back: %v", it.key, err)
			}
		}
		if it.debugContainer != nil {
			r.exerciseDebug(it, stored)
			next()
		}
		// The update of the object before that of its status: settle's dry runs take the
		// object as it is at the end as their old one, and a status update changes no spec.
		if r.ref.updatesUnchanged() {
			r.exerciseUnchanged(it, stored, "")
			next()
		}
		if r.ref.statusCase(it.obj) {
			r.exerciseUnchanged(it, stored, "status")
			next()
		}
		if r.ref.bindsPods() {
			r.exerciseBinding(it, stored)
		}
	}
	// Updates of the namespaces, then creates (of those that can be deleted).
	for _, it := range r.items {
		if !it.isNS || it.onUpdate == nil {
			continue
		}
		got, err := c.update(ctx, it.gvr, it.updateIn, false)
		r.check(it, it.onUpdate, r.readBack(it, got, err))
	}
	r.settle()
	r.deleteObjects()
	for _, it := range r.items {
		if !it.isNS || it.onCreate == nil {
			continue
		}
		if err := c.deleteNamespace(ctx, it.obj.GetName()); err != nil {
			r.t.Fatalf("%s: deleting it: %v", it.key, err)
		}
		got, err := c.create(ctx, it.gvr, it.obj, false)
		r.check(it, it.onCreate, r.readBack(it, got, err))
	}
}

// prepareDebug, for a Pod, dry-runs kubectl debug's request with no policy bound to see the
// ephemeral container as the API server presents it to admission (defaulted).
func (r *runner) prepareDebug(it *item) {
	if it.created == nil {
		return
	}
	in := verify.Debug(it.created)
	if in == nil {
		return
	}
	presented, err := r.c.updateSubresource(r.ctx, it.gvr, in, ephemeralContainers, true)
	if err != nil {
		r.t.Errorf("%s: dry-run update of %s with no policy bound: %v", it.key, ephemeralContainers, err)
		return
	}
	list, _, _ := unstructured.NestedSlice(presented.Object, "spec", "ephemeralContainers")
	if len(list) == 0 {
		r.t.Errorf("%s: the dry-run update of %s stored no ephemeral container", it.key, ephemeralContainers)
		return
	}
	it.debugContainer, _ = list[len(list)-1].(map[string]any)
}

// exerciseDebug sends kubectl debug's request for a Pod the policies created (stored): an UPDATE
// of pods/ephemeralcontainers adding it.debugContainer. The engines predict it from the stored
// Pod, and their results are taken as the API server stores them (verify.Stored: the update
// strategy keeps only the ephemeral containers), not through a dry run: the policies are bound.
// A field the result adds that the API server would default is then reported as a difference.
func (r *runner) exerciseDebug(it *item, stored *unstructured.Unstructured) {
	old := stored.DeepCopy()
	unstructured.RemoveNestedField(old.Object, "metadata", "managedFields")
	in := old.DeepCopy()
	list, _, _ := unstructured.NestedSlice(in.Object, "spec", "ephemeralContainers")
	list = append(list, runtime.DeepCopyJSONValue(it.debugContainer))
	if err := unstructured.SetNestedSlice(in.Object, list, "spec", "ephemeralContainers"); err != nil {
		r.t.Fatal(err)
	}
	var ns *corev1.Namespace
	if it.namespaced {
		ns = r.nss[it.obj.GetNamespace()]
	}
	p := &prediction{op: admissionv1.Update, sub: ephemeralContainers, input: in, old: old}
	refs := r.ref.admit(r.ctx, verify.RefRequest{Object: in.DeepCopy(), OldObject: old, Namespace: ns, Operation: admissionv1.Update, SubResource: "ephemeralcontainers"})
	evs := r.evaluateSub(in, old, admissionv1.Update, "ephemeralcontainers")
	p.outcomes = r.outcomes(refs, evs, func(o *outcome) { o.server = verify.Stored("ephemeralcontainers", old, o.raw) })
	got, err := r.c.updateSubresource(r.ctx, it.gvr, in, ephemeralContainers, false)
	r.check(it, p, r.readBack(it, got, err))
}

// deferredCheck is an update sent with the policies bound whose predictions are taken as the
// API server stores them once the policies are unbound (settle).
type deferredCheck struct {
	it  *item
	p   *prediction
	got result
}

// exerciseUnchanged sends an UPDATE of an object the policies created (stored, as the API
// server has it now) that changes nothing, as a client writing back what it read does: of the
// object itself (sub ""), where Kyverno's rules run again on what they mutated (an append
// appends again, a merge finds its work done), or of its status (sub "status"), where the
// rules for that subresource run (Kyverno's Node/status). The engines predict it from the
// stored object. Their results are taken as the API server stores them by a dry run once the
// policies are unbound (settle): what it keeps of a status update depends on the kind's
// strategy (a Node's keeps the metadata, others reset it).
func (r *runner) exerciseUnchanged(it *item, stored *unstructured.Unstructured, sub string) {
	in := stored.DeepCopy()
	unstructured.RemoveNestedField(in.Object, "metadata", "managedFields")
	var ns *corev1.Namespace
	if it.namespaced {
		ns = r.nss[it.obj.GetNamespace()]
	}
	p := &prediction{op: admissionv1.Update, sub: sub, input: in, old: in}
	refs := r.ref.admit(r.ctx, verify.RefRequest{Object: in.DeepCopy(), OldObject: in, Namespace: ns, Operation: admissionv1.Update, SubResource: sub})
	evs := r.evaluateSub(in, in, admissionv1.Update, sub)
	p.outcomes = r.outcomes(refs, evs, func(o *outcome) {})
	var got *unstructured.Unstructured
	var err error
	if sub == "" {
		got, err = r.c.update(r.ctx, it.gvr, in, false)
	} else {
		got, err = r.c.updateSubresource(r.ctx, it.gvr, in, sub, false)
	}
	r.deferred = append(r.deferred, deferredCheck{it: it, p: p, got: r.readBack(it, got, err)})
}

// settle checks the updates exerciseUnchanged sent: with the policies unbound, a dry-run
// update with each prediction (on the resource or its subresource, as sent) shows it as the
// API server stores it, then the policies are bound again. The dry run's old object is the
// stored one after the update, which has the spec, status and metadata the engines' old had
// wherever the API server takes them from the old object (an update of the status changes no
// spec, an update of the resource no status, and a reset field was reset alike).
func (r *runner) settle() {
	if len(r.deferred) == 0 {
		return
	}
	if err := r.c.unbind(r.ctx); err != nil {
		r.t.Fatalf("removing the policies to check the updates sent with them: %v", err)
	}
	for _, d := range r.deferred {
		it, sub := d.it, d.p.sub
		cur, err := r.c.get(r.ctx, it.gvr, it.obj.GetNamespace(), it.obj.GetName())
		if err != nil {
			r.t.Fatalf("%s: reading it back: %v", it.key, err)
		}
		store := func(o *outcome) {
			o.status = sub == "status"
			if o.denied != nil {
				return
			}
			raw := o.raw.DeepCopy()
			raw.SetResourceVersion(cur.GetResourceVersion())
			if sub == "" {
				o.server, o.serverErr = r.c.update(r.ctx, it.gvr, raw, true)
			} else {
				o.server, o.serverErr = r.c.updateSubresource(r.ctx, it.gvr, raw, sub, true)
			}
			if o.serverErr != nil && !isInvalid(o.serverErr) {
				r.t.Errorf("%s: dry-run update (%s) of the %s prediction: %v", it.key, sub, o.engine, o.serverErr)
			}
		}
		for i := range d.p.outcomes {
			o := &d.p.outcomes[i]
			store(o)
			for j := range o.others {
				store(&o.others[j])
			}
		}
		r.check(it, d.p, d.got)
	}
	r.deferred = nil
	if _, err := r.c.bind(r.ctx, r.policies); err != nil {
		r.t.Fatalf("binding the policies again: %v", err)
	}
}

// exerciseBinding binds a Pod the policies created (stored) that has no node, as the scheduler
// does: a CREATE of pods/binding carrying a Binding (verify.Binding), which the engines predict.
// The API server keeps no Binding: it sets the Pod's node and copies the Binding's annotations,
// and its labels (with the PodTopologyLabelsAdmission feature, on in the API server the e2e
// runs), over the Pod's (BindingREST's setPodNodeAndMetadata), which boundPod does to the
// stored Pod with each prediction; a Binding is created once, so no dry run shows it.
func (r *runner) exerciseBinding(it *item, stored *unstructured.Unstructured) {
	if stored.GetAPIVersion() != "v1" || stored.GetKind() != "Pod" {
		return
	}
	if node, _, _ := unstructured.NestedString(stored.Object, "spec", "nodeName"); node != "" {
		return
	}
	const node = "node-1"
	b := verify.Binding(stored, node)
	var ns *corev1.Namespace
	if it.namespaced {
		ns = r.nss[it.obj.GetNamespace()]
	}
	p := &prediction{op: admissionv1.Create, sub: "binding", input: b}
	refs := r.ref.admit(r.ctx, verify.RefRequest{Object: b.DeepCopy(), Namespace: ns, Operation: admissionv1.Create, SubResource: "binding"})
	evs := r.evaluateReq(admission.Request{Object: b, Operation: admissionv1.Create, SubResource: "binding", Resource: it.gvr})
	p.outcomes = r.outcomes(refs, evs, func(o *outcome) { o.server = boundPod(stored, o.raw, node) })
	_, err := r.c.createSubresource(r.ctx, it.gvr, it.obj.GetNamespace(), b, "binding")
	got := result{err: err}
	if err == nil {
		if got.obj, err = r.c.get(r.ctx, it.gvr, it.obj.GetNamespace(), it.obj.GetName()); err != nil {
			r.t.Fatalf("%s: reading it back: %v", it.key, err)
		}
	}
	r.check(it, p, got)
}

// boundPod is the Pod as the API server stores it once bound to node by binding: its node set,
// the Binding's annotations and labels copied over its own.
func boundPod(pod, binding *unstructured.Unstructured, node string) *unstructured.Unstructured {
	out := pod.DeepCopy()
	unstructured.RemoveNestedField(out.Object, "metadata", "managedFields")
	_ = unstructured.SetNestedField(out.Object, node, "spec", "nodeName")
	over := func(add, m map[string]string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		for k, v := range add {
			m[k] = v
		}
		return m
	}
	if add := binding.GetAnnotations(); len(add) > 0 {
		out.SetAnnotations(over(add, out.GetAnnotations()))
	}
	if add := binding.GetLabels(); len(add) > 0 {
		out.SetLabels(over(add, out.GetLabels()))
	}
	return out
}

// ephemeralContainers is the subresource kubectl debug updates.
const ephemeralContainers = "ephemeralcontainers"

// readBack reads a written object back from the API server.
func (r *runner) readBack(it *item, written *unstructured.Unstructured, err error) result {
	if err != nil {
		return result{err: err}
	}
	got, err := r.c.get(r.ctx, it.gvr, written.GetNamespace(), written.GetName())
	if err != nil {
		r.t.Fatalf("%s: reading it back: %v", it.key, err)
	}
	return result{obj: got}
}

type result struct {
	obj *unstructured.Unstructured
	err error
}

// check compares what the API server did with what each engine predicted.
func (r *runner) check(it *item, p *prediction, got result) {
	what := fmt.Sprintf("%s %s", p.op, it.key)
	if p.sub != "" {
		what = fmt.Sprintf("%s %s (%s)", p.op, it.key, p.sub)
	}
	if ref := p.outcomes[0]; ref.denied == nil {
		if equalJSON(clean(ref.raw).Object, clean(p.input).Object) {
			objectsUntouched.Add(1)
		} else {
			objectsMutated.Add(1)
		}
	}
	for _, o := range p.outcomes {
		msg := verdict(o, got)
		if msg != "" {
			// The API server runs the policies in an order of its own: any order the engine was
			// run in will do.
			for _, alt := range o.others {
				if verdict(alt, got) == "" {
					r.t.Logf("%s: as %s with its policies in the order %s", what, o.engine, strings.Join(alt.order, ", "))
					msg = ""
					break
				}
			}
		}
		if msg != "" && o.orders > 1 {
			msg = fmt.Sprintf("in none of the %d orders of its policies tried (distinct results: %d); with them in the order %s: %s",
				o.orders, 1+len(o.others), strings.Join(o.order, ", "), msg)
		}
		if msg == "" {
			checksPassed.Add(1)
			continue
		}
		checksFailed.Add(1)
		r.t.Errorf("%s: the API server and %s differ: %s", what, o.engine, msg)
	}
}

// verdict is "" when the API server did what the engine predicted, else what differs.
func verdict(o outcome, got result) string {
	clean := clean
	if o.status {
		clean = cleanStatus
	}
	switch {
	case o.denied != nil && got.err != nil:
		return ""
	case o.denied != nil:
		return fmt.Sprintf("%s denies the request (%v) but the API server admits it", o.engine, o.denied)
	case got.err != nil && o.serverErr != nil:
		if errorText(got.err) == errorText(o.serverErr) {
			return ""
		}
		// Pod update rejections print a diff of the specs, in which an empty list the engine
		// dropped (its result went through the Go type) shows as null: compare the reasons.
		if firstLine(errorText(got.err)) == firstLine(errorText(o.serverErr)) {
			return ""
		}
		return fmt.Sprintf("both are rejected, differently:\n  API server: %s\n  %s's result: %s", errorText(got.err), o.engine, errorText(o.serverErr))
	case got.err != nil:
		return fmt.Sprintf("the API server rejects the request (%s) but %s's result is valid:\n%s", errorText(got.err), o.engine,
			indent(diff(nil, clean(o.server), "", "predicted")))
	case o.serverErr != nil:
		return fmt.Sprintf("the API server admits the request but %s's result is rejected (%s); %s's result to the stored object:\n%s",
			o.engine, errorText(o.serverErr), o.engine, indent(diff(clean(o.raw), clean(got.obj), o.engine, "apiserver")))
	}
	want, have := clean(o.server), clean(got.obj)
	if equalJSON(want.Object, have.Object) {
		return ""
	}
	return fmt.Sprintf("the stored object differs (%s's result, as the API server stores it, to the object the API server stored with the policies):\n%s",
		o.engine, indent(diff(want, have, o.engine, "apiserver")))
}

// deleteObjects deletes the case's objects other than namespaces.
func (r *runner) deleteObjects() {
	for i := len(r.items) - 1; i >= 0; i-- {
		it := r.items[i]
		if it.isNS {
			continue
		}
		if err := r.c.deleteObject(r.ctx, it.gvr, it.obj.GetNamespace(), it.obj.GetName()); err != nil {
			r.t.Errorf("%s: deleting it: %v", it.key, err)
		}
	}
}

// teardown is phase D: unbind the policies, delete the objects and namespaces, restore the
// immortal namespaces.
func (r *runner) teardown() {
	if err := r.c.unbind(r.ctx); err != nil {
		r.t.Errorf("removing the policies: %v", err)
	}
	r.deleteObjects()
	for name := range r.nss {
		if err := r.c.deleteNamespace(r.ctx, name); err != nil {
			r.t.Errorf("deleting namespace %s: %v", name, err)
		}
	}
	for name, old := range r.saved {
		cur, err := r.c.get(r.ctx, nsGVR, "", name)
		if err != nil {
			r.t.Errorf("namespace %s: %v", name, err)
			continue
		}
		cur.SetLabels(old.GetLabels())
		cur.SetAnnotations(old.GetAnnotations())
		if _, err := r.c.update(r.ctx, nsGVR, cur, false); err != nil {
			r.t.Errorf("restoring namespace %s: %v", name, err)
		}
	}
	r.saved = map[string]*unstructured.Unstructured{}
}

// serverFields are set by the API server after admission, or on storage.
var serverFields = [][]string{
	{"metadata", "uid"}, {"metadata", "resourceVersion"}, {"metadata", "creationTimestamp"},
	{"metadata", "managedFields"}, {"metadata", "generation"}, {"metadata", "selfLink"},
	{"metadata", "deletionTimestamp"}, {"metadata", "deletionGracePeriodSeconds"}, {"status"},
}

// stripServerFields returns a copy of o without the fields the API server sets on create.
func stripServerFields(o *unstructured.Unstructured) *unstructured.Unstructured {
	o = o.DeepCopy()
	for _, f := range serverFields {
		unstructured.RemoveNestedField(o.Object, f...)
	}
	return o
}

// clean is the part of an object the comparison looks at.
func clean(o *unstructured.Unstructured) *unstructured.Unstructured {
	if o == nil {
		return nil
	}
	return stripServerFields(o)
}

// cleanStatus is clean but keeping the status.
func cleanStatus(o *unstructured.Unstructured) *unstructured.Unstructured {
	if o == nil {
		return nil
	}
	status, ok, _ := unstructured.NestedFieldCopy(o.Object, "status")
	o = stripServerFields(o)
	if ok {
		o.Object["status"] = status
	}
	return o
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func diff(a, b *unstructured.Unstructured, from, to string) string {
	y := func(o *unstructured.Unstructured) string {
		if o == nil {
			return ""
		}
		data, _ := yaml.Marshal(o.Object)
		return string(data)
	}
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(y(a)), B: difflib.SplitLines(y(b)),
		FromFile: from, ToFile: to, Context: 3,
	})
	return d
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

func caseName(o *unstructured.Unstructured) string {
	s := o.GetKind() + "/"
	if o.GetNamespace() != "" {
		s += o.GetNamespace() + "/"
	}
	return s + o.GetName()
}

// allNeedNewerVersion: is every refusal one of a CEL feature the target version lacks?
func allNeedNewerVersion(msgs []string) bool {
	for _, m := range msgs {
		if !strings.Contains(m, "needs lists.flatten()") && !strings.Contains(m, "two-variable comprehensions") {
			return false
		}
	}
	return len(msgs) > 0
}
