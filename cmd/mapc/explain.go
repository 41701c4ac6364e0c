package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
)

func newExplainCmd() *cobra.Command {
	var files []string
	var kubeVersion, output, layoutFlag string
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
			out := compiler.Compile(docs, compiler.Options{KubernetesVersion: kv, Layout: layout})
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
	c.Flags().StringVar(&layoutFlag, "layout", string(compiler.LayoutFused), "fused or per-mutator")
	return c
}

type explainedGroup struct {
	Policy    string   `json:"policy"`
	Mutators  []string `json:"mutators"`
	Rounds    int      `json:"rounds"`
	Mutations int      `json:"mutations"`
	Why       []string `json:"why,omitempty"`
}

func explained(out *compiler.Output) []explainedGroup {
	var gs []explainedGroup
	for i, g := range out.Groups {
		eg := explainedGroup{Rounds: g.Rounds, Why: g.Why}
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
	data, err := json.MarshalIndent(map[string]any{"groups": explained(out)}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func explainText(w io.Writer, out *compiler.Output) {
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
	}
}
