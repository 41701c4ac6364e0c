package main

import (
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
)

// installFlags describe how Gatekeeper's webhook (or Kyverno) was installed: what it never
// mutated.
type installFlags struct {
	excludeNamespaces       []string
	mutateIgnoredNamespaces bool
	webhookSubresources     bool
	kyvernoConfig           string
}

func (f *installFlags) add(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.excludeNamespaces, "exclude-namespaces", nil, "namespaces Gatekeeper's webhook did not mutate in (its exempt namespaces; names, optionally with a leading or trailing *); every policy skips them. A Gatekeeper Config among the -f documents adds its excludedNamespaces for the mutation webhook")
	fl.BoolVar(&f.mutateIgnoredNamespaces, "mutate-ignored-namespaces", false, "also mutate in namespaces labelled "+gatekeeper.IgnoreLabel+" (by default the bindings skip them, as Gatekeeper's installed webhook does)")
	fl.BoolVar(&f.webhookSubresources, "webhook-subresources", true, "Gatekeeper's webhook is installed for the subresources its Helm chart adds (mutatingWebhookSubResources), so the policies match kubectl debug's pods/ephemeralcontainers, a Pod's pods/binding and a Service's services/status too; false where it is installed for resources only (its static manifest, deploy/gatekeeper.yaml)")
	fl.StringVar(&f.kyvernoConfig, "kyverno-config", "", "Kyverno's ConfigMap as installed (kubectl get configmap kyverno -n kyverno -o yaml): the policies compiled from Kyverno policies skip what its resourceFilters, excludeUsernames, excludeGroups, webhooks selectors and matchConditions make Kyverno skip, and verify runs Kyverno's engine with it")
}

// apply copies the flags into compiler options, checking the namespace patterns.
func (f *installFlags) apply(o *compiler.Options) error {
	if err := gatekeeper.CheckNamespaceWildcards(f.excludeNamespaces); err != nil {
		return usageErr("--exclude-namespaces: %v", err)
	}
	o.ExcludedNamespaces = f.excludeNamespaces
	o.MutateIgnoredNamespaces = f.mutateIgnoredNamespaces
	o.NoWebhookSubresources = !f.webhookSubresources
	if f.kyvernoConfig != "" {
		docs, err := source.ReadPaths([]string{f.kyvernoConfig}, nil)
		if err != nil {
			return usageErr("--kyverno-config: %v", err)
		}
		if len(docs) != 1 {
			return usageErr("--kyverno-config %s: %d documents; it must hold Kyverno's ConfigMap alone", f.kyvernoConfig, len(docs))
		}
		o.KyvernoConfig = docs[0]
	}
	return nil
}

// kyvernoConfigData is the data of the Kyverno ConfigMap of o (nil for none), for Kyverno's
// engine; its problems are reported by the compiler.
func kyvernoConfigData(o compiler.Options) map[string]string {
	if o.KyvernoConfig == nil {
		return nil
	}
	data, _, _ := unstructured.NestedStringMap(o.KyvernoConfig.Object.Object, "data")
	if data == nil {
		data = map[string]string{}
	}
	return data
}
