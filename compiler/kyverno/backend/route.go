// Package backend is Kyverno's route through the compiler: it takes the Kyverno policies the
// route claims, reads each with the front end (package kyverno), lowers each mutate rule (package
// lower) and builds one MutatingAdmissionPolicy per Kyverno policy (package emit) whose
// mutations are the policy's rules (a foreach's entries each a mutation) in Kyverno's order,
// each guarded by the rule's match and exclude blocks as Kyverno evaluates them on the object
// the rule sees. A policy whose rules read a ConfigMap (configMap context entries) reads it as
// its param: paramKind v1 ConfigMap, and a binding whose paramRef names it.
//
// It must not import another language's packages; what it shares with them is package cel,
// package emit, compiler/diag, compiler/route and compiler/source.
package backend

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/kyverno/lower"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/internal/par"
)

// namePrefix starts the name of every policy compiled from a Kyverno policy.
const (
	namePrefix   = "kyverno-"
	shortestName = namePrefix + "policy-x"
)

// Route is Kyverno's route (route.Route).
type Route struct{}

// Input names a Kyverno input policy.
func (Route) Input() string { return "Kyverno policy" }

// Kinds are Kyverno's policy kinds.
func (Route) Kinds() []string { return kyverno.Kinds }

// ShortestName is the shortest name of a policy compiled from a Kyverno policy.
func (Route) ShortestName() string { return shortestName }

// Claims Kyverno's ClusterPolicies and Policies.
func (Route) Claims(d *source.Document) bool { return kyverno.IsPolicy(d.Object) }

// Related: documents of Kyverno's API groups (kyverno.io, *.kyverno.io: other policy kinds,
// reports, the Kyverno CLI's test and values files) that are not ClusterPolicies or Policies.
func (Route) Related(d *source.Document) bool {
	group := d.Object.GroupVersionKind().Group
	return group == "kyverno.io" || strings.HasSuffix(group, ".kyverno.io")
}

// Compile compiles the Kyverno policies among docs.
func (Route) Compile(docs []*source.Document, opts route.Options) *route.Output {
	out := &route.Output{}
	if len(docs) == 0 {
		return out
	}
	if len(opts.ExcludedNamespaces) > 0 {
		out.Problems = append(out.Problems, fmt.Errorf("--exclude-namespaces %s: it names the namespaces Gatekeeper's webhook is exempted from, and the input has Kyverno policies, to which it does not apply (Kyverno's own exclusions, its ConfigMap's resourceFilters and its webhooks' namespaceSelector, come with --kyverno-config): compile the Kyverno policies without it", strings.Join(opts.ExcludedNamespaces, ",")))
	}
	if opts.MutateIgnoredNamespaces {
		out.Problems = append(out.Problems, errors.New("--mutate-ignored-namespaces: it is about the namespaces Gatekeeper's webhook skips (labelled admission.gatekeeper.sh/ignore), and the input has Kyverno policies, to which it does not apply (Kyverno's webhooks' namespaceSelector comes with --kyverno-config): compile the Kyverno policies without it"))
	}
	if opts.NoWebhookSubresources {
		out.Problems = append(out.Problems, errors.New("--webhook-subresources=false: it is about the subresources Gatekeeper's webhook is installed for, and the input has Kyverno policies, to which it does not apply (Kyverno's webhook is called for a Pod's ephemeralcontainers wherever its rules are for Pods, and for the subresources its rules name): compile the Kyverno policies without it"))
	}
	if opts.KubernetesVersion == nil {
		opts.KubernetesVersion, _ = route.ParseVersion(route.DefaultKubernetesVersion)
	}
	env := cel.NewEnv(opts.KubernetesVersion)
	var cfg *kyverno.Config
	if opts.KyvernoConfig != nil {
		var problems []error
		cfg, problems = kyverno.ReadConfig(opts.KyvernoConfig)
		if cfg != nil {
			problems = append(problems, configConditions(env, cfg)...)
		}
		if len(problems) > 0 {
			// No policy can be compiled as Kyverno runs it: each is refused, the
			// configuration's problems reported once.
			out.Problems = append(out.Problems, problems...)
			for _, d := range docs {
				obj := d.Object
				out.Mutators = append(out.Mutators, route.MutatorStatus{Mutator: obj.GetKind() + "/" + obj.GetName(), File: d.File, Line: d.Line,
					Status: route.Refused, Reasons: []string{fmt.Sprintf("Kyverno's configuration (%s) cannot be honoured: %d problem(s)", opts.KyvernoConfig.File, len(problems))}})
			}
			return out
		}
		out.Installation = configLines(cfg)
	}
	type ignoring struct {
		p  *kyverno.Policy
		at int // its line of the report
	}
	var failingIgnore []ignoring
	ignorePolicies := 0
	// Each policy on its own, on every core; the results joined in input order.
	type result struct {
		p        *kyverno.Policy
		problems []error
		notes    []diag.Note
		pol      *emit.Policy
		mayFail  bool
		use      *policyUse
		err      error
	}
	results := make([]result, len(docs))
	par.Do(len(docs), func(i int) {
		r := &results[i]
		r.p, r.problems, r.notes = kyverno.Read(docs[i])
		if r.p != nil && len(r.problems) == 0 {
			r.pol, r.mayFail, r.use, r.err = compilePolicy(env, r.p, cfg, opts)
		}
	})
	ps := make([]*kyverno.Policy, len(results))
	uses := make([]*policyUse, len(results))
	for i, r := range results {
		if ps[i] = r.p; r.err == nil && r.pol != nil {
			uses[i] = r.use
		}
	}
	for i, err := range imagesAcross(ps, uses) {
		results[i].err = err
	}
	rules := make([][]emitted, len(uses))
	for i, u := range uses {
		if u != nil && results[i].err == nil {
			rules[i] = u.Rules
		}
	}
	for i, err := range defaultingAcross(ps, rules) {
		results[i].err = err
	}
	for i, d := range docs {
		obj := d.Object
		st := route.MutatorStatus{Mutator: obj.GetKind() + "/" + obj.GetName(), File: d.File, Line: d.Line}
		p, problems := results[i].p, results[i].problems
		out.Notes = append(out.Notes, results[i].notes...)
		if p == nil && len(problems) == 0 {
			continue // no mutate rules: noted
		}
		if len(problems) == 0 {
			pol, mayFail, err := results[i].pol, results[i].mayFail, results[i].err
			if err == nil && pol != nil && mayFail && p.FailurePolicy == "Ignore" {
				failingIgnore = append(failingIgnore, ignoring{p, len(out.Mutators)})
			}
			if err == nil && pol != nil && p.FailurePolicy == "Ignore" {
				ignorePolicies++
			}
			var lo leftOut
			if errors.As(err, &lo) {
				st.Status = route.LeftOut
				st.Reasons = []string{string(lo)}
			} else if err != nil {
				problems = append(problems, err)
			} else if pol == nil {
				st.Status = route.LeftOut
				st.Reasons = []string{"no rule can change an object"}
			} else {
				out.Policies = append(out.Policies, pol)
				st.Status = route.Compiled
				st.Policies = []string{pol.Policy.Name}
			}
		}
		if len(problems) > 0 {
			st.Status = route.Refused
			for _, e := range problems {
				var pr *diag.Problem
				if errors.As(e, &pr) {
					st.Reasons = append(st.Reasons, pr.Reason())
				} else {
					st.Reasons = append(st.Reasons, e.Error())
				}
			}
			out.Problems = append(out.Problems, problems...)
		}
		out.Mutators = append(out.Mutators, st)
	}
	if ignorePolicies > 1 {
		// Kyverno's webhook for Ignore policies hands the policies after one that failed an
		// empty object: they change nothing. The API server runs the others as if nothing
		// failed.
		for _, f := range failingIgnore {
			prob := &diag.Problem{File: f.p.Doc.File, Line: f.p.Doc.LineOf("spec", "failurePolicy"), Object: f.p.Object(), Field: "spec.failurePolicy",
				Msg: "Ignore, with a rule that can fail (a variable without a value, a replace of a missing path, a missing foreach list), beside other Ignore policies: when it fails, Kyverno's webhook gives the Ignore policies after it an empty object, so they change nothing, while the API server still runs them; use Fail"}
			out.Problems = append(out.Problems, prob)
			st := &out.Mutators[f.at]
			name := ""
			if len(st.Policies) > 0 {
				name = st.Policies[0]
			}
			st.Status, st.Policies, st.Reasons = route.Refused, nil, []string{prob.Reason()}
			out.Policies = slices.DeleteFunc(out.Policies, func(p *emit.Policy) bool { return p.Policy.Name == name })
		}
	}
	return out
}

// policyName is "kyverno-clusterpolicy-<name>", or "kyverno-policy-<namespace>-<name>".
func policyName(p *kyverno.Policy) string {
	if p.Namespace != "" {
		return namePrefix + "policy-" + p.Namespace + "-" + p.Name
	}
	return namePrefix + strings.ToLower(p.Kind) + "-" + p.Name
}

// problem positions err (a lowering refusal or a check failure) at rule r of p.
func problem(p *kyverno.Policy, r *kyverno.Rule, sub string, err error) error {
	field := r.Field
	if sub != "" {
		field += "." + sub
	}
	var fe *lower.FieldError
	msg := err.Error()
	if !errors.As(err, &fe) {
		fe = nil
	} else {
		if fe.Field != "" {
			field += "." + fe.Field
		}
		msg = fe.Msg
	}
	at := sub
	if fe != nil && fe.Field != "" {
		at += "." + fe.Field
	}
	line := p.Doc.LineOf(append(append([]string(nil), r.Path...), kyverno.FieldPath(at)...)...)
	return &diag.Problem{File: p.Doc.File, Line: line, Object: p.Object(), Field: field, Msg: msg}
}

// compilePolicy builds the policy's MutatingAdmissionPolicy: one JSONPatch mutation per rule (per
// entry of a foreach), in order.
func compilePolicy(env *cel.Env, p *kyverno.Policy, cfg *kyverno.Config, opts route.Options) (*emit.Policy, bool, *policyUse, error) {
	var use policyUse
	pol, mayFail, err := compileRules(env, p, cfg, opts, &use)
	return pol, mayFail > 0, &use, err
}

// compileRules builds the policy and counts its rules that can fail. cfg is Kyverno's
// configuration (nil: its defaults).
func compileRules(env *cel.Env, p *kyverno.Policy, cfg *kyverno.Config, opts route.Options, use *policyUse) (*emit.Policy, int, error) {
	resources := emit.NewResources(opts.CRDs)
	var muts []emit.Mutation
	var kinds []gk
	mayFail := 0
	var rules []emitted    // per rule that can change an object
	var collapseKinds []gk // the kinds of the rules that read lower.CollapsedVariable
	var contents []emit.Contents
	for _, r := range p.Rules {
		failing := mayFail
		rk, err := ruleKinds(r, opts)
		if err != nil {
			return nil, 0, problem(p, r, "match", err)
		}
		kinds = append(kinds, rk...)
		guard, err := lower.Rule(p, r)
		if err != nil {
			return nil, 0, problem(p, r, "match", err)
		}
		sc := lower.Scope{Object: objectShape(rk), Features: env.Features()}
		if cfg != nil {
			sc.Registry = cfg.Registry
		}
		sc, err = lower.Context(r, sc)
		if err != nil {
			return nil, 0, problem(p, r, "", err)
		}
		if r.ForEach != nil {
			if err := entriesConstant(r, sc); err != nil {
				return nil, 0, problem(p, r, err.sub, err)
			}
		}
		pre, err := lower.Preconditions(r.Preconditions, sc, "preconditions")
		if err != nil {
			return nil, 0, problem(p, r, "", err)
		}
		if r.Preconditions != nil && len(lower.Variables(conditionsOf(r.Preconditions))) > 0 {
			mayFail++ // a variable without a value fails the rule
		}
		// Once the preconditions pass, Kyverno's mutate.Mutate substitutes the variables of the
		// whole rule (SubstituteAllInRule), the preconditions' and the context entries'
		// included: a key it did not need to decide them (an any block stops at the first that
		// holds), or an entry no variable names, fails the rule there when it has no value. A
		// foreach substitutes only its patches.
		var preVars []cel.Expr
		if r.ForEach == nil {
			if preVars, err = lower.RuleVariables(r, sc); err != nil {
				return nil, 0, problem(p, r, "", err)
			}
		}
		var ops cel.Expr
		var plain cel.Expr // ops as the analyses read them, where they differ (strategicMerge)
		var vars []cel.Expr
		var entries []cel.Expr // a foreach's entries after the first, each a mutation of its own
		switch {
		case r.StrategicMerge != nil:
			cases, vs, err := lower.SubstituteCases(r.StrategicMerge, sc, "")
			if err != nil {
				return nil, 0, problem(p, r, "mutate.patchStrategicMerge", err)
			}
			vars = vs
			each := make([]cel.Expr, len(cases))
			runs, bare := make([]cel.Expr, len(cases)), make([]cel.Expr, len(cases))
			for i, c := range cases {
				if each[i], runs[i], bare[i], err = strategicMerge(c.Patch.(map[string]any), rk); err != nil {
					return nil, 0, problem(p, r, "mutate.patchStrategicMerge", err)
				}
			}
			plain = lower.ChooseCase(cases, each)
			ops = plain
			if runs[0] != nil {
				var used bool
				if ops, used, err = collapsed(rk, plain, lower.ChooseCase(cases, runs), lower.ChooseCase(cases, bare)); err != nil {
					return nil, 0, problem(p, r, "mutate.patchStrategicMerge", err)
				}
				if used {
					collapseKinds = append(collapseKinds, rk...)
				}
			}
		case r.ForEach != nil:
			for _, fe := range r.ForEach {
				sc.Written = append(sc.Written, foreachWrites(fe)...)
			}
			all, err := forEach(r, rk, sc)
			if err != nil {
				return nil, 0, problem(p, r, "mutate", err)
			}
			if err := entriesApart(r, guard, pre); err != nil {
				return nil, 0, problem(p, r, "mutate", err)
			}
			ops, entries = all[0], all[1:]
			mayFail++ // a missing list (a path without a final []) or a variable without a value in an entry fails the rule
		default:
			jops := append([]kyverno.Op(nil), r.JSON6902...)
			for i := range jops {
				if strings.Contains(jops[i].Path, "{{") {
					return nil, 0, problem(p, r, fmt.Sprintf("mutate.patchesJson6902[%d]", i), errors.New("variables in paths are not supported yet"))
				}
				v, vs, err := lower.SubstituteText(jops[i].Value, sc, "")
				if err != nil {
					return nil, 0, problem(p, r, fmt.Sprintf("mutate.patchesJson6902[%d].value", i), err)
				}
				jops[i].Value = v
				vars = append(vars, vs...)
			}
			// Per kind: the maps its objects always have need no creation.
			if len(rk) == 0 || hasAnyKind(rk) {
				ops, err = lower.JSON6902("", "", jops)
			} else {
				ops, err = perKind(rk, func(apiVersion, kind string) (cel.Expr, string, error) {
					e, err := lower.JSON6902(apiVersion, kind, jops)
					return e, "", err
				})
			}
			if err != nil {
				return nil, 0, problem(p, r, "mutate.patchesJson6902", err)
			}
			for _, op := range r.JSON6902 {
				if op.Op == "replace" {
					mayFail++
					break
				}
			}
		}
		vars = append(vars, preVars...)
		if len(vars) > 0 {
			mayFail++ // a variable without a value fails the rule
			ops = cel.Guarded(lower.Resolved(vars), ops)
			if plain != nil {
				plain = cel.Guarded(lower.Resolved(vars), plain)
			}
		}
		for n, ops := range append([]cel.Expr{ops}, entries...) {
			e := cel.Guarded(guard, cel.Guarded(pre, ops))
			if cel.IsEmpty(e) {
				continue
			}
			em := emitted{kinds: requestKinds(rk), mayFail: mayFail > failing, e: e, plain: e, rule: r, entry: -1}
			if n == 0 && plain != nil {
				em.plain = cel.Guarded(guard, cel.Guarded(pre, plain))
			}
			if r.ForEach != nil {
				em.entry = n
			}
			rules = append(rules, em)
		}
	}
	installed, err := configured(env, p, cfg, kinds)
	if err != nil {
		return nil, 0, err
	}
	if installed.guard == cel.False {
		return nil, 0, leftOut("Kyverno's configuration (its resource filters or excluded users) skips every request its rules match")
	}
	if err := defaultingBetween(p, rules); err != nil {
		return nil, 0, err
	}
	use.Rules = rules
	if err := imagesBefore(p, rules, opts, use); err != nil {
		return nil, 0, err
	}
	// Reads of Kyverno's images read a policy variable that parses the images; strategic
	// merges read one that holds the object collapsed.
	var vars []emit.Variable
	var checker *cel.Checker
	if slices.ContainsFunc(rules, func(m emitted) bool { return readsImages(m.e) }) {
		s, err := env.Print(lower.Images())
		if err != nil {
			return nil, 0, problem(p, p.Rules[0], "", fmt.Errorf("the variable that parses the images does not print (a fault of mapc, not of the policy: please report it with the policy): %v", err))
		}
		vars = append(vars, emit.Variable{Name: lower.ImagesVariable, Expression: s})
	}
	if len(collapseKinds) > 0 {
		view, err := collapseView(requestKinds(collapseKinds))
		var s string
		if err == nil {
			s, err = env.Print(view)
		}
		if err != nil {
			return nil, 0, problem(p, p.Rules[0], "", fmt.Errorf("the variable that collapses the object's keyed lists does not print (a fault of mapc, not of the policy: please report it with the policy): %v", err))
		}
		vars = append(vars, emit.Variable{Name: lower.CollapsedVariable, Expression: s})
	}
	if len(vars) > 0 {
		cvs := make([]cel.Variable, len(vars))
		for i, v := range vars {
			cvs[i] = cel.Variable{Name: v.Name, Expression: v.Expression}
		}
		if checker, err = env.WithVariables(cvs); err != nil {
			return nil, 0, problem(p, p.Rules[0], "", fmt.Errorf("the policy's variables do not check: %v", err))
		}
	}
	for _, step := range steps(rules) {
		e, parts := step.expr()
		if len(parts) == 0 {
			continue // no rule of the step can change an object of its kinds
		}
		// The parts (each rule's operations, lists of JSONPatch; the whole chooses one by the
		// request's kind) are checked one by one: cel-go's checker takes time quadratic in
		// the number of generic calls of one expression. Tests check the whole too.
		check := env.CheckJSONPatchExpr
		if p.ConfigMap != nil {
			check = env.CheckJSONPatchWithParamsExpr
		}
		if checker != nil {
			check = func(x cel.Expr) error { return checker.CheckExpr(x, false, p.ConfigMap != nil) }
		}
		if installed.guard != cel.True {
			e = cel.Guarded(installed.guard, e)
			for i := range parts {
				parts[i] = cel.Guarded(installed.guard, parts[i])
			}
		}
		s, err := env.Print(e)
		for _, part := range parts {
			if err == nil {
				err = check(part)
			}
		}
		if err == nil && cel.SelfChecking() && len(parts) > 1 {
			err = check(e)
		}
		if err != nil {
			// Name the rule whose operations do not check.
			for _, m := range step {
				if err1 := check(m.e); err1 != nil {
					return nil, 0, problem(p, m.rule, "mutate", fmt.Errorf("the lowered patch does not check: %v", err1))
				}
			}
			return nil, 0, problem(p, step[0].rule, "mutate", fmt.Errorf("the lowered patch does not check: %v", err))
		}
		muts = append(muts, emit.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: s})
		contents = append(contents, step.contents(p, len(contents)))
	}
	if len(muts) == 0 {
		return nil, mayFail, nil
	}
	// A rule that can fail beside another rule for the same kind: under Ignore, Kyverno drops
	// the patches of both. (Autogen's rules for other kinds never run on the same object.)
	partial := false
	for i := range rules {
		for j := range rules {
			if i != j && rules[i].mayFail && overlap(rules[i].kinds, rules[j].kinds) {
				partial = true
			}
		}
	}
	if partial && p.FailurePolicy == "Ignore" {
		return nil, 0, &diag.Problem{File: p.Doc.File, Line: p.Doc.LineOf("spec", "failurePolicy"), Object: p.Object(), Field: "spec.failurePolicy",
			Msg: "Ignore, with a rule that can fail (a variable without a value, a replace of a missing path, a missing foreach list) beside other rules for the same kinds, or a foreach with several entries (each entry is a mutation of its own): Kyverno then drops the patches of every rule of the policy, a MutatingAdmissionPolicy only the failing mutation's; use Fail, or put the rule, or each entry, in a policy of its own"}
	}
	if err := namespaceEntryKinds(p, opts); err != nil {
		return nil, 0, err
	}
	var param *emit.Param
	if p.ConfigMap != nil {
		if err := configMapAlwaysRead(p, opts); err != nil {
			return nil, 0, err
		}
		// Kyverno fails the rule reading a missing ConfigMap; every request the policy
		// intercepts has such a rule (configMapAlwaysRead): Deny fails it alike, subject to the
		// failure policy as Kyverno's failure is.
		param = &emit.Param{APIVersion: "v1", Kind: "ConfigMap", Name: p.ConfigMap.Name, Namespace: p.ConfigMap.Namespace,
			NotFound: admissionregistrationv1.DenyAction}
	}
	conds, err := matchConditions(env, p)
	if err != nil {
		return nil, 0, err
	}
	conds = append(conds, installed.conditions...)
	fp := admissionregistrationv1.Fail
	if p.FailurePolicy == "Ignore" {
		fp = admissionregistrationv1.Ignore
	}
	eo := emit.Options{FailurePolicy: fp, Resources: resources, Reinvocation: opts.Reinvocation, NamePrefix: opts.NamePrefix}
	spec := emit.Spec{Name: policyName(p), Sources: []emit.Source{{APIVersion: p.APIVersion, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}},
		Rules: resourceRules(kinds, resources), Conditions: conds, Variables: vars, Mutations: muts, Param: param}
	if cfg != nil {
		spec.NamespaceSelector, spec.ObjectSelector = cfg.NamespaceSelector, cfg.ObjectSelector
	}
	pol, err := emit.NewPolicy(spec, eo)
	if pol != nil {
		pol.Contents = contents
	}
	return pol, mayFail, err
}

// readsImages: does e read the policy variable of Kyverno's images?
func readsImages(e cel.Expr) bool {
	return slices.ContainsFunc(cel.Reads(e, "variables"), func(p []string) bool { return len(p) > 0 && p[0] == lower.ImagesVariable })
}

// leftOut is why a policy is left out, not compiled nor refused.
type leftOut string

func (l leftOut) Error() string { return string(l) }

// installation is what Kyverno's configuration adds to a policy: match conditions, or, for a
// policy with match conditions of its own, a guard in front of each mutation.
type installation struct {
	conditions []emit.Condition
	guard      cel.Expr
}

// Names of the match conditions that stand for Kyverno's configuration.
const (
	conditionResourceFilters = "kyverno-resource-filters"
	conditionExcludedUsers   = "kyverno-excluded-users"
)

// configured lowers what Kyverno's configuration (resourceFilters, excludeUsernames,
// excludeGroups) makes its webhook handler skip for the policy's kinds, and the match conditions
// of Kyverno's webhooks (for a policy without conditions of its own, which has a webhook of its
// own with those instead). Kyverno's handler decides what it skips after the API server decided
// to call the webhook: where the webhook has match conditions, one that fails must still fail
// the request (under Fail) when the configuration skips it, so there the configuration guards
// each mutation instead (a skipped request is not changed, as Kyverno's handler answers it
// without a patch); elsewhere it is the policy's own conditions, which spare the API server the
// whole policy.
func configured(env *cel.Env, p *kyverno.Policy, cfg *kyverno.Config, kinds []gk) (installation, error) {
	in := installation{guard: cel.True}
	if cfg.IsZero() {
		return in, nil
	}
	var ks []lower.Kind
	for _, k := range kinds {
		ks = append(ks, lower.Kind{Group: k.Group, Version: k.Version, Kind: k.Kind, Subresource: k.Sub})
	}
	resources, users := lower.Unfiltered(cfg, ks)
	if len(p.MatchConditions) > 0 || len(cfg.MatchConditions) > 0 {
		// A policy with conditions of its own has a webhook of its own, with those instead of
		// the configuration's.
		if len(p.MatchConditions) == 0 {
			for _, c := range cfg.MatchConditions {
				in.conditions = append(in.conditions, emit.Condition{Name: c.Name, Expression: c.Expression})
			}
		}
		in.guard = cel.And(resources, users)
		return in, nil
	}
	for _, c := range []struct {
		name string
		e    cel.Expr
	}{{conditionResourceFilters, resources}, {conditionExcludedUsers, users}} {
		if c.e == cel.True {
			continue
		}
		s, err := env.Print(c.e)
		if err == nil {
			err = env.CheckConditionExpr(c.e)
		}
		if err != nil {
			return in, &diag.Problem{File: p.Doc.File, Line: p.Doc.Line, Object: p.Object(), Msg: fmt.Sprintf("Kyverno's configuration: the condition %s does not check: %v", c.name, err)}
		}
		in.conditions = append(in.conditions, emit.Condition{Name: c.name, Expression: s})
	}
	return in, nil
}

// configLines says what Kyverno's configuration adds to the policies, for explain.
func configLines(cfg *kyverno.Config) []string {
	if cfg.IsZero() {
		return nil
	}
	what := "Kyverno's ConfigMap " + cfg.Doc.Object.GetNamespace() + "/" + cfg.Doc.Object.GetName()
	if cfg.Doc.Object.GetNamespace() == "" {
		what = "Kyverno's ConfigMap " + cfg.Doc.Object.GetName()
	}
	var out []string
	if len(cfg.Filters) > 0 {
		out = append(out, fmt.Sprintf("%s: resourceFilters are the match condition %s of each policy with kinds they filter (a guard on each mutation where the policy has match conditions)", what, conditionResourceFilters))
	}
	if !cfg.Excluded.Empty() {
		out = append(out, fmt.Sprintf("%s: excludeUsernames and excludeGroups are the match condition %s (a guard on each mutation where the policy has match conditions)", what, conditionExcludedUsers))
	}
	if cfg.NamespaceSelector != nil {
		out = append(out, fmt.Sprintf("%s: the webhooks' namespaceSelector is every binding's", what))
	}
	if cfg.ObjectSelector != nil {
		out = append(out, fmt.Sprintf("%s: the webhooks' objectSelector is every binding's", what))
	}
	if len(cfg.MatchConditions) > 0 {
		out = append(out, fmt.Sprintf("%s: the webhooks' matchConditions are the match conditions of every policy without conditions of its own", what))
	}
	return out
}

// configConditions checks the expressions of the match conditions of Kyverno's webhooks, as
// matchConditions checks a policy's own.
func configConditions(env *cel.Env, cfg *kyverno.Config) []error {
	var out []error
	for _, c := range cfg.MatchConditions {
		refuse := func(format string, args ...any) {
			d := cfg.Doc
			out = append(out, &diag.Problem{File: d.File, Line: d.LineOf("data", "matchConditions"), Object: d.Object.GetKind() + "/" + d.Object.GetName(),
				Field: "data.matchConditions", Msg: fmt.Sprintf("[%d] (%s): %s", c.At, c.Name, fmt.Sprintf(format, args...))})
		}
		ids, err := env.Identifiers(c.Expression)
		if err != nil {
			refuse("%q does not parse: %v", c.Expression, err)
			continue
		}
		bad := false
		for _, id := range ids {
			if why, ok := notInWebhookConditions[id]; ok {
				refuse("%q reads %s: %s", c.Expression, id, why)
				bad = true
				break
			}
		}
		if bad {
			continue
		}
		if err := env.CheckCondition(c.Expression); err != nil {
			refuse("%q: %v", c.Expression, err)
		}
	}
	return out
}

// notInWebhookConditions are the variables of a MutatingAdmissionPolicy's match conditions
// that a webhook's lack, with why a condition reading one is refused.
var notInWebhookConditions = map[string]string{
	"params":          "a webhook's match conditions have no params, so the API server refuses Kyverno's webhook and the policy never runs; remove the condition, or read the value in preconditions",
	"namespaceObject": "a webhook's match conditions have no namespaceObject, so the API server refuses Kyverno's webhook and the policy never runs; test the namespace with a namespaceSelector in match or exclude",
	"variables":       "a webhook's match conditions have no variables, so the API server refuses Kyverno's webhook and the policy never runs; write the expression out in the condition",
	"authorizer":      "not supported yet: the authorizer's answers depend on the cluster's authorization, which mapc verify cannot reproduce to check the translation; keep this policy on Kyverno, or drop the condition",
}

// matchConditions are the policy's webhook match conditions as the policy's own: the API server
// evaluates a MutatingAdmissionPolicy's as it evaluates a webhook's (any false: the policy does
// not run; else any error: the failure policy decides), with the same variables but for those of
// notInWebhookConditions, which are refused.
func matchConditions(env *cel.Env, p *kyverno.Policy) ([]emit.Condition, error) {
	var out []emit.Condition
	for _, c := range p.MatchConditions {
		at := []string{"spec", "webhookConfiguration", "matchConditions", strconv.Itoa(c.At), "expression"}
		refuse := func(format string, args ...any) error {
			return &diag.Problem{File: p.Doc.File, Line: p.Doc.LineOf(at...), Object: p.Object(),
				Field: fmt.Sprintf("spec.webhookConfiguration.matchConditions[%d].expression", c.At), Msg: fmt.Sprintf(format, args...)}
		}
		ids, err := env.Identifiers(c.Expression)
		if err != nil {
			return nil, refuse("%q does not parse: %v", c.Expression, err)
		}
		for _, id := range ids {
			if why, ok := notInWebhookConditions[id]; ok {
				return nil, refuse("%q reads %s: %s", c.Expression, id, why)
			}
		}
		if err := env.CheckCondition(c.Expression); err != nil {
			return nil, refuse("%q: %v", c.Expression, err)
		}
		out = append(out, emit.Condition{Name: c.Name, Expression: c.Expression})
	}
	return out, nil
}

// gk is a kind a rule applies to, with the version its schema is read in, and the subresource
// whose requests it applies to ("" for the resource itself).
type gk struct{ Group, Version, Kind, Sub string }

func (k gk) apiVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// anyKind stands for kinds: ["*"], every kind of every group and version (and no subresource),
// custom resources included.
var anyKind = gk{Group: "*", Version: "*", Kind: "*"}

// hasAnyKind: does the list hold anyKind?
func hasAnyKind(kinds []gk) bool { return slices.Contains(kinds, anyKind) }

// objectShape is what the schema says of the objects of the kinds, for the rule's variables.
func objectShape(kinds []gk) lower.Shape {
	if hasAnyKind(kinds) {
		return lower.AnyObjectShape()
	}
	var ks []lower.Kind
	for _, k := range kinds {
		ks = append(ks, lower.Kind{Group: k.Group, Version: k.Version, Kind: k.Kind})
	}
	return lower.ObjectShape(ks...)
}

// ruleKinds lists the kinds the rule's match block names (built-in kinds the client libraries
// know, and the CRDs' kinds).
func ruleKinds(r *kyverno.Rule, opts route.Options) ([]gk, error) {
	var out []gk
	seen := map[gk]bool{}
	for _, f := range append(append([]kyverno.Filter(nil), r.Match.Any...), r.Match.All...) {
		if len(f.Kinds) == 0 && len(r.Match.All) <= 1 {
			return nil, fmt.Errorf("a filter without kinds is not supported: name the kinds it applies to")
		}
		for _, k := range f.Kinds {
			pk := lower.ParseKind(k)
			if pk.Group == "*" && pk.Version == "*" && pk.Kind == "*" {
				if pk.Subresource != "" {
					return nil, fmt.Errorf("kind %q: every kind's subresources are not supported: name the kinds", k)
				}
				// Every kind: the rule's guard tests nothing of the request's kind.
				return []gk{anyKind}, nil
			}
			if strings.ContainsAny(pk.Kind, "*?") {
				return nil, fmt.Errorf("kind %q: wildcard kinds other than \"*\" (every kind) are not supported yet: name the kinds", k)
			}
			found := knownKindsCached(pk, opts)
			if len(found) == 0 {
				return nil, fmt.Errorf("kind %q is not a kind the Kubernetes API serves: give the CustomResourceDefinition of a custom resource with --crd", k)
			}
			if pk.Subresource != "" {
				for i, g := range found {
					if err := subresourceOf(g, pk.Subresource, opts); err != nil {
						return nil, fmt.Errorf("kind %q: %w", k, err)
					}
					found[i].Sub = pk.Subresource
				}
			}
			for _, g := range found {
				if !seen[g] {
					seen[g] = true
					out = append(out, g)
				}
			}
		}
	}
	return out, nil
}

// builtinKinds caches knownKinds for compilations without CRDs (the client libraries' kinds
// never change).
var builtinKinds sync.Map // lower.Kind → []gk

func knownKindsCached(k lower.Kind, opts route.Options) []gk {
	if len(opts.CRDs) > 0 {
		return knownKinds(k, opts)
	}
	if v, ok := builtinKinds.Load(k); ok {
		return slices.Clone(v.([]gk))
	}
	found := knownKinds(k, opts)
	builtinKinds.Store(k, slices.Clone(found))
	return found
}

// knownKinds are the served kinds k matches, one version per group (the first the client
// libraries list in version priority order).
func knownKinds(k lower.Kind, opts route.Options) []gk {
	byGroup := map[string][]string{}
	add := func(g, v, kind string) {
		if !glob(k.Group, g) || !glob(k.Version, v) || kind != k.Kind {
			return
		}
		byGroup[g] = append(byGroup[g], v)
	}
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || gvk.Group == "extensions" {
			continue
		}
		add(gvk.Group, gvk.Version, gvk.Kind)
	}
	for _, crd := range opts.CRDs {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				add(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)
			}
		}
	}
	var out []gk
	for g, vs := range byGroup {
		sortVersions(g, vs)
		out = append(out, gk{Group: g, Version: vs[0], Kind: k.Kind})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// sortVersions orders versions as the client libraries prioritise them.
func sortVersions(group string, vs []string) {
	prio := clientgoscheme.Scheme.PrioritizedVersionsForGroup(group)
	rank := func(v string) int {
		for i, p := range prio {
			if p.Version == v {
				return i
			}
		}
		return len(prio)
	}
	sort.SliceStable(vs, func(i, j int) bool {
		if rank(vs[i]) != rank(vs[j]) {
			return rank(vs[i]) < rank(vs[j])
		}
		return vs[i] < vs[j]
	})
}

func glob(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	return pattern == s
}

// strategicMerge lowers the rule's patchStrategicMerge for each kind it applies to (merge keys
// depend on the kind): its operations; for a rule for kinds named, the condition on which
// Kyverno's merge runs (its anchors' conditions on the object hold) and the operations where it
// does (bare).
func strategicMerge(patch map[string]any, kinds []gk) (ops, runs, bare cel.Expr, err error) {
	if hasAnyKind(kinds) {
		// Kyverno's merge reads each kind's schema (merge keys, replaced lists, retained keys);
		// labels and annotations merge alike in every kind.
		if err := onlyLabelsAndAnnotations(patch); err != nil {
			return nil, nil, nil, err
		}
		cond, ops, err := lower.StrategicMerge("", "", patch)
		if err != nil {
			return nil, nil, nil, err
		}
		return cel.Guarded(cond, ops), nil, nil, nil
	}
	type lowering struct{ cond, ops cel.Expr }
	lowered := map[string]lowering{} // by schema signature: kinds whose lists merge alike
	ops, err = perKind(kinds, func(apiVersion, kind string) (cel.Expr, string, error) {
		sig := lower.Signature(apiVersion, kind, patch)
		if l, ok := lowered[sig]; ok {
			return cel.Guarded(l.cond, l.ops), sig, nil
		}
		cond, ops, err := lower.StrategicMerge(apiVersion, kind, patch)
		if err != nil {
			return nil, "", err
		}
		lowered[sig] = lowering{cond, ops}
		return cel.Guarded(cond, ops), sig, nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	runs, err = perKindOr(kinds, cel.False, func(apiVersion, kind string) (cel.Expr, string, error) {
		sig := lower.Signature(apiVersion, kind, patch)
		return lowered[sig].cond, sig, nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	bare, err = perKind(kinds, func(apiVersion, kind string) (cel.Expr, string, error) {
		sig := lower.Signature(apiVersion, kind, patch)
		return lowered[sig].ops, sig, nil
	})
	return ops, runs, bare, err
}

// collapsed is ops, a rule's strategic merge for objects of kinds, as Kyverno's merge runs it
// where runs holds (decided on the object as it comes, as Kyverno decides its anchors): operations
// that collapse the object's keyed lists, then bare, the merge's own, on the object so
// collapsed, which they read from the policy's variable (lower.CollapsedVariable, see
// collapseView); ops where no kind has a keyed list.
func collapsed(kinds []gk, ops, runs, bare cel.Expr) (cel.Expr, bool, error) {
	if !slices.ContainsFunc(kinds, func(k gk) bool { return len(lower.CollapseSummary(k.apiVersion(), k.Kind)) > 0 }) {
		return ops, false, nil
	}
	collapse, err := perKind(kinds, func(apiVersion, kind string) (cel.Expr, string, error) {
		return lower.CollapseOps(apiVersion, kind), strings.Join(lower.CollapseSummary(apiVersion, kind), " "), nil
	})
	if err != nil {
		return nil, false, err
	}
	body := bare
	if slices.ContainsFunc(kinds, func(k gk) bool { return lower.ReadsCollapsed(k.apiVersion(), k.Kind, bare) }) {
		body = cel.Substitute(bare, "object", cel.VarRef(lower.CollapsedVariable))
	}
	return cel.Guarded(runs, cel.Bin("+", collapse, body)), true, nil
}

// collapseView is the value of the policy variable lower.CollapsedVariable for objects of kinds:
// the object with its keyed lists collapsed as Kyverno's merge collapses them.
func collapseView(kinds []gk) (cel.Expr, error) {
	object := cel.Ident("object")
	return perKindOr(kinds, object, func(apiVersion, kind string) (cel.Expr, string, error) {
		if v := lower.CollapseView(apiVersion, kind); v != nil {
			return v, strings.Join(lower.CollapseSummary(apiVersion, kind), " "), nil
		}
		return object, "", nil
	})
}

// perKind lowers with lowerKind for each kind; kinds that give the same operations share them,
// the others are told apart by the request's kind.
// lowerKind gives the kind's operations and an id ("" for none) that kinds lowered alike share.
func perKind(kinds []gk, lowerKind func(apiVersion, kind string) (cel.Expr, string, error)) (cel.Expr, error) {
	return perKindOr(kinds, cel.List(), lowerKind)
}

// perKindOr is perKind for expressions that are none where nothing changes.
func perKindOr(kinds []gk, none cel.Expr, lowerKind func(apiVersion, kind string) (cel.Expr, string, error)) (cel.Expr, error) {
	type variant struct {
		e     cel.Expr
		kinds []gk
	}
	var vs []*variant
	byText := map[string]*variant{}
	printed := map[string]string{} // a lowering several kinds share (same id) is printed once
	for _, k := range kinds {
		e, id, err := lowerKind(k.apiVersion(), k.Kind)
		if err != nil {
			return nil, err
		}
		key, ok := printed[id]
		if !ok || id == "" {
			key = cel.String(e)
			printed[id] = key
		}
		if v, ok := byText[key]; ok {
			v.kinds = append(v.kinds, k)
			continue
		}
		v := &variant{e: e, kinds: []gk{k}}
		byText[key] = v
		vs = append(vs, v)
	}
	if len(vs) == 1 {
		return vs[0].e, nil
	}
	out := none
	for i := len(vs) - 1; i >= 0; i-- {
		var is []cel.Expr
		for _, k := range vs[i].kinds {
			kind := cel.Field(cel.Ident("request"), "kind")
			is = append(is, cel.And(cel.Bin("==", cel.Field(kind, "group"), cel.Str(k.Group)), cel.Bin("==", cel.Field(kind, "kind"), cel.Str(k.Kind))))
		}
		out = cel.CondList(cel.Or(is...), vs[i].e, out)
	}
	return out, nil
}

// resourceRules are the policy's matchConstraints: every kind of every rule, on CREATE and
// UPDATE (the requests Kyverno's mutating webhook is called for); each mutation checks its own.
// Where pods are, pods/ephemeralcontainers is too, as Kyverno's webhook has it: Kyverno runs
// the Pod rules on a request adding ephemeral containers (kubectl debug), an UPDATE of the Pod
// of which the API server keeps only the ephemeral containers.
func resourceRules(kinds []gk, resources *emit.Resources) []admissionregistrationv1.NamedRuleWithOperations {
	if hasAnyKind(kinds) {
		// Every resource, as Kyverno's webhook for a policy of kinds "*" (its rules test each
		// request's kind).
		scope := admissionregistrationv1.AllScopes
		return []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*", ephemeralContainers}, Scope: &scope},
		}}}
	}
	byGroup := map[string][]string{}
	for _, k := range kinds {
		res, ok := resources.Resource(schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind})
		if !ok {
			continue
		}
		if k.Sub != "" {
			res += "/" + k.Sub
		}
		if !contains(byGroup[k.Group], res) {
			byGroup[k.Group] = append(byGroup[k.Group], res)
		}
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var out []admissionregistrationv1.NamedRuleWithOperations
	for _, g := range groups {
		res := byGroup[g]
		if g == "" && contains(res, "pods") && !contains(res, ephemeralContainers) {
			res = append(res, ephemeralContainers)
		}
		sort.Strings(res)
		scope := admissionregistrationv1.AllScopes
		out = append(out, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{g}, APIVersions: []string{"*"}, Resources: res, Scope: &scope},
		}})
	}
	return out
}

// ephemeralContainers is the subresource of a Pod's ephemeral containers.
const ephemeralContainers = "pods/ephemeralcontainers"

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// forEach lowers the rule's foreach entries, in order, for each kind the rule applies to: the
// operations of each entry. Kyverno runs the entries one after the other, each reading its list
// and request.object from the object as the earlier entries left it: the mutations of a
// MutatingAdmissionPolicy, one per entry, do the same.
func forEach(r *kyverno.Rule, kinds []gk, sc lower.Scope) ([]cel.Expr, error) {
	if hasAnyKind(kinds) {
		return nil, errors.New("foreach in a rule for every kind (*) is not supported yet: name the kinds")
	}
	var out []cel.Expr
	for n, fe := range r.ForEach {
		e, err := perKind(kinds, func(apiVersion, kind string) (cel.Expr, string, error) {
			e, err := lower.ForEach(apiVersion, kind, fe, fmt.Sprintf("foreach[%d]", n), sc)
			return e, "", err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// entriesApart checks that what decides whether a rule with several foreach entries runs (its
// match and exclude blocks, its preconditions) reads nothing an entry before the last writes:
// Kyverno decides it once, on the object before the first entry, while each entry's mutation
// decides it again on the object as the earlier entries left it. An entry writes where
// foreachWrites says.
func entriesApart(r *kyverno.Rule, guard, pre cel.Expr) error {
	if len(r.ForEach) < 2 {
		return nil
	}
	reads := cel.Reads(cel.And(guard, pre), "object")
	for n, fe := range r.ForEach[:len(r.ForEach)-1] {
		for _, written := range foreachWrites(fe) {
			if err := readsWritten(reads, written, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// readsWritten refuses reads of the rule's match, exclude or preconditions that meet the place
// foreach entry n writes.
func readsWritten(reads [][]string, written []string, n int) error {
	for _, read := range reads {
		if !isPrefix(read, written) && !isPrefix(written, read) {
			continue
		}
		what := "the rule's match, exclude or preconditions read"
		if len(read) > 0 {
			what += " " + strings.Join(read, ".")
		} else {
			what += " the whole object"
		}
		return &lower.FieldError{Field: fmt.Sprintf("foreach[%d]", n), Msg: fmt.Sprintf("changes %s, and %s: Kyverno decides whether the rule runs once, before its first entry, while each later entry, a mutation of its own, would decide it again on the changed object; not supported: split the entries into rules", strings.Join(written, "."), what)}
	}
	return nil
}

func isPrefix(prefix, s []string) bool {
	return len(prefix) <= len(s) && slices.Equal(prefix, s[:len(prefix)])
}

// onlyLabelsAndAnnotations checks that a patch of a rule for every kind sets only labels and
// annotations (with anchors): what Kyverno's merge does elsewhere depends on the kind's schema.
func onlyLabelsAndAnnotations(patch map[string]any) error {
	for k, v := range patch {
		if k != "metadata" {
			return fmt.Errorf("%s: a rule for every kind (*) patches only metadata.labels and metadata.annotations here: Kyverno's merge of other fields depends on each kind's schema (merge keys, lists replaced whole); name the kinds", k)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("metadata: must be a map")
		}
		for mk, mv := range m {
			if mk != "labels" && mk != "annotations" {
				return fmt.Errorf("metadata.%s: a rule for every kind (*) patches only metadata.labels and metadata.annotations here: Kyverno's merge of other fields depends on each kind's schema; name the kinds", mk)
			}
			entries, ok := mv.(map[string]any)
			if !ok {
				return fmt.Errorf("metadata.%s: must be a map of strings", mk)
			}
			for ek, ev := range entries {
				switch ev.(type) {
				case map[string]any, []any:
					return fmt.Errorf("metadata.%s.%s: must be a string", mk, ek)
				}
				if strings.HasPrefix(ek, "$") {
					return fmt.Errorf("metadata.%s.%s: directives in a rule for every kind (*) are not supported", mk, ek)
				}
			}
		}
	}
	return nil
}

// requestKinds are the kinds without their subresources: the mutations are laid out by the
// request's kind (steps), and each rule's guard tests the subresource, so rules for a kind and
// for its subresources are taken in turn.
func requestKinds(kinds []gk) []gk {
	var out []gk
	for _, k := range kinds {
		k.Sub = ""
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// overlap: do the kind lists share a kind?
func overlap(a, b []gk) bool {
	if len(a) > 0 && len(b) > 0 && (hasAnyKind(a) || hasAnyKind(b)) {
		return true
	}
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// emitted is one rule's operations: the kinds it applies to, whether it can fail; e is a list
// of JSONPatch operations.
type emitted struct {
	kinds   []gk
	mayFail bool
	e       cel.Expr
	plain   cel.Expr // e as the analyses of reads and writes take it: without the collapse of keyed lists
	rule    *kyverno.Rule
	entry   int // the foreach entry (-1: a rule without foreach)
}

// step is one mutation: rules for disjoint kinds, at most one of which runs on an object, each
// with the kinds it runs for in this mutation.
type step []member

type member struct {
	emitted
	kinds []gk // the kinds the rule runs for in this step
}

// steps lays the rules out as mutations. An object goes through the rules for its kind, in
// order; rules for other kinds do nothing to it. So the j-th mutation runs, for each kind, the
// j-th rule for that kind (Kyverno's autogen rules for the Pod controllers and CronJobs share
// their Pod rule's mutation): as many mutations as the most rules any kind has.
//
// A rule for every kind (anyKind) runs, in its place, for each kind the other rules name, and
// for the kinds they do not (anyKind in the steps: choose gives it the other kinds).
func steps(rules []emitted) []step {
	var kinds []gk
	seen := map[gk]bool{}
	for _, r := range rules {
		for _, k := range r.kinds {
			if !seen[k] && k != anyKind {
				seen[k] = true
				kinds = append(kinds, k)
			}
		}
	}
	any := false
	for _, r := range rules {
		any = any || hasAnyKind(r.kinds)
	}
	if any {
		kinds = append(kinds, anyKind)
	}
	seq := map[gk][]int{}
	for i, r := range rules {
		if hasAnyKind(r.kinds) {
			for _, k := range kinds {
				seq[k] = append(seq[k], i)
			}
			continue
		}
		for _, k := range r.kinds {
			seq[k] = append(seq[k], i)
		}
	}
	var out []step
	for j := 0; ; j++ {
		var st step
		at := map[int]int{} // rule → its member
		for _, k := range kinds {
			if j >= len(seq[k]) {
				continue
			}
			i := seq[k][j]
			m, ok := at[i]
			if !ok {
				m = len(st)
				at[i] = m
				st = append(st, member{emitted: rules[i]})
			}
			st[m].kinds = append(st[m].kinds, k)
		}
		if st == nil {
			return out
		}
		out = append(out, st)
	}
}

// contents says which rules mutation i (the step) runs, why it is not part of the mutation
// before, and why it is a JSONPatch (for explain).
func (st step) contents(p *kyverno.Policy, i int) emit.Contents {
	var c emit.Contents
	src := emit.Source{APIVersion: p.APIVersion, Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
	var whys []string
	seen := map[string]bool{}
	for _, m := range st {
		c.Steps = append(c.Steps, emit.Step{Source: src, Round: 1, Rule: m.rule.Name})
		why := patchWhy(m)
		if !seen[why] {
			seen[why] = true
			whys = append(whys, why)
		}
	}
	c.Patch = strings.Join(whys, "; ")
	if i > 0 {
		c.Why = "Kyverno runs a policy's rules (and a foreach's entries) in order, each on the object the one before left; rules for kinds no object has at once share a mutation"
	}
	return c
}

// patchWhy says why a rule's operations are a JSONPatch rather than an ApplyConfiguration.
func patchWhy(m member) string {
	r := m.rule
	switch {
	case r.StrategicMerge != nil:
		return "patchStrategicMerge as Kyverno's merge gives it (new keyed list items first, lists without merge keys in its schema replaced whole, anchors decided on the object, one item per key left in every keyed list of the object), which the API server's apply merge (new items last, its own schema, no conditions, the lists it is not given left as they are) does not give"
	case r.ForEach != nil:
		return "foreach: each element patched in Kyverno's order, at its index"
	}
	return "patchesJson6902: the rule's own operations, with Kyverno's options (missing parents created, removals of missing paths ignored)"
}

// expr is the step's operations: each rule's, for the kinds it runs for in this step; and the
// parts it chooses from by the request's kind (the rules' operations that are not empty lists).
func (st step) expr() (cel.Expr, []cel.Expr) {
	return st.choose(func(m member) cel.Expr { return m.e }, cel.List(), cel.IsEmpty)
}

// choose is the expression that gives, for each kind, what of gives for the rule that runs for
// it (none for other kinds), and the rules' parts that are not empty.
func (st step) choose(of func(member) cel.Expr, none cel.Expr, empty func(cel.Expr) bool) (cel.Expr, []cel.Expr) {
	if len(st) == 1 && len(st[0].kinds) == len(st[0].emitted.kinds) {
		return of(st[0]), []cel.Expr{of(st[0])}
	}
	kind := cel.Field(cel.Ident("request"), "kind")
	is := func(k gk) cel.Expr {
		return cel.And(cel.Bin("==", cel.Field(kind, "group"), cel.Str(k.Group)), cel.Bin("==", cel.Field(kind, "kind"), cel.Str(k.Kind)))
	}
	out := none
	var parts []cel.Expr
	// The member for anyKind (a rule for every kind, in a step where every kind of the policy
	// has a member) runs for every kind the other members do not name, each in a branch of its
	// own before it: it is the innermost branch.
	anyAt := slices.IndexFunc(st, func(m member) bool { return slices.Contains(m.kinds, anyKind) })
	if anyAt >= 0 {
		out = of(st[anyAt])
		if !empty(out) {
			parts = append(parts, out)
		}
	}
	for i := len(st) - 1; i >= 0; i-- {
		if i == anyAt {
			continue
		}
		var ks []cel.Expr
		for _, k := range st[i].kinds {
			ks = append(ks, is(k))
		}
		e := assumeKinds(of(st[i]), st[i].kinds)
		if !empty(e) {
			parts = append(parts, e)
		}
		out = cel.CondList(cel.Or(ks...), e, out)
	}
	slices.Reverse(parts)
	return out, parts
}

// assumeKinds is e where the request is for one of kinds (its group and kind, any version): the
// tests of the request's group and kind in the rule's match block and in perKind's branches
// decided, and the conditions they decide simplified away. When e simplifies to the same
// expression for each kind on its own, that is the result (a match block's disjunction of kinds
// becomes its test of the version); otherwise only the tests that have one outcome for every
// kind are decided.
func assumeKinds(e cel.Expr, kinds []gk) cel.Expr {
	var first cel.Expr
	firstText := ""
	for i, k := range kinds {
		f := cel.Fold(e, decideKind([]gk{k}))
		if i == 0 {
			first, firstText = f, cel.String(f)
			continue
		}
		if cel.String(f) != firstText {
			return cel.Fold(e, decideKind(kinds))
		}
	}
	return first
}

// decideKind gives, for a test request.kind.group == "g" or request.kind.kind == "k", its
// outcome when it is the same for every one of kinds (nil otherwise, and for other nodes).
func decideKind(kinds []gk) func(cel.Expr) cel.Expr {
	return func(x cel.Expr) cel.Expr {
		op, l, r, ok := cel.AsBinary(x)
		if !ok || op != "==" {
			return nil
		}
		v, isStr := cel.StrValue(r)
		operand, name, isField := cel.AsField(l)
		if !isStr || !isField || name != "group" && name != "kind" {
			return nil
		}
		if o, n, ok := cel.AsField(operand); !ok || n != "kind" {
			return nil
		} else if id, ok := cel.AsIdent(o); !ok || id != "request" {
			return nil
		}
		holds := make([]bool, len(kinds))
		for i, k := range kinds {
			got := k.Kind
			if name == "group" {
				got = k.Group
			}
			holds[i] = got == v
		}
		return cel.Outcome(holds)
	}
}

// conditionsOf is the preconditions' keys and values, for the variables they read.
func conditionsOf(pc *kyverno.Preconditions) []any {
	var out []any
	for _, c := range append(append([]kyverno.Condition(nil), pc.Any...), pc.All...) {
		out = append(out, c.Key, c.Value)
	}
	return out
}

// configMapAlwaysRead checks that a missing ConfigMap fails the policy on every request its
// MutatingAdmissionPolicy intercepts (CREATE and UPDATE of every kind of its rules), as the API
// server's parameterNotFoundAction Deny does: each kind needs a rule that Kyverno runs on every
// such request of the kind (a match block of kinds alone, any version; no exclude, no
// preconditions) and whose patch has a variable that loads the ConfigMap's context entry.
// Kyverno loads a context entry when a variable's text names it (pkg/engine/context: deferred
// loading, on by default), and substitutes every variable of a patch before it patches.
func configMapAlwaysRead(p *kyverno.Policy, opts route.Options) error {
	always := map[gk]bool{}
	var all []gk
	for _, r := range p.Rules {
		rk, err := ruleKinds(r, opts)
		if err != nil {
			return problem(p, r, "match", err)
		}
		all = append(all, rk...)
		if readsConfigMap(r) {
			for _, k := range rk {
				always[k] = true
			}
		}
	}
	for _, k := range all {
		if always[k] {
			continue
		}
		cm := p.ConfigMap
		return &diag.Problem{File: p.Doc.File, Line: p.Doc.LineOf(cm.Path...), Object: p.Object(), Field: cm.Field,
			Msg: fmt.Sprintf("the ConfigMap %s: when it is missing, Kyverno fails only the rules that read it, when they run, while a MutatingAdmissionPolicy reading it as its param fails (or, with parameterNotFoundAction Allow, skips) the whole policy on every request it intercepts; supported when every kind of the policy (here %s) has a rule that always reads it: a match of kinds alone, no exclude, no preconditions, and a variable of the entry in its patchStrategicMerge or patchesJson6902", cm.Where(), kindName(k))}
	}
	if cm := p.ConfigMap; cm.RequestNamespace {
		for _, k := range all {
			if k.Group == "" && k.Kind == "Namespace" {
				return &diag.Problem{File: p.Doc.File, Line: p.Doc.LineOf(append(append([]string(nil), cm.Path...), "namespace")...), Object: p.Object(), Field: cm.Field + ".namespace",
					Msg: "{{request.namespace}} in a policy on Namespaces: the API server looks for the param of a Namespace's request in that namespace, while Kyverno's request.namespace for it differs; not supported: give the namespace"}
			}
		}
	}
	return nil
}

// namespaceEntryKinds refuses an apiCall context entry reading the request's namespace in a
// rule that can apply to a kind that is not namespaced: there Kyverno's urlPath becomes
// /api/v1/namespaces/, the list of every namespace, where the policy's namespaceObject is null.
func namespaceEntryKinds(p *kyverno.Policy, opts route.Options) error {
	for _, r := range p.Rules {
		vars := r.Variables
		var each func(fes []kyverno.ForEach)
		each = func(fes []kyverno.ForEach) {
			for _, fe := range fes {
				vars = append(vars, fe.Variables...)
				each(fe.ForEach)
			}
		}
		each(r.ForEach)
		i := slices.IndexFunc(vars, func(v kyverno.Variable) bool { return v.Namespace })
		if i < 0 {
			continue
		}
		rk, err := ruleKinds(r, opts)
		if err != nil {
			return problem(p, r, "match", err)
		}
		for _, k := range rk {
			if !namespacedKind(k, opts) {
				entry := vars[i]
				return &diag.Problem{File: p.Doc.File, Line: p.Doc.LineOf(entry.Path...), Object: p.Object(), Field: entry.Field,
					Msg: fmt.Sprintf("an apiCall reading the request's namespace in a rule for %s, which is not a namespaced kind: for a cluster-scoped object Kyverno gets the list of every namespace, where a MutatingAdmissionPolicy has no namespace to read; supported in rules for namespaced kinds only", kindName(k))}
			}
		}
	}
	return nil
}

// namespacedKind: is k a kind whose objects are always in a namespace (a built-in one, or a
// custom resource whose CustomResourceDefinition says so)?
func namespacedKind(k gk, opts route.Options) bool {
	if k == anyKind {
		return false
	}
	for _, crd := range opts.CRDs {
		if crd.Spec.Group == k.Group && crd.Spec.Names.Kind == k.Kind {
			return crd.Spec.Scope == apiextensionsv1.NamespaceScoped
		}
	}
	return cel.NamespacedKind(k.Group, k.Kind)
}

func kindName(k gk) string {
	if k == anyKind {
		return "every kind (*)"
	}
	name := k.Group + "/" + k.Version + "/" + k.Kind
	if k.Group == "" {
		name = k.Version + "/" + k.Kind
	}
	if k.Sub != "" {
		name += "/" + k.Sub
	}
	return name
}

// readsConfigMap: does Kyverno load a configMap context entry of the rule on every CREATE and
// UPDATE of the rule's kinds?
func readsConfigMap(r *kyverno.Rule) bool {
	if len(r.ConfigMaps) == 0 || !r.Exclude.Empty() || r.Preconditions != nil {
		return false
	}
	filters := r.Match.Any
	if len(r.Match.All) > 0 {
		if len(r.Match.Any) > 0 || len(r.Match.All) > 1 {
			return false
		}
		filters = r.Match.All
	}
	for _, f := range filters {
		if !kindsOnly(f) {
			return false
		}
		for _, k := range f.Kinds {
			if lower.ParseKind(k).Version != "*" {
				return false
			}
		}
	}
	var patch any
	switch {
	case r.StrategicMerge != nil:
		patch = r.StrategicMerge
	case r.JSON6902 != nil:
		var vs []any
		for _, op := range r.JSON6902 {
			vs = append(vs, op.Value)
		}
		patch = vs
	default:
		return false
	}
	for _, v := range lower.Variables(patch) {
		for _, cm := range r.ConfigMaps {
			if lower.Loads(cm.Entry, strings.TrimSuffix(strings.TrimPrefix(v, "{{"), "}}")) {
				return true
			}
		}
	}
	return false
}

// kindsOnly: does the filter name kinds and nothing else?
func kindsOnly(f kyverno.Filter) bool {
	return len(f.Kinds) > 0 && (kyverno.Filter{Subjects: f.Subjects, Name: f.Name, Names: f.Names, Namespaces: f.Namespaces,
		Operations: f.Operations, Annotations: f.Annotations, Selector: f.Selector, NamespaceSelector: f.NamespaceSelector}).Empty()
}
