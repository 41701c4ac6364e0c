package lower

import (
	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// Unfiltered lowers what Kyverno's configuration c makes its webhook handler skip
// (handlers.withFilter, before any policy runs) for a policy whose rules are for kinds (their
// group and kind; any version, no subresource): resources is the condition that no resource
// filter matches the request (config.ToFilter), users that the request's user is not excluded
// (config.IsExcluded). Each is cel.True when c skips nothing the policy sees. Both read only
// the request, and never fail.
func Unfiltered(c *kyverno.Config, kinds []Kind) (resources, users cel.Expr) {
	if c == nil {
		return cel.True, cel.True
	}
	kind := cel.Field(request, "kind")
	var filtered []cel.Expr
	for _, f := range c.Filters {
		// The policy's requests are for its kinds' resources, never a subresource.
		if !kyverno.Match(f.Subresource, "") {
			continue
		}
		matchesAll, matchesSome, namespaceKind := true, false, false
		for _, k := range kinds {
			if k.Group == "*" && k.Version == "*" && k.Kind == "*" {
				// Every kind: the filter matches some (tested on the request).
				matchesAll, matchesSome = false, true
				namespaceKind = namespaceKind || kyverno.Match(f.Group, "") && kyverno.Match(f.Kind, "Namespace")
				continue
			}
			m := kyverno.Match(f.Group, k.Group) && kyverno.Match(f.Kind, k.Kind)
			matchesAll, matchesSome = matchesAll && m, matchesSome || m
			namespaceKind = namespaceKind || m && k.Group == "" && k.Kind == "Namespace"
		}
		if !matchesSome {
			continue
		}
		gk := cel.True
		if !matchesAll {
			gk = cel.And(Glob(f.Group, cel.Field(kind, "group")), Glob(f.Kind, cel.Field(kind, "kind")))
		}
		version := Glob(f.Version, cel.Field(kind, "version"))
		where := cel.And(Glob(f.Namespace, requestString("namespace")), Glob(f.Name, requestString("name")))
		if namespaceKind {
			// Kyverno also matches a Namespace's name against the filter's namespace.
			isNamespace := cel.And(cel.Bin("==", cel.Field(kind, "group"), cel.Str("")), cel.Bin("==", cel.Field(kind, "version"), cel.Str("v1")),
				cel.Bin("==", cel.Field(kind, "kind"), cel.Str("Namespace")))
			where = cel.Or(where, cel.And(isNamespace, Glob(f.Namespace, requestString("name"))))
		}
		filtered = append(filtered, cel.And(gk, version, where))
	}
	resources = cel.Negate(cel.Or(filtered...))
	users = cel.True
	if !c.Excluded.Empty() {
		users = cel.Or(matchesUser(c.Included), cel.Negate(matchesUser(c.Excluded)))
	}
	return resources, users
}

// requestString is request.<name>, "" where the request has none.
func requestString(name string) cel.Expr {
	return cel.Cond(cel.Has(request, name), cel.Field(request, name), cel.Str(""))
}

// matchesUser: does the request's user name, or one of its groups, match one of u's patterns
// (Kyverno's config match.matches, without roles)?
func matchesUser(u kyverno.Users) cel.Expr {
	user := cel.Field(request, "userInfo")
	name := cel.Cond(cel.Has(user, "username"), cel.Field(user, "username"), cel.Str(""))
	groups := cel.Cond(cel.Has(user, "groups"), cel.Field(user, "groups"), cel.List())
	var cs []cel.Expr
	for _, p := range u.Names {
		cs = append(cs, Glob(p, name))
	}
	g := cel.Ident("g")
	for _, p := range u.Groups {
		cs = append(cs, cel.Method(groups, "exists", g, Glob(p, g)))
	}
	if len(cs) == 0 {
		return cel.False
	}
	return cel.Or(cs...)
}
