// Package verify admits objects both ways — through a reference engine (a Reference: by default
// Gatekeeper's own engine, package reference/gatekeeper; for Kyverno's policies, Kyverno's own
// engine, the kyverno-engine program of the module reference/kyverno) and through the emitted
// MutatingAdmissionPolicies run by the API server's own MAP code (package cel/admission) — in many
// policy orders, and reports every difference.
//
// It decides nothing about translation; it only compares.
package verify

import (
	"cmp"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/internal/typed"
)

// Options tune a Verifier.
type Options struct {
	// Namespaces are the namespace objects (labels for namespaceSelector). A namespace an object
	// names but that is not listed exists with only its kubernetes.io/metadata.name label, as long
	// as no mutator or policy that applies to the object looks at its other labels: then the case
	// fails, asking for the Namespace object (see Check).
	Namespaces []*corev1.Namespace
	// GiveNamespacesWith ends the advice to give a Namespace object, e.g. "with --namespaces or -f".
	GiveNamespacesWith string
	// CRDs give the schemas, resources and scopes of custom resources (objects and param kinds)
	// to the policies' evaluator; Gatekeeper's engine needs none.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Params are the param objects the policies with a paramKind read (admission.Options.Params).
	Params []*unstructured.Unstructured
	// GiveCRDsWith ends the advice to give a CRD for a param of an unknown kind, e.g. "with --crd".
	GiveCRDsWith string
	// AllOrdersUpTo: every order of the policies is tried when there are at most this many orders
	// (default 24, i.e. up to 4 policies); otherwise sorted, reversed and Shuffles seeded shuffles.
	AllOrdersUpTo int
	Shuffles      int
	Seed          int64
	// Idempotence re-admits each result through the policies and fails objects that change again,
	// unless Gatekeeper, admitting the same result, changes it the same way.
	Idempotence bool
	// ExcludedNamespaces are the namespaces Gatekeeper's Config excludes from mutation
	// (Gatekeeper wildcards); compiler.Output.ExcludedNamespaces.
	ExcludedNamespaces []string
	// MutateIgnoredNamespaces: Gatekeeper's webhook is called for namespaces labelled
	// admission.gatekeeper.sh/ignore too (by default it is installed with a namespaceSelector
	// that skips them, as its Helm chart and manifest install it).
	MutateIgnoredNamespaces bool
	// NoWebhookSubresources: Gatekeeper's webhook is installed for resources only (its static
	// manifest): it is not called for a subresource's request, which it then leaves as it comes
	// (route.Options.NoWebhookSubresources).
	NoWebhookSubresources bool
	// Reference is the engine the policies are compared with; nil is Gatekeeper's engine, built
	// from the mutators with ExcludedNamespaces, MutateIgnoredNamespaces and NoWebhookSubresources. A Reference given
	// is built already: New and NewSets then refuse mutators, and those two fields are its own.
	// The Verifier's Close closes it too when it has a Close method (KyvernoReference stops its
	// program).
	Reference Reference
}

// Case is one admission request.
type Case struct {
	Name      string // for reports; defaults to kind/namespace/name
	Object    *unstructured.Unstructured
	OldObject *unstructured.Unstructured
	Operation admissionv1.Operation
	// SubResource is the request's subresource: "" for the resource itself, or
	// "ephemeralcontainers", an UPDATE of a Pod that adds ephemeral containers (kubectl debug),
	// whose results are compared as the API server stores them (see Stored).
	SubResource string
	// Resource is the request's resource where it is not the object's kind's (a Binding's
	// pods/binding); zero for the kind's.
	Resource schema.GroupVersionResource
	// User is who sends the request (in group system:authenticated), to both the reference and
	// the policies; "" is the user "mapc".
	User string
}

// Result is the verdict for one case.
type Result struct {
	Case    string
	Pass    bool
	Orders  int      // how many policy orders were tried
	Order   []string // the first failing order (policy names)
	Want    *unstructured.Unstructured
	WantErr string
	Got     *unstructured.Unstructured
	GotErr  string
	Diff    string // unified diff, the reference (want) to MAPs (got)
	Reason  string
	// Reference names the engine that gave Want (Reference.Name), for reports.
	Reference string
	// Ignored are the policies' failing expressions that failurePolicy Ignore skipped while
	// admitting the case (in the failing order, for a failed case).
	Ignored []string
	// File and Line locate the case's input (an object, a refused mutator, a suite), when known.
	File string
	Line int
}

// Verifier holds both engines for one set of mutators and their compiled policies.
type Verifier struct {
	opts     Options
	ref      Reference
	ev       *admission.Evaluator
	sets     []admission.PolicySet
	orders   [][]int
	nsByName map[string]*corev1.Namespace
	// notes collects what the cases assumed of namespaces not given.
	notes *admission.Trace
}

// New builds both engines.
func New(mutators []*unstructured.Unstructured, policies []*emit.Policy, opts Options) (*Verifier, error) {
	sets := make([]admission.PolicySet, 0, len(policies))
	for _, p := range policies {
		sets = append(sets, admission.PolicySet{Policy: p.Policy, Bindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{p.Binding}})
	}
	return NewSets(mutators, sets, opts)
}

// NewSets is New for policies given with any number of bindings each (e.g. hand-written MAPs).
// With Options.Reference, mutators must be empty: the reference has its own.
func NewSets(mutators []*unstructured.Unstructured, sets []admission.PolicySet, opts Options) (*Verifier, error) {
	if opts.AllOrdersUpTo == 0 {
		opts.AllOrdersUpTo = 24
	}
	if opts.Shuffles == 0 {
		opts.Shuffles = 6
	}
	ref := opts.Reference
	if ref == nil {
		gk, err := newGatekeeperReference(mutators, opts)
		if err != nil {
			return nil, err
		}
		ref = gk
	} else if len(mutators) > 0 {
		return nil, fmt.Errorf("%d mutator(s) given with a reference engine (%s) of its own: give either", len(mutators), ref.Name())
	}
	ev, err := admission.New(admission.Options{Namespaces: opts.Namespaces, GiveNamespacesWith: opts.GiveNamespacesWith,
		CRDs: opts.CRDs, Params: opts.Params, GiveCRDsWith: opts.GiveCRDsWith})
	if err != nil {
		return nil, fmt.Errorf("the API server's MAP code: %w", err)
	}
	v := &Verifier{opts: opts, ref: ref, ev: ev, nsByName: map[string]*corev1.Namespace{}, notes: &admission.Trace{}}
	for _, ns := range opts.Namespaces {
		v.nsByName[ns.Name] = ns
	}
	v.sets = sets
	v.orders = Orders(len(v.sets), opts.AllOrdersUpTo, opts.Shuffles, opts.Seed)
	return v, nil
}

// Close releases the evaluator, and the reference when it holds anything (see Options.Reference).
func (v *Verifier) Close() {
	v.ev.Close()
	if c, ok := v.ref.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// Orders lists the policy orders to try: all n! when that is at most allUpTo, else the sorted
// order, its reverse and `shuffles` seeded shuffles.
func Orders(n, allUpTo, shuffles int, seed int64) [][]int {
	fact := 1
	for i := 2; i <= n && fact <= allUpTo; i++ {
		fact *= i
	}
	id := make([]int, n)
	for i := range id {
		id[i] = i
	}
	if fact <= allUpTo {
		var out [][]int
		permute(append([]int(nil), id...), 0, &out)
		return out
	}
	rev := make([]int, n)
	for i := range rev {
		rev[i] = n - 1 - i
	}
	out := [][]int{id, rev}
	r := rand.New(rand.NewSource(seed))
	for i := 0; i < shuffles; i++ {
		p := append([]int(nil), id...)
		r.Shuffle(n, func(a, b int) { p[a], p[b] = p[b], p[a] })
		out = append(out, p)
	}
	return out
}

func permute(a []int, k int, out *[][]int) {
	if k == len(a) {
		*out = append(*out, append([]int(nil), a...))
		return
	}
	for i := k; i < len(a); i++ {
		a[k], a[i] = a[i], a[k]
		permute(a, k+1, out)
		a[k], a[i] = a[i], a[k]
	}
}

func (v *Verifier) namespaceOf(obj *unstructured.Unstructured) *corev1.Namespace {
	name := obj.GetNamespace()
	if name == "" || obj.GetKind() == "Namespace" && obj.GroupVersionKind().Group == "" {
		return nil
	}
	if ns, ok := v.nsByName[name]; ok {
		return ns
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
}

// referenceAlike: does the reference, admitting the result got again, also give again? Then a
// result that changes on re-admission is the reference's behaviour, reproduced (in Gatekeeper, a
// keyed list element whose key the API server drops as empty is not found again, and added again,
// by both).
func (v *Verifier) referenceAlike(ctx context.Context, got, again *unstructured.Unstructured, op admissionv1.Operation, order []string, user string) bool {
	in, err := Normalize(got)
	if err != nil {
		return false
	}
	ref, err := v.ref.Admit(ctx, RefRequest{Object: in.DeepCopy(), Namespace: v.namespaceOf(in), Operation: op, Order: order, User: user})
	if err == nil {
		ref, err = normalize(ref, false)
	}
	return err == nil && apiequality.Semantic.DeepEqual(ref.Object, again.Object)
}

// Check admits one case through the reference once and through the policies in every order.
//
// A case in a namespace not given fails, asking for the Namespace object, when the reference
// (for Gatekeeper, a mutator's match.namespaceSelector, where the rest of its match and applyTo
// hold; see Reference.NamespaceUses) or a policy (see
// admission.NamespaceNotGivenError) looks at that namespace's labels: both engines would take it
// as unlabelled. The admission.gatekeeper.sh/ignore label is taken as absent instead (see
// AssumedNamespaces).
func (v *Verifier) Check(ctx context.Context, c Case) Result {
	in, err := Normalize(c.Object)
	res := Result{Case: c.Name, Reference: v.ref.Name()}
	if res.Case == "" {
		res.Case = caseName(c.Object)
	}
	if err != nil {
		res.Reason = "the object is not valid: " + err.Error()
		return res
	}
	op := c.Operation
	if op == "" {
		op = admissionv1.Create
	}
	if nerr := v.checkNamespace(ctx, in, c.OldObject, op); nerr != nil {
		res.Reason = nerr.Error()
		return res
	}
	if c.SubResource != "" && c.SubResource != "ephemeralcontainers" && c.SubResource != "status" && c.SubResource != "binding" {
		res.Reason = fmt.Sprintf("subresource %q: only ephemeralcontainers, status and binding are supported", c.SubResource)
		return res
	}
	want, werr := v.ref.Admit(ctx, RefRequest{Object: in.DeepCopy(), OldObject: c.OldObject, Namespace: v.namespaceOf(in), Operation: op, SubResource: c.SubResource, User: c.User})
	if werr == nil {
		// The API server decodes a webhook's result leniently: unknown fields are dropped.
		want, werr = normalize(want, false)
	}
	if werr == nil {
		want = Stored(c.SubResource, c.OldObject, want)
	}
	res.Want = want
	if werr != nil {
		res.WantErr = werr.Error()
	}
	ordered, _ := v.ref.(OrderedReference)
	wants := map[string]refResult{}
	for _, order := range v.orders {
		var refOrder []string
		res.Orders++
		sets := make([]admission.PolicySet, len(order))
		names := make([]string, len(order))
		maps := make([]*admissionregistrationv1.MutatingAdmissionPolicy, len(order))
		for i, j := range order {
			sets[i] = v.sets[j]
			names[i] = v.sets[j].Policy.Name
			maps[i] = v.sets[j].Policy
		}
		if ordered != nil {
			// The engine's result with its policies in this order.
			refOrder = ordered.Order(maps)
			key := strings.Join(refOrder, "\x00")
			r, ok := wants[key]
			if !ok {
				r.want, r.err = v.ref.Admit(ctx, RefRequest{Object: in.DeepCopy(), OldObject: c.OldObject, Namespace: v.namespaceOf(in), Operation: op, SubResource: c.SubResource, Order: refOrder, User: c.User})
				if r.err == nil {
					r.want, r.err = normalize(r.want, false)
				}
				if r.err == nil {
					r.want = Stored(c.SubResource, c.OldObject, r.want)
				}
				wants[key] = r
			}
			want, werr = r.want, r.err
			res.Want, res.WantErr = want, ""
			if werr != nil {
				res.WantErr = werr.Error()
			}
		}
		tr := &admission.Trace{}
		got, gerr := v.ev.Admit(admission.WithTrace(ctx, tr), sets, admission.Request{Object: in.DeepCopy(), OldObject: c.OldObject, Operation: op, SubResource: c.SubResource, Resource: c.Resource, UserName: c.User})
		if gerr == nil {
			got, gerr = Normalize(got)
		}
		if gerr == nil {
			got = Stored(c.SubResource, c.OldObject, got)
		}
		v.notes.Merge(tr)
		ignored := ignoredFailures(tr)
		if reason := compare(v.ref.Name(), want, werr, got, gerr); reason != "" {
			res.Order, res.Got, res.Reason, res.Ignored = names, got, reason, ignored
			if len(res.Ignored) > 0 {
				// A failure the policies skipped is the likely cause.
				res.Reason += "; " + strings.Join(res.Ignored, "; ")
			}
			if gerr != nil {
				res.GotErr = gerr.Error()
			}
			res.Diff = v.diff(want, got)
			return res
		}
		for _, f := range ignored {
			if !slices.Contains(res.Ignored, f) {
				res.Ignored = append(res.Ignored, f)
			}
		}
		if v.opts.Idempotence && gerr == nil && c.SubResource == "" {
			again, aerr := v.ev.Admit(ctx, sets, admission.Request{Object: got.DeepCopy(), Operation: op, UserName: c.User})
			if aerr == nil {
				again, aerr = Normalize(again)
			}
			if aerr == nil && !apiequality.Semantic.DeepEqual(again.Object, got.Object) && v.referenceAlike(ctx, got, again, op, refOrder, c.User) {
				continue // the reference's own result changes again, and the same way
			}
			if aerr != nil || !apiequality.Semantic.DeepEqual(again.Object, got.Object) {
				res.Order, res.Got = names, again
				res.Reason = "not idempotent: admitting the result again changes it"
				if aerr != nil {
					res.GotErr = aerr.Error()
				}
				res.Diff = v.diff(got, again)
				return res
			}
		}
	}
	res.Got = res.Want
	res.Pass = true
	return res
}

// Stored is what the API server stores of obj, admitted on the subresource of an update of old:
// for "ephemeralcontainers", the Pod's update strategy for the subresource keeps old but for the
// ephemeral containers (and name, namespace, uid, resourceVersion) of obj, whatever else the
// admission changed; obj for the resource itself ("") and for "status" (where what the API
// server keeps depends on the kind's strategy: the admitted objects are compared whole, which
// is stricter).
func Stored(subresource string, old, obj *unstructured.Unstructured) *unstructured.Unstructured {
	if subresource != "ephemeralcontainers" || old == nil || obj == nil {
		return obj
	}
	out := old.DeepCopy()
	out.SetName(obj.GetName())
	out.SetNamespace(obj.GetNamespace())
	out.SetUID(obj.GetUID())
	out.SetResourceVersion(obj.GetResourceVersion())
	if l, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "ephemeralContainers"); ok {
		_ = unstructured.SetNestedField(out.Object, runtime.DeepCopyJSONValue(l), "spec", "ephemeralContainers")
	} else {
		unstructured.RemoveNestedField(out.Object, "spec", "ephemeralContainers")
	}
	return out
}

// Debug is a Pod (v1) with an ephemeral container added, as kubectl debug adds one with the
// pods/ephemeralcontainers subresource (an UPDATE of the Pod, see Stored); nil for other objects.
func Debug(pod *unstructured.Unstructured) *unstructured.Unstructured {
	if pod.GetAPIVersion() != "v1" || pod.GetKind() != "Pod" {
		return nil
	}
	out := pod.DeepCopy()
	list, _, _ := unstructured.NestedSlice(out.Object, "spec", "ephemeralContainers")
	name := "debugger"
	for i := 0; slices.ContainsFunc(list, func(c any) bool { m, _ := c.(map[string]any); return m["name"] == name }); i++ {
		name = fmt.Sprintf("debugger-%d", i+1)
	}
	list = append(list, map[string]any{"name": name, "image": "busybox:1.36", "stdin": true, "tty": true})
	if err := unstructured.SetNestedSlice(out.Object, list, "spec", "ephemeralContainers"); err != nil {
		return nil
	}
	return out
}

// refResult is the reference's result for one order of its policies.
type refResult struct {
	want *unstructured.Unstructured
	err  error
}

// compare says how the policies' result differs from the reference's (named ref), "" if not.
func compare(ref string, want *unstructured.Unstructured, werr error, got *unstructured.Unstructured, gerr error) string {
	switch {
	case werr != nil && gerr != nil:
		return "" // both deny
	case werr != nil:
		return ref + " denies the request but the policies admit it"
	case gerr != nil:
		return "the policies deny the request but " + ref + " admits it"
	case !apiequality.Semantic.DeepEqual(want.Object, got.Object):
		return "the policies mutate the object differently from " + ref
	}
	return ""
}

func caseName(o *unstructured.Unstructured) string {
	s := o.GetKind() + "/"
	if o.GetNamespace() != "" {
		s += o.GetNamespace() + "/"
	}
	return s + o.GetName()
}

// Normalize gives an object the form the API server gives it: built-in kinds go through their Go
// type and back (as the API server decodes a request and encodes it for webhooks and storage).
func Normalize(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return normalize(o, true)
}

// normalize is Normalize; strict refuses unknown fields, as the API server does for requests
// (lenient is how it decodes a mutating webhook's result: unknown fields dropped).
func normalize(o *unstructured.Unstructured, strict bool) (*unstructured.Unstructured, error) {
	if o == nil {
		return nil, nil
	}
	gvk := o.GroupVersionKind()
	if !typed.Known(gvk) {
		return o.DeepCopy(), nil
	}
	m, err := typed.RoundTrip(gvk, o.Object, strict)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: m}
	out.SetGroupVersionKind(gvk)
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	return out, nil
}

// diff is DiffObjects from the reference (named in lower case) to the policies.
func (v *Verifier) diff(a, b *unstructured.Unstructured) string {
	return DiffObjects(a, b, strings.ToLower(v.ref.Name()), "policies")
}

// DiffObjects is a unified diff of two objects as YAML, from a (named from) to b (named to).
func DiffObjects(a, b *unstructured.Unstructured, from, to string) string {
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

// Summary is "N passed, M failed".
func Summary(rs []Result) string {
	p, f := 0, 0
	for _, r := range rs {
		if r.Pass {
			p++
		} else {
			f++
		}
	}
	return fmt.Sprintf("%d passed, %d failed", p, f)
}

// Report renders results as text: PASS/FAIL per case, with the diff and failing order.
func Report(rs []Result) string {
	var b strings.Builder
	sorted := append([]Result(nil), rs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Case < sorted[j].Case })
	for _, r := range sorted {
		if r.Pass {
			fmt.Fprintf(&b, "PASS %s (%d policy orders)\n", r.Case, r.Orders)
			for _, f := range r.Ignored {
				fmt.Fprintf(&b, "  note: %s\n", f)
			}
			continue
		}
		fmt.Fprintf(&b, "FAIL %s: %s\n", r.Case, r.Reason)
		if len(r.Order) > 0 {
			fmt.Fprintf(&b, "  policy order: %s\n", strings.Join(r.Order, ", "))
		}
		if r.WantErr != "" {
			fmt.Fprintf(&b, "  %s: %s\n", cmp.Or(r.Reference, "want"), r.WantErr)
		}
		if r.GotErr != "" {
			fmt.Fprintf(&b, "  policies: %s\n", r.GotErr)
		}
		if r.Diff != "" {
			for _, l := range strings.Split(strings.TrimRight(r.Diff, "\n"), "\n") {
				b.WriteString("  " + l + "\n")
			}
		}
	}
	b.WriteString(Summary(rs) + "\n")
	return b.String()
}
