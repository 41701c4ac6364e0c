package admission

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
)

// A namespace an object is admitted in, but that is not among Options.Namespaces, is taken to
// exist with only its kubernetes.io/metadata.name label. That answer is right only as long as
// nothing looks at its other labels. So, for a request in a namespace not given, each policy that
// applies to the request apart from its namespace selectors (its matchConstraints and one of its
// bindings, by the API server's own matcher with the namespace selectors left out, and its match
// conditions, which the API server evaluates without the namespace: namespaceObject is null
// there) is looked at:
//
//   - the policy's spec.matchConstraints.namespaceSelector or the binding's
//     spec.matchResources.namespaceSelector requires a label other than
//     kubernetes.io/metadata.name: Admit refuses the request (NamespaceNotGivenError);
//   - one of the policy's variables or mutations reads the namespace beyond its name and its
//     kubernetes.io/metadata.name label (other labels, annotations, ...), as mapc's fused
//     policies do for a mutator's namespaceSelector: the Trace lists the read
//     (Trace.NamespaceReads), since whether the read decides anything depends on the rest of the
//     expression;
//   - the one requirement taken as met is admission.gatekeeper.sh/ignore DoesNotExist, which
//     mapc gives every binding by default (as Gatekeeper's webhook is installed): a namespace not
//     given is taken as not ignored, and Trace.AssumedNamespaces lists it.

// GatekeeperIgnoreLabel is the namespace label that makes Gatekeeper's webhook, as installed by
// its Helm chart and manifest, skip a namespace.
const GatekeeperIgnoreLabel = "admission.gatekeeper.sh/ignore"

// SelectorLabels lists the label keys a namespace selector needs to know besides
// kubernetes.io/metadata.name, which every namespace carries with its own name, and says
// whether it requires GatekeeperIgnoreLabel to be absent (a requirement not listed in keys).
func SelectorLabels(sel *metav1.LabelSelector) (keys []string, ignoreLabel bool) {
	if sel == nil {
		return nil, false
	}
	seen := map[string]bool{}
	add := func(k string) {
		if k != metadataNameLabel && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for k := range sel.MatchLabels {
		add(k)
	}
	for _, r := range sel.MatchExpressions {
		if r.Key == GatekeeperIgnoreLabel && r.Operator == metav1.LabelSelectorOpDoesNotExist {
			ignoreLabel = true
			continue
		}
		add(r.Key)
	}
	sort.Strings(keys)
	return keys, ignoreLabel
}

// NamespaceNotGivenError refuses to admit an object whose namespace was not given while what
// the policies do depends on that namespace's labels.
type NamespaceNotGivenError struct {
	Namespace string
	// Uses are the places that look at the namespace's labels, e.g.
	// "binding b: spec.matchResources.namespaceSelector on env".
	Uses []string
	// How says how to give the Namespace object, e.g. "with --namespaces or -f" (may be empty).
	How string
}

func (e *NamespaceNotGivenError) Error() string {
	how := ""
	if e.How != "" {
		how = " " + e.How
	}
	return fmt.Sprintf("namespace %s is not given, but its labels matter (%s): give the Namespace object (kubectl get namespace %s -o yaml)%s",
		e.Namespace, strings.Join(e.Uses, "; "), e.Namespace, how)
}

// namespaceUse is what one PolicySet needs to know of a request's namespace, worked out once
// per set.
type namespaceUse struct {
	policy generic.PolicyAccessor // the policy without its namespace selector
	// conditions are the policy's match conditions, compiled when first needed (nil without
	// any): from the policy with only its match conditions and variables, conditionsPolicy.
	conditionsOnce   sync.Once
	conditionsPolicy *admissionregistrationv1.MutatingAdmissionPolicy
	conditions       *mutating.PolicyEvaluator
	bindings         []bindingNamespaceUse
	// uses are the policy's namespaceSelector's uses of the namespace's labels; reads its
	// expressions'.
	uses        []string
	reads       []string
	ignoreLabel bool
}

type bindingNamespaceUse struct {
	binding     generic.BindingAccessor // the binding without its namespace selector
	uses        []string
	ignoreLabel bool
}

// needsNamespace reports whether anything of the set can depend on a namespace's labels.
func (u *namespaceUse) needsNamespace() bool {
	if len(u.uses) > 0 || len(u.reads) > 0 || u.ignoreLabel {
		return true
	}
	for _, b := range u.bindings {
		if len(b.uses) > 0 || b.ignoreLabel {
			return true
		}
	}
	return false
}

// selectorUse says which labels *sel looks at (as "what on key, key"), and whether it requires the
// ignore label's absence, then empties it: the rest of the match is tested without it.
func selectorUse(sel **metav1.LabelSelector, what string) (uses []string, ignore bool) {
	keys, ignore := SelectorLabels(*sel)
	if len(keys) > 0 {
		uses = []string{what + " on " + strings.Join(keys, ", ")}
	}
	*sel = &metav1.LabelSelector{}
	return uses, ignore
}

// newNamespaceUse analyses a defaulted policy and its defaulted bindings.
func newNamespaceUse(policy *admissionregistrationv1.MutatingAdmissionPolicy, bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding) *namespaceUse {
	u := &namespaceUse{}
	stripped := policy.DeepCopy()
	if mc := stripped.Spec.MatchConstraints; mc != nil {
		u.uses, u.ignoreLabel = selectorUse(&mc.NamespaceSelector, "policy "+policy.Name+": spec.matchConstraints.namespaceSelector")
	}
	for _, e := range policyExpressions(policy) {
		if reads := namespaceReads(e.expr); len(reads) > 0 {
			u.reads = append(u.reads, fmt.Sprintf("policy %s: %s reads %s", policy.Name, e.field, strings.Join(reads, ", ")))
		}
	}
	u.policy = mutating.NewMutatingAdmissionPolicyAccessor(stripped)
	if len(policy.Spec.MatchConditions) > 0 {
		u.conditionsPolicy = policy.DeepCopy()
		u.conditionsPolicy.Spec.Mutations = nil
	}
	for _, b := range bindings {
		bu := bindingNamespaceUse{}
		sb := b.DeepCopy()
		if mr := sb.Spec.MatchResources; mr != nil {
			bu.uses, bu.ignoreLabel = selectorUse(&mr.NamespaceSelector, "binding "+b.Name+": spec.matchResources.namespaceSelector")
		}
		bu.binding = mutating.NewMutatingAdmissionPolicyBindingAccessor(sb)
		u.bindings = append(u.bindings, bu)
	}
	return u
}

type fieldExpr struct{ field, expr string }

// policyExpressions lists the CEL expressions of a policy that see the namespace, with their
// fields: variables and mutations (match conditions are evaluated without it).
func policyExpressions(p *admissionregistrationv1.MutatingAdmissionPolicy) []fieldExpr {
	var out []fieldExpr
	for i, v := range p.Spec.Variables {
		out = append(out, fieldExpr{fmt.Sprintf("spec.variables[%d].expression", i), v.Expression})
	}
	for i, m := range p.Spec.Mutations {
		switch {
		case m.JSONPatch != nil:
			out = append(out, fieldExpr{fmt.Sprintf("spec.mutations[%d].jsonPatch.expression", i), m.JSONPatch.Expression})
		case m.ApplyConfiguration != nil:
			out = append(out, fieldExpr{fmt.Sprintf("spec.mutations[%d].applyConfiguration.expression", i), m.ApplyConfiguration.Expression})
		}
	}
	return out
}

const namespaceObjectVar = "namespaceObject"

var celParser = func() *parser.Parser {
	p, err := parser.NewParser(parser.Macros(parser.AllMacros...), parser.EnableOptionalSyntax(true), parser.EnableVariadicOperatorASTs(true))
	if err != nil {
		panic(err)
	}
	return p
}()

// namespaceReads lists the reads of namespaceObject in a CEL expression that tell more than the
// namespace's name: `namespaceObject.metadata.labels["env"]`, `namespaceObject.metadata.annotations`.
// Known without the Namespace object, and not listed: comparing namespaceObject with null, its
// metadata.name, has(namespaceObject.metadata.labels) (every namespace has the name label), and
// the label kubernetes.io/metadata.name, looked up by a constant key (`l["k"]`, `l[?"k"]`, `"k" in l`) in
// namespaceObject.metadata.labels or in a conditional choosing between it and {} (as mapc
// writes it). An expression that does not parse is listed as reading namespaceObject if it names
// it (the API server refuses it anyway).
func namespaceReads(expr string) []string {
	if !strings.Contains(expr, namespaceObjectVar) {
		return nil
	}
	tree, errs := celParser.Parse(common.NewTextSource(expr))
	if errs != nil && len(errs.GetErrors()) > 0 {
		return []string{namespaceObjectVar}
	}
	r := &readFinder{}
	r.walk(tree.Expr())
	return r.reads
}

const (
	namespaceNamePath   = namespaceObjectVar + ".metadata.name"
	namespaceLabelsPath = namespaceObjectVar + ".metadata.labels"
)

type readFinder struct{ reads []string }

func (r *readFinder) add(read string) {
	if !slices.Contains(r.reads, read) {
		r.reads = append(r.reads, read)
	}
}

func (r *readFinder) addLabel(key string) {
	if key != metadataNameLabel {
		r.add(fmt.Sprintf("%s[%q]", namespaceLabelsPath, key))
	}
}

func (r *readFinder) walk(e ast.Expr) {
	if e == nil {
		return
	}
	switch e.Kind() {
	case ast.IdentKind:
		if e.AsIdent() == namespaceObjectVar {
			r.add(namespaceObjectVar)
		}
	case ast.SelectKind:
		if path, ok := namespacePath(e); ok {
			switch {
			case path == namespaceNamePath:
			case path == namespaceLabelsPath && e.AsSelect().IsTestOnly():
			default:
				r.add(path)
			}
			return
		}
		r.walk(e.AsSelect().Operand())
	case ast.CallKind:
		c := e.AsCall()
		args := c.Args()
		switch fn := c.FunctionName(); {
		case fn == operators.OptSelect:
			if path, ok := namespacePath(e); ok {
				if path != namespaceNamePath {
					r.add(path)
				}
				return
			}
		case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2 &&
			(isNamespaceIdent(args[0]) && isNull(args[1]) || isNull(args[0]) && isNamespaceIdent(args[1])):
			return
		case (fn == operators.Index || fn == operators.OptIndex) && len(args) == 2 && isLabels(args[0]):
			if key, ok := stringLiteral(args[1]); ok {
				r.addLabel(key)
				r.walkLabelsConditions(args[0])
				return
			}
		case fn == operators.In && len(args) == 2 && isLabels(args[1]):
			if key, ok := stringLiteral(args[0]); ok {
				r.addLabel(key)
				r.walkLabelsConditions(args[1])
				return
			}
		}
		if c.IsMemberFunction() {
			r.walk(c.Target())
		}
		for _, a := range args {
			r.walk(a)
		}
	case ast.ListKind:
		for _, x := range e.AsList().Elements() {
			r.walk(x)
		}
	case ast.MapKind:
		for _, x := range e.AsMap().Entries() {
			r.walk(x.AsMapEntry().Key())
			r.walk(x.AsMapEntry().Value())
		}
	case ast.StructKind:
		for _, x := range e.AsStruct().Fields() {
			r.walk(x.AsStructField().Value())
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		r.walk(c.IterRange())
		if c.IterVar() == namespaceObjectVar || c.IterVar2() == namespaceObjectVar || c.AccuVar() == namespaceObjectVar {
			return // shadowed inside
		}
		for _, x := range []ast.Expr{c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
			r.walk(x)
		}
	}
}

// isLabels: is e namespaceObject.metadata.labels, or a conditional whose branches are that or {}
// (at least one of them the labels)?
func isLabels(e ast.Expr) bool {
	if e.Kind() == ast.SelectKind && !e.AsSelect().IsTestOnly() {
		path, ok := namespacePath(e)
		return ok && path == namespaceLabelsPath
	}
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != operators.Conditional || len(e.AsCall().Args()) != 3 {
		return false
	}
	a, b := e.AsCall().Args()[1], e.AsCall().Args()[2]
	labelsOrEmpty := func(x ast.Expr) bool {
		return isLabels(x) || x.Kind() == ast.MapKind && len(x.AsMap().Entries()) == 0
	}
	return labelsOrEmpty(a) && labelsOrEmpty(b) && (isLabels(a) || isLabels(b))
}

// walkLabelsConditions walks the conditions of a labels expression (see isLabels).
func (r *readFinder) walkLabelsConditions(e ast.Expr) {
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != operators.Conditional {
		return
	}
	args := e.AsCall().Args()
	r.walk(args[0])
	r.walkLabelsConditions(args[1])
	r.walkLabelsConditions(args[2])
}

func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}

// namespacePath is "namespaceObject.a.b" for a chain of field selections (a.b or a.?b) on
// namespaceObject.
func namespacePath(e ast.Expr) (string, bool) {
	var fields []string
	for {
		if e.Kind() == ast.SelectKind {
			fields = append([]string{e.AsSelect().FieldName()}, fields...)
			e = e.AsSelect().Operand()
			continue
		}
		if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.OptSelect && len(e.AsCall().Args()) == 2 {
			if f := e.AsCall().Args()[1]; f.Kind() == ast.LiteralKind {
				if name, ok := f.AsLiteral().Value().(string); ok {
					fields = append([]string{name}, fields...)
					e = e.AsCall().Args()[0]
					continue
				}
			}
		}
		break
	}
	if !isNamespaceIdent(e) {
		return "", false
	}
	return strings.Join(append([]string{namespaceObjectVar}, fields...), "."), true
}

func isNamespaceIdent(e ast.Expr) bool {
	return e.Kind() == ast.IdentKind && e.AsIdent() == namespaceObjectVar
}

func isNull(e ast.Expr) bool {
	return e.Kind() == ast.LiteralKind && e.AsLiteral() == types.NullValue
}

var namespacesResource = schema.GroupResource{Resource: "namespaces"}

// checkNamespace refuses a request in a namespace not given when a policy that applies to it
// apart from its namespace selectors selects namespaces by their labels; it records in the trace
// the reads of such a namespace by the policies' expressions, and the namespace if the only
// requirement on its labels is admission.gatekeeper.sh/ignore DoesNotExist.
func (e *Evaluator) checkNamespace(uses []*namespaceUse, attrs admission.Attributes, t *Trace) error {
	ns := attrs.GetNamespace()
	if ns == "" || attrs.GetResource().GroupResource() == namespacesResource || e.given[ns] {
		return nil
	}
	var found, reads []string
	assumed := false
	for _, u := range uses {
		if u == nil || !u.needsNamespace() {
			continue
		}
		ok, _, gvk, err := e.matcher.DefinitionMatches(attrs, e.objIfaces, u.policy)
		if err != nil || !ok || !e.conditionsMatch(u, attrs, gvk) {
			continue
		}
		for _, b := range u.bindings {
			if ok, err := e.matcher.BindingMatches(attrs, e.objIfaces, b.binding); err != nil || !ok {
				continue
			}
			for _, s := range u.reads {
				if !slices.Contains(reads, s) {
					reads = append(reads, s)
				}
			}
			uses := append(append([]string(nil), u.uses...), b.uses...)
			if len(uses) == 0 {
				assumed = assumed || u.ignoreLabel || b.ignoreLabel
				continue
			}
			for _, s := range uses {
				if !slices.Contains(found, s) {
					found = append(found, s)
				}
			}
		}
	}
	if len(found) > 0 {
		return &NamespaceNotGivenError{Namespace: ns, Uses: found, How: e.giveNamespacesWith}
	}
	if t != nil {
		if assumed {
			t.assume(ns)
		}
		if len(reads) > 0 {
			t.read(ns, reads)
		}
	}
	return nil
}

// conditionsMatch evaluates a policy's match conditions as the dispatcher does (they see no
// namespace). A failure counts as no match: under Ignore the policy is skipped, under Fail the
// request is denied, and either way the namespace's labels change nothing.
func (e *Evaluator) conditionsMatch(u *namespaceUse, attrs admission.Attributes, gvk schema.GroupVersionKind) bool {
	u.conditionsOnce.Do(func() {
		if u.conditionsPolicy != nil {
			pe := compilePolicy(u.conditionsPolicy)
			u.conditions = &pe
		}
	})
	pe := u.conditions
	if pe == nil || pe.Matcher == nil {
		return true
	}
	if pe.Error != nil {
		return false
	}
	va, err := admission.NewVersionedAttributes(attrs, gvk, e.objIfaces)
	if err != nil {
		return false
	}
	// A fresh context: this evaluation is not the admission's, and records nothing.
	ctx := context.Background()
	if pe.CompositedCompiler != nil {
		ctx = pe.CompositedCompiler.CreateContext(ctx)
	}
	res := pe.Matcher.Match(ctx, va, nil, e.authorizer)
	return res.Error == nil && res.Matches
}
