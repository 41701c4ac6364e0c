// Package lower turns Kyverno's mutate rules, as the front end (package kyverno) read them, into
// CEL trees (package cel): each rule's match and exclude blocks into a condition on the request
// and the object as the rule sees it, its variables' JMESPath (parsed by Kyverno's own parser,
// with the semantics of Kyverno's JMESPath and functions) into CEL values, its variable context
// entries into the CEL values the variables naming them read, and its patch into
// JSONPatch operations that give the object Kyverno's patch gives (patchStrategicMerge as
// Kyverno's kustomize merge does it, with its anchors; patchesJson6902 with Kyverno's options).
// What it cannot lower exactly it refuses with an error naming the field.
//
// It must not print or check CEL (package cel does), nor build policies (the back end does).
package lower

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

var (
	object   = cel.Ident("object")
	request  = cel.Ident("request")
	metadata = cel.Field(object, "metadata")
)

// Glob is Kyverno's wildcard match of s against pattern (ext/wildcard): "*" is any run of
// characters, "?" exactly one; the empty pattern matches only the empty string.
func Glob(pattern string, s cel.Expr) cel.Expr {
	switch {
	case pattern == "*":
		return cel.True
	case !strings.ContainsAny(pattern, "*?"):
		return cel.Bin("==", s, cel.Str(pattern))
	case !strings.Contains(pattern, "?") && strings.Count(pattern, "*") == 1 && strings.HasSuffix(pattern, "*"):
		return cel.Method(s, "startsWith", cel.Str(strings.TrimSuffix(pattern, "*")))
	case !strings.Contains(pattern, "?") && strings.Count(pattern, "*") == 1 && strings.HasPrefix(pattern, "*"):
		return cel.Method(s, "endsWith", cel.Str(strings.TrimPrefix(pattern, "*")))
	}
	var re strings.Builder
	re.WriteString("^(?s)")
	for _, r := range pattern {
		switch r {
		case '*':
			re.WriteString(".*")
		case '?':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString("$")
	return cel.Method(s, "matches", cel.Str(re.String()))
}

// orEmpty is m[?key].orValue(dflt).
func orValue(m cel.Expr, key string, dflt cel.Expr) cel.Expr {
	return cel.Method(cel.OptIndex(m, cel.Str(key)), "orValue", dflt)
}

// resourceName is the name Kyverno matches: metadata.name, or generateName when there is none.
func resourceName() cel.Expr {
	name := orValue(metadata, "name", cel.Str(""))
	return cel.Cond(cel.Bin("!=", name, cel.Str("")), name, orValue(metadata, "generateName", cel.Str("")))
}

func isNamespaceKind() cel.Expr {
	return cel.Bin("==", cel.Field(cel.Field(request, "kind"), "kind"), cel.Str("Namespace"))
}

// resourceNamespace is the namespace Kyverno matches: a Namespace's own name, else the object's
// namespace.
func resourceNamespace() cel.Expr {
	return cel.Cond(isNamespaceKind(), orValue(metadata, "name", cel.Str("")), orValue(metadata, "namespace", cel.Str("")))
}

// Kind is one entry of a filter's kinds, as Kyverno parses it (pkg/utils/kube ParseKindSelector).
type Kind struct{ Group, Version, Kind, Subresource string }

// ParseKind parses "Kind", "Version/Kind", "Group/Version/Kind", "Kind/subresource" (also
// "Kind.subresource") as Kyverno does (kyverno.ParseKindSelector).
func ParseKind(input string) Kind {
	g, v, k, s := kyverno.ParseKindSelector(input)
	return Kind{g, v, k, s}
}

// kindMatch is the request against one kinds entry (kyverno CheckKind, as the engine calls it:
// ephemeral containers allowed): its group, version and kind, and its subresource, which for a
// v1 Pod may also be ephemeralcontainers whatever the entry's. subs: the policy is called for
// subresources other than a Pod's ephemeralcontainers, so an entry without one tests that the
// request has none; otherwise the only subresource requests are a Pod's ephemeral containers,
// which every entry for Pods (or every kind) takes, and entries without one test nothing more.
func kindMatch(k Kind, subs bool) cel.Expr {
	kind := cel.Field(request, "kind")
	cs := []cel.Expr{Glob(k.Group, cel.Field(kind, "group")), Glob(k.Version, cel.Field(kind, "version")), Glob(k.Kind, cel.Field(kind, "kind"))}
	if k.Subresource == "" && !subs {
		return cel.And(cs...)
	}
	sub := SubResource()
	test := Glob(k.Subresource, sub)
	if kyverno.Match(k.Group, "") && kyverno.Match(k.Version, "v1") && kyverno.Match(k.Kind, "Pod") && !kyverno.Match(k.Subresource, "ephemeralcontainers") {
		pod := cel.And(cel.Bin("==", cel.Field(kind, "group"), cel.Str("")), cel.Bin("==", cel.Field(kind, "version"), cel.Str("v1")),
			cel.Bin("==", cel.Field(kind, "kind"), cel.Str("Pod")))
		test = cel.Or(test, cel.And(pod, cel.Bin("==", sub, cel.Str("ephemeralcontainers"))))
	}
	return cel.And(append(cs, test)...)
}

// SubResource is the request's subresource, "" for the resource itself.
func SubResource() cel.Expr { return requestString("subResource") }

// Subresources: is the policy called for subresources other than a Pod's ephemeralcontainers
// (a match block names one)?
func Subresources(p *kyverno.Policy) bool {
	for _, r := range p.Rules {
		for _, f := range append(append([]kyverno.Filter(nil), r.Match.Any...), r.Match.All...) {
			for _, k := range f.Kinds {
				if s := ParseKind(k).Subresource; s != "" && s != "ephemeralcontainers" {
					return true
				}
			}
		}
	}
	return false
}

// Filter is one resource filter as a condition (pkg/engine/utils doesResourceMatchConditionBlock).
// An empty filter never matches. subs is as for kindMatch.
func Filter(f kyverno.Filter, subs bool) (cel.Expr, error) {
	if f.Empty() {
		return cel.False, nil
	}
	var cs []cel.Expr
	if len(f.Operations) > 0 {
		var ops []cel.Expr
		for _, o := range f.Operations {
			ops = append(ops, cel.Str(o))
		}
		cs = append(cs, cel.Bin("in", cel.Field(request, "operation"), cel.List(ops...)))
	}
	if len(f.Kinds) > 0 {
		var ks []cel.Expr
		for _, k := range f.Kinds {
			ks = append(ks, kindMatch(ParseKind(k), subs))
		}
		cs = append(cs, cel.Or(ks...))
	}
	if f.Name != "" {
		cs = append(cs, Glob(f.Name, resourceName()))
	}
	if len(f.Names) > 0 {
		var ns []cel.Expr
		for _, n := range f.Names {
			ns = append(ns, Glob(n, resourceName()))
		}
		cs = append(cs, cel.Or(ns...))
	}
	if len(f.Namespaces) > 0 {
		var ns []cel.Expr
		for _, n := range f.Namespaces {
			ns = append(ns, Glob(n, resourceNamespace()))
		}
		cs = append(cs, cel.Or(ns...))
	}
	if len(f.Annotations) > 0 {
		ann := orValue(metadata, "annotations", cel.Map(nil, nil))
		keys := make([]string, 0, len(f.Annotations))
		for k := range f.Annotations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := f.Annotations[k]
			if !strings.ContainsAny(k, "*?") {
				cs = append(cs, cel.And(cel.Bin("in", cel.Str(k), ann), Glob(v, cel.Index(ann, cel.Str(k)))))
				continue
			}
			a := cel.Ident("a")
			cs = append(cs, cel.Method(ann, "exists", a, cel.And(Glob(k, a), Glob(v, cel.Index(ann, a)))))
		}
	}
	if f.Selector != nil {
		c, err := selector(f.Selector, orValue(metadata, "labels", cel.Map(nil, nil)))
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if f.NamespaceSelector != nil {
		ns := cel.Ident("namespaceObject")
		md := cel.Field(ns, "metadata")
		lbls := cel.Cond(cel.Or(cel.Bin("==", ns, cel.Null()), cel.Not(cel.Has(md, "labels"))), cel.Map(nil, nil), cel.Field(md, "labels"))
		c, err := selector(f.NamespaceSelector, lbls)
		if err != nil {
			return nil, err
		}
		cs = append(cs, cel.And(cel.Not(isNamespaceKind()), c))
	}
	if len(f.Subjects) > 0 {
		cs = append(cs, subjects(f.Subjects))
	}
	return cel.And(cs...), nil
}

// selector is Kyverno's match of the labels lbls against sel (pkg/utils/match CheckSelector):
// the selector's requirements, a matchLabels entry whose value holds wildcards met where the
// label is there and its value matches (see kyverno.SplitSelector) and is a valid label value
// (Kyverno puts the label's value in the selector it then parses: one that is not valid, which
// the object can hold at admission, fails the selector, as not matching).
func selector(sel *metav1.LabelSelector, lbls cel.Expr) (cel.Expr, error) {
	exact, wild := kyverno.SplitSelector(sel)
	c, err := cel.LabelSelector(exact, lbls)
	if err != nil {
		return nil, err
	}
	cs := []cel.Expr{c}
	for _, k := range slices.Sorted(maps.Keys(wild)) {
		v := cel.Index(lbls, cel.Str(k))
		valid := cel.And(cel.Bin("<=", cel.Call("size", v), cel.Int(int64(validation.LabelValueMaxLength))),
			cel.Method(v, "matches", cel.Str("^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")))
		cs = append(cs, cel.And(cel.Bin("in", cel.Str(k), lbls), Glob(wild[k], v), valid))
	}
	return cel.And(cs...), nil
}

// subjects is Kyverno's match of the requesting user (pkg/utils/match CheckSubjects): a
// ServiceAccount by its user name, a User by name, a Group among the user's groups, with
// wildcards.
func subjects(subs []rbacv1.Subject) cel.Expr {
	user := cel.Field(request, "userInfo")
	name := cel.Cond(cel.Has(user, "username"), cel.Field(user, "username"), cel.Str(""))
	groups := cel.Cond(cel.Has(user, "groups"), cel.Field(user, "groups"), cel.List())
	var cs []cel.Expr
	for _, s := range subs {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			cs = append(cs, Glob("system:serviceaccount:"+s.Namespace+":"+s.Name, name))
		case rbacv1.UserKind:
			cs = append(cs, Glob(s.Name, name))
		case rbacv1.GroupKind:
			g := cel.Ident("g")
			cs = append(cs, cel.Method(groups, "exists", g, Glob(s.Name, g)))
		}
	}
	return cel.Or(cs...)
}

// Rule is the condition under which Kyverno runs the rule on the object as it is when the rule
// runs (pkg/engine/utils MatchesResourceDescription): the policy's namespace, the match block,
// then the exclude block.
func Rule(p *kyverno.Policy, r *kyverno.Rule) (cel.Expr, error) {
	var cs []cel.Expr
	if p.Namespace != "" {
		cs = append(cs, cel.Bin("==", orValue(metadata, "namespace", cel.Str("")), cel.Str(p.Namespace)))
	}
	subs := Subresources(p)
	m, err := block(r.Match, subs)
	if err != nil {
		return nil, err
	}
	cs = append(cs, m)
	if !r.Exclude.Empty() {
		x, err := block(r.Exclude, subs)
		if err != nil {
			return nil, err
		}
		cs = append(cs, cel.Not(x))
	}
	return cel.And(cs...), nil
}

// block is a match block (any: one filter matches; all: every filter matches) or an exclude
// block (excluded when any, or all, filters match; an empty filter never excludes).
func block(b kyverno.Block, subs bool) (cel.Expr, error) {
	filters, any := b.All, false
	if len(b.Any) > 0 {
		filters, any = b.Any, true
	}
	var cs []cel.Expr
	for _, f := range filters {
		c, err := Filter(f, subs)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if any {
		return cel.Or(cs...), nil
	}
	return cel.And(cs...), nil
}

// LabelSelectorKeys lists the label keys a selector reads (for messages).
func LabelSelectorKeys(sel *metav1.LabelSelector) []string {
	var ks []string
	for k := range sel.MatchLabels {
		ks = append(ks, k)
	}
	for _, e := range sel.MatchExpressions {
		ks = append(ks, e.Key)
	}
	sort.Strings(ks)
	return ks
}

func errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// FieldError is a refusal of a field of the rule's patch.
type FieldError struct {
	Field string // below the patch, e.g. "spec.containers[0].(image)"
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}
