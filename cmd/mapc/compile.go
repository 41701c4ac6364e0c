package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

type compileFlags struct {
	files           []string
	out             string
	check           bool
	kubeVersion     string
	output          string
	failurePolicy   string
	crds            []string
	skipUnsupported bool
	verbose         bool
	layout          string
	reinvocation    string
	install         installFlags
}

func newCompileCmd() *cobra.Command {
	f := &compileFlags{}
	c := &cobra.Command{
		Use:   "compile -f PATH [-f PATH]... [-o DIR | -o -]",
		Short: "Compile mutators into MutatingAdmissionPolicies and bindings",
		Example: `  mapc compile -f examples/gatekeeper -o -
  mapc compile -f mutators/ -o deploy/policies
  mapc compile -f mutators/ -o deploy/policies --check`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCompile(cmd, f) },
	}
	fl := c.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file, directory (recursive: .yaml .yml .json) or - for stdin; repeatable")
	fl.StringVarP(&f.out, "output-dir", "o", "-", "directory to write (one file per policy and a kustomization.yaml), or - for stdout")
	fl.BoolVar(&f.check, "check", false, "write nothing; exit 1 with a diff if -o DIR differs from what would be generated")
	fl.StringVar(&f.kubeVersion, "kubernetes-version", compiler.DefaultKubernetesVersion, "target Kubernetes version: 1.36+ emits admissionregistration.k8s.io/v1, 1.34-1.35 v1beta1, 1.32-1.33 v1alpha1")
	fl.StringVar(&f.output, "output", "yaml", "yaml or json")
	fl.StringVar(&f.failurePolicy, "failure-policy", "Ignore", "Ignore (Gatekeeper's default: on error the object is admitted unmutated) or Fail")
	fl.StringArrayVar(&f.crds, "crd", nil, "CustomResourceDefinition file or directory, so that policies name custom resources by their plural (otherwise they match all resources of the group/version and check the kind in CEL); repeatable")
	fl.BoolVar(&f.skipUnsupported, "skip-unsupported", false, "write the policies that compile even if some mutators are refused (still listed, still exit 1)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "also say which documents were ignored and why")
	f.install.add(fl)
	fl.StringVar(&f.reinvocation, "reinvocation-policy", "Never", "Never (as Gatekeeper's webhook is installed) or IfNeeded (run again when later admission changed the object; safe, as every mutation is guarded as Gatekeeper guards it)")
	fl.StringVar(&f.layout, "layout", string(compiler.LayoutFused), "fused (one policy per set of resources, independent mutations fused: fastest) or per-mutator (one policy per mutator or group of interacting mutators: for one-at-a-time rollouts)")
	return c
}

func runCompile(cmd *cobra.Command, f *compileFlags) error {
	stderr := cmd.ErrOrStderr()
	if len(f.files) == 0 {
		return usageErr("compile needs at least one -f PATH")
	}
	format := emit.Format(f.output)
	if format != emit.YAML && format != emit.JSON {
		return usageErr("--output %q: use yaml or json", f.output)
	}
	if err := oneOf("--failure-policy", f.failurePolicy, "Ignore", "Fail"); err != nil {
		return err
	}
	if err := oneOf("--reinvocation-policy", f.reinvocation, "Never", "IfNeeded"); err != nil {
		return err
	}
	if f.check && f.out == "-" {
		return usageErr("--check compares with a directory: give -o DIR")
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
	docs, err := source.ReadPaths(f.files, cmd.InOrStdin())
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	opts := compiler.Options{KubernetesVersion: kv, Layout: layout, CRDs: crds,
		FailurePolicy: admissionregistrationv1.FailurePolicyType(f.failurePolicy),
		Reinvocation:  admissionregistrationv1.ReinvocationPolicyType(f.reinvocation)}
	if err := f.install.apply(&opts); err != nil {
		return err
	}
	out := compiler.Compile(docs, opts)
	if f.verbose {
		for _, n := range out.Notes {
			fmt.Fprintln(stderr, "note: "+n)
		}
	} else {
		for _, n := range out.Notes {
			if shownNote(n) {
				fmt.Fprintln(stderr, "note: "+n)
			}
		}
	}
	for _, p := range out.Problems {
		fmt.Fprintln(stderr, p.Error())
	}
	failed := len(out.Problems) > 0
	if failed && !f.skipUnsupported {
		return &exitError{code: 1, err: fmt.Errorf("%d mutator(s) refused; nothing written (use --skip-unsupported to write the rest)", len(out.Problems))}
	}
	apiVersion := emit.APIVersion(kv)
	if f.out == "-" {
		data, err := emit.Stream(out.Policies, apiVersion, format)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		if _, err := cmd.OutOrStdout().Write(data); err != nil {
			return &exitError{code: 1, err: err}
		}
	} else {
		files, err := emit.Files(out.Policies, apiVersion, format)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		if f.check {
			d, err := emit.Diff(f.out, files)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if d != "" {
				fmt.Fprint(cmd.OutOrStdout(), d)
				return &exitError{code: 1, err: fmt.Errorf("%s is not what the mutators compile to (run without --check to update it)", f.out)}
			}
		} else if err := emit.WriteDir(f.out, files); err != nil {
			return &exitError{code: 1, err: err}
		}
	}
	if failed {
		return &exitError{code: 1, err: fmt.Errorf("%d mutator(s) refused; the others were written", len(out.Problems))}
	}
	return nil
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

// shownNote: is note n printed without --verbose? Those that say a mutator gets no policy or no
// mutation, so that nobody wonders where it went.
func shownNote(n string) bool {
	return strings.Contains(n, "no policy emitted") || strings.Contains(n, "no mutation emitted")
}
