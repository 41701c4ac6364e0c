package main

import (
	"github.com/spf13/pflag"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
)

// installFlags describe how Gatekeeper's webhook was installed: what it never mutated.
type installFlags struct {
	excludeNamespaces       []string
	mutateIgnoredNamespaces bool
}

func (f *installFlags) add(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.excludeNamespaces, "exclude-namespaces", nil, "namespaces Gatekeeper's webhook did not mutate in (its exempt namespaces; names, optionally with a leading or trailing *); every policy skips them. A Gatekeeper Config among the -f documents adds its excludedNamespaces for the mutation webhook")
	fl.BoolVar(&f.mutateIgnoredNamespaces, "mutate-ignored-namespaces", false, "also mutate in namespaces labelled "+gatekeeper.IgnoreLabel+" (by default the bindings skip them, as Gatekeeper's installed webhook does)")
}

// apply copies the flags into compiler options, checking the namespace patterns.
func (f *installFlags) apply(o *compiler.Options) error {
	if err := gatekeeper.CheckNamespaceWildcards(f.excludeNamespaces); err != nil {
		return usageErr("--exclude-namespaces: %v", err)
	}
	o.ExcludedNamespaces = f.excludeNamespaces
	o.MutateIgnoredNamespaces = f.mutateIgnoredNamespaces
	return nil
}
