package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mapc-dev/mapc/internal/quiet"
	"github.com/mapc-dev/mapc/suite"
	"github.com/mapc-dev/mapc/verify"
)

func newTestCmd() *cobra.Command {
	var output formatFlag
	c := &cobra.Command{
		Use:   "test SUITE... [-o text|json|junit|github]",
		Short: "Run test suites: admit objects through the policies and compare with the expected objects",
		Long: `test runs suite files: each lists sources (Gatekeeper mutators and Kyverno policies, which are
compiled, or ready MutatingAdmissionPolicy files), namespaces and cases (an object, the operation, and the expected
object or error). Every case is admitted through the API server's own MutatingAdmissionPolicy
code, in every order of the policies, and compared with what is expected. It prints PASS or FAIL
per case (with a diff, expected to got, and the failing policy order), then "N passed, M failed".
Exit status 1 if any case fails or a suite cannot run.

A SUITE is a file, or a directory searched for suite files. Three formats are read (see
docs/suites.md): mapc's own (apiVersion: mapc.dev/v1alpha1, kind: Test), kaptest manifests
(mapTestSuites, expectObject) and kyverno-test.yaml (results with patchedResources), as far as
they apply to MutatingAdmissionPolicies; the cases that do not are listed as SKIP. A
kyverno-test.yaml result for a Kyverno ClusterPolicy or Policy runs through the policy compiled
from it, after those compiled from the Kyverno policies listed before it, as kyverno test applies
them, and is judged as kyverno test judges it.

Policies with a paramKind read the param objects a suite gives (params: in mapc's format, a
test's param in kaptest's), resolved by the API server's own code.

A case whose object is in a namespace the suite does not give fails when that namespace's labels
matter (a namespaceSelector of a policy, binding or mutator that applies looks at labels other
than kubernetes.io/metadata.name). A failing expression that failurePolicy Ignore skipped is
noted under its case. Warnings (in the text report; on standard error with other formats) name
the namespaces not given that were taken as not labelled admission.gatekeeper.sh/ignore.`,
		Example: `  mapc test testdata/suites
  mapc test examples/params
  mapc test examples/kyverno
  mapc test policies.test.yaml -o junit > report.xml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			quiet.Klog()
			if len(args) == 0 {
				return usageErr("test needs at least one SUITE file or directory")
			}
			if err := output.check("test"); err != nil {
				return err
			}
			paths, err := suite.Find(args)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			w := cmd.OutOrStdout()
			var reports []verify.Suite
			passed, failed, skipped := 0, 0, 0
			ctx := context.Background()
			for _, p := range paths {
				s, err := suite.Load(p)
				if err != nil {
					failed++
					if output.value == "text" {
						fmt.Fprintf(w, "=== %s\nFAIL %s: the suite cannot be read:\n  %v\n", p, p, err)
					}
					reports = append(reports, verify.Suite{Name: p, Results: []verify.Result{{Case: "read", Reason: "the suite cannot be read: " + err.Error()}}})
					continue
				}
				o := suite.Run(ctx, s)
				if output.value == "text" {
					suite.WriteText(w, o)
				} else {
					for _, x := range o.Warnings { // "warning: ..." or "note: ...": name the suite
						kind, rest, _ := strings.Cut(x, ": ")
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s: %s\n", kind, p, rest)
					}
				}
				passed += o.Passed()
				failed += o.Failed()
				skipped += len(s.Skipped)
				reports = append(reports, o.Report())
			}
			switch output.value {
			case "json", "junit", "github":
				err = writeSuites(w, output.value, "mapc test", reports...)
			default:
				summary := fmt.Sprintf("%d passed, %d failed", passed, failed)
				if skipped > 0 {
					summary += fmt.Sprintf(", %d skipped", skipped)
				}
				_, err = fmt.Fprintln(w, summary)
			}
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			if failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d case(s) failed", failed)}
			}
			return nil
		},
	}
	addFormatFlag(c.Flags(), &output, "text", "text", "json", "junit", "github")
	return c
}
