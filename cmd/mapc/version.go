package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mapc-dev/mapc/internal/version"
)

func newVersionCmd() *cobra.Command {
	var output formatFlag
	c := &cobra.Command{
		Use:   "version [-o text|json]",
		Short: "Print mapc's version, commit, and the versions of the engines it reproduces and runs",
		Long: `version prints mapc's module version (a release, or a pseudo-version naming the commit of a
build from a checkout), the commit and whether the tree was modified, the Go toolchain, and the
versions of the libraries that decide its results: Gatekeeper's engine, the Kubernetes API server's
admission code and API types, and CEL. Generated files name the same version in their header.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.check("version"); err != nil {
				return err
			}
			info := version.Get()
			w := cmd.OutOrStdout()
			if output.value == "json" {
				data, err := json.MarshalIndent(info, "", "  ")
				if err != nil {
					return &exitError{code: 1, err: err}
				}
				fmt.Fprintf(w, "%s\n", data)
				return nil
			}
			fmt.Fprintf(w, "mapc %s\n", info.Version)
			if info.Commit != "" {
				mod := ""
				if info.Modified {
					mod = " (modified)"
				}
				fmt.Fprintf(w, "  commit: %s%s\n", info.Commit, mod)
			}
			fmt.Fprintf(w, "  go: %s\n", info.Go)
			for _, l := range info.Libraries {
				fmt.Fprintf(w, "  %s: %s %s\n", l.Role, l.Path, l.Version)
			}
			return nil
		},
	}
	addFormatFlag(c.Flags(), &output, "text", "text", "json")
	return c
}
