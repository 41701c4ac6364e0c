// Package route is the contract between the compiler (package compiler, which dispatches) and
// the pipeline of each input language: a Route claims the documents of its language and
// compiles them into policies, notes, problems and a report of every input policy, with the
// options every route takes.
//
// It holds types only. It must not import a front end, and no route imports another.
package route

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

// Route is one input language's way through the compiler.
type Route interface {
	// Input names one input policy of the language, for messages ("Gatekeeper mutator").
	Input() string
	// Kinds lists the kinds of its input policies (an allow-list names them Kind/name).
	Kinds() []string
	// ShortestName is the shortest name the route gives a policy, which a name prefix must
	// make a valid object name with.
	ShortestName() string
	// Claims: is d a document of this language (an input policy, one meant as one and
	// misspelt, or a document of its installation)?
	Claims(d *source.Document) bool
	// Related: is d another document of the language's engine (its configuration, CLI files,
	// resources of its API groups that are not input policies)? Commands leave those out of the
	// objects they admit.
	Related(d *source.Document) bool
	// Compile compiles the documents the route claimed (none, possibly: it still checks the
	// options that concern it).
	Compile(docs []*source.Document, opts Options) *Output
}

// Options are the compiler's settings.
type Options struct {
	KubernetesVersion *version.Version
	FailurePolicy     admissionregistrationv1.FailurePolicyType
	// Layout is LayoutFused (default) or LayoutPerMutator.
	Layout Layout
	// CRDs give the resource names of custom resources.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ExcludedNamespaces are namespaces (Gatekeeper wildcards: "x", "x*", "*x") Gatekeeper's
	// mutation webhook never mutated in: a Config's excludedNamespaces for the mutation webhook
	// (read from the documents too) and its exempt namespaces. Every policy skips them.
	ExcludedNamespaces []string
	// Reinvocation is the policies' reinvocationPolicy (default Never, as Gatekeeper's webhook is
	// installed). IfNeeded is safe: every mutation is guarded as Gatekeeper guards it, so running a
	// policy again on its own result changes nothing (verify --idempotence checks it); it helps
	// when other mutating admission (webhooks, other policies) runs after mapc's policies.
	Reinvocation admissionregistrationv1.ReinvocationPolicyType
	// MutateIgnoredNamespaces drops the exclusion of namespaces labelled
	// admission.gatekeeper.sh/ignore, which Gatekeeper's webhook (as its Helm chart and manifest
	// install it) is never called for.
	MutateIgnoredNamespaces bool
	// NoWebhookSubresources: Gatekeeper's webhook is installed for resources only (its static
	// manifest, or a Helm chart with mutatingWebhookSubResources empty), not for the
	// subresources the chart adds by default, so the policies match none of them.
	NoWebhookSubresources bool
	// NamePrefix starts every policy's and binding's name, so that compilations for different
	// teams can share a cluster.
	NamePrefix string
	// KyvernoConfig is Kyverno's ConfigMap as installed (nil: Kyverno's defaults, which filter
	// nothing): the policies compiled from Kyverno policies skip what its webhooks skip.
	KyvernoConfig *source.Document
}

// Layout says how mutations are spread over policies.
type Layout string

const (
	// LayoutFused puts every mutation that applies to the same resources into one policy and
	// fuses mutations that cannot affect each other into one expression: the fewest mutations
	// for the API server to run (each costs it about a millisecond of CPU).
	LayoutFused Layout = "fused"
	// LayoutPerMutator emits one policy per mutator (per group of interacting mutators), with
	// native match conditions: easy to read and to roll out one at a time.
	LayoutPerMutator Layout = "per-mutator"
)

// Output is what a route made of its documents.
type Output struct {
	Policies []*emit.Policy
	// Notes are informational: documents ignored, input policies that never apply or are
	// computed differently, and why; in the order the route found them.
	Notes []diag.Note
	// Problems are refusals and rejections (diag.Problem, or plain errors of the options).
	Problems []error
	// Mutators lists every input policy document with what became of it.
	Mutators []MutatorStatus
	// Installation says, a line each, what the installation of the engine mapc replaces (its
	// configuration) adds to the policies, for explain.
	Installation []string
	// Detail is the route's own account of how it compiled (its plan), for explain and tests.
	Detail any
}

// Status says what became of one input policy.
type Status string

const (
	// Compiled: its mutation is in the policies named.
	Compiled Status = "compiled"
	// LeftOut: no mutation was emitted, because it never changes an object (it never applies
	// to an admission request, or another input policy makes its write moot), as the reason says.
	LeftOut Status = "left-out"
	// Refused: it cannot be translated exactly, or is invalid; see the problems.
	Refused Status = "refused"
	// Kept: refused, and an allow-list keeps it on the engine mapc replaces during a partial
	// migration: still refused, listed, and no longer a failure.
	Kept Status = "kept-on-gatekeeper"
)

// MutatorStatus is one input policy's line of the compile report.
type MutatorStatus struct {
	Mutator  string   `json:"mutator"` // Kind/name
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Status   Status   `json:"status"`
	Policies []string `json:"policies,omitempty"`
	// Reasons say why it was left out or refused (every problem found with it).
	Reasons []string `json:"reasons,omitempty"`
}

// DefaultKubernetesVersion is the version compiled for when none is given.
const DefaultKubernetesVersion = "1.37"

// ParseVersion reads "1.34" or "1.34.2" and checks it is one MAP exists in.
func ParseVersion(s string) (*version.Version, error) {
	v, err := version.ParseGeneric(strings.TrimPrefix(s, "v"))
	if err != nil {
		return nil, fmt.Errorf("--kubernetes-version %q: %v", s, err)
	}
	if !v.AtLeast(version.MajorMinor(1, 32)) {
		return nil, fmt.Errorf("--kubernetes-version %s: MutatingAdmissionPolicy exists from Kubernetes 1.32 (alpha) on", s)
	}
	return version.MajorMinor(v.Major(), v.Minor()), nil
}
