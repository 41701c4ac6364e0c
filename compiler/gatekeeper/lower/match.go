package lower

import (
	"reflect"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// namespaceName is the namespace Gatekeeper matches namespaces and excludedNamespaces against:
// a Namespace object's own name, else the request's namespace ("" for cluster-scoped objects).
func namespaceName() cel.Expr {
	md := cel.Field(cel.Ident("object"), "metadata")
	return cel.Cond(isNamespaceKind(), cel.Field(md, "name"), requestNamespace())
}

// Wildcard is Gatekeeper's wildcard.Matches(s): "x", "x*" (prefix), "*x" (suffix), "*x*".
func Wildcard(w string, s cel.Expr) cel.Expr { return wildcard(w, s, false) }

// wildcardGenerateName is Gatekeeper's wildcard.MatchesGenerateName: the same, except that a
// generateName is only a prefix, so "x" and "*x" never match it.
func wildcardGenerateName(w string, s cel.Expr) cel.Expr { return wildcard(w, s, true) }

func wildcard(w string, s cel.Expr, generateName bool) cel.Expr {
	switch {
	case strings.HasPrefix(w, "*") && strings.HasSuffix(w, "*") && len(w) >= 2:
		inner := strings.TrimSuffix(strings.TrimPrefix(w, "*"), "*")
		if inner == "" {
			return cel.True
		}
		return cel.Method(s, "contains", cel.Str(inner))
	case w == "*":
		return cel.True
	case strings.HasSuffix(w, "*"):
		return cel.Method(s, "startsWith", cel.Str(strings.TrimSuffix(w, "*")))
	case generateName:
		return cel.False
	case strings.HasPrefix(w, "*"):
		return cel.Method(s, "endsWith", cel.Str(strings.TrimPrefix(w, "*")))
	}
	return cel.Bin("==", s, cel.Str(w))
}

// NamespacesMatch is Gatekeeper's namespacesMatch for match.namespaces.
func NamespacesMatch(ws []string) cel.Expr { return namespaceListMatch(ws, false) }

// ExcludedNamespacesMatch is Gatekeeper's excludedNamespacesMatch.
func ExcludedNamespacesMatch(ws []string) cel.Expr { return namespaceListMatch(ws, true) }

// namespaceListMatch: true without a namespace (cluster-scoped) or when the namespace matches
// one of ws (excluded: matches none of them); true for an empty ws.
func namespaceListMatch(ws []string, excluded bool) cel.Expr {
	if len(ws) == 0 {
		return cel.True
	}
	ns := namespaceName()
	var any []cel.Expr
	for _, w := range ws {
		any = append(any, Wildcard(w, ns))
	}
	match := cel.Or(any...)
	if excluded {
		match = cel.Not(match)
	}
	return cel.Or(cel.Bin("==", ns, cel.Str("")), match)
}

// NameMatch is Gatekeeper's namesMatch for match.name.
func NameMatch(w string) cel.Expr {
	if w == "" {
		return cel.True
	}
	md := cel.Field(cel.Ident("object"), "metadata")
	name := cel.Cond(cel.Bin("in", cel.Str("name"), md), cel.Field(md, "name"), cel.Str(""))
	gen := cel.Cond(cel.Bin("in", cel.Str("generateName"), md), cel.Field(md, "generateName"), cel.Str(""))
	return cel.Or(Wildcard(w, name), wildcardGenerateName(w, gen))
}

// KindsMatch is Gatekeeper's kindsMatch over the request's kind, for mutators whose kinds the
// resource rules cannot express (AssignMetadata with match.kinds).
func KindsMatch(groups, kinds [][]string) cel.Expr {
	if len(kinds) == 0 {
		return cel.True
	}
	k := cel.Field(cel.Ident("request"), "kind")
	var any []cel.Expr
	for i := range kinds {
		km := cel.True
		if len(kinds[i]) > 0 && !contains(kinds[i], "*") {
			km = cel.Bin("in", cel.Field(k, "kind"), strList(kinds[i]))
		}
		gm := cel.True
		if len(groups[i]) > 0 && !contains(groups[i], "*") {
			gm = cel.Bin("in", cel.Field(k, "group"), strList(groups[i]))
		}
		any = append(any, cel.And(km, gm))
	}
	return cel.Or(any...)
}

func strList(ss []string) cel.Expr {
	s := append([]string(nil), ss...)
	sort.Strings(s)
	out := make([]cel.Expr, len(s))
	for i, x := range s {
		out[i] = cel.Str(x)
	}
	return cel.List(out...)
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// RulesMatch is true when the request's group, version, kind and operation are one of rules
// (Gatekeeper's applyTo, expanded). Used inside grouped policies, whose resource rules are the
// union of their members'.
func RulesMatch(rules []ir.Rule) cel.Expr {
	k := cel.Field(cel.Ident("request"), "kind")
	var any []cel.Expr
	for _, r := range rules {
		any = append(any, cel.And(
			cel.Bin("==", cel.Field(k, "group"), cel.Str(r.Group)),
			cel.Bin("==", cel.Field(k, "version"), cel.Str(r.Version)),
			cel.Bin("==", cel.Field(k, "kind"), cel.Str(r.Kind)),
			cel.Bin("in", cel.Field(cel.Ident("request"), "operation"), strList(r.Operations)),
		))
	}
	return cel.Or(any...)
}

// OperationsMatch is true when the request's operation is one of ops.
func OperationsMatch(ops []string) cel.Expr {
	return cel.Bin("in", cel.Field(cel.Ident("request"), "operation"), strList(ops))
}

// ScopeMatch is Gatekeeper's scopeMatch: Namespace objects count as cluster-scoped.
func ScopeMatch(scope string) cel.Expr {
	clusterScoped := cel.Or(isNamespaceKind(), cel.Bin("==", requestNamespace(), cel.Str("")))
	switch scope {
	case "Cluster":
		return clusterScoped
	case "Namespaced":
		return cel.Not(clusterScoped)
	}
	return cel.True
}

// NamespaceSelectorMatch is Gatekeeper's namespaceSelectorMatch: a Namespace object is matched on
// its own labels, a namespaced object on its namespace's, a cluster-scoped object always matches.
func NamespaceSelectorMatch(sel *metav1.LabelSelector) (cel.Expr, error) {
	if sel == nil {
		return cel.True, nil
	}
	own, err := cel.LabelsMatch(sel)
	if err != nil {
		return nil, err
	}
	nsObj := cel.Ident("namespaceObject")
	nsLabels := cel.Cond(cel.Has(cel.Field(nsObj, "metadata"), "labels"), cel.Field(cel.Field(nsObj, "metadata"), "labels"), cel.Map(nil, nil))
	theirs, err := cel.LabelSelector(sel, nsLabels)
	if err != nil {
		return nil, err
	}
	return cel.Cond(isNamespaceKind(), own, cel.Or(cel.Bin("==", nsObj, cel.Null()), theirs)), nil
}

// requestNamespace is the request's namespace, "" when it has none: the API server leaves the
// field unset for cluster-scoped objects, and reading an unset field is an error in CEL.
func requestNamespace() cel.Expr {
	r := cel.Ident("request")
	return cel.Cond(cel.Has(r, "namespace"), cel.Field(r, "namespace"), cel.Str(""))
}

// CompletionGuard is the part of a mutation's match that a request may fail although another
// mutation, of the same kinds and operations, matches it: scope, namespaces, name, namespace
// selector and label selector (True when there is none). For ir.Completion's By, whose label
// selector plan.Complete takes only when no mutation writes the labels it reads.
func CompletionGuard(m ir.Match) (cel.Expr, error) {
	ns, err := NamespaceSelectorMatch(m.NamespaceSelector)
	if err != nil {
		return nil, err
	}
	labels, err := cel.LabelsMatch(m.LabelSelector)
	if err != nil {
		return nil, err
	}
	return cel.And(ScopeMatch(m.Scope), NamespacesMatch(m.Namespaces), ExcludedNamespacesMatch(m.ExcludedNamespaces), NameMatch(m.Name), ns, labels), nil
}

// CompletionGuardFor is CompletionGuard of g for a request that f matches: the clauses f's own
// match already implies (the same scope, name, namespace or label selector; every namespace f admits in
// g's list; every namespace g excludes excluded by f) are left out.
func CompletionGuardFor(g, f ir.Match) (cel.Expr, error) {
	if g.Scope == f.Scope {
		g.Scope = ""
	}
	if g.Name == f.Name {
		g.Name = ""
	}
	if g.NamespaceSelector != nil && f.NamespaceSelector != nil && reflect.DeepEqual(g.NamespaceSelector, f.NamespaceSelector) {
		g.NamespaceSelector = nil
	}
	if g.LabelSelector != nil && f.LabelSelector != nil && reflect.DeepEqual(g.LabelSelector, f.LabelSelector) {
		g.LabelSelector = nil
	}
	if len(f.Namespaces) > 0 && subset(f.Namespaces, g.Namespaces) {
		g.Namespaces = nil
	}
	if subset(g.ExcludedNamespaces, f.ExcludedNamespaces) {
		g.ExcludedNamespaces = nil
	}
	return CompletionGuard(g)
}

// subset: is every pattern of a one of b?
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
