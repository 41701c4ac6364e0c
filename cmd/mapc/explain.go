package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
)

func newExplainCmd() *cobra.Command {
	var files []string
	var kubeVersion, output, layoutFlag string
	var install installFlags
	c := &cobra.Command{
		Use:   "explain -f PATH [-f PATH]...",
		Short: "Show the plan: which mutators share a policy, why, in what order and how many rounds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageErr("explain needs at least one -f PATH")
			}
			kv, err := compiler.ParseVersion(kubeVersion)
			if err != nil {
				return usageErr("%v", err)
			}
			layout, err := parseLayout(layoutFlag)
			if err != nil {
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
			out := compiler.Compile(docs, opts)
			for _, p := range out.Problems {
				fmt.Fprintln(cmd.ErrOrStderr(), p.Error())
			}
			switch output {
			case "json":
				err = explainJSON(cmd.OutOrStdout(), out)
			case "text":
				explainText(cmd.OutOrStdout(), out)
			default:
				return usageErr("--output %q: use text or json", output)
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if len(out.Problems) > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d mutator(s) refused", len(out.Problems))}
			}
			return nil
		},
	}
	c.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - for stdin; repeatable")
	c.Flags().StringVar(&kubeVersion, "kubernetes-version", compiler.DefaultKubernetesVersion, "target Kubernetes version")
	c.Flags().StringVar(&output, "output", "text", "text or json")
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
}

type explainedInstall struct {
	ExcludedNamespaces     []string `json:"excludedNamespaces,omitempty"`
	SkipsIgnoredNamespaces bool     `json:"skipsIgnoredNamespaces"`
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
		}
		if i < len(out.PolicyOf) && out.PolicyOf[i] != nil {
			eg.Policy = out.PolicyOf[i].Policy.Name
			eg.Mutations = len(out.PolicyOf[i].Policy.Spec.Mutations)
		}
		gs = append(gs, eg)
	}
	return gs
}

func explainJSON(w io.Writer, out *compiler.Output) error {
	data, err := json.MarshalIndent(map[string]any{"groups": explained(out),
		"installation": explainedInstall{out.ExcludedNamespaces, out.SkipsIgnoredNamespaces}}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func explainText(w io.Writer, out *compiler.Output) {
	if out.SkipsIgnoredNamespaces {
		fmt.Fprintf(w, "installation: the bindings skip namespaces labelled %s (Gatekeeper's webhook is installed so)\n", compiler.IgnoreLabel)
	}
	if len(out.ExcludedNamespaces) > 0 {
		fmt.Fprintf(w, "installation: every policy skips the namespaces %s (Config, --exclude-namespaces)\n", strings.Join(out.ExcludedNamespaces, ", "))
	}
	for _, g := range explained(out) {
		if len(g.Mutators) == 1 {
			fmt.Fprintf(w, "%s: %s alone (interacts with no other mutator), %d mutation(s)\n", g.Policy, g.Mutators[0], g.Mutations)
			continue
		}
		fmt.Fprintf(w, "%s: %d mutators in Gatekeeper's order, %d round(s), %d mutation(s)\n", g.Policy, len(g.Mutators), g.Rounds, g.Mutations)
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
	}
}
