package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/cel/admission"
	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/quiet"
	"github.com/mapc-dev/mapc/suite"
	"github.com/mapc-dev/mapc/verify"
)

type verifyFlags struct {
	files       []string
	namespaces  []string
	policies    []string
	params      []string
	crds        []string
	idempotence bool
	output      formatFlag
	kubeVersion string
	seed        int64
	allow       []string
	install     installFlags
	kyvernoBin  string
}

func newVerifyCmd() *cobra.Command {
	f := &verifyFlags{}
	c := &cobra.Command{
		Use:   "verify -f MUTATORS -f OBJECTS [flags]",
		Short: "Check that the compiled policies mutate objects exactly as Gatekeeper or Kyverno does",
		Long: `verify compiles the Gatekeeper mutators (or the Kyverno policies) among the -f documents,
then admits every other document both ways: through the input language's own engine, driven as
its webhook drives it, and through the compiled MutatingAdmissionPolicies run by the API
server's own code, in every order of the policies (all orders up to 24, else sorted, reversed
and seeded shuffles: the API server's order is arbitrary). It prints PASS or FAIL per object,
with a diff (the engine's result to the policies' result) and the failing policy order, then
"N passed, M failed". Exit status 1 if any object differs or any input policy is refused. On a
terminal, a run longer than a second shows how far it is on stderr.

Each Pod is also admitted on kubectl debug's request ("UPDATE pods/ephemeralcontainers ...", see
below), which Gatekeeper's webhook, as its Helm chart installs it, and Kyverno's are called for.
Kyverno's rules run on every request its webhook is called for: with Kyverno policies, each
object is also updated with no change ("UPDATE Kind/namespace/name", the object as its own old
object), and so is the object as Kyverno created it ("UPDATE Kind/namespace/name, as created":
the rules run again on what they mutated); each Pod gets an ephemeral container as kubectl debug
adds one ("UPDATE pods/ephemeralcontainers ...", compared as the API server stores it: only the
ephemeral containers change).

Documents are told apart by kind: Gatekeeper mutators, or Kyverno ClusterPolicies and Policies
(one language per run); objects to admit (everything else); Namespace objects are admitted too
and give namespaceSelector its labels. MutatingAdmissionPolicies among -f are ignored: to
verify hand-written (or edited) policies instead of compiling, give them with --policies.

Gatekeeper's engine (v3.23.1) is built into mapc. Kyverno's (v1.19.1) is the kyverno-engine
program (` + "`make kyverno-engine`" + ` builds bin/kyverno-engine), found with --kyverno-engine, else
$MAPC_KYVERNO_ENGINE, else next to mapc, else in PATH. It runs Kyverno's default configuration
(no resource filters, no excluded users or groups), the Fail policies before the Ignore ones as
Kyverno's two webhooks do, each group in the order of the input.

An object in a namespace not given fails when a mutator's match.namespaceSelector (where the
rest of its match holds) or a policy's or binding's namespaceSelector looks at labels other than
kubernetes.io/metadata.name, as gator refuses it; give the Namespace object with --namespaces
or -f. Namespaces not given are otherwise taken as not labelled admission.gatekeeper.sh/ignore
(a warning lists them). A policy expression that failed and that failurePolicy Ignore skipped
is named in the reason of a failing object (and noted under a passing one).

Policies given with --policies may have a paramKind: their bindings' paramRefs read the param
objects given with --params (as mapc eval does; a custom param kind needs its CRD with --crd), so
a hand-written policy that takes its values from a ConfigMap or a custom resource is checked
against the mutators with those values. Policies compiled from Kyverno policies with configMap
context entries read the ConfigMap as their param: give it with --params (Kyverno's engine reads
the same ConfigMaps).`,
		Example: `  mapc verify -f examples/gatekeeper -f examples/objects
  mapc verify -f mutators/ -f testdata/objects --idempotence -o junit > verify.xml
  mapc verify -f mutators/ -f objects/ --policies deploy/policies
  mapc verify -f mutators/ -f objects/ --policies by-team.yaml --params team-configmaps.yaml
  mapc verify -f kyverno-policies/ -f objects/ --policies deploy/policies --kyverno-engine bin/kyverno-engine`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.files = inputPaths(f.files, args)
			return runVerify(cmd, f)
		},
	}
	fl := c.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "mutators and objects: file, directory or - for stdin; repeatable")
	fl.StringArrayVar(&f.namespaces, "namespaces", nil, "more Namespace objects, for lookup only (not admitted); repeatable")
	f.install.add(fl)
	fl.StringArrayVar(&f.policies, "policies", nil, "verify these MutatingAdmissionPolicies and bindings instead of compiling the mutators; repeatable")
	fl.StringArrayVar(&f.params, "params", nil, "param objects the policies with a paramKind read (file or directory): ConfigMaps of Kyverno's configMap context entries, or those --policies read; repeatable")
	fl.StringArrayVar(&f.crds, "crd", nil, "CustomResourceDefinition file giving the schema of custom resources (objects and param kinds) to the policies; repeatable")
	fl.BoolVar(&f.idempotence, "idempotence", false, "also admit each result again and fail objects that change again")
	addFormatFlag(fl, &f.output, "text", "text", "json", "junit", "github")
	fl.StringVar(&f.kubeVersion, "kubernetes-version", compiler.DefaultKubernetesVersion, "target Kubernetes version (compilation, and checks of --policies)")
	fl.StringArrayVar(&f.allow, "allow-refusals", nil, "a RefusalAllowList file naming mutators that stay on Gatekeeper: their refusals do not fail verify, and the others are verified without them; repeatable")
	fl.Int64Var(&f.seed, "seed", 0, "seed of the shuffled policy orders tried when there are more than 24 orders")
	fl.StringVar(&f.kyvernoBin, "kyverno-engine", "", "the kyverno-engine program, Kyverno's engine (default $"+verify.KyvernoEngineEnv+", else next to mapc, else in PATH)")
	return c
}

func runVerify(cmd *cobra.Command, f *verifyFlags) error {
	quiet.Klog()
	stderr := cmd.ErrOrStderr()
	if len(f.files) == 0 {
		return usageErr("verify needs -f PATH of mutators and objects")
	}
	if err := f.output.check("verify"); err != nil {
		return err
	}
	kv, err := compiler.ParseVersion(f.kubeVersion)
	if err != nil {
		return usageErr("%v", err)
	}
	if countStdin(f.files, f.namespaces, f.policies, f.params, f.crds) > 1 {
		return usageErr("only one of -f, --namespaces, --policies, --params, --crd can read standard input")
	}
	docs, err := source.ReadPaths(f.files, cmd.InOrStdin())
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	sorted := compiler.Sort(docs)
	var mutDocs, cfgDocs []*source.Document
	for _, d := range sorted.Inputs[compiler.Gatekeeper] {
		if gatekeeper.IsConfig(d) {
			cfgDocs = append(cfgDocs, d)
		} else {
			mutDocs = append(mutDocs, d) // a misnamed one is refused by the compiler
		}
	}
	kyvDocs, objDocs := sorted.Inputs[compiler.Kyverno], sorted.Objects
	for _, d := range sorted.Related {
		fmt.Fprintf(stderr, "warning: %s:%d: %s %s is the configuration or a file of Gatekeeper or Kyverno, not an input policy or an object to admit; ignored\n", d.File, d.Line, d.Object.GetAPIVersion(), suite.Identity(d.Object))
	}
	for _, d := range sorted.Policies {
		fmt.Fprintf(stderr, "warning: %s:%d: %s is a policy; to verify policies give them with --policies (ignored)\n", d.File, d.Line, suite.Identity(d.Object))
	}
	if len(mutDocs) > 0 && len(kyvDocs) > 0 {
		return usageErr("verify takes one input language per run: %s:%d has a Gatekeeper mutator and %s:%d a Kyverno policy; verify them separately",
			mutDocs[0].File, mutDocs[0].Line, kyvDocs[0].File, kyvDocs[0].Line)
	}
	// What the input policies are called, and the engine they are verified against.
	inputs, engine := "mutators", "Gatekeeper"
	if len(kyvDocs) > 0 {
		inputs, engine = "Kyverno policies", "Kyverno"
		mutDocs = kyvDocs
		for _, d := range cfgDocs {
			fmt.Fprintf(stderr, "warning: %s:%d: Gatekeeper's Config does not apply to Kyverno policies; ignored\n", d.File, d.Line)
		}
		cfgDocs = nil
	}
	if len(mutDocs) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("no Gatekeeper mutators or Kyverno policies in %s", strings.Join(f.files, ", "))}
	}
	if len(objDocs) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("no objects to admit in %s", strings.Join(f.files, ", "))}
	}
	if err := source.CheckObjects(objDocs); err != nil {
		return &exitError{code: 1, err: err}
	}

	copts := compiler.Options{KubernetesVersion: kv}
	if err := f.install.apply(&copts); err != nil {
		return err
	}
	excluded, problems := gatekeeper.ConfigExclusions(cfgDocs)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, p.Error())
		}
		return &exitError{code: 1, err: fmt.Errorf("cannot read the Gatekeeper Config")}
	}
	excluded = append(append([]string(nil), copts.ExcludedNamespaces...), excluded...)
	var sets []admission.PolicySet
	kept := map[string]bool{}
	var skipped []verify.Skip
	if len(f.policies) > 0 {
		ps, err := readPolicies(cmd, f.policies, kv)
		if err != nil {
			return err
		}
		sets = ps.Sets
	} else {
		allow, err := readAllowLists(f.allow)
		if err != nil {
			return err
		}
		out := compiler.Compile(append(append([]*source.Document(nil), mutDocs...), cfgDocs...), copts)
		out.Allow(allow...)
		for _, m := range out.Mutators {
			if m.Status == compiler.Kept {
				kept[m.File+"\x00"+m.Mutator] = true
				skipped = append(skipped, verify.Skip{Case: "compile " + m.Mutator,
					Reason: strings.Join(m.Reasons, "; ") + "; not verified: " + engine + "'s webhook keeps mutating with it, and the policies are verified against " + engine + " without it"})
			}
		}
		for _, p := range out.Kept {
			fmt.Fprintln(stderr, "kept on "+engine+" (allowed refusal): "+p.Error())
		}
		for _, n := range out.Notes {
			if n.Kind.LeftOut() {
				fmt.Fprintln(stderr, "note: "+n.String())
			}
		}
		if len(out.Problems) > 0 {
			for _, p := range out.Problems {
				fmt.Fprintln(stderr, p.Error())
			}
			// Reports CI tools read show the refusals as failing cases.
			if f.output.value != "text" {
				rep := verify.Suite{Name: "mapc verify", Results: refusalResults(out.Problems)}
				if err := writeSuites(cmd.OutOrStdout(), f.output.value, "mapc verify", rep); err != nil {
					return &exitError{code: 1, err: err}
				}
			}
			return &exitError{code: 1, err: fmt.Errorf("%d problem(s) with the %s; no object verified", len(out.Problems), inputs)}
		}
		for _, p := range out.Policies {
			sets = append(sets, suite.PolicySet(p))
		}
	}
	nss, err := readNamespaces(cmd, f.namespaces, docs)
	if err != nil {
		return err
	}
	crds, err := readCRDs(cmd, f.crds)
	if err != nil {
		return err
	}
	params, err := readParams(cmd, f.params, sets)
	if err != nil {
		return err
	}
	var mutators []*unstructured.Unstructured
	for _, d := range mutDocs {
		if !kept[d.File+"\x00"+d.Object.GetKind()+"/"+d.Object.GetName()] {
			mutators = append(mutators, d.Object)
		}
	}
	vopts := verify.Options{Namespaces: nss, Idempotence: f.idempotence, Seed: f.seed,
		ExcludedNamespaces: excluded, MutateIgnoredNamespaces: f.install.mutateIgnoredNamespaces,
		NoWebhookSubresources: !f.install.webhookSubresources, GiveNamespacesWith: giveNamespacesWith,
		CRDs: crds, Params: suite.ParamObjects(params), GiveCRDsWith: giveCRDsWith}
	if len(kyvDocs) > 0 {
		path, err := verify.FindKyvernoEngine(f.kyvernoBin)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		ref, err := verify.NewKyvernoReferenceWithConfig(path, mutators, suite.ParamObjects(params), kyvernoConfigData(copts))
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		vopts.Reference, mutators = ref, nil
	}
	v, err := verify.NewSets(mutators, sets, vopts)
	if err != nil {
		if ref, ok := vopts.Reference.(*verify.KyvernoReference); ok {
			ref.Close()
		}
		return &exitError{code: 1, err: suite.PositionParamError(err, params, "--params")}
	}
	defer v.Close()
	ctx := context.Background()
	objects, err := inRequestNamespace(ctx, objDocs)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	// Kyverno's rules run on updates and kubectl debug's requests too, and may act on them
	// otherwise than on creates; an update of what they created is checked after the create,
	// and an update of the status where a rule is for it.
	var cases []verify.Case
	for _, obj := range objects {
		if len(kyvDocs) > 0 {
			cases = append(cases, verify.KyvernoCases(obj)...)
			if c, ok := vopts.Reference.(*verify.KyvernoReference).StatusCase(obj); ok {
				cases = append(cases, c)
			}
			continue
		}
		cases = append(cases, verify.Case{Object: obj})
		if c, ok := verify.DebugCase(obj); ok {
			cases = append(cases, c)
		}
		if c, ok := verify.ServiceStatusCase(obj); ok {
			cases = append(cases, c)
		}
		if c, ok := verify.BindingCase(obj); ok {
			cases = append(cases, c)
		}
	}
	what := "object(s)"
	if len(cases) != len(objects) {
		what = "request(s)"
	}
	var rs []verify.Result
	failed := 0
	var mu sync.Mutex
	done := progress(stderr, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("verifying %d of %d %s, %d failed", min(len(rs)+1, len(cases)), len(cases), what, failed)
	})
	for i := 0; i < len(cases); i++ {
		c := cases[i]
		r := v.Check(ctx, c)
		mu.Lock()
		if !r.Pass {
			failed++
		}
		rs = append(rs, r)
		if u, ok := verify.UpdateOfResult(c, r); ok && len(kyvDocs) > 0 {
			cases = append(cases, u)
		}
		mu.Unlock()
	}
	done()
	// The compiled policies read namespaces' labels only for the input policies' selectors, which
	// the reference checks; hand-written ones may read more.
	var reads map[string][]string
	if len(f.policies) > 0 {
		reads = v.NamespaceReads()
	}
	for _, w := range suite.NamespaceWarnings(v.AssumedNamespaces(), reads, giveNamespacesWith) {
		fmt.Fprintln(stderr, w)
	}
	w := cmd.OutOrStdout()
	rep := verify.Suite{Name: "mapc verify", Results: rs, Skipped: skipped}
	if err := writeSuites(w, f.output.value, "mapc verify", rep); err != nil {
		return &exitError{code: 1, err: err}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d %s are not mutated as %s mutates them", failed, len(rs), what, engine)}
	}
	return nil
}

// inRequestNamespace returns the objects as admission sees them: a namespaced object written
// without a namespace is created in the namespace of the request (default, as kubectl sends it),
// and the API server sets it on the object before any admission plugin or webhook runs, so
// Gatekeeper sees it too. Whether a kind is namespaced is the evaluator's REST mapping.
func inRequestNamespace(ctx context.Context, docs []*source.Document) ([]*unstructured.Unstructured, error) {
	var ev *admission.Evaluator
	defer func() {
		if ev != nil {
			ev.Close()
		}
	}()
	out := make([]*unstructured.Unstructured, len(docs))
	for i, d := range docs {
		out[i] = d.Object
		if d.Object.GetNamespace() != "" {
			continue
		}
		if ev == nil {
			var err error
			if ev, err = admission.New(admission.Options{}); err != nil {
				return nil, err
			}
		}
		got, err := ev.Admit(ctx, nil, admission.Request{Object: d.Object})
		if err != nil || got.GetNamespace() == "" {
			continue // not namespaced, or invalid: Check reports it
		}
		out[i] = d.Object.DeepCopy()
		out[i].SetNamespace(got.GetNamespace())
	}
	return out, nil
}

// refusalResults are the compile problems as failing results, one per problem.
func refusalResults(problems []error) []verify.Result {
	var rs []verify.Result
	for _, d := range diag.Problems(problems) {
		name := "compile"
		if d.Object != "" {
			name = "compile " + d.Object
		}
		reason := d.Msg
		if d.Field != "" {
			reason = d.Field + ": " + reason
		}
		rs = append(rs, verify.Result{Case: name, Reason: reason, File: d.File, Line: d.Line})
	}
	return rs
}
