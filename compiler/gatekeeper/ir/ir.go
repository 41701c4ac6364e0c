// Package ir is Gatekeeper's mutation IR: the contract between its front end (package
// gatekeeper), which lowers each mutator into a Mutation, and its back end (packages plan, lower
// and backend), which never looks at the input documents again.
//
// The IR states what a mutation does in Gatekeeper's engine's terms — a path of steps, what each
// step tolerates (pathTests), and the operation at its end — and nothing about CEL or patch
// types. Another input language brings its own model rather than bending this one. It must not
// import anything of mapc's.
package ir

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Source names the document a Mutation came from, for error messages and annotations.
type Source struct {
	File       string
	Line       int
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// String is "Kind/name", as used in messages.
func (s Source) String() string { return s.Kind + "/" + s.Name }

// Mutation is one input mutator, lowered.
type Mutation struct {
	Source Source
	// SortKey orders mutations as the reference engine does (Gatekeeper sorts by group, kind,
	// namespace, name).
	SortKey string

	Match Match
	// Path is where the mutation acts; never empty.
	Path []Step
	// ExistsOK[i] and MissingOK[i] say whether the walk may go on when the element at Path[i]
	// exists or is missing (Gatekeeper's pathTests; AssignMetadata's add-only rule).
	ExistsOK  []bool
	MissingOK []bool
	Op        Op
	// Completions are the other mutations that change the list element this mutation creates,
	// in Gatekeeper's order: the new element is written as they leave it (plan.Complete).
	Completions []Completion
}

// WithTest is a copy of m whose walk at Path[i] goes on only as existsOK and missingOK say (a
// pathTest there): the planner's rules compute some mutations with a test they do not have.
func (m *Mutation) WithTest(i int, existsOK, missingOK bool) *Mutation {
	c := *m
	c.ExistsOK = append([]bool(nil), m.ExistsOK...)
	c.MissingOK = append([]bool(nil), m.MissingOK...)
	c.ExistsOK[i], c.MissingOK[i] = existsOK, missingOK
	return &c
}

// Completion names a mutation By that changes the list element the mutation creates in
// Gatekeeper's run, whenever By's match holds: the element is written as Gatekeeper leaves it
// (lower.CompleteElement computes it from the mutations named).
type Completion struct {
	By *Mutation
}

// Step is one element of a path: an object field, or a list element selected by key or glob.
type Step struct {
	// Field is set for an object field step.
	Field string
	// List steps: elements whose KeyField equals KeyValue, or every element when Glob.
	List     bool
	KeyField string
	KeyValue string
	Glob     bool
}

// Match says which admission requests a mutation applies to.
type Match struct {
	// Rules are the (group, version, kind) combinations and operations the mutation applies to.
	// Empty means every kind.
	Rules []Rule
	// Operations is used when Rules is empty.
	Operations []string
	// Scope is "", "Namespaced" or "Cluster" (Gatekeeper's meaning: Namespace objects count as
	// cluster-scoped).
	Scope string
	// Namespaces and ExcludedNamespaces hold Gatekeeper wildcards: "x", "x*", "*x", "*x*".
	Namespaces         []string
	ExcludedNamespaces []string
	// Name is a Gatekeeper wildcard over metadata.name (and generateName prefixes).
	Name              string
	LabelSelector     *metav1.LabelSelector
	NamespaceSelector *metav1.LabelSelector
	// Kinds restricts by (group, kind) when Rules is empty (AssignMetadata has no applyTo).
	Kinds []GroupKinds
}

// MayMatchKind: may a request for group/kind match m? (By its rules when it has any, else by
// its match.kinds; every kind when it has neither.)
func (m Match) MayMatchKind(group, kind string) bool {
	if len(m.Rules) > 0 {
		for _, r := range m.Rules {
			if r.Group == group && r.Kind == kind {
				return true
			}
		}
		return false
	}
	if len(m.Kinds) == 0 {
		return true
	}
	for _, k := range m.Kinds {
		if (len(k.Groups) == 0 || slices.Contains(k.Groups, "*") || slices.Contains(k.Groups, group)) &&
			(len(k.Kinds) == 0 || slices.Contains(k.Kinds, "*") || slices.Contains(k.Kinds, kind)) {
			return true
		}
	}
	return false
}

// Rule is one applyTo entry, expanded.
type Rule struct {
	Group, Version, Kind string
	Operations           []string
}

// GroupKinds is one match.kinds entry; empty lists mean any.
type GroupKinds struct {
	Groups []string
	Kinds  []string
}

// Op is what happens at the end of the path.
type Op interface{ isOp() }

// SetValue sets the value (Gatekeeper Assign / AssignMetadata): replace, never merge.
// When the path ends in a keyed list step, Value is the whole element (a map).
type SetValue struct {
	Value any
	// FromMetadata, when set ("name" or "namespace"), takes the value from the object instead.
	FromMetadata string
}

// MergeSet adds each value not yet in the list, at the end (ModifySet merge).
type MergeSet struct{ Values []any }

// PruneSet removes every element equal to one of the values (ModifySet prune).
type PruneSet struct{ Values []any }

// RewriteImage replaces the non-empty parts of an image reference (AssignImage).
type RewriteImage struct{ Domain, Path, Tag string }

func (SetValue) isOp()     {}
func (MergeSet) isOp()     {}
func (PruneSet) isOp()     {}
func (RewriteImage) isOp() {}

// PathString renders a path in Gatekeeper's location syntax (keys unquoted).
func PathString(p []Step) string {
	var b strings.Builder
	for i, s := range p {
		switch {
		case !s.List:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Field)
		case s.Glob:
			fmt.Fprintf(&b, "[%s: *]", s.KeyField)
		default:
			fmt.Fprintf(&b, "[%s: %s]", s.KeyField, s.KeyValue)
		}
	}
	return b.String()
}

// PathKey is an unambiguous text for a path, for map keys (PathString leaves keys unquoted).
func PathKey(p []Step) string {
	var b strings.Builder
	str := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	for _, s := range p {
		switch {
		case !s.List:
			b.WriteByte('.')
			str(s.Field)
		case s.Glob:
			b.WriteByte('*')
			str(s.KeyField)
		default:
			b.WriteByte('[')
			str(s.KeyField)
			str(s.KeyValue)
		}
	}
	return b.String()
}
