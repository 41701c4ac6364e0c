package cel

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/mapc-dev/mapc/compiler/ir"
)

func sortStrings(s []string) { sort.Strings(s) }

// objectLabels is the object's labels as the policy sees them when it runs (other policies may
// have added some).
func objectLabels() Expr {
	md := Field(Ident("object"), "metadata")
	return Cond(Bin("in", Str("labels"), md), Field(md, "labels"), Map(nil, nil))
}

// LabelSelector is a CEL condition equal to metav1.LabelSelectorAsSelector(sel).Matches(labels)
// (True for a nil selector). The selector is validated the same way.
func LabelSelector(sel *metav1.LabelSelector, lbls Expr) (Expr, error) {
	if sel == nil {
		return True, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	reqs, selectable := s.Requirements()
	if !selectable {
		return False, nil // labels.Nothing()
	}
	var conds []Expr
	for _, r := range reqs {
		c, err := requirement(r, lbls)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return And(conds...), nil
}

func requirement(r labels.Requirement, lbls Expr) (Expr, error) {
	key := Str(r.Key())
	has := Bin("in", key, lbls)
	val := Index(lbls, key)
	values := r.Values().List()
	sort.Strings(values)
	vals := make([]Expr, len(values))
	for i, v := range values {
		vals[i] = Str(v)
	}
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return And(has, Bin("in", val, List(vals...))), nil
	case selection.NotEquals, selection.NotIn:
		return Or(Not(has), Not(Bin("in", val, List(vals...)))), nil
	case selection.Exists:
		return has, nil
	case selection.DoesNotExist:
		return Not(has), nil
	}
	return nil, fmt.Errorf("label selector operator %q has no CEL translation", r.Operator())
}

// namespaceName is the namespace Gatekeeper matches namespaces and excludedNamespaces against:
// a Namespace object's own name, else the request's namespace ("" for cluster-scoped objects).
func namespaceName() Expr {
	md := Field(Ident("object"), "metadata")
	return Cond(isNamespaceKind(), Field(md, "name"), requestNamespace())
}

// Wildcard is Gatekeeper's wildcard.Matches(s): "x", "x*" (prefix), "*x" (suffix), "*x*".
func Wildcard(w string, s Expr) Expr { return wildcard(w, s, false) }

// wildcardGenerateName is Gatekeeper's wildcard.MatchesGenerateName: the same, except that a
// generateName is only a prefix, so "x" and "*x" never match it.
func wildcardGenerateName(w string, s Expr) Expr { return wildcard(w, s, true) }

func wildcard(w string, s Expr, generateName bool) Expr {
	switch {
	case strings.HasPrefix(w, "*") && strings.HasSuffix(w, "*") && len(w) >= 2:
		inner := strings.TrimSuffix(strings.TrimPrefix(w, "*"), "*")
		if inner == "" {
			return True
		}
		return Method(s, "contains", Str(inner))
	case w == "*":
		return True
	case strings.HasSuffix(w, "*"):
		return Method(s, "startsWith", Str(strings.TrimSuffix(w, "*")))
	case generateName:
		return False
	case strings.HasPrefix(w, "*"):
		return Method(s, "endsWith", Str(strings.TrimPrefix(w, "*")))
	}
	return Bin("==", s, Str(w))
}

// NamespacesMatch is Gatekeeper's namespacesMatch for match.namespaces.
func NamespacesMatch(ws []string) Expr {
	if len(ws) == 0 {
		return True
	}
	ns := namespaceName()
	var any []Expr
	for _, w := range ws {
		any = append(any, Wildcard(w, ns))
	}
	return Or(Bin("==", ns, Str("")), Or(any...))
}

// ExcludedNamespacesMatch is Gatekeeper's excludedNamespacesMatch.
func ExcludedNamespacesMatch(ws []string) Expr {
	if len(ws) == 0 {
		return True
	}
	ns := namespaceName()
	var any []Expr
	for _, w := range ws {
		any = append(any, Wildcard(w, ns))
	}
	return Or(Bin("==", ns, Str("")), Not(Or(any...)))
}

// NameMatch is Gatekeeper's namesMatch for match.name.
func NameMatch(w string) Expr {
	if w == "" {
		return True
	}
	md := Field(Ident("object"), "metadata")
	name := Cond(Bin("in", Str("name"), md), Field(md, "name"), Str(""))
	gen := Cond(Bin("in", Str("generateName"), md), Field(md, "generateName"), Str(""))
	return Or(Wildcard(w, name), wildcardGenerateName(w, gen))
}

// KindsMatch is Gatekeeper's kindsMatch over the request's kind, for mutators whose kinds the
// resource rules cannot express (AssignMetadata with match.kinds).
func KindsMatch(groups, kinds [][]string) Expr {
	if len(kinds) == 0 {
		return True
	}
	k := Field(Ident("request"), "kind")
	var any []Expr
	for i := range kinds {
		km := True
		if len(kinds[i]) > 0 && !contains(kinds[i], "*") {
			km = Bin("in", Field(k, "kind"), strList(kinds[i]))
		}
		gm := True
		if len(groups[i]) > 0 && !contains(groups[i], "*") {
			gm = Bin("in", Field(k, "group"), strList(groups[i]))
		}
		any = append(any, And(km, gm))
	}
	return Or(any...)
}

func strList(ss []string) Expr {
	s := append([]string(nil), ss...)
	sort.Strings(s)
	out := make([]Expr, len(s))
	for i, x := range s {
		out[i] = Str(x)
	}
	return List(out...)
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// Has is the has() macro over a field selection this package built.
func Has(operand Expr, field string) Expr { return Call("has", Field(operand, field)) }

// RulesMatch is true when the request's group, version, kind and operation are one of rules
// (Gatekeeper's applyTo, expanded). Used inside grouped policies, whose resource rules are the
// union of their members'.
func RulesMatch(rules []ir.Rule) Expr {
	k := Field(Ident("request"), "kind")
	var any []Expr
	for _, r := range rules {
		any = append(any, And(
			Bin("==", Field(k, "group"), Str(r.Group)),
			Bin("==", Field(k, "version"), Str(r.Version)),
			Bin("==", Field(k, "kind"), Str(r.Kind)),
			Bin("in", Field(Ident("request"), "operation"), strList(r.Operations)),
		))
	}
	return Or(any...)
}

// OperationsMatch is true when the request's operation is one of ops.
func OperationsMatch(ops []string) Expr {
	return Bin("in", Field(Ident("request"), "operation"), strList(ops))
}

// ScopeMatch is Gatekeeper's scopeMatch: Namespace objects count as cluster-scoped.
func ScopeMatch(scope string) Expr {
	clusterScoped := Or(isNamespaceKind(), Bin("==", requestNamespace(), Str("")))
	switch scope {
	case "Cluster":
		return clusterScoped
	case "Namespaced":
		return Not(clusterScoped)
	}
	return True
}

// NamespaceSelectorMatch is Gatekeeper's namespaceSelectorMatch: a Namespace object is matched on
// its own labels, a namespaced object on its namespace's, a cluster-scoped object always matches.
func NamespaceSelectorMatch(sel *metav1LabelSelector) (Expr, error) {
	if sel == nil {
		return True, nil
	}
	own, err := LabelSelector(sel, objectLabels())
	if err != nil {
		return nil, err
	}
	nsObj := Ident("namespaceObject")
	nsLabels := Cond(Has(Field(nsObj, "metadata"), "labels"), Field(Field(nsObj, "metadata"), "labels"), Map(nil, nil))
	theirs, err := LabelSelector(sel, nsLabels)
	if err != nil {
		return nil, err
	}
	return Cond(isNamespaceKind(), own, Or(Bin("==", nsObj, Null()), theirs)), nil
}

type metav1LabelSelector = metav1.LabelSelector

// LabelsMatch is the label selector over the object's current labels.
func LabelsMatch(sel *metav1.LabelSelector) (Expr, error) { return LabelSelector(sel, objectLabels()) }

// Guarded is c ? ops : [] for a list of JSONPatch operations.
func Guarded(c, ops Expr) Expr { return condList(c, ops, emptyList) }

// requestNamespace is the request's namespace, "" when it has none: the API server leaves the
// field unset for cluster-scoped objects, and reading an unset field is an error in CEL.
func requestNamespace() Expr {
	r := Ident("request")
	return Cond(Has(r, "namespace"), Field(r, "namespace"), Str(""))
}

// CompletionGuard is the part of a mutation's match that a request may fail although another
// mutation, of the same kinds and operations, matches it: scope, namespaces, name and namespace
// selector (True when there is none). For ir.Completion's By.
func CompletionGuard(m ir.Match) (Expr, error) {
	ns, err := NamespaceSelectorMatch(m.NamespaceSelector)
	if err != nil {
		return nil, err
	}
	return And(ScopeMatch(m.Scope), NamespacesMatch(m.Namespaces), ExcludedNamespacesMatch(m.ExcludedNamespaces), NameMatch(m.Name), ns), nil
}
