package lower

import (
	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// Unfiltered lowers what Kyverno's configuration c makes its webhook handler skip
// (handlers.withFilter, before any policy runs) for a policy whose rules are for kinds (their
// group, kind and subresource; any version): resources is the condition that no resource filter
// matches the request (config.ToFilter), users that the request's user is not excluded
// (config.IsExcluded). Each is cel.True when c skips nothing the policy sees. Both read only
// the request, and never fail.
func Unfiltered(c *kyverno.Config, kinds []Kind) (resources, users cel.Expr) {
	if c == nil {
		return cel.True, cel.True
	}
	kind := cel.Field(request, "kind")
	// The requests the policy sees: its kinds' (a subresource's where the kind names one), and
	// a Pod's ephemeralcontainers wherever Pods are (or every kind).
	type seen struct {
		group, kind, sub string
		every            bool // every kind (*)
	}
	var reqs []seen
	for _, k := range kinds {
		every := k.Group == "*" && k.Version == "*" && k.Kind == "*"
		reqs = append(reqs, seen{k.Group, k.Kind, k.Subresource, every})
		if k.Subresource == "" && (every || k.Group == "" && k.Kind == "Pod") {
			reqs = append(reqs, seen{group: "", kind: "Pod", sub: "ephemeralcontainers"})
		}
	}
	var filtered []cel.Expr
	for _, f := range c.Filters {
		// The filter's group and kind, and its subresource, each tested on the request unless
		// it holds for every request the other holds for.
		all, matchesSome, needGK, needSub, namespaceKind := true, false, false, false, false
		for _, r := range reqs {
			// For every kind (*), the group and kind match some requests (tested).
			gk := r.every || kyverno.Match(f.Group, r.group) && kyverno.Match(f.Kind, r.kind)
			sub := kyverno.Match(f.Subresource, r.sub)
			all = all && !r.every && gk && sub
			matchesSome = matchesSome || gk && sub
			needGK = needGK || sub && (r.every || !gk)
			needSub = needSub || gk && !sub
			if r.every {
				namespaceKind = namespaceKind || sub && kyverno.Match(f.Group, "") && kyverno.Match(f.Kind, "Namespace")
			} else {
				namespaceKind = namespaceKind || gk && sub && r.group == "" && r.kind == "Namespace"
			}
		}
		if !matchesSome {
			continue
		}
		if !all && !needGK && !needSub {
			// The filter matches the requests its group and kind match, and only those.
			needGK = true
		}
		var cs []cel.Expr
		if needGK {
			cs = append(cs, Glob(f.Group, cel.Field(kind, "group")), Glob(f.Kind, cel.Field(kind, "kind")))
		}
		if needSub {
			cs = append(cs, Glob(f.Subresource, SubResource()))
		}
		cs = append(cs, Glob(f.Version, cel.Field(kind, "version")))
		where := cel.And(Glob(f.Namespace, requestString("namespace")), Glob(f.Name, requestString("name")))
		if namespaceKind {
			// Kyverno also matches a Namespace's name against the filter's namespace.
			isNamespace := cel.And(cel.Bin("==", cel.Field(kind, "group"), cel.Str("")), cel.Bin("==", cel.Field(kind, "version"), cel.Str("v1")),
				cel.Bin("==", cel.Field(kind, "kind"), cel.Str("Namespace")))
			where = cel.Or(where, cel.And(isNamespace, Glob(f.Namespace, requestString("name"))))
		}
		filtered = append(filtered, cel.And(append(cs, where)...))
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
