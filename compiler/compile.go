// Package compiler wires the phases together: documents → front end (compiler/gatekeeper) →
// mutation IR → CEL (package cel) → MAP objects (package emit). It holds no translation logic of
// its own beyond choosing, per mutation, the match conditions and the patch expression.
package compiler

import (
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/ir"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

// DefaultKubernetesVersion is the version compiled for when none is given.
const DefaultKubernetesVersion = "1.37"

// Options are the compiler's settings.
type Options struct {
	KubernetesVersion *version.Version
	FailurePolicy     admissionregistrationv1.FailurePolicyType
}

// Output is what a compilation produced.
type Output struct {
	Policies []*emit.Policy
	// Notes are informational: ignored documents, mutators that never apply.
	Notes []string
	// Problems are refusals and rejections, each "file:line: Kind/name: field: message".
	Problems []error
}

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

// Compile translates every mutator among docs.
func Compile(docs []*source.Document, opts Options) *Output {
	if opts.KubernetesVersion == nil {
		opts.KubernetesVersion, _ = ParseVersion(DefaultKubernetesVersion)
	}
	env := cel.NewEnv(opts.KubernetesVersion)
	fe := gatekeeper.Compile(docs)
	out := &Output{Notes: fe.Notes}
	for _, p := range fe.Problems {
		out.Problems = append(out.Problems, p)
	}
	for _, m := range fe.Mutations {
		p, err := compileOne(env, m, opts)
		if err != nil {
			out.Problems = append(out.Problems, &gatekeeper.Problem{File: m.Source.File, Line: m.Source.Line, Object: m.Source.String(), Field: "spec.location", Msg: err.Error()})
			continue
		}
		out.Policies = append(out.Policies, p)
	}
	sort.SliceStable(out.Problems, func(i, j int) bool { return out.Problems[i].Error() < out.Problems[j].Error() })
	sort.SliceStable(out.Policies, func(i, j int) bool { return out.Policies[i].Policy.Name < out.Policies[j].Policy.Name })
	return out
}

func compileOne(env *cel.Env, m *ir.Mutation, opts Options) (*emit.Policy, error) {
	var conds []emit.Condition
	addCond := func(name string, e cel.Expr) error {
		if e == cel.True {
			return nil
		}
		s, err := env.Print(e)
		if err != nil {
			return err
		}
		if err := env.CheckCondition(s); err != nil {
			return err
		}
		conds = append(conds, emit.Condition{Name: name, Expression: s})
		return nil
	}
	if len(m.Match.Rules) == 0 || emit.NeedsKindCondition(m.Match) {
		var groups, kinds [][]string
		if len(m.Match.Rules) == 0 {
			for _, k := range m.Match.Kinds {
				groups, kinds = append(groups, k.Groups), append(kinds, k.Kinds)
			}
		} else {
			for _, r := range m.Match.Rules {
				groups, kinds = append(groups, []string{r.Group}), append(kinds, []string{r.Kind})
			}
		}
		if err := addCond("kinds", cel.KindsMatch(groups, kinds)); err != nil {
			return nil, err
		}
	}
	if len(m.Match.Rules) == 0 {
		// Gatekeeper's webhook never mutates its own objects.
		if err := addCond("not-gatekeeper-objects", cel.Not(cel.Method(cel.Field(cel.Field(cel.Ident("request"), "kind"), "group"), "endsWith", cel.Str(".gatekeeper.sh")))); err != nil {
			return nil, err
		}
	}
	if err := addCond("namespaces", cel.NamespacesMatch(m.Match.Namespaces)); err != nil {
		return nil, err
	}
	if err := addCond("excluded-namespaces", cel.ExcludedNamespacesMatch(m.Match.ExcludedNamespaces)); err != nil {
		return nil, err
	}
	if err := addCond("name", cel.NameMatch(m.Match.Name)); err != nil {
		return nil, err
	}
	e, err := cel.JSONPatch(m, env.Features())
	if err != nil {
		return nil, err
	}
	s, err := env.Print(e)
	if err != nil {
		return nil, err
	}
	if err := env.CheckJSONPatch(s); err != nil {
		return nil, err
	}
	return emit.NewPolicy(m, conds, []emit.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: s}}, emit.Options{FailurePolicy: opts.FailurePolicy})
}
