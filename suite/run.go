package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/verify"
)

// Outcome is what running a suite gave.
type Outcome struct {
	Suite   *Suite
	Results []verify.Result
	// Warnings are about the policies (see Policies.Warnings) and the compilation.
	Warnings []string
	// Err says why the suite could not run at all (a mutator refused, a policy the API server
	// would reject, ...); then no case ran.
	Err error
}

// Passed and Failed count the results; a suite that could not run counts as one failure.
func (o *Outcome) Passed() int {
	n := 0
	for _, r := range o.Results {
		if r.Pass {
			n++
		}
	}
	return n
}

// Failed counts failed cases, or 1 for a suite that could not run.
func (o *Outcome) Failed() int {
	if o.Err != nil {
		return 1
	}
	return len(o.Results) - o.Passed()
}

// Report is the outcome as a verify.Suite, for the JSON and JUnit reports.
func (o *Outcome) Report() verify.Suite {
	vs := verify.Suite{Name: o.Suite.Name + " (" + o.Suite.File + ")", Results: o.Results, Skipped: o.Suite.Skipped}
	if o.Err != nil {
		vs.Results = []verify.Result{{Case: "setup", Reason: "the suite cannot run: " + o.Err.Error()}}
	}
	return vs
}

// Run compiles the suite's mutators, reads its policies and admits every case through the API
// server's MutatingAdmissionPolicy code (package cel/admission), in every order of the policies
// the case uses (all orders up to 24, else sorted, reversed and seeded shuffles: the API server's
// order is arbitrary, so an expectation must hold in all of them).
//
// A case whose object is in a namespace the suite does not give fails when that namespace's
// labels matter: a namespaceSelector of a policy or binding that applies, or of a mutator among
// the sources, looks at labels other than kubernetes.io/metadata.name (see
// admission.NamespaceNotGivenError and verify.MutatorNamespaces). The outcome's warnings list
// the namespaces not given that were taken as not labelled admission.gatekeeper.sh/ignore, and
// those whose labels the policies' expressions read.
func Run(ctx context.Context, s *Suite) *Outcome {
	o := &Outcome{Suite: s}
	sets, err := o.policies()
	if err != nil {
		o.Err = err
		return o
	}
	r := &runner{s: s, sets: sets, given: map[string]bool{}, notes: &admission.Trace{}}
	for _, ns := range s.Namespaces {
		r.given[ns.Name] = true
	}
	if len(s.Mutators) > 0 {
		var muts []*unstructured.Unstructured
		for _, d := range s.Mutators {
			muts = append(muts, d.Object)
		}
		// The compiled policies carry the webhook's selector: their trace notes it.
		if r.mutators, err = verify.NewMutatorNamespaces(muts, false, nil); err != nil {
			o.Err = err
			return o
		}
	}
	if s.Format == FormatMapc {
		o.Warnings = append(o.Warnings, UnreadParams(s.Params, sets, "params")...)
	}
	r.ev, err = admission.New(admission.Options{Namespaces: s.Namespaces, CRDs: s.CRDs, Params: ParamObjects(s.Params),
		GiveNamespacesWith: giveNamespacesWith(s.Format), GiveCRDsWith: giveCRDsWith(s.Format)})
	if err != nil {
		o.Err = PositionParamError(err, s.Params, paramsField(s.Format))
		return o
	}
	defer r.ev.Close()
	r.kyverno = kyvernoSets(sets)
	for _, c := range s.Cases {
		if c.Kyverno != nil {
			res, skip := r.runKyverno(ctx, c)
			if skip != "" {
				s.Skipped = append(s.Skipped, verify.Skip{Case: c.Name, Reason: skip})
				continue
			}
			o.Results = append(o.Results, res)
			continue
		}
		o.Results = append(o.Results, r.runCase(ctx, c))
	}
	o.Warnings = append(o.Warnings, NamespaceWarnings(r.notes.AssumedNamespaces(), r.notes.NamespaceReads(), giveNamespacesWith(s.Format))...)
	return o
}

// runner runs the cases of one suite.
type runner struct {
	s        *Suite
	sets     []admission.PolicySet
	ev       *admission.Evaluator
	given    map[string]bool
	mutators *verify.MutatorNamespaces // nil without mutators among the sources
	// notes collects what the admissions assumed of namespaces not given.
	notes *admission.Trace
	// kyverno are the policies compiled from Kyverno policies, by the Kyverno policy ("name" or
	// "namespace/name").
	kyverno map[string]admission.PolicySet
}

// giveNamespacesWith says where a suite of the format gives Namespace objects.
func giveNamespacesWith(format string) string {
	switch format {
	case FormatKaptest:
		return "among the suite's resources"
	case FormatKyverno:
		return "among the suite's resources (or its labels in the values file's namespaceSelector)"
	}
	return "in the suite's namespaces"
}

// giveCRDsWith says where a suite of the format gives CustomResourceDefinitions.
func giveCRDsWith(format string) string {
	if format == FormatMapc {
		return "in the suite's crds"
	}
	return "among the suite's crds"
}

// paramsField is where a suite of the format gives params, for messages.
func paramsField(format string) string {
	if format == FormatKaptest {
		return "resources (a test's param)"
	}
	return "params"
}

// NamespaceWarnings words what was assumed of namespaces not given: those taken as not labelled
// admission.gatekeeper.sh/ignore, and those whose labels the policies' expressions read (taken as
// having none but kubernetes.io/metadata.name). how says where Namespace objects are given.
func NamespaceWarnings(assumed []string, reads map[string][]string, how string) []string {
	var out []string
	if len(assumed) > 0 {
		out = append(out, fmt.Sprintf("warning: namespace(s) %s not given: taken as not labelled %s, so the policies mutate there (give the Namespace objects %s to check)",
			strings.Join(assumed, ", "), admission.GatekeeperIgnoreLabel, how))
	}
	var nss []string
	for ns := range reads {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		out = append(out, fmt.Sprintf("warning: namespace %s not given: taken as having no label but kubernetes.io/metadata.name, which matters if the policies' reads of it decide anything (%s); give the Namespace object (kubectl get namespace %s -o yaml) %s",
			ns, strings.Join(reads[ns], "; "), ns, how))
	}
	return out
}

// policies compiles the mutators and reads the ready policies, sorted by name.
func (o *Outcome) policies() ([]admission.PolicySet, error) {
	s := o.Suite
	var sets []admission.PolicySet
	var problems []string
	if len(s.Mutators) > 0 || len(s.Kyverno) > 0 {
		docs := append(append([]*source.Document(nil), s.Mutators...), s.Kyverno...)
		out := compiler.Compile(docs, compiler.Options{KubernetesVersion: s.KubernetesVersion})
		for _, p := range out.Problems {
			problems = append(problems, p.Error())
		}
		for _, n := range out.Notes {
			if n.Kind.NoPolicy() {
				o.Warnings = append(o.Warnings, "note: "+n.String())
			}
		}
		for _, p := range out.Policies {
			sets = append(sets, PolicySet(p))
		}
	}
	if len(s.Policies) > 0 {
		ps := ReadPolicies(s.Policies, s.KubernetesVersion)
		for _, w := range ps.Warnings {
			if s.BindUnbound && strings.HasSuffix(w, "it never runs") {
				continue // such policies are bound to everything below
			}
			o.Warnings = append(o.Warnings, "warning: "+w)
		}
		for _, p := range ps.Problems {
			problems = append(problems, p.Error())
		}
		sets = append(sets, ps.Sets...)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	sort.SliceStable(sets, func(i, j int) bool { return sets[i].Policy.Name < sets[j].Policy.Name })
	for i := 1; i < len(sets); i++ {
		if sets[i].Policy.Name == sets[i-1].Policy.Name {
			return nil, fmt.Errorf("two policies are named %s (a compiled mutator and a ready policy?)", sets[i].Policy.Name)
		}
	}
	if s.BindUnbound {
		sets = BindAll(sets)
	}
	return sets, nil
}

// selectSets picks the policies and bindings a case runs with.
func selectSets(c *Case, all []admission.PolicySet) ([]admission.PolicySet, error) {
	sel := all
	if c.Policies != nil {
		sel = nil
		for _, name := range c.Policies {
			found := false
			for _, s := range all {
				if s.Policy.Name == name {
					sel = append(sel, s)
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("no policy is named %q", name)
			}
		}
	}
	switch {
	case c.Binding != "":
		out := make([]admission.PolicySet, len(sel))
		for i, s := range sel {
			out[i] = admission.PolicySet{Policy: s.Policy}
			for _, b := range s.Bindings {
				if b.Name == c.Binding {
					out[i].Bindings = []*admissionregistrationv1.MutatingAdmissionPolicyBinding{b}
				}
			}
			if len(out[i].Bindings) == 0 {
				return nil, fmt.Errorf("no binding of policy %s is named %q", s.Policy.Name, c.Binding)
			}
		}
		sel = out
	case c.OwnBinding:
		out := make([]admission.PolicySet, len(sel))
		for i, s := range sel {
			out[i] = admission.PolicySet{Policy: s.Policy}
		}
		sel = BindAll(out)
	}
	return sel, nil
}

// withParamRef gives the bindings of the policies with a paramKind the paramRef ref.
func withParamRef(sets []admission.PolicySet, ref *admissionregistrationv1.ParamRef) []admission.PolicySet {
	out := make([]admission.PolicySet, len(sets))
	for i, s := range sets {
		out[i] = s
		if s.Policy.Spec.ParamKind == nil {
			continue
		}
		out[i].Bindings = make([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, len(s.Bindings))
		for j, b := range s.Bindings {
			b = b.DeepCopy()
			b.Spec.ParamRef = ref.DeepCopy()
			out[i].Bindings[j] = b
		}
	}
	return out
}

func (r *runner) runCase(ctx context.Context, c *Case) verify.Result {
	ev := r.ev
	res := verify.Result{Case: c.Name}
	sets, err := selectSets(c, r.sets)
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	if c.Param != nil {
		sets = withParamRef(sets, r.ev.ParamRefTo(c.Param))
	}
	in, err := verify.Normalize(c.Object)
	if err != nil {
		res.Reason = "the object is not valid: " + err.Error()
		return res
	}
	req := admission.Request{Object: in, OldObject: c.OldObject, Operation: c.Operation, UserName: c.User}
	if req.Operation == "" {
		req.Operation = admissionv1.Create
	}
	// The object as the API server sees it before any policy (decoded, in its namespace).
	base, err := ev.Admit(ctx, nil, req)
	if err == nil {
		base, err = verify.Normalize(base)
	}
	if err != nil {
		res.Reason = "the object cannot be admitted: " + err.Error()
		return res
	}
	if err := r.checkNamespace(ctx, sets, base, req); err != nil {
		res.Reason = err.Error()
		return res
	}
	var want *unstructured.Unstructured
	switch {
	case c.Expect != nil:
		if want, err = verify.Normalize(c.Expect); err != nil {
			res.Reason = "the expected object is not valid: " + err.Error()
			return res
		}
		if want.GetNamespace() == "" && c.Object.GetNamespace() == "" {
			// Neither names a namespace: the request goes to the default namespace, as kubectl's.
			want.SetNamespace(base.GetNamespace())
		}
	case c.ExpectUnchanged:
		want = base
	}
	res.Want = want
	if c.ExpectError != nil {
		if *c.ExpectError == "" {
			res.WantErr = "an error"
		} else {
			res.WantErr = fmt.Sprintf("an error containing %q", *c.ExpectError)
		}
	}
	for _, order := range verify.Orders(len(sets), 24, 6, 0) {
		res.Orders++
		ordered := make([]admission.PolicySet, len(order))
		names := make([]string, len(order))
		for i, j := range order {
			ordered[i], names[i] = sets[j], sets[j].Policy.Name
		}
		rq := req
		rq.Object = in.DeepCopy()
		tr := &admission.Trace{}
		got, gerr := ev.Admit(admission.WithTrace(ctx, tr), ordered, rq)
		if gerr == nil {
			got, gerr = verify.Normalize(got)
		}
		r.notes.Merge(tr)
		for _, f := range tr.Ignored() {
			if !slices.Contains(res.Ignored, f.String()) {
				res.Ignored = append(res.Ignored, f.String())
			}
		}
		reason := judge(c, want, got, gerr)
		if reason == "" {
			res.Got = got
			continue
		}
		res.Reason, res.Order, res.Got = reason, names, got
		if gerr != nil {
			res.GotErr = gerr.Error()
		}
		if want != nil && got != nil {
			if c.Tidy {
				res.Diff = Diff(tidied(want), tidied(got))
			} else {
				res.Diff = Diff(want, got)
			}
		}
		return res
	}
	res.Pass = true
	return res
}

// checkNamespace fails a case in a namespace not given whose labels a selector that applies
// looks at: the policies' (admission.Evaluator.CheckNamespace) or the mutators' among the
// sources. obj is the object in its request namespace.
func (r *runner) checkNamespace(ctx context.Context, sets []admission.PolicySet, obj *unstructured.Unstructured, req admission.Request) error {
	ns := obj.GetNamespace()
	if ns == "" || r.given[ns] {
		return nil
	}
	var uses []string
	if r.mutators != nil {
		uses, _ = r.mutators.Uses(obj, req.Operation)
	}
	tr := &admission.Trace{}
	err := r.ev.CheckNamespace(admission.WithTrace(ctx, tr), sets, req)
	var nerr *admission.NamespaceNotGivenError
	switch {
	case errors.As(err, &nerr):
		uses = append(uses, nerr.Uses...)
	case err != nil:
		return nil // the admission reports it
	}
	if len(uses) > 0 {
		return &admission.NamespaceNotGivenError{Namespace: ns, Uses: uses, How: giveNamespacesWith(r.s.Format)}
	}
	return nil
}

// judge says why got (or gerr) does not meet the case's expectation, or "" if it does.
func judge(c *Case, want, got *unstructured.Unstructured, gerr error) string {
	switch {
	case c.ExpectError != nil && gerr == nil:
		return "admitted, but an error was expected"
	case c.ExpectError != nil && !strings.Contains(gerr.Error(), *c.ExpectError):
		return fmt.Sprintf("the error does not contain %q", *c.ExpectError)
	case c.ExpectError != nil:
		return ""
	case gerr != nil:
		return "the policies deny the request"
	case c.ExpectAdmitted:
		return ""
	case c.ExpectUnchanged && !apiequality.Semantic.DeepEqual(want.Object, got.Object):
		return "the policies change the object, which was expected unchanged"
	case c.Tidy && !apiequality.Semantic.DeepEqual(tidied(want).Object, tidied(got).Object):
		return "the policies' result differs from the expected object (nulls, empty maps and lists aside, as kyverno test compares)"
	case c.Tidy:
		return ""
	case !apiequality.Semantic.DeepEqual(want.Object, got.Object):
		return "the policies' result differs from the expected object"
	}
	return ""
}

// Diff is a unified diff of two objects as YAML, expected to got.
func Diff(want, got *unstructured.Unstructured) string {
	return verify.DiffObjects(want, got, "expected", "got")
}

// WriteText prints an outcome: a header, notes and warnings, then PASS, FAIL (with the place of
// the case, the failing policy order, the errors and the diff) or SKIP per case.
func WriteText(w io.Writer, o *Outcome) {
	s := o.Suite
	fmt.Fprintf(w, "=== %s (%s, %s format)\n", s.Name, s.File, s.Format)
	for _, n := range s.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, x := range o.Warnings {
		fmt.Fprintln(w, x)
	}
	if o.Err != nil {
		fmt.Fprintf(w, "FAIL %s: the suite cannot run:\n", s.Name)
		for _, l := range strings.Split(o.Err.Error(), "\n") {
			fmt.Fprintf(w, "  %s\n", l)
		}
		return
	}
	where := map[string]string{}
	for _, c := range s.Cases {
		where[c.Name] = c.Where
	}
	for _, r := range o.Results {
		if r.Pass {
			fmt.Fprintf(w, "PASS %s (%d policy order%s)\n", r.Case, r.Orders, plural(r.Orders))
			writeNotes(w, r.Ignored)
			continue
		}
		fmt.Fprintf(w, "FAIL %s: %s\n", r.Case, r.Reason)
		writeNotes(w, r.Ignored)
		if where[r.Case] != "" {
			fmt.Fprintf(w, "  case at %s\n", where[r.Case])
		}
		if len(r.Order) > 0 {
			fmt.Fprintf(w, "  policy order: %s\n", strings.Join(r.Order, ", "))
		}
		if r.WantErr != "" {
			fmt.Fprintf(w, "  expected: %s\n", r.WantErr)
		}
		if r.GotErr != "" {
			fmt.Fprintf(w, "  got error: %s\n", r.GotErr)
		}
		for _, l := range strings.Split(strings.TrimRight(r.Diff, "\n"), "\n") {
			if l != "" {
				fmt.Fprintf(w, "  %s\n", l)
			}
		}
	}
	for _, sk := range s.Skipped {
		fmt.Fprintf(w, "SKIP %s: %s\n", sk.Case, sk.Reason)
	}
}

// writeNotes prints the failures failurePolicy Ignore swallowed during a case.
func writeNotes(w io.Writer, ignored []string) {
	for _, f := range ignored {
		fmt.Fprintf(w, "  note: %s\n", f)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
