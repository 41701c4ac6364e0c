package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/lower"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/quiet"
	"github.com/mapc-dev/mapc/suite"
)

func newExplainCmd() *cobra.Command {
	var files []string
	var kubeVersion, layoutFlag string
	var output formatFlag
	var install installFlags
	c := &cobra.Command{
		Use:   "explain -f PATH [-f PATH]...",
		Short: "Show the plan: which mutators share a policy, why, in what order and how many rounds",
		Long: `Show the plan: which mutators share a policy, why, in what order and how many rounds,
and the installation context. Objects given with -f (anything that is not a mutator, a Gatekeeper
Config or a policy; Namespaces are also looked up by namespace selectors) are admitted through
the API server's MutatingAdmissionPolicy code in process, and explain reports, for each policy's
match conditions and each mutation, the largest CEL runtime cost an object took against the API
server's limits (1,000,000 per expression, 2,500,000 for a policy's match conditions).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			files = inputPaths(files, args)
			if len(files) == 0 {
				return usageErr("explain needs at least one PATH (or -f PATH)")
			}
			kv, err := compiler.ParseVersion(kubeVersion)
			if err != nil {
				return usageErr("%v", err)
			}
			layout, err := parseLayout(layoutFlag)
			if err != nil {
				return err
			}
			if err := output.check("explain"); err != nil {
				return err
			}
			docs, err := source.ReadPaths(files, cmd.InOrStdin())
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			opts := compiler.Options{KubernetesVersion: kv, Layout: layout}
			if err := install.apply(&opts); err != nil {
				return err
			}
			sorted := compiler.Sort(docs)
			mutDocs, objDocs := append(sorted.All(), sorted.Related...), sorted.Objects
			out := compiler.Compile(mutDocs, opts)
			for _, p := range out.Problems {
				fmt.Fprintln(cmd.ErrOrStderr(), p.Error())
			}
			var costs []explainedCost
			if len(objDocs) > 0 && len(out.Problems) == 0 {
				quiet.Klog()
				if costs, err = measureCosts(cmd, out, opts.CRDs, docs, objDocs); err != nil {
					return err
				}
			}
			switch output.value {
			case "json":
				err = explainJSON(cmd.OutOrStdout(), out, costs)
			case "text":
				explainText(cmd.OutOrStdout(), out, costs)
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if len(out.Problems) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d input policies refused", len(out.Problems))}
			}
			return nil
		},
	}
	c.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - for stdin; repeatable: mutators, a Gatekeeper Config, and objects to measure the policies' CEL cost on")
	c.Flags().StringVar(&kubeVersion, "kubernetes-version", compiler.DefaultKubernetesVersion, "target Kubernetes version")
	addFormatFlag(c.Flags(), &output, "text", "text", "json")
	install.add(c.Flags())
	c.Flags().StringVar(&layoutFlag, "layout", string(compiler.LayoutFused), "fused or per-mutator")
	return c
}

type explainedGroup struct {
	Policy    string   `json:"policy"`
	Mutators  []string `json:"mutators"`
	Rounds    int      `json:"rounds"`
	Mutations int      `json:"mutations"`
	Why       []string `json:"why,omitempty"`
	// Together lists mutators computed in one expression because the API server defaults the
	// object between mutations (see compiler/plan/defaults.go).
	Together []string `json:"computedTogether,omitempty"`
	// AlsoIn lists the kinds' policies a group for every kind also runs in; Policy then excludes
	// those kinds' resources.
	AlsoIn []string `json:"alsoIn,omitempty"`
	// Completed lists the list elements mutators create with values earlier mutators set there
	// in Gatekeeper's next pass (plan.Complete).
	Completed []string `json:"completedElements,omitempty"`
}

// explainedPolicy lists what each mutation of a fused policy computes.
type explainedPolicy struct {
	Policy    string              `json:"policy"`
	Mutations []explainedMutation `json:"mutations"`
}

type explainedMutation struct {
	PatchType string          `json:"patchType"`
	Steps     []explainedStep `json:"steps"`
	// After and Why: the step of the mutation before that its steps cannot be computed with,
	// and why (After is empty when the expression before reached its length limit).
	After string `json:"after,omitempty"`
	Why   string `json:"why,omitempty"`
	// LeavesOut: steps that leave out a list element another step replaces whole.
	LeavesOut []string `json:"leavesOut,omitempty"`
	// Patch: why the mutation is of its patch type.
	Patch string `json:"patchTypeBecause,omitempty"`
}

type explainedStep struct {
	Mutator string `json:"mutator"`
	Rule    string `json:"rule,omitempty"`
	Round   int    `json:"round"`
}

func explainedPolicies(out *compiler.Output) []explainedPolicy {
	var ps []explainedPolicy
	for _, p := range out.Policies {
		if len(p.Contents) != len(p.Policy.Spec.Mutations) {
			continue // not fused
		}
		ep := explainedPolicy{Policy: p.Policy.Name}
		for i, c := range p.Contents {
			em := explainedMutation{PatchType: string(p.Policy.Spec.Mutations[i].PatchType), After: c.After, Why: c.Why, LeavesOut: c.LeavesOut, Patch: c.Patch}
			for _, st := range c.Steps {
				em.Steps = append(em.Steps, explainedStep{Mutator: st.Source.String(), Rule: st.Rule, Round: st.Round})
			}
			ep.Mutations = append(ep.Mutations, em)
		}
		ps = append(ps, ep)
	}
	return ps
}

type explainedInstall struct {
	ExcludedNamespaces     []string `json:"excludedNamespaces,omitempty"`
	SkipsIgnoredNamespaces bool     `json:"skipsIgnoredNamespaces"`
	// Lines are what other engines' installations add (route.Output.Installation).
	Lines []string `json:"lines,omitempty"`
}

func explained(out *compiler.Output) []explainedGroup {
	var gs []explainedGroup
	for i, g := range out.Groups {
		eg := explainedGroup{Rounds: g.Rounds, Why: g.Why}
		for _, c := range g.Couplings {
			eg.Together = append(eg.Together, c.A.Source.String()+" + "+c.B.Source.String())
		}
		for _, m := range g.Mutations {
			eg.Mutators = append(eg.Mutators, m.Source.String())
			for _, c := range m.Completions {
				when := ""
				if g, err := lower.CompletionGuardFor(c.By.Match, m.Match); err == nil && g != cel.True {
					when = " where its match holds"
				}
				pass := "in Gatekeeper's next pass"
				if c.By.SortKey > m.SortKey {
					pass = "later in the same pass"
				}
				eg.Completed = append(eg.Completed, fmt.Sprintf("%s writes %s already as %s changes it %s%s", m.Source, elementPath(m), c.By.Source, pass, when))
			}
		}
		if i < len(out.AlsoIn) {
			for _, p := range out.AlsoIn[i] {
				eg.AlsoIn = append(eg.AlsoIn, p.Policy.Name)
			}
		}
		if i < len(out.PolicyOf) && out.PolicyOf[i] != nil {
			eg.Policy = out.PolicyOf[i].Policy.Name
			eg.Mutations = len(out.PolicyOf[i].Policy.Spec.Mutations)
		}
		gs = append(gs, eg)
	}
	return gs
}

// explainedCost is the largest CEL runtime cost one expression of a policy took on the objects.
type explainedCost struct {
	Policy     string `json:"policy"`
	Expression string `json:"expression"` // mutations[i] or matchConditions
	PatchType  string `json:"patchType,omitempty"`
	Max        int64  `json:"maxCost"`
	Object     string `json:"object"` // the object that took it
	Limit      int64  `json:"limit"`
	// Operations: the most JSONPatch operations the mutation gave one object, and which.
	Operations       int    `json:"maxOperations,omitempty"`
	OperationsObject string `json:"operationsObject,omitempty"`
}

// measureCosts admits every object through the compiled policies, in the order emitted, and
// keeps the largest cost of each expression.
func measureCosts(cmd *cobra.Command, out *compiler.Output, crds []*apiextensionsv1.CustomResourceDefinition, docs, objDocs []*source.Document) ([]explainedCost, error) {
	nss, err := readNamespaces(cmd, nil, docs)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	objects, err := inRequestNamespace(ctx, objDocs)
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	ev, err := admission.New(admission.Options{Namespaces: nss, CRDs: crds})
	if err != nil {
		return nil, &exitError{code: 1, err: err}
	}
	defer ev.Close()
	var sets []admission.PolicySet
	patchTypes := map[string]string{}
	for _, p := range out.Policies {
		sets = append(sets, suite.PolicySet(p))
		for i, m := range p.Policy.Spec.Mutations {
			patchTypes[fmt.Sprintf("%s/mutations[%d]", p.Policy.Name, i)] = string(m.PatchType)
		}
	}
	byExpr := map[string]*explainedCost{}
	var order []string
	for _, obj := range objects {
		rec := &admission.CostRecord{}
		if _, err := ev.Admit(admission.WithCostRecord(ctx, rec), sets, admission.Request{Object: obj}); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: not admitted (%v); its CEL cost is not counted\n", suite.Identity(obj), err)
			continue
		}
		for _, c := range rec.Costs() {
			k := c.Policy + "/" + c.Expression
			e, ok := byExpr[k]
			if !ok {
				limit := int64(celconfig.PerCallLimit)
				if c.Expression == "matchConditions" {
					limit = celconfig.RuntimeCELCostBudgetMatchConditions
				}
				e = &explainedCost{Policy: c.Policy, Expression: c.Expression, PatchType: patchTypes[k], Max: -1, Limit: limit}
				byExpr[k] = e
				order = append(order, k)
			}
			if c.Cost > e.Max {
				e.Max, e.Object = c.Cost, suite.Identity(obj)
			}
			if c.Operations > e.Operations {
				e.Operations, e.OperationsObject = c.Operations, suite.Identity(obj)
			}
		}
	}
	// By policy, then match conditions and mutations in order.
	rank := func(k string) (string, int) {
		e := byExpr[k]
		i := -1
		fmt.Sscanf(e.Expression, "mutations[%d]", &i)
		return e.Policy, i
	}
	sort.Slice(order, func(a, b int) bool {
		pa, ia := rank(order[a])
		pb, ib := rank(order[b])
		if pa != pb {
			return pa < pb
		}
		return ia < ib
	})
	costs := make([]explainedCost, len(order))
	for i, k := range order {
		costs[i] = *byExpr[k]
	}
	return costs, nil
}

// explainedRedundant is a mutator the fused layout emits nothing for (plan.Redundant).
type explainedRedundant struct {
	Mutator string `json:"mutator"`
	Because string `json:"because"`
}

func redundant(rs []plan.Redundancy) []explainedRedundant {
	var out []explainedRedundant
	for _, r := range rs {
		out = append(out, explainedRedundant{Mutator: r.M.Source.String(), Because: r.Why})
	}
	return out
}

// createdOnly is out.CreateOnly's reasons.
func createdOnly(out *compiler.Output) []plan.Redundancy {
	var rs []plan.Redundancy
	for _, o := range out.CreateOnly {
		rs = append(rs, o.Redundancy)
	}
	return rs
}

func explainJSON(w io.Writer, out *compiler.Output, costs []explainedCost) error {
	doc := map[string]any{"groups": explained(out), "policies": explainedPolicies(out),
		"installation": explainedInstall{out.ExcludedNamespaces, out.SkipsIgnoredNamespaces, out.Installation}}
	if rs := redundant(out.Redundant); rs != nil {
		doc["redundant"] = rs
	}
	if rs := redundant(out.Forwarded); rs != nil {
		doc["forwarded"] = rs
	}
	if rs := redundant(createdOnly(out)); rs != nil {
		doc["createdOnly"] = rs
	}
	if costs != nil {
		doc["celCost"] = costs
	}
	doc["mutators"] = out.Mutators
	doc["problems"] = diag.Problems(out.Problems)
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func explainText(w io.Writer, out *compiler.Output, costs []explainedCost) {
	defer func() {
		if len(costs) == 0 {
			return
		}
		fmt.Fprintf(w, "CEL cost on the objects given (the largest per expression, as the API server counts it), and the JSONPatch operations (each converted, marshalled and applied on its own):\n")
		for _, c := range costs {
			what := c.Expression
			if c.PatchType != "" {
				what += " (" + c.PatchType + ")"
			}
			ops := ""
			if c.Operations > 0 {
				ops = fmt.Sprintf("; up to %d JSONPatch operations, on %s", c.Operations, c.OperationsObject)
			}
			fmt.Fprintf(w, "  %s %s: %d on %s, %.2g%% of the limit %d%s\n", c.Policy, what, c.Max, c.Object, 100*float64(c.Max)/float64(c.Limit), c.Limit, ops)
		}
	}()
	if out.SkipsIgnoredNamespaces {
		fmt.Fprintf(w, "installation: the bindings skip namespaces labelled %s (Gatekeeper's webhook is installed so)\n", gatekeeper.IgnoreLabel)
	}
	if len(out.ExcludedNamespaces) > 0 {
		fmt.Fprintf(w, "installation: every policy skips the namespaces %s (Config, --exclude-namespaces)\n", strings.Join(out.ExcludedNamespaces, ", "))
	}
	for _, l := range out.Installation {
		fmt.Fprintf(w, "installation: %s\n", l)
	}
	for _, g := range explained(out) {
		also := ""
		if len(g.AlsoIn) > 0 {
			also = fmt.Sprintf("; also computed in %s, whose kinds %s skips (one mutation less for their objects)", strings.Join(g.AlsoIn, ", "), g.Policy)
		}
		if len(g.Mutators) == 1 {
			fmt.Fprintf(w, "%s: %s alone (interacts with no other mutator)%s\n", g.Policy, g.Mutators[0], also)
			for _, c := range g.Completed {
				fmt.Fprintf(w, "  %s\n", c)
			}
			continue
		}
		if also != "" {
			fmt.Fprintf(w, "%s: %s\n", g.Policy, strings.TrimPrefix(also, "; "))
		}
		fmt.Fprintf(w, "%s: %d mutators in Gatekeeper's order, %d round(s)\n", g.Policy, len(g.Mutators), g.Rounds)
		for _, m := range g.Mutators {
			fmt.Fprintf(w, "  - %s\n", m)
		}
		fmt.Fprintf(w, "  grouped because:\n")
		for _, y := range g.Why {
			fmt.Fprintf(w, "    %s\n", y)
		}
		for _, t := range g.Together {
			fmt.Fprintf(w, "  computed in one expression (the API server defaults the object between mutations): %s\n", t)
		}
		for _, c := range g.Completed {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
	for _, sec := range []struct {
		title string
		rs    []plan.Redundancy
	}{
		{"no mutation for these: they never change an object in Gatekeeper's run (it gives the same result without them)", out.Redundant},
		{"computed as an Assign of the value a later mutator always replaces theirs with (Gatekeeper's result is the same)", out.Forwarded},
		{"computed only where they create their list element (where it exists, their write changes nothing in Gatekeeper's run)", createdOnly(out)},
	} {
		if len(sec.rs) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", sec.title)
		for _, r := range redundant(sec.rs) {
			fmt.Fprintf(w, "  - %s: %s\n", r.Mutator, r.Because)
		}
	}
	for _, p := range explainedPolicies(out) {
		fmt.Fprintf(w, "%s: %d mutation(s), each computed from the object the one before left:\n", p.Policy, len(p.Mutations))
		for i, m := range p.Mutations {
			var steps []string
			for k := 0; k < len(m.Steps); k++ {
				st := m.Steps[k]
				s := st.Mutator
				if st.Rule != "" {
					// A policy's rules in one mutation: "Kind/name rule a" or "Kind/name rules a, b".
					rules := []string{st.Rule}
					for k+1 < len(m.Steps) && m.Steps[k+1].Mutator == st.Mutator && m.Steps[k+1].Rule != "" {
						k++
						rules = append(rules, m.Steps[k].Rule)
					}
					if len(rules) == 1 {
						s += " rule " + rules[0]
					} else {
						s += " rules " + strings.Join(rules, ", ")
					}
				}
				if st.Round > 1 {
					s += fmt.Sprintf(" (round %d)", st.Round)
				}
				steps = append(steps, s)
			}
			fmt.Fprintf(w, "  mutations[%d] (%s): %s\n", i, m.PatchType, strings.Join(steps, ", "))
			switch {
			case m.After != "":
				fmt.Fprintf(w, "    not in the mutation before (which runs %s): %s\n", m.After, m.Why)
			case m.Why != "":
				fmt.Fprintf(w, "    not in the mutation before: %s\n", m.Why)
			}
			for _, l := range m.LeavesOut {
				fmt.Fprintf(w, "    %s\n", l)
			}
			if m.Patch != "" {
				article := "a"
				if strings.HasPrefix(m.PatchType, "A") {
					article = "an"
				}
				fmt.Fprintf(w, "    %s %s for %s\n", article, m.PatchType, m.Patch)
			}
		}
	}
}

// elementPath is m's path up to the last list element on it (the element it creates).
func elementPath(m *ir.Mutation) string {
	last := len(m.Path) - 1
	for i, st := range m.Path {
		if st.List {
			last = i
		}
	}
	return ir.PathString(m.Path[:last+1])
}
