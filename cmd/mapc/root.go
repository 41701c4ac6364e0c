package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/mapc-dev/mapc/internal/version"
)

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "mapc",
		Short: "Compile Gatekeeper mutators and Kyverno mutate rules into native MutatingAdmissionPolicies",
		Long: `mapc compiles Gatekeeper mutators (Assign, AssignMetadata, ModifySet, AssignImage) and
Kyverno's mutate rules (ClusterPolicy, Policy) into Kubernetes MutatingAdmissionPolicy and
MutatingAdmissionPolicyBinding objects that mutate every object exactly as Gatekeeper's or
Kyverno's engine does, or refuses, saying why.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%v (see '%s --help')", err, c.CommandPath())
	})
	root.Version = version.Get().String()
	root.SetVersionTemplate("mapc {{.Version}}\n")
	root.AddCommand(newCompileCmd(), newExplainCmd(), newEvalCmd(), newVerifyCmd(), newTestCmd(), newVersionCmd())
	return root
}
