// Package backend is Gatekeeper's route through the compiler: it takes the documents the route
// claims (mutators, documents meant as mutators, Gatekeeper Configs), runs the front end
// (package gatekeeper), checks each mutation against the kinds' schemas and the API server's
// storage, plans (package plan), lowers (package lower), refuses and plans again when a
// mutation cannot be emitted, decides where each match clause goes, and builds the policies
// (package emit) of the chosen layout.
//
// It must not import another language's packages; what it shares with them is package cel,
// package emit, compiler/diag, compiler/route and compiler/source.
package backend

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/lower"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

// Route is Gatekeeper's route (route.Route).
type Route struct{}

// Input names a Gatekeeper input policy.
func (Route) Input() string { return "Gatekeeper mutator" }

// Kinds are Gatekeeper's mutator kinds.
func (Route) Kinds() []string { return gatekeeper.Kinds }

// ShortestName is the shortest name of a policy compiled from Gatekeeper mutators.
func (Route) ShortestName() string { return shortestName }

// Claims Gatekeeper's mutators, documents meant as mutators with a misspelt group or kind
// (which the front end refuses), and Gatekeeper's Config.
func (Route) Claims(d *source.Document) bool {
	if gatekeeper.IsConfig(d) || gatekeeper.IsMutator(d.Object) {
		return true
	}
	_, msg := gatekeeper.Misnamed(d.Object)
	return msg != ""
}

// Related: documents of Gatekeeper's API groups (*.gatekeeper.sh: constraints, templates,
// configuration) that are not mutators.
func (Route) Related(d *source.Document) bool {
	group := d.Object.GroupVersionKind().Group
	return group == "gatekeeper.sh" || strings.HasSuffix(group, ".gatekeeper.sh")
}

// Compile compiles the documents Gatekeeper's route claimed.
func (Route) Compile(docs []*source.Document, opts route.Options) *route.Output {
	return Compile(docs, opts)
}

func emitOptions(o route.Options) emit.Options {
	eo := emit.Options{FailurePolicy: o.FailurePolicy, Resources: emit.NewResources(o.CRDs), Reinvocation: o.Reinvocation, NamePrefix: o.NamePrefix}
	if !o.MutateIgnoredNamespaces {
		eo.NamespaceRequirements = []metav1.LabelSelectorRequirement{{Key: gatekeeper.IgnoreLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}
	}
	return eo
}

// Plan is how the back end compiled (the route's Output.Detail).
type Plan struct {
	// Groups is the plan: which mutations share a policy and why; PolicyOf[i] is the policy
	// emitted for Groups[i] (nil when it was refused).
	Groups   []*plan.Group
	PolicyOf []*emit.Policy
	// AlsoIn[i] lists the other policies group i runs in (fused layout: a group for every kind
	// merged into kinds' policies, which its own policy then excludes).
	AlsoIn [][]*emit.Policy
	// Redundant lists the mutators the fused layout emits nothing for: they change nothing in
	// Gatekeeper's run (plan.Redundant).
	Redundant []plan.Redundancy
	// Forwarded lists the mutators the fused layout computes with the constant a later one
	// always replaces what they write with (plan.Forward).
	Forwarded []plan.Redundancy
	// CreateOnly lists the mutators the fused layout computes only where they create their
	// list element: where it exists, their write changes nothing (plan.CreateOnly).
	CreateOnly []plan.OnlyCreating
	// ExcludedNamespaces is every namespace the policies skip (options and Config documents).
	ExcludedNamespaces []string
	// SkipsIgnoredNamespaces: the bindings skip namespaces labelled gatekeeper.IgnoreLabel (there
	// are mutators, and bindings for them).
	SkipsIgnoredNamespaces bool
}

// output is what Compile builds: the route's output and the plan.
type output struct {
	route.Output
	Plan
}

// Compile translates every mutator among docs; its Output.Detail is the *Plan.
func Compile(docs []*source.Document, opts route.Options) *route.Output {
	if opts.KubernetesVersion == nil {
		opts.KubernetesVersion, _ = route.ParseVersion(route.DefaultKubernetesVersion)
	}
	env := cel.NewEnv(opts.KubernetesVersion)
	all := docs
	docs, excluded, notes, problems := gatekeeper.InstallContext(docs)
	opts.ExcludedNamespaces = append(append([]string(nil), opts.ExcludedNamespaces...), excluded...)
	fe := gatekeeper.Compile(docs)
	out := &output{Output: route.Output{Notes: append(notes, fe.Notes...)}, Plan: Plan{ExcludedNamespaces: opts.ExcludedNamespaces, SkipsIgnoredNamespaces: !opts.MutateIgnoredNamespaces && len(docs) > 0}}
	if len(docs) > 0 {
		if opts.NoWebhookSubresources {
			out.Installation = append(out.Installation, "the policies match no subresource, as Gatekeeper's static manifest installs its webhook (--webhook-subresources=false)")
		} else {
			out.Installation = append(out.Installation, "the policies of Pods, Services and every resource also match pods/ephemeralcontainers, services/status and pods/binding, as Gatekeeper's Helm chart installs its webhook (--webhook-subresources=false for its static manifest)")
		}
	}
	out.Problems = append(out.Problems, problems...)
	for _, p := range fe.Problems {
		out.Problems = append(out.Problems, p)
	}
	if err := gatekeeper.CheckNamespaceWildcards(opts.ExcludedNamespaces); err != nil {
		out.Problems = append(out.Problems, err)
	}
	var ms []*ir.Mutation
	sc := schemaCache{}
	sc.prefetch(fe.Mutations)
	var fz *plan.Fuser // footprints, computed once per plan for planning and fusing
	outside := map[*ir.Mutation][]ir.Rule{}
	noncanonical := map[*ir.Mutation]error{}
	for _, m := range fe.Mutations {
		if k := subresourceOnlyKind(m.Match); k != "" && !opts.NoWebhookSubresources {
			out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: "spec.match.kinds",
				Msg: fmt.Sprintf("%s objects come only in the requests of a subresource (%s), which Gatekeeper's Helm chart calls its webhook for: not supported yet (with --webhook-subresources=false, for the static manifest, Gatekeeper never sees them, and neither do the policies)", k, subresourceOnlyKinds[k])})
			continue
		}
		// Kinds whose schema lacks the location: the API server drops Gatekeeper's write there.
		var keep, drop []ir.Rule
		for _, r := range m.Match.Rules {
			if sc.outsideSchema(m, r) {
				drop = append(drop, r)
			} else {
				keep = append(keep, r)
			}
		}
		// Where the location leaves the schema below a parent Gatekeeper may create (a new list
		// element, an object), the parent survives the API server's decoding though the leaf
		// does not: no policy is the same as the webhook there.
		created := ""
		for _, r := range drop {
			if p := sc.createdInSchema(m, r); p != "" {
				created = fmt.Sprintf("%s has no field at %s, so the API server drops what Gatekeeper writes there, but Gatekeeper first creates %s where it is missing, which the API server keeps: no policy can reproduce that; give a location %s has, or a pathTest MustExist on %s", r.Kind, ir.PathString(m.Path), p, r.Kind, p)
				break
			}
		}
		if created != "" {
			out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: "spec.location", Msg: created})
			continue
		}
		if len(drop) > 0 {
			var kinds []string
			for _, r := range drop {
				kinds = append(kinds, r.Kind)
			}
			outside[m] = drop
			if len(keep) == 0 {
				out.Notes = append(out.Notes, note(diag.OutsideSchema, m, fmt.Sprintf("no policy emitted: %s has no field at its location (%s), so the API server drops what Gatekeeper writes there", strings.Join(dedupe(kinds), ", "), ir.PathString(m.Path))))
				continue
			}
			out.Notes = append(out.Notes, note(diag.NotAppliedTo, m, fmt.Sprintf("not applied to %s: it has no field at the location (%s), so the API server drops what Gatekeeper writes there", strings.Join(dedupe(kinds), ", "), ir.PathString(m.Path))))
			m.Match.Rules = keep
		}
		if err := sc.checkCanonical(m); err != nil {
			noncanonical[m] = err
		}
		ms = append(ms, m)
	}
	// What Gatekeeper writes outside a kind's schema is still there for its later mutators within
	// the request: one that looks at or below it on that kind cannot be reproduced.
	refused := map[*ir.Mutation]bool{}
	// A value the API server stores differently from how it is written (an empty list it drops,
	// a ModifySet value it completes) is stored alike from the webhook's patch and from a policy:
	// only another mutator that reads or writes there, seeing the value as written in
	// Gatekeeper's run and as stored between the policies' mutations, tells them apart.
	for _, m := range ms {
		err, ok := noncanonical[m]
		if !ok {
			continue
		}
		if b := seenBy(m, ms); b != nil {
			out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: valueField(m),
				Msg: fmt.Sprintf("%v (%s reads or writes there too)", err, b.Source)})
			refused[m] = true
		}
	}
	for _, m := range fe.Mutations { // in document order, for stable messages
		drop, ok := outside[m]
		if !ok {
			continue
		}
		for _, b := range fe.Mutations {
			if b == m || refused[b] || !overlap(b.Path, m.Path) {
				continue
			}
			for _, r := range drop {
				if kindAllowedIR(b.Match, r) {
					msg := fmt.Sprintf("%s writes %s on %s, which has no such field: the API server drops it from what Gatekeeper returns, but %s looks there within the same request; no policy can reproduce that", m.Source, ir.PathString(m.Path), r.Kind, b.Source)
					out.Problems = append(out.Problems, &gatekeeper.Problem{File: b.Source.File, Line: b.Source.Line, Object: b.Source.String(), Field: "spec.location", Msg: msg})
					refused[b] = true
					break
				}
			}
		}
	}
	// A mutation that cannot be lowered on its own for the target version (a list element needs
	// 1.33's comprehensions, say) is refused here, by itself, so that the refusal names the
	// version and not the groups it would have broken.
	for _, m := range ms {
		if refused[m] {
			continue
		}
		if _, err := lower.JSONPatch(m, env.Features()); err != nil {
			refused[m] = true
			out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: "spec.location", Msg: err.Error()})
		}
	}
	baseNotes := len(out.Notes)
	// Emission refuses the mutation whose expression fails (too costly, or rejected by the API
	// server's compiler), and everything is planned again without it, so that every other
	// mutator is still written (--skip-unsupported) and every refusal is found in one run.
emission:
	for {
		out.Notes = out.Notes[:baseNotes]
		out.Policies, out.PolicyOf, out.AlsoIn = nil, nil, nil
		// Refuse the groups Gatekeeper's in-memory quirks or the API server's defaulting make
		// irreproducible, and plan the rest again (refusing some can change the others' groups).
		ops := map[*ir.Mutation]ir.Op{} // as lowered: plan.Forward changes some, afresh in each pass
		for _, m := range ms {
			ops[m] = m.Op
		}
		var keep []*ir.Mutation
		for {
			keep = nil
			for _, m := range ms {
				if !refused[m] {
					keep = append(keep, m)
				}
			}
			// Fused, mutators that change nothing in Gatekeeper's run get no mutation: they would
			// only cost CEL and, interacting with the mutator that makes them moot, mutations.
			out.Redundant, out.Forwarded = nil, nil
			for _, m := range keep {
				m.Op = ops[m]
			}
			if opts.Layout != route.LayoutPerMutator {
				out.Forwarded = plan.Forward(keep)
				out.Redundant = plan.Redundant(keep)
				gone := map[*ir.Mutation]bool{}
				for _, r := range out.Redundant {
					gone[r.M] = true
				}
				keep = slices.DeleteFunc(keep, func(m *ir.Mutation) bool { return gone[m] })
			}
			// New elements get the values earlier mutators set in them in Gatekeeper's next pass
			// (plan.Complete); footprints depend on them, so they are computed afresh.
			plan.Complete(keep)
			fz = plan.NewFuser()
			out.Groups = fz.Plan(keep)
			more := false
			for _, g := range out.Groups {
				// A value stored differently is exact only alone: run once, by itself.
				for _, m := range g.Mutations {
					if err, ok := noncanonical[m]; ok && !refused[m] && (len(g.Mutations) > 1 || g.Rounds > 1) {
						refused[m], more = true, true
						out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: valueField(m),
							Msg: fmt.Sprintf("%v (it must run with %s, whose result depends on it)", err, g.Mutations[0].Source)})
					}
				}
				for m, msg := range sc.quirks(g) {
					if !refused[m] {
						refused[m], more = true, true
						out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: "spec", Msg: msg})
					}
				}
				_, problems := units(g)
				for m, msg := range problems {
					if !refused[m] {
						refused[m], more = true, true
						out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: "spec.location", Msg: msg})
					}
				}
			}
			if !more {
				break
			}
		}
		if opts.Layout != route.LayoutPerMutator {
			// Writes that change nothing where their list element is are emitted only where they
			// create it (plan.CreateOnly: the plan stands). The mutators named in the reasons above
			// keep their writes.
			named := map[*ir.Mutation]bool{}
			for _, r := range append(slices.Clone(out.Forwarded), out.Redundant...) {
				named[r.By] = true
			}
			out.CreateOnly = plan.CreateOnly(keep, named)
			for i, o := range out.CreateOnly {
				if o.SharesCreation() {
					fz.ShareCreation(o)
					out.CreateOnly[i].Why += fmt.Sprintf("; both may be computed in one expression, %s appending the element only where this one's match does not hold", o.By.Source)
				}
			}
		}
		for _, r := range out.Forwarded {
			m := r.M
			out.Notes = append(out.Notes, note(diag.Forwarded, m, fmt.Sprintf("computed as an Assign of the value of %s: %s", r.By.Source, r.Why)))
		}
		for _, r := range out.CreateOnly {
			m := r.M
			out.Notes = append(out.Notes, note(diag.CreateOnly, m, "computed only where it creates its list element: "+r.Why))
		}
		for _, r := range out.Redundant {
			m := r.M
			out.Notes = append(out.Notes, note(diag.Redundant, m, redundantReason+r.Why))
		}
		fail := func(e *mutationError) {
			ms := []*ir.Mutation{e.m}
			if g, ok := e.err.(groupError); ok {
				ms = append(ms, g.group...)
			}
			for _, m := range ms {
				if !refused[m] {
					refused[m] = true
					out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: "spec.location", Msg: e.err.Error()})
				}
			}
		}
		if opts.Layout == route.LayoutPerMutator {
			for _, g := range out.Groups {
				var p *emit.Policy
				var err *mutationError
				if len(g.Mutations) == 1 {
					var e error
					if p, e = compileOne(env, g.Mutations[0], opts); e != nil {
						err = &mutationError{m: g.Mutations[0], err: e}
					}
				} else {
					p, err = compileGroup(env, g, opts)
				}
				if err == nil && p != nil {
					var jerr error
					if err, jerr = tooLarge(g.Mutations, p); jerr != nil {
						err = &mutationError{m: g.Mutations[0], err: jerr}
					}
				}
				out.PolicyOf = append(out.PolicyOf, p)
				if err != nil {
					fail(err)
					continue emission
				}
				if p == nil {
					m := g.Mutations[0]
					out.Notes = append(out.Notes, note(diag.NeverWrites, m, "no policy emitted: it can never write anything (its path tests exclude every object)"))
					continue
				}
				out.Policies = append(out.Policies, p)
			}
		} else {
			policies, policyOf, alsoIn, err := compileFused(env, fz, out.Groups, out.CreateOnly, opts)
			if err != nil {
				fail(err)
				continue emission
			}
			out.Policies, out.PolicyOf, out.AlsoIn = policies, policyOf, alsoIn
		}
		break
	}
	diag.Sort(out.Problems)
	sort.SliceStable(out.Policies, func(i, j int) bool { return out.Policies[i].Policy.Name < out.Policies[j].Policy.Name })
	out.Mutators = report(all, out)
	o := out.Output
	o.Detail = &out.Plan
	return &o
}

// redundantReason begins the reason of a mutator plan.Redundant leaves out.
const redundantReason = "no mutation emitted: it never changes an object in Gatekeeper's run: "

// note is a note of kind about m.
func note(kind diag.NoteKind, m *ir.Mutation, msg string) diag.Note {
	return diag.Note{Kind: kind, File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Msg: msg}
}

// printer prints and checks expressions against one environment.
type printer struct{ env *cel.Env }

func (p printer) condition(e cel.Expr) (string, error) {
	s, err := p.env.Print(e)
	if err != nil {
		return "", err
	}
	return s, p.env.CheckConditionExpr(e)
}

func (p printer) jsonPatch(e cel.Expr) (string, error) {
	s, err := p.env.Print(e)
	if err != nil {
		return "", err
	}
	return s, p.env.CheckJSONPatchExpr(e)
}

// compileOne emits a policy for a mutation that interacts with no other: the request-level match
// clauses become native rules, selectors and match conditions, visible to operators and cheap for
// the API server; the object-level ones (labels) stay inside the expression.
func compileOne(env *cel.Env, m *ir.Mutation, opts route.Options) (*emit.Policy, error) {
	pr := printer{env}
	var conds []emit.Condition
	addCond := func(name string, e cel.Expr) error {
		e = notNamespaceIfImpossible(m.Match, e)
		if e == cel.True {
			return nil
		}
		s, err := pr.condition(e)
		if err != nil {
			return err
		}
		conds = append(conds, emit.Condition{Name: name, Expression: s})
		return nil
	}
	if len(m.Match.Rules) == 0 || needsKindCondition(m.Match, emit.NewResources(opts.CRDs)) {
		if err := addCond("kinds", kindsGuard(m.Match)); err != nil {
			return nil, err
		}
	}
	if matchesGatekeeperGroups(m.Match) {
		if err := addCond("not-gatekeeper-resources", notGatekeeperResources()); err != nil {
			return nil, err
		}
	}
	if err := addCond(installConditionName, lower.ExcludedNamespacesMatch(opts.ExcludedNamespaces)); err != nil {
		return nil, err
	}
	if err := addCond("namespaces", lower.NamespacesMatch(m.Match.Namespaces)); err != nil {
		return nil, err
	}
	if err := addCond("excluded-namespaces", lower.ExcludedNamespacesMatch(m.Match.ExcludedNamespaces)); err != nil {
		return nil, err
	}
	if err := addCond("name", lower.NameMatch(m.Match.Name)); err != nil {
		return nil, err
	}
	e, err := lower.JSONPatch(m, env.Features())
	if err != nil {
		return nil, err
	}
	if cel.IsEmpty(e) {
		return nil, nil
	}
	s, err := pr.jsonPatch(cel.Compact(e))
	if err != nil {
		return nil, err
	}
	return newPolicy(policyName(m.Source), []ir.Source{m.Source}, m.Match, conds, nil,
		[]emit.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: s}}, opts)
}

// compileGroup emits one policy for interacting mutations: their mutations in Gatekeeper's order,
// repeated g.Rounds times, each guarded by its own complete match, since the policy's rules are
// the union of the members'.
func compileGroup(env *cel.Env, g *plan.Group, opts route.Options) (*emit.Policy, *mutationError) {
	pr := printer{env}
	var union ir.Match
	var srcs []ir.Source
	var exprs []string
	for _, m := range g.Mutations {
		srcs = append(srcs, m.Source)
		union.Rules = append(union.Rules, m.Match.Rules...)
		if len(m.Match.Rules) == 0 {
			union.Operations = mergeOps(union.Operations, m.Match.Operations)
		}
	}
	// Each unit is one expression: a mutation alone, or mutations the API server's defaulting
	// couples, computed together.
	us, _ := units(g)
	for _, u := range us {
		var batch []step
		for _, m := range u {
			guard, err := fullGuard(m)
			if err != nil {
				return nil, &mutationError{m: m, err: err}
			}
			ops, err := lower.JSONPatch(m, env.Features())
			if err != nil {
				return nil, &mutationError{m: m, err: err}
			}
			if !cel.IsEmpty(ops) {
				batch = append(batch, step{m: m, guard: guard})
			}
		}
		if len(batch) == 0 {
			exprs = append(exprs, "")
			continue
		}
		e, err := fusedPatch(env, batch)
		if err != nil {
			return nil, &mutationError{m: batch[0].m, err: err}
		}
		s, err := pr.jsonPatch(e)
		if err != nil {
			return nil, &mutationError{m: batch[0].m, err: err}
		}
		exprs = append(exprs, s)
	}
	for _, m := range g.Mutations {
		if len(m.Match.Rules) == 0 {
			union.Rules = nil // one member applies to every kind: so does the policy
			break
		}
	}
	if len(union.Rules) == 0 && len(union.Operations) == 0 {
		union.Operations = []string{"CREATE", "UPDATE"}
	}
	var muts []emit.Mutation
	for r := 0; r < g.Rounds; r++ {
		for _, s := range exprs {
			if s != "" {
				muts = append(muts, emit.Mutation{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: s})
			}
		}
	}
	if len(muts) == 0 {
		return nil, nil
	}
	conds, err := installConditions(env, opts)
	if err != nil {
		return nil, &mutationError{m: g.Mutations[0], err: err}
	}
	p, err := newPolicy(namePrefix+"group-"+strings.TrimPrefix(policyName(g.Mutations[0].Source), namePrefix), srcs, union, conds, nil, muts, opts)
	if err != nil {
		return nil, &mutationError{m: g.Mutations[0], err: err}
	}
	return p, nil
}

// installConditionName names the match condition that skips the namespaces Gatekeeper's
// installation excluded from mutation.
const installConditionName = "gatekeeper-excluded-namespaces"

// installConditions are the match conditions every policy gets from the installation context.
func installConditions(env *cel.Env, opts route.Options) ([]emit.Condition, error) {
	e := lower.ExcludedNamespacesMatch(opts.ExcludedNamespaces)
	if e == cel.True {
		return nil, nil
	}
	s, err := printer{env}.condition(e)
	if err != nil {
		return nil, err
	}
	return []emit.Condition{{Name: installConditionName, Expression: s}}, nil
}

// fullGuard is every match clause of m as one CEL condition, for use inside a grouped policy.
func fullGuard(m *ir.Mutation) (cel.Expr, error) {
	var parts []cel.Expr
	if len(m.Match.Rules) > 0 {
		parts = append(parts, lower.RulesMatch(m.Match.Rules))
	} else {
		parts = append(parts, lower.OperationsMatch(m.Match.Operations), kindsGuard(m.Match))
	}
	if matchesGatekeeperGroups(m.Match) {
		parts = append(parts, notGatekeeperResources())
	}
	parts = append(parts, lower.ScopeMatch(m.Match.Scope), lower.NamespacesMatch(m.Match.Namespaces),
		lower.ExcludedNamespacesMatch(m.Match.ExcludedNamespaces), lower.NameMatch(m.Match.Name))
	ns, err := lower.NamespaceSelectorMatch(m.Match.NamespaceSelector)
	if err != nil {
		return nil, err
	}
	parts = append(parts, ns)
	return notNamespaceIfImpossible(m.Match, cel.And(parts...)), nil
}

// notNamespaceIfImpossible simplifies e (a guard or match condition of a mutation with match m)
// for requests that are not for Namespaces when m's kinds exclude Namespaces: e is then false for
// a Namespace anyway (its kinds test fails) or never evaluated for one (the policy's rules).
func notNamespaceIfImpossible(m ir.Match, e cel.Expr) cel.Expr {
	if m.MayMatchKind("", "Namespace") {
		return e
	}
	return lower.AssumeNotNamespace(e)
}

func kindsGuard(m ir.Match) cel.Expr {
	var groups, kinds [][]string
	if len(m.Rules) == 0 {
		for _, k := range m.Kinds {
			groups, kinds = append(groups, k.Groups), append(kinds, k.Kinds)
		}
	} else {
		for _, r := range m.Rules {
			groups, kinds = append(groups, []string{r.Group}), append(kinds, []string{r.Kind})
		}
	}
	return lower.KindsMatch(groups, kinds)
}

func notGatekeeperResources() cel.Expr {
	groups := make([]cel.Expr, len(gatekeeperGroups))
	for i, g := range gatekeeperGroups {
		groups[i] = cel.Str(g)
	}
	return cel.Not(cel.Bin("in", cel.Field(cel.Field(cel.Ident("request"), "kind"), "group"), cel.List(groups...)))
}

func mergeOps(a, b []string) []string {
	for _, x := range b {
		if !contains(a, x) {
			a = append(a, x)
		}
	}
	sort.Strings(a)
	return a
}

// gatekeeperGroups are the API groups whose objects Gatekeeper's webhook never mutates
// (webhookHandler.isGatekeeperResource).
var gatekeeperGroups = []string{"config.gatekeeper.sh", "constraints.gatekeeper.sh", "expansion.gatekeeper.sh",
	"externaldata.gatekeeper.sh", "mutations.gatekeeper.sh", "status.gatekeeper.sh", "templates.gatekeeper.sh"}

func matchesGatekeeperGroups(m ir.Match) bool {
	if len(m.Rules) == 0 {
		for _, k := range m.Kinds {
			if len(k.Groups) == 0 {
				return true
			}
			for _, g := range k.Groups {
				if g == "*" || contains(gatekeeperGroups, g) {
					return true
				}
			}
		}
		return len(m.Kinds) == 0
	}
	for _, r := range m.Rules {
		if contains(gatekeeperGroups, r.Group) {
			return true
		}
	}
	return false
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// valueField names the field holding a mutation's value(s), for messages.
func valueField(m *ir.Mutation) string {
	switch m.Op.(type) {
	case ir.MergeSet, ir.PruneSet:
		return "spec.parameters.values"
	}
	return "spec.parameters.assign.value"
}

// kindAllowedIR: could m apply to requests of r's kind?
func kindAllowedIR(m ir.Match, r ir.Rule) bool {
	if len(m.Rules) == 0 {
		if len(m.Kinds) == 0 {
			return true
		}
		for _, k := range m.Kinds {
			if (len(k.Kinds) == 0 || contains(k.Kinds, "*") || contains(k.Kinds, r.Kind)) && (len(k.Groups) == 0 || contains(k.Groups, "*") || contains(k.Groups, r.Group)) {
				return true
			}
		}
		return false
	}
	for _, x := range m.Rules {
		if x.Group == r.Group && x.Kind == r.Kind {
			return true
		}
	}
	return false
}

// seenBy returns a mutation other than m, among ms, that may apply to one of m's kinds and whose
// location meets m's (nil if none).
func seenBy(m *ir.Mutation, ms []*ir.Mutation) *ir.Mutation {
	for _, b := range ms {
		if b == m || !overlap(b.Path, m.Path) {
			continue
		}
		if len(m.Match.Rules) == 0 {
			return b
		}
		for _, r := range m.Match.Rules {
			if kindAllowedIR(b.Match, r) {
				return b
			}
		}
	}
	return nil
}

// subresourceOnlyKinds are the kinds served only in the requests of a subresource of the Helm
// chart's webhook (group/Kind, and where they come).
var subresourceOnlyKinds = map[string]string{
	"autoscaling/Scale": "deployments/scale, replicasets/scale, statefulsets/scale, replicationcontrollers/scale",
	"policy/Eviction":   "pods/eviction",
}

// subresourceOnlyKind is the first of subresourceOnlyKinds the match names ("" for none; a match
// of every kind names none: what it changes in them is not stored).
func subresourceOnlyKind(m ir.Match) string {
	for _, r := range m.Rules {
		for _, k := range []string{"autoscaling/Scale", "policy/Eviction"} { // subresourceOnlyKinds, in order
			group, kind, _ := strings.Cut(k, "/")
			if (r.Group == group || r.Group == "*") && r.Kind == kind {
				return k
			}
		}
	}
	return ""
}
