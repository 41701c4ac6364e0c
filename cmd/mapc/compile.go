package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/internal/version"
	"github.com/mapc-dev/mapc/verify"
)

type compileFlags struct {
	files           []string
	dir             string
	check           bool
	kubeVersion     string
	output          formatFlag
	failurePolicy   string
	crds            []string
	skipUnsupported bool
	allowEmpty      bool
	report          string
	namePrefix      string
	allowRefusals   []string
	reportFormat    string
	verbose         bool
	quiet           bool
	layout          string
	reinvocation    string
	install         installFlags
}

func newCompileCmd() *cobra.Command {
	f := &compileFlags{}
	c := &cobra.Command{
		Use:   "compile [PATH]... [-f PATH]... [-o yaml|json] [--output-dir DIR [--check]]",
		Short: "Compile mutators into MutatingAdmissionPolicies and bindings",
		Long: `compile reads Gatekeeper mutators and Kyverno policies from files, directories or standard
input (PATH arguments and -f alike) and writes the MutatingAdmissionPolicies and bindings that
mutate every object exactly as Gatekeeper's or Kyverno's engine does: to standard output (-o yaml or json), or with --output-dir
into a directory of one file per policy and a kustomization.yaml, replaced atomically.

Exit status: 0 ok; 1 a mutator was refused or invalid, no mutator was found (see --allow-empty),
a file could not be read, or --check found drift; 2 usage error. Every problem is listed on
stderr as file:line: Kind/name: field: what is wrong, and nothing is written unless
--skip-unsupported. A summary line on stderr ends every run. On a terminal, a run longer than a
second shows what it is doing on stderr, on one line cleared at the end.`,
		Example: `  mapc compile examples/gatekeeper
  mapc compile -f examples/kyverno/policies -o yaml
  mapc compile -f mutators/ --output-dir deploy/policies
  mapc compile -f mutators/ --output-dir deploy/policies --check
  kubectl get assign,assignmetadata,modifyset,assignimage -A -o yaml | mapc compile -f - -o json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.files = inputPaths(f.files, args)
			return runCompile(cmd, f)
		},
	}
	fl := c.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file, directory (recursive: .yaml .yml .json) or - for stdin; repeatable (PATH arguments are read alike)")
	addFormatFlag(fl, &f.output, "yaml", "yaml", "json")
	fl.StringVar(&f.dir, "output-dir", "", "write one file per policy (with its binding) and a kustomization.yaml into this directory, replacing it atomically (only a directory mapc wrote)")
	fl.BoolVar(&f.check, "check", false, "with --output-dir: write nothing; exit 1 with a diff if the directory differs from what would be generated")
	fl.StringVar(&f.kubeVersion, "kubernetes-version", compiler.DefaultKubernetesVersion, "target Kubernetes version: 1.36+ emits admissionregistration.k8s.io/v1, 1.34-1.35 v1beta1, 1.32-1.33 v1alpha1")
	fl.StringVar(&f.failurePolicy, "failure-policy", "Ignore", "Ignore (Gatekeeper's default: on error the object is admitted unmutated) or Fail")
	fl.StringArrayVar(&f.crds, "crd", nil, "CustomResourceDefinition file or directory, so that policies name custom resources by their plural (otherwise they match all resources of the group/version and check the kind in CEL); repeatable")
	fl.BoolVar(&f.skipUnsupported, "skip-unsupported", false, "write the policies that compile even if some mutators are refused (still listed, still exit 1)")
	fl.BoolVar(&f.allowEmpty, "allow-empty", false, "when the input holds no mutator, write an empty policy set instead of failing")
	fl.StringVar(&f.report, "report", "", "also write a report of every mutator (compiled into which policy, left out and why, refused and why) and every problem to this file (- for standard output, with --output-dir); written whether or not the compile succeeds")
	fl.StringVar(&f.reportFormat, "report-format", "json", "json, github (workflow commands that annotate the mutators' files) or sarif (for code-scanning tools)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "also list every note: documents ignored, mutators computed differently and why")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print no notes, only problems and the summary")
	fl.StringArrayVar(&f.allowRefusals, "allow-refusals", nil, "a RefusalAllowList file naming the mutators that stay on Gatekeeper during a partial migration: their refusals are listed but do not fail the run; an entry naming no refused mutator is an error; repeatable")
	fl.StringVar(&f.namePrefix, "name-prefix", "", "start every policy's and binding's name with this prefix (e.g. team-a-), so that several compilations can share a cluster")
	f.install.add(fl)
	fl.StringVar(&f.reinvocation, "reinvocation-policy", "Never", "Never (as Gatekeeper's webhook is installed) or IfNeeded (run again when later admission changed the object; safe, as every mutation is guarded as Gatekeeper guards it)")
	fl.StringVar(&f.layout, "layout", string(compiler.LayoutFused), "fused (one policy per set of resources, independent mutations fused: fastest) or per-mutator (one policy per mutator or group of interacting mutators: for one-at-a-time rollouts)")
	return c
}

func runCompile(cmd *cobra.Command, f *compileFlags) error {
	stderr := cmd.ErrOrStderr()
	if len(f.files) == 0 {
		return usageErr("compile needs at least one PATH (or -f PATH, - for standard input)")
	}
	if err := f.output.check("compile"); err != nil {
		return err
	}
	format := emit.Format(f.output.value)
	if f.dir != "" {
		if err := checkOutputDir(f.dir); err != nil {
			return err
		}
	}
	if err := oneOf("--failure-policy", f.failurePolicy, "Ignore", "Fail"); err != nil {
		return err
	}
	if err := oneOf("--reinvocation-policy", f.reinvocation, "Never", "IfNeeded"); err != nil {
		return err
	}
	if err := compiler.CheckNamePrefix(f.namePrefix); err != nil {
		return usageErr("%v", err)
	}
	if f.check && f.dir == "" {
		return usageErr("--check compares with a directory: give --output-dir DIR")
	}
	if err := oneOf("--report-format", f.reportFormat, "json", "github", "sarif"); err != nil {
		return err
	}
	if f.report == "-" && f.dir == "" {
		return usageErr("--report -: standard output carries the policies; give --output-dir DIR, or --report FILE")
	}
	if f.quiet && f.verbose {
		return usageErr("--quiet and --verbose contradict each other: give one")
	}
	kv, err := compiler.ParseVersion(f.kubeVersion)
	if err != nil {
		return usageErr("%v", err)
	}
	layout, err := parseLayout(f.layout)
	if err != nil {
		return err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	if len(f.crds) > 0 {
		crdDocs, err := source.ReadPaths(f.crds, nil)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		if crds, err = compiler.CRDs(crdDocs); err != nil {
			return &exitError{code: 1, err: err}
		}
		if len(crds) == 0 {
			return &exitError{code: 1, err: fmt.Errorf("--crd %s: no CustomResourceDefinition found", strings.Join(f.crds, ", "))}
		}
	}
	allow, err := readAllowLists(f.allowRefusals)
	if err != nil {
		return err
	}
	docs, err := source.ReadPaths(f.files, cmd.InOrStdin())
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("%v\nnothing written", err)}
	}
	opts := compiler.Options{KubernetesVersion: kv, Layout: layout, CRDs: crds,
		FailurePolicy: admissionregistrationv1.FailurePolicyType(f.failurePolicy),
		Reinvocation:  admissionregistrationv1.ReinvocationPolicyType(f.reinvocation),
		NamePrefix:    f.namePrefix}
	if err := f.install.apply(&opts); err != nil {
		return err
	}
	done := progress(stderr, func() string { return fmt.Sprintf("compiling %d documents", len(docs)) })
	out := compiler.Compile(docs, opts)
	done()
	apiVersion := emit.APIVersion(kv)
	warnings, sizeErr := emit.CheckSizes(out.Policies, apiVersion)
	if sizeErr != nil {
		out.Problems = append(out.Problems, sizeErr)
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	out.Allow(allow...)
	if !f.quiet {
		// Without --verbose, the notes that say a mutator gets no policy or no mutation, so that
		// nobody wonders where it went.
		for _, n := range out.Notes {
			if f.verbose || n.Kind.LeftOut() {
				fmt.Fprintln(stderr, "note: "+n.String())
			}
		}
	}
	for _, p := range out.Kept {
		fmt.Fprintln(stderr, "kept on Gatekeeper (allowed refusal): "+p.Error())
	}
	for _, p := range out.Problems {
		fmt.Fprintln(stderr, p.Error())
	}
	summary := compileSummary(docs, out)
	if f.report != "" {
		if err := writeReport(cmd, f, kv.String(), layout, summary, out); err != nil {
			return &exitError{code: 1, err: err}
		}
	}
	if len(out.Mutators) == 0 && len(out.Problems) == 0 && !f.allowEmpty {
		fmt.Fprintln(stderr, "mapc: "+summary)
		return &exitError{code: 1, err: fmt.Errorf("no Gatekeeper mutator or Kyverno policy found in %s; nothing written (an empty input is most often a failed 'kubectl get' or a wrong path; --allow-empty writes an empty policy set)", strings.Join(f.files, ", "))}
	}
	failed := len(out.Problems) > 0
	if failed && !f.skipUnsupported {
		fmt.Fprintln(stderr, "mapc: "+summary)
		return &exitError{code: 1, err: fmt.Errorf("%d problem(s); nothing written (--skip-unsupported writes the policies that compile)", len(out.Problems))}
	}
	ver := version.Get().Version
	if f.dir == "" {
		data, err := emit.Stream(out.Policies, apiVersion, format)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		if _, err := cmd.OutOrStdout().Write(emit.Stamp(data, ver)); err != nil {
			return &exitError{code: 1, err: err}
		}
	} else {
		files, err := emit.Files(out.Policies, apiVersion, format)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		files = emit.StampFiles(files, ver)
		if f.check {
			d, err := emit.Diff(f.dir, files)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if d != "" {
				fmt.Fprint(cmd.OutOrStdout(), d)
				fmt.Fprintln(stderr, "mapc: "+summary)
				if only, was := emit.VersionDrift(f.dir, files); only {
					return &exitError{code: 1, err: fmt.Errorf("%s differs only in the mapc version its headers name: it was generated by mapc %s, this is mapc %s; the policies are the same (run without --check to update the headers)", f.dir, strings.Join(was, ", "), ver)}
				}
				return &exitError{code: 1, err: fmt.Errorf("%s is not what the mutators compile to (run without --check to update it)", f.dir)}
			}
		} else if err := emit.WriteDir(f.dir, files); err != nil {
			return &exitError{code: 1, err: err}
		}
	}
	fmt.Fprintln(stderr, "mapc: "+summary)
	if failed {
		return &exitError{code: 1, err: fmt.Errorf("%d problem(s); the policies that compile were written without the refused mutators", len(out.Problems))}
	}
	return nil
}

// compileSummary is the one line that ends every compile.
func compileSummary(docs []*source.Document, out *compiler.Output) string {
	found := "input policies"
	if len(out.Mutators) == 1 {
		found = "input policy"
	}
	s := fmt.Sprintf("%d document(s) read, %d %s found: %d compiled into %d policies", len(docs), len(out.Mutators), found, compiler.Count(out.Mutators, compiler.Compiled), len(out.Policies))
	if n := compiler.Count(out.Mutators, compiler.LeftOut); n > 0 {
		s += fmt.Sprintf(", %d left out (they never change an object: the notes and --report say why)", n)
	}
	if n := compiler.Count(out.Mutators, compiler.Refused); n > 0 {
		s += fmt.Sprintf(", %d refused", n)
	}
	if n := compiler.Count(out.Mutators, compiler.Kept); n > 0 {
		s += fmt.Sprintf(", %d kept on Gatekeeper by the allow-list", n)
	}
	if len(out.Problems) > 0 {
		s += fmt.Sprintf(", %d problem(s)", len(out.Problems))
	}
	return s
}

func parseLayout(s string) (compiler.Layout, error) {
	switch l := compiler.Layout(s); l {
	case compiler.LayoutFused, compiler.LayoutPerMutator:
		return l, nil
	}
	return "", usageErr("--layout %q: use fused or per-mutator", s)
}

// oneOf checks an enumerated flag's value.
func oneOf(flag, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usageErr("%s %q: use %s", flag, v, strings.Join(allowed, " or "))
}

// compileReport is what --report writes: every mutator, every problem and the policies.
type compileReport struct {
	Mapc              string                   `json:"mapc"`
	KubernetesVersion string                   `json:"kubernetesVersion"`
	Layout            compiler.Layout          `json:"layout"`
	Summary           string                   `json:"summary"`
	Policies          []string                 `json:"policies"`
	Mutators          []compiler.MutatorStatus `json:"mutators"`
	Problems          []diag.Problem           `json:"problems"`
	// Kept are the refusals an allow-list expects.
	Kept []diag.Problem `json:"kept,omitempty"`
}

func writeReport(cmd *cobra.Command, f *compileFlags, kv string, layout compiler.Layout, summary string, out *compiler.Output) error {
	rep := compileReport{Mapc: version.Get().Version, KubernetesVersion: kv, Layout: layout, Summary: summary,
		Policies: []string{}, Mutators: out.Mutators, Problems: diag.Problems(out.Problems), Kept: diag.Problems(out.Kept)}
	if rep.Mutators == nil {
		rep.Mutators = []compiler.MutatorStatus{}
	}
	for _, p := range out.Policies {
		rep.Policies = append(rep.Policies, p.Policy.Name)
	}
	var b bytes.Buffer
	if f.reportFormat == "github" {
		for _, d := range rep.Problems {
			fmt.Fprintf(&b, "::error %s::%s\n", githubLocation(d.File, d.Line, d.Object), githubMessage(d))
		}
		for _, m := range rep.Mutators {
			if m.Status == compiler.LeftOut {
				fmt.Fprintf(&b, "::notice %s::%s\n", githubLocation(m.File, m.Line, m.Mutator), verify.GitHubEscape("left out: "+strings.Join(m.Reasons, "; "), false))
			}
		}
		fmt.Fprintf(&b, "%s\n", summary)
	} else if f.reportFormat == "sarif" {
		data, err := sarifReport(rep)
		if err != nil {
			return err
		}
		b.Write(data)
		b.WriteByte('\n')
	} else {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	if f.report == "-" {
		_, err := cmd.OutOrStdout().Write(b.Bytes())
		return err
	}
	return os.WriteFile(f.report, b.Bytes(), 0o644)
}

func githubLocation(file string, line int, title string) string {
	return verify.GitHubProperties(file, line, title)
}

func githubMessage(d diag.Problem) string {
	msg := d.Msg
	if d.Field != "" {
		msg = d.Field + ": " + msg
	}
	return verify.GitHubEscape(msg, false)
}

func readAllowLists(paths []string) ([]*compiler.AllowList, error) {
	var lists []*compiler.AllowList
	for _, p := range paths {
		l, err := compiler.ReadAllowList(p)
		if err != nil {
			return nil, &exitError{code: 1, err: err}
		}
		lists = append(lists, l)
	}
	return lists, nil
}
