package lower

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/mapc-dev/mapc/cel"
)

// Kyverno's strategic merge (kyaml's merge2) walks the whole object, not only the places its
// patch names, and leaves one item per key in every keyed list it passes through: the place of
// the key's first item, the content of its last one, as the object held it (kyaml walks and
// merges the first, then puts the object's items back by key, the last one last); in a list of
// several keys (ports: containerPort and protocol), the place of the last one (kyaml takes each
// item out and puts it back at the end). A list of scalars with a merge strategy (finalizers)
// keeps each value once, in the order of its first place. The walk goes on below the items it
// kept whole (a container whose name is not repeated: its env, ports, volume mounts), not below
// the last of repeated ones.
//
// An object from the API server repeats a key only where its validation lets it (an env
// variable given twice, a host alias, a finalizer); any list can hold a repeat that another
// policy wrote before (two policies adding one volume). CollapseView is what the merge makes of
// the object before it merges the patch, for the rule's lowering to run on; CollapseOps the
// operations that write it.

// collapsePlan is where the keyed lists of a map are, in kyaml's schema of the kind.
type collapsePlan struct {
	fields []collapseField // by name
}

type collapseField struct {
	name string
	list *collapseList // a keyed list at the field
	sub  *collapsePlan // a map with keyed lists below
}

type collapseList struct {
	keys []string      // merge keys; [""] for a list of scalars
	item *collapsePlan // the keyed lists inside each item (nil: none)
}

var collapsePlans sync.Map // apiVersion/kind → *collapsePlan (nil: none)

// planCollapse is the plan of the kind's objects, nil where kyaml's schema has no keyed list (a
// custom resource: kyaml has no schema for it).
func planCollapse(apiVersion, kind string) *collapsePlan {
	key := apiVersion + "/" + kind
	if v, ok := collapsePlans.Load(key); ok {
		return v.(*collapsePlan)
	}
	var p *collapsePlan
	if s := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind}); s != nil {
		p = planMap(s, map[string]*collapsePlan{}, map[string]bool{})
	}
	collapsePlans.Store(key, p)
	return p
}

// planMap plans the map of schema s. done memoises plans by schema reference; open holds the
// references being planned (a schema that holds itself, such as JSONSchemaProps, adds nothing
// on the way back to itself). Maps of maps (additionalProperties) are not followed: no built-in
// kind has a keyed list below one (TestCollapsePlanMaps).
func planMap(s *openapi.ResourceSchema, done map[string]*collapsePlan, open map[string]bool) *collapsePlan {
	var out collapsePlan
	names := make([]string, 0, len(s.Schema.Properties))
	for name := range s.Schema.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fs := s.Field(name)
		if fs == nil || fs.Schema == nil {
			continue
		}
		prop := s.Schema.Properties[name]
		ref := prop.Ref.String()
		switch {
		case slices.Contains(fs.Schema.Type, "array"):
			keys := mergeKeys(fs)
			if len(keys) == 0 {
				continue // kyaml replaces such a list whole, without walking its items
			}
			l := &collapseList{keys: keys}
			if es := fs.Elements(); es != nil && keys[0] != "" {
				itemRef := ""
				if fs.Schema.Items != nil && fs.Schema.Items.Schema != nil {
					itemRef = fs.Schema.Items.Schema.Ref.String()
				}
				l.item = planRef(es, itemRef, done, open)
			}
			out.fields = append(out.fields, collapseField{name: name, list: l})
		case len(fs.Schema.Properties) > 0:
			if sub := planRef(fs, ref, done, open); sub != nil {
				out.fields = append(out.fields, collapseField{name: name, sub: sub})
			}
		}
	}
	if len(out.fields) == 0 {
		return nil
	}
	return &out
}

func planRef(s *openapi.ResourceSchema, ref string, done map[string]*collapsePlan, open map[string]bool) *collapsePlan {
	if ref == "" {
		return planMap(s, done, open)
	}
	if p, ok := done[ref]; ok {
		return p
	}
	if open[ref] {
		return nil
	}
	open[ref] = true
	p := planMap(s, done, open)
	delete(open, ref)
	done[ref] = p
	return p
}

// collapser writes the expression of a collapsed object (the value of CollapsedVariable, whose
// comprehension variables are its own).
type collapser struct{ n int }

func (c *collapser) fresh(prefix string) cel.Expr {
	c.n++
	return cel.Ident(prefix + strconv.Itoa(c.n))
}

// list is the list value v collapsed: one item per key, where the key's first item is, with
// its last item's content (collapsed below where the key has one item); for several keys
// (ports: containerPort and protocol), where the key's last item is. A list with an item
// without its keys stays as it is: kyaml treats such an item apart, and no valid object has one.
// keys are the merge keys, each the name of the field or an expression giving it.
func (c *collapser) list(keys []cel.Expr, item *collapsePlan, v cel.Expr) cel.Expr {
	i, x := c.fresh("i"), c.fresh("x")
	if keys == nil {
		return cel.Method(v, "transformList", i, x, cel.Bin("==", cel.Method(v, "indexOf", x), i), x)
	}
	ks, y := c.fresh("k"), c.fresh("y")
	at := cel.Index(ks, i)
	first := cel.Bin("==", cel.Method(ks, "indexOf", at), i)
	last := cel.Method(ks, "lastIndexOf", at)
	kept := cel.Expr(x)
	if item != nil {
		kept = c.mapValue(item, x)
	}
	filter := first
	if len(keys) > 1 {
		// kyaml's merge takes each of the object's items out of a list of several keys and
		// puts it back last: the last item of each key stays, in the order of the last items.
		filter, kept = cel.Bin("==", last, i), cel.Cond(first, kept, x)
	} else {
		kept = cel.Cond(cel.Bin("==", last, i), kept, cel.Index(v, last))
	}
	var keyOf, has []cel.Expr
	for _, k := range keys {
		keyOf = append(keyOf, cel.Index(y, k))
		has = append(has, cel.Bin("in", k, y))
	}
	key := keyOf[0]
	if len(keyOf) > 1 {
		key = cel.List(keyOf...)
	}
	collapsed := cel.Let(identName(ks), cel.Method(v, "map", y, key), cel.Method(v, "transformList", i, x, filter, kept))
	return cel.Cond(cel.Method(v, "all", y, cel.And(has...)), collapsed, v)
}

// mapValue is the map value m with its keyed lists collapsed. The lists of one key and no
// keyed list in their items share one expression, which finds the key by the field's name.
func (c *collapser) mapValue(p *collapsePlan, m cel.Expr) cel.Expr {
	k, v := c.fresh("k"), c.fresh("v")
	type branch struct {
		names []string
		value cel.Expr
		sig   string // a list's signature
	}
	var branches []branch
	byKey := map[string]string{} // the leaf lists of one key: field name → key
	var leaves []string
	for _, f := range p.fields {
		switch {
		case f.list != nil && f.list.item == nil && len(f.list.keys) == 1 && f.list.keys[0] != "":
			byKey[f.name] = f.list.keys[0]
			leaves = append(leaves, f.name)
		case f.list != nil:
			sig := f.list.signature()
			if j := slices.IndexFunc(branches, func(b branch) bool { return b.sig == sig }); j >= 0 {
				branches[j].names = append(branches[j].names, f.name) // containers, initContainers
				continue
			}
			var keys []cel.Expr
			if f.list.keys[0] != "" {
				for _, key := range f.list.keys {
					keys = append(keys, cel.Str(key))
				}
			}
			branches = append(branches, branch{[]string{f.name}, c.list(keys, f.list.item, v), sig})
		default:
			branches = append(branches, branch{[]string{f.name}, c.mapValue(f.sub, v), ""})
		}
	}
	if len(leaves) == 1 {
		branches = append(branches, branch{leaves, c.list([]cel.Expr{cel.Str(byKey[leaves[0]])}, nil, v), ""})
	} else if len(leaves) > 1 {
		var names, keys []cel.Expr
		for _, l := range leaves {
			names, keys = append(names, cel.Str(l)), append(keys, cel.Str(byKey[l]))
		}
		branches = append(branches, branch{leaves, c.list([]cel.Expr{cel.Index(cel.Map(names, keys), k)}, nil, v), ""})
	}
	out := cel.Expr(v)
	for i := len(branches) - 1; i >= 0; i-- {
		b := branches[i]
		is := cel.Bin("==", k, cel.Str(b.names[0]))
		if len(b.names) > 1 {
			var names []cel.Expr
			for _, n := range b.names {
				names = append(names, cel.Str(n))
			}
			is = cel.Bin("in", k, cel.List(names...))
		}
		out = cel.Cond(cel.And(is, cel.Bin("!=", v, cel.Null())), b.value, out)
	}
	return cel.Method(m, "transformMap", k, v, out)
}

// ops are the JSONPatch operations that give, from the object, the object collapsed (d): each
// field at its top that the collapse changes (metadata, spec, status) replaced whole.
func ops(plan *collapsePlan, object, d cel.Expr) cel.Expr {
	out := cel.List()
	for i := len(plan.fields) - 1; i >= 0; i-- {
		f := plan.fields[i]
		ov, dv := cel.Index(object, cel.Str(f.name)), cel.Index(d, cel.Str(f.name))
		op := cel.Guarded(cel.And(present(object, f.name), cel.Bin("!=", dv, ov)), cel.List(cel.PatchOp("replace", cel.Pointer{}.Child(f.name), dv)))
		if cel.IsEmpty(out) {
			out = op
		} else {
			out = cel.Bin("+", op, out)
		}
	}
	return out
}

// signature tells lists that collapse alike apart from the others.
func (l *collapseList) signature() string {
	var b strings.Builder
	var walk func(l *collapseList)
	var walkMap func(p *collapsePlan)
	walk = func(l *collapseList) {
		fmt.Fprintf(&b, "(%s", strings.Join(l.keys, ","))
		walkMap(l.item)
		b.WriteString(")")
	}
	walkMap = func(p *collapsePlan) {
		if p == nil {
			return
		}
		b.WriteString("{")
		for _, f := range p.fields {
			b.WriteString(f.name)
			if f.list != nil {
				walk(f.list)
			} else {
				walkMap(f.sub)
			}
			b.WriteString(";")
		}
		b.WriteString("}")
	}
	walk(l)
	return b.String()
}

func identName(e cel.Expr) string {
	name, _ := cel.AsIdent(e)
	return name
}

// CollapsedVariable is the policy variable (spec.variables) that holds the object with its
// keyed lists collapsed (CollapseView): one expression per policy, which the API server
// evaluates at most once per mutation, where a mutation reads it.
const CollapsedVariable = "collapsed"

// CollapseView is the object of the kind apiVersion/kind with its keyed lists collapsed, as
// Kyverno's merge collapses them before it merges a patch; nil where the kind has no keyed list
// (a custom resource).
func CollapseView(apiVersion, kind string) cel.Expr {
	plan := planCollapse(apiVersion, kind)
	if plan == nil {
		return nil
	}
	return (&collapser{}).mapValue(plan, cel.Ident("object"))
}

// CollapseOps are the JSONPatch operations that turn the object into CollapseView's, read from
// CollapsedVariable: each of the object's fields at its top (metadata, spec, status) that the
// collapse changes replaced whole.
func CollapseOps(apiVersion, kind string) cel.Expr {
	plan := planCollapse(apiVersion, kind)
	if plan == nil {
		return cel.List()
	}
	return ops(plan, cel.Ident("object"), cel.VarRef(CollapsedVariable))
}

// ReadsCollapsed: does ops, operations for objects of the kind apiVersion/kind, read the object
// at or below a keyed list the collapse can change, or the whole of a map above one? Such
// operations must read the object collapsed (CollapsedVariable); the others read it alike as it
// is.
func ReadsCollapsed(apiVersion, kind string, ops cel.Expr) bool {
	plan := planCollapse(apiVersion, kind)
	return plan != nil && readsCollapsed(plan, ops)
}

// readsCollapsed: does ops read the object at or below a keyed list of plan, or the whole of a
// map above one?
func readsCollapsed(plan *collapsePlan, ops cel.Expr) bool {
	for _, r := range cel.ReadsDeep(ops, "object") {
		p := plan
		for i, step := range r.Chain {
			if p == nil {
				break
			}
			j := slices.IndexFunc(p.fields, func(f collapseField) bool { return f.name == step })
			if j < 0 {
				p = nil
				break
			}
			f := p.fields[j]
			if f.list != nil {
				if i < len(r.Chain)-1 || !r.Shallow {
					return true
				}
				p = nil
				break
			}
			p = f.sub
		}
		if p != nil && !r.Shallow {
			return true // the whole of a map holding keyed lists
		}
	}
	return false
}

// CollapseSummary names the keyed lists of the kind's objects that the merge collapses, as
// paths (items as []) with their keys: none for a kind without any; kinds with the same summary
// collapse alike (the backend shares their expressions).
func CollapseSummary(apiVersion, kind string) []string {
	var out []string
	var walk func(p *collapsePlan, at string)
	walk = func(p *collapsePlan, at string) {
		if p == nil {
			return
		}
		for _, f := range p.fields {
			path := join(at, f.name)
			if f.list != nil {
				out = append(out, path+"("+strings.Join(f.list.keys, ",")+")")
				walk(f.list.item, path+"[]")
				continue
			}
			walk(f.sub, path)
		}
	}
	walk(planCollapse(apiVersion, kind), "")
	return out
}
