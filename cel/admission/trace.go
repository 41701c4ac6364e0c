package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Trace collects what an admission does without telling the client, for the admissions whose
// context came from WithTrace: expression failures that a policy's failurePolicy Ignore swallowed,
// and namespaces not given whose labels were assumed (see namespaces.go). It is safe for
// concurrent use.
//
// The API server's MAP dispatcher reports an ignored failure nowhere a client can see: the
// generic policy dispatcher drops the errors of Ignore policies (with a TODO for a metric), a
// failing match condition of an Ignore policy just makes the policy not match, and the mutating
// dispatcher's metric (ObserveRejection) counts failures per policy, binding and error type,
// process-wide, with neither the message nor the mutation. Unlike webhooks, no
// failed-open audit annotation or warning is written. So the evaluator observes the failures
// where the API server's dispatcher receives them: each mutation's patcher and each policy's
// match-condition matcher (built by compilePolicy) are wrapped, and a failure is recorded when
// the dispatcher goes on with it under failurePolicy Ignore: a patcher error that is not an API
// status error (the dispatcher denies the request with those whatever the failurePolicy), and
// match-condition errors when the matcher answers "no match" without naming a false condition.
type Trace struct {
	mu      sync.Mutex
	ignored []Failure
	assumed map[string]bool
	reads   map[string][]string
}

// Failure is one expression that failed, and that failurePolicy Ignore skipped.
type Failure struct {
	Policy string
	// Expression is "spec.mutations[i]", or "spec.matchConditions[i] (name)" (then the whole
	// policy was skipped).
	Expression string
	Err        string
}

func (f Failure) String() string {
	what := "admitted the object without it"
	if f.matchCondition() {
		what = "skipped the policy"
	}
	return fmt.Sprintf("policy %s: %s failed, and failurePolicy Ignore %s: %s", f.Policy, f.Expression, what, f.Err)
}

func (f Failure) matchCondition() bool {
	return strings.HasPrefix(f.Expression, "spec.matchConditions")
}

type traceKey struct{}

// WithTrace returns a context whose admissions record in t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Ignored returns the failures failurePolicy Ignore swallowed, in order; an expression that
// failed again when its policy was reinvoked is listed once, with its first error.
func (t *Trace) Ignored() []Failure {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Failure(nil), t.ignored...)
}

// AssumedNamespaces returns, sorted, the namespaces not given that were taken as not labelled
// admission.gatekeeper.sh/ignore because a binding or policy that applied requires that label
// to be absent.
func (t *Trace) AssumedNamespaces() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for ns := range t.assumed {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// NamespaceReads maps each namespace not given whose labels (or more than its name) the
// expressions of a policy that applied read, to those reads, e.g. `policy p:
// spec.variables[0].expression reads namespaceObject.metadata.labels["env"]`. Such a namespace
// is taken as having no label but kubernetes.io/metadata.name.
func (t *Trace) NamespaceReads() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string][]string{}
	for ns, r := range t.reads {
		out[ns] = append([]string(nil), r...)
	}
	return out
}

// Merge adds what another trace recorded to t.
func (t *Trace) Merge(o *Trace) {
	for _, f := range o.Ignored() {
		t.ignore(f)
	}
	for _, ns := range o.AssumedNamespaces() {
		t.assume(ns)
	}
	for ns, rs := range o.NamespaceReads() {
		t.read(ns, rs)
	}
}

func (t *Trace) read(ns string, reads []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reads == nil {
		t.reads = map[string][]string{}
	}
	for _, r := range reads {
		if !slices.Contains(t.reads[ns], r) {
			t.reads[ns] = append(t.reads[ns], r)
		}
	}
}

func (t *Trace) ignore(f Failure) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, g := range t.ignored {
		if g.Policy == f.Policy && g.Expression == f.Expression {
			return // a reinvocation failing again: the first failure is reported
		}
	}
	t.ignored = append(t.ignored, f)
}

// Assume records ns as a namespace not given taken as not labelled
// admission.gatekeeper.sh/ignore (for callers that decide so themselves, e.g. for Gatekeeper's
// mutators).
func (t *Trace) Assume(ns string) { t.assume(ns) }

func (t *Trace) assume(ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.assumed == nil {
		t.assumed = map[string]bool{}
	}
	t.assumed[ns] = true
}

func ignores(fp *admissionregistrationv1.FailurePolicyType) bool {
	return fp != nil && *fp == admissionregistrationv1.Ignore
}

// tracedPatcher is a mutation's patcher that records the failures its policy ignores.
type tracedPatcher struct {
	patch.Patcher
	policy string
	index  int
	ignore bool
}

func (p *tracedPatcher) Patch(ctx context.Context, req patch.Request, budget int64) (runtime.Object, error) {
	obj, err := p.Patcher.Patch(ctx, req, budget)
	if err != nil && p.ignore {
		var status *apierrors.StatusError
		if t := traceFrom(ctx); t != nil && !errors.As(err, &status) {
			t.ignore(Failure{Policy: p.policy, Expression: fmt.Sprintf("spec.mutations[%d]", p.index), Err: err.Error()})
		}
	}
	return obj, err
}

// conditionErrors collects the errors of one evaluation of a policy's match conditions.
type conditionErrors struct{ failures []Failure }

type conditionErrorsKey struct{}

// tracedMatcher is a policy's match-condition matcher that records the failures its policy
// ignores: errors, and the matcher's answer "no match" with no condition false.
type tracedMatcher struct {
	matchconditions.Matcher
	ignore bool
}

func (m *tracedMatcher) Match(ctx context.Context, va *admission.VersionedAttributes, params runtime.Object, authz authorizer.UnconditionalAuthorizer) matchconditions.MatchResult {
	t := traceFrom(ctx)
	if t == nil || !m.ignore {
		return m.Matcher.Match(ctx, va, params, authz)
	}
	errs := &conditionErrors{}
	res := m.Matcher.Match(context.WithValue(ctx, conditionErrorsKey{}, errs), va, params, authz)
	if !res.Matches && res.Error == nil && res.FailedConditionName == "" {
		for _, f := range errs.failures {
			t.ignore(f)
		}
	}
	return res
}

func recordConditionError(ctx context.Context, f Failure) {
	if errs, ok := ctx.Value(conditionErrorsKey{}).(*conditionErrors); ok {
		errs.failures = append(errs.failures, f)
	}
}
