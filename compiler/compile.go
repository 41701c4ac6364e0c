// Package compiler is the dispatcher: Compile gives every document to the route of its input
// language (compiler/route; Gatekeeper's is compiler/gatekeeper/backend), notes the documents
// no route claims, and joins what the routes made into one Output: policies sorted by name,
// problems sorted by position, notes in phases (the installation, then each document in input
// order, then what the back ends decided), and a report of every input policy.
//
// It holds no translation logic: a front end and its back end own their pipeline, and no route
// imports another.
package compiler

import (
	"k8s.io/apimachinery/pkg/util/version"

	"fmt"
	"sort"
	"strings"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/backend"
	kyvernobackend "github.com/mapc-dev/mapc/compiler/kyverno/backend"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

// routes are the input languages, each claiming its documents; the first that claims a
// document gets it.
var routes = []route.Route{backend.Route{}, kyvernobackend.Route{}}

// The input languages, as Documents.Inputs names them.
var (
	Gatekeeper = backend.Route{}.Input()
	Kyverno    = kyvernobackend.Route{}.Input()
)

// DefaultKubernetesVersion is the version compiled for when none is given.
const DefaultKubernetesVersion = route.DefaultKubernetesVersion

// ParseVersion reads "1.34" or "1.34.2" and checks it is one MAP exists in.
func ParseVersion(s string) (*version.Version, error) { return route.ParseVersion(s) }

// Options are the compiler's settings (route.Options).
type Options = route.Options

// Layout says how mutations are spread over policies (route.Layout).
type Layout = route.Layout

// The layouts (route.LayoutFused, route.LayoutPerMutator).
const (
	LayoutFused      = route.LayoutFused
	LayoutPerMutator = route.LayoutPerMutator
)

// Output is what a compilation produced.
type Output struct {
	Policies []*emit.Policy
	// Notes are informational: ignored documents, mutators that never apply or are computed
	// differently, and why.
	Notes []diag.Note
	// Problems are refusals and rejections, each "file:line: Kind/name: field: message".
	Problems []error
	// Mutators lists every input policy document with what became of it, in file and line order.
	Mutators []MutatorStatus
	// Kept are the refusals an allow-list expects (Allow): listed, not failures.
	Kept []error
	// Installation says what the installations of the engines replaced add to the policies
	// (route.Output.Installation), for explain.
	Installation []string
	// Plan is how Gatekeeper's route compiled its mutators (groups, rounds, rewrites, the
	// installation context), for explain and tests.
	backend.Plan
}

// CheckNamePrefix checks a --name-prefix against the names every route gives its policies.
func CheckNamePrefix(prefix string) error {
	for _, r := range routes {
		if err := emit.CheckNamePrefix(prefix, r.ShortestName()); err != nil {
			return err
		}
	}
	return nil
}

// inputs names the input policies of every route, for the note on a document none claims.
func inputs() string {
	var names []string
	for _, r := range routes {
		names = append(names, r.Input())
	}
	return strings.Join(names, " or ")
}

// Compile translates every input policy among docs.
func Compile(docs []*source.Document, opts Options) *Output {
	if err := CheckNamePrefix(opts.NamePrefix); err != nil {
		return &Output{Problems: []error{err}}
	}
	if opts.KubernetesVersion == nil {
		opts.KubernetesVersion, _ = ParseVersion(DefaultKubernetesVersion)
	}
	sorted := Sort(docs)
	shares := make([][]*source.Document, len(routes))
	for i, r := range routes {
		shares[i] = sorted.Inputs[r.Input()]
	}
	var notes []diag.Note
	for _, group := range [][]*source.Document{sorted.Related, sorted.Policies, sorted.Objects} {
		for _, d := range group {
			obj := d.Object
			notes = append(notes, diag.Note{Kind: diag.Ignored, File: d.File, Line: d.Line,
				Msg: fmt.Sprintf("%s %s/%s is not a %s; ignored", obj.GetAPIVersion(), obj.GetKind(), obj.GetName(), inputs())})
		}
	}
	out := &Output{}
	for i, r := range routes {
		ro := r.Compile(shares[i], opts)
		out.Policies = append(out.Policies, ro.Policies...)
		notes = append(notes, ro.Notes...)
		out.Problems = append(out.Problems, ro.Problems...)
		out.Mutators = append(out.Mutators, ro.Mutators...)
		out.Installation = append(out.Installation, ro.Installation...)
		if p, ok := ro.Detail.(*backend.Plan); ok {
			out.Plan = *p
		}
	}
	out.Notes = inPhases(docs, notes)
	diag.Sort(out.Problems)
	sort.SliceStable(out.Policies, func(i, j int) bool { return out.Policies[i].Policy.Name < out.Policies[j].Policy.Name })
	sort.SliceStable(out.Mutators, func(i, j int) bool {
		if out.Mutators[i].File != out.Mutators[j].File {
			return out.Mutators[i].File < out.Mutators[j].File
		}
		return out.Mutators[i].Line < out.Mutators[j].Line
	})
	return out
}

// inPhases orders notes: the installation's first, then the notes about single documents
// (ignored, never applying) in the order of the documents, then the rest as they came.
func inPhases(docs []*source.Document, notes []diag.Note) []diag.Note {
	type pos struct {
		file string
		line int
	}
	at := map[pos]int{}
	for i, d := range docs {
		if _, ok := at[pos{d.File, d.Line}]; !ok {
			at[pos{d.File, d.Line}] = i
		}
	}
	phase := func(n diag.Note) (int, int) {
		switch n.Kind {
		case diag.Installation:
			return 0, 0
		case diag.Ignored, diag.NeverApplies:
			return 1, at[pos{n.File, n.Line}]
		}
		return 2, 0
	}
	out := append([]diag.Note(nil), notes...)
	sort.SliceStable(out, func(i, j int) bool {
		pi, di := phase(out[i])
		pj, dj := phase(out[j])
		if pi != pj {
			return pi < pj
		}
		return di < dj
	})
	return out
}
