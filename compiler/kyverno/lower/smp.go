package lower

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/mapc-dev/mapc/cel"
)

// StrategicMerge lowers a patchStrategicMerge for objects of the kind apiVersion/kind: the
// condition its anchors put on the object (cel.True when none) and the JSONPatch operations that
// give Kyverno's result when it holds.
//
// Kyverno merges with kustomize's strategic merge (kyaml merge2, new list items prepended), with
// the merge keys of kyaml's embedded Kubernetes OpenAPI (a list without a merge strategy there —
// any list of a custom resource — is replaced whole). A keyed list comes out with the patch's
// items first, in the patch's order, then the object's other items in their order; Kyverno's
// anchors: (key) conditions (on a map: the whole rule is skipped when one fails; in a list of
// maps: the patch applies to the items that pass), +(key) add-if-not-present, <(key) global
// conditions (a list item holding one only gates the rule); and kyaml's $patch directives.
func StrategicMerge(apiVersion, kind string, patch map[string]any) (cond, ops cel.Expr, err error) {
	g := &smp{always: rootMaps(apiVersion, kind)}
	s := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind})
	g.reach = cel.True
	dropped, err := dropEquality(patch, s, "")
	if err != nil {
		return nil, nil, err
	}
	patch = dropped.(map[string]any)
	switch d, err := directive(patch, ""); {
	case err != nil:
		return nil, nil, err
	case d == "delete" || d == "replace":
		return nil, nil, errorf("$patch", "$patch: %s on the whole object is not supported: Kyverno's merge would delete or replace the object itself", d)
	}
	ops, err = g.mapOps(cel.Pointer{}, object, patch, s, "", true)
	if err != nil {
		return nil, nil, err
	}
	return cel.And(g.conds...), ops, nil
}

// Signature names what lowering patch depends on in the schema of apiVersion/kind: the merge
// keys of each list the patch reaches. Kinds with the same signature lower alike.
func Signature(apiVersion, kind string, patch map[string]any) string {
	var b strings.Builder
	var walk func(v any, s *openapi.ResourceSchema, path string)
	walk = func(v any, s *openapi.ResourceSchema, path string) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				_, name := anchor(k)
				var fs *openapi.ResourceSchema
				if s != nil {
					fs = s.Field(name)
				}
				walk(x[k], fs, path+"."+name)
			}
		case []any:
			var es *openapi.ResourceSchema
			if s != nil {
				es = s.Elements()
			}
			fmt.Fprintf(&b, "%s=%s,%t;", path, strings.Join(mergeKeys(s), ","), es != nil)
			for _, e := range x {
				walk(e, es, path+"[]")
			}
		}
	}
	walk(patch, openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind}), "")
	return b.String()
}

type smp struct {
	conds []cel.Expr
	vars  int
	// reach is the condition that the map mapOps works on exists (static maps only).
	reach cel.Expr
	// always: the places where every object of the kind has a map at admission (alwaysMaps);
	// path: the field names of the static map mapOps works on.
	always map[string]bool
	path   []string
}

func (g *smp) fresh(prefix string) string {
	g.vars++
	return prefix + strconv.Itoa(g.vars)
}

// anchor splits an anchored key: "(k)" condition, "+(k)" add-if-not-present, "<(k)" global
// condition; kind "" for a plain key.
func anchor(key string) (kind, name string) {
	switch {
	case strings.HasPrefix(key, "+(") && strings.HasSuffix(key, ")"):
		return "+", key[2 : len(key)-1]
	case strings.HasPrefix(key, "<(") && strings.HasSuffix(key, ")"):
		return "<", key[2 : len(key)-1]
	case strings.HasPrefix(key, "(") && strings.HasSuffix(key, ")"):
		return "(", key[1 : len(key)-1]
	case len(key) > 2 && strings.ContainsAny(key[:1], "=X^") && key[1] == '(' && strings.HasSuffix(key, ")"):
		return key[:1], key[2 : len(key)-1]
	}
	return "", key
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// present is cur[?key].orValue(null) != null: the field is there and not null.
func present(cur cel.Expr, key string) cel.Expr {
	return cel.Bin("!=", cel.Method(cel.OptIndex(cur, cel.Str(key)), "orValue", cel.Null()), cel.Null())
}

// mapOps merges the map patch into the map cur at p. static says cur is a fixed place of the
// object (conditions there skip the whole rule); inside a list's items it is not.
func (g *smp) mapOps(p cel.Pointer, cur cel.Expr, patch map[string]any, s *openapi.ResourceSchema, field string, static bool) (cel.Expr, error) {
	var parts []cel.Expr
	for _, key := range slices.Sorted(maps.Keys(patch)) {
		v := patch[key]
		kind, name := anchor(key)
		f := join(field, key)
		if key == "$patch" {
			continue // read by the caller: directive
		}
		if strings.HasPrefix(name, "$") {
			return nil, errorf(f, "%s", unknownDirective)
		}
		if kind == "" && prunable(v) {
			continue // Kyverno drops empty maps from the patch before merging
		}
		var fs *openapi.ResourceSchema
		if s != nil {
			fs = s.Field(name)
		}
		child := cel.Index(cur, cel.Str(name))
		cp := p.Child(name)
		switch kind {
		case "(", "<":
			// On a map, a global anchor is a condition anchor: either skips the whole rule.
			if !static {
				return nil, errorf(f, "a condition anchor below a list item's top level is not supported yet")
			}
			c, err := condition(cur, name, v, f)
			if err != nil {
				return nil, err
			}
			g.conds = append(g.conds, cel.And(g.reach, c))
			continue
		case "+":
			if v == nil {
				// Where the field is missing, a null is left in the patch, which clears
				// nothing: Kyverno's merge sets no null.
				continue
			}
			val, err := fresh(v, f, fs)
			if err != nil {
				return nil, err
			}
			parts = append(parts, cel.Guarded(cel.Not(present(cur, name)), cel.List(cel.PatchOp("add", cp, val))))
			continue
		case "":
		default:
			return nil, errorf(f, "the %s(...) anchor is not supported in a mutate rule's patch: Kyverno's mutate anchors are (key), +(key) and <(key); the rule cannot be translated", kind)
		}
		switch x := v.(type) {
		case nil:
			parts = append(parts, cel.Guarded(present(cur, name), cel.List(cel.PatchOp("remove", cp, nil))))
		case map[string]any:
			d, err := directive(x, f)
			if err != nil {
				return nil, err
			}
			if d == "delete" || d == "replace" {
				if hasAnchor(x) {
					return nil, errorf(f, "anchors in a map with $patch: %s are not supported: Kyverno evaluates them against the object's map the directive drops", d)
				}
			}
			switch d {
			case "delete":
				parts = append(parts, cel.Guarded(present(cur, name), cel.List(cel.PatchOp("remove", cp, nil))))
				continue
			case "replace":
				val, err := fresh(x, f, fs)
				if err != nil {
					return nil, err
				}
				parts = append(parts, cel.List(cel.PatchOp("add", cp, val)))
				continue
			}
			reach, path := g.reach, g.path
			// A map the object always has at admission needs no test and no creation.
			always := static && g.always[pathKey(append(path[:len(path):len(path)], name))]
			if static {
				g.path = append(path[:len(path):len(path)], name)
				if !always {
					g.reach = cel.And(reach, present(cur, name))
				}
			}
			inner, err := g.mapOps(cp, child, x, fs, f, static)
			g.reach, g.path = reach, path
			if err != nil {
				return nil, err
			}
			if always {
				parts = append(parts, inner)
				continue
			}
			// Kyverno's merge adds the patch's map where the object has none, also when nothing
			// is left of it (its fields null or deleted).
			var whenMissing cel.Expr = cel.List()
			if !hasCondition(x) {
				val, err := fresh(x, f, fs)
				if err != nil {
					return nil, err
				}
				whenMissing = cel.List(cel.PatchOp("add", cp, val))
			}
			parts = append(parts, cel.CondList(present(cur, name), inner, whenMissing))
		case []any:
			ops, err := g.listOps(cp, cur, name, x, fs, f, static)
			if err != nil {
				return nil, err
			}
			parts = append(parts, ops)
		default:
			if x, ok := x.(expr); ok && x.t&placeTypes(fs)&(tMap|tList) != 0 {
				ops, err := g.wholeValue(cp, cur, name, x, fs, f)
				if err != nil {
					return nil, err
				}
				parts = append(parts, ops)
				continue
			}
			val, err := valueOf(x)
			if err != nil {
				return nil, errorf(f, "%v", err)
			}
			parts = append(parts, cel.List(cel.PatchOp("add", cp, val)))
		}
	}
	return concat(parts), nil
}

// placeTypes are the types the schema allows at a place in the object (every type where it is
// not known): a value of another type makes an object the API server refuses, in Kyverno as in
// the policy.
func placeTypes(s *openapi.ResourceSchema) types {
	if s == nil {
		return tAny
	}
	return schemaTypes(s)
}

// wholeValue merges a variable's value, which can be a map or a list, into cur[name] at p.
// Kyverno substitutes the patch's variables before it merges, so such a value merges as the
// patch's own map or list would: a list replaces the object's where the schema gives it no
// merge strategy; a map is merged into the object's, key by key (added whole where the object
// has none, unless empty: Kyverno's preprocessing drops empty maps from the substituted patch).
// Supported for maps whose values are strings, numbers or booleans (as labels'): a null among
// them would delete the object's key, a map or list merge again.
func (g *smp) wholeValue(p cel.Pointer, cur cel.Expr, name string, x expr, s *openapi.ResourceSchema, field string) (cel.Expr, error) {
	if x.t&tList != 0 {
		if keys := mergeKeys(s); len(keys) > 0 {
			return nil, errorf(field, "the variable's value can be a list, which Kyverno merges into the object's list (a list with a merge strategy): not supported yet; write the list's items in the patch")
		}
	}
	if x.t&placeTypes(s)&tMap == 0 {
		return cel.List(cel.PatchOp("add", p, x.e)), nil
	}
	if !x.vals.only(tStr | tBool | tInt | tDouble) {
		return nil, errorf(field, "the variable's value can be a map, which Kyverno merges into the object's map key by key: supported where its values are strings, numbers or booleans (labels, annotations), not where they can be null, maps or lists")
	}
	v := g.fresh("m")
	k := g.fresh("k")
	val, key := cel.Ident(v), cel.Ident(k)
	merge := cel.Method(val, "map", key, cel.PatchOp("add", p.Key(key), cel.Index(val, key)))
	// Kyverno drops an empty map from the patch (after substituting its variables).
	added := cel.Guarded(cel.Bin(">", cel.Call("size", val), cel.Int(0)), cel.List(cel.PatchOp("add", p, val)))
	ops := cel.Cond(present(cur, name), merge, added)
	if x.t != tMap {
		ops = cel.Cond(isType(val, "map"), ops, cel.List(cel.PatchOp("add", p, val)))
	}
	return cel.Let(v, x.e, ops), nil
}

// listOps merges the list patch into cur[name] at p.
func (g *smp) listOps(p cel.Pointer, parent cel.Expr, name string, patch []any, s *openapi.ResourceSchema, field string, static bool) (cel.Expr, error) {
	cur := cel.Index(parent, cel.Str(name))
	// Items with a global anchor only gate the rule: Kyverno drops them from the patch.
	var rest []any
	var place []int // the place in the patch of each item of rest, for messages
	for i, e := range patch {
		if m, ok := e.(map[string]any); ok && hasGlobal(m) {
			if err := g.gate(parent, name, m, s, fmt.Sprintf("%s[%d]", field, i), static); err != nil {
				return nil, err
			}
			continue
		}
		rest = append(rest, e)
		place = append(place, i)
	}
	if len(rest) == 0 {
		return cel.List(), nil
	}
	patch = rest
	item := func(i int) string { return fmt.Sprintf("%s[%d]", field, place[i]) }
	for i, e := range patch {
		if m, ok := e.(map[string]any); ok && hasAnchor(m) {
			if _, ok := m["$patch"]; ok {
				return nil, errorf(item(i), "$patch in a list item with anchors is not supported yet")
			}
		}
	}
	keys := mergeKeys(s)
	if len(keys) == 0 {
		// Not associative: the patch's list replaces the object's.
		if hasCondition(patch) {
			return nil, errorf(field, "a condition anchor in a list without merge keys is not supported yet")
		}
		if hasDirective(patch) {
			return nil, errorf(field, "$patch in a list without merge keys is not supported: kyaml's merge writes the list into the object as it is, directives included")
		}
		val, err := fresh(patch, field, s)
		if err != nil {
			return nil, err
		}
		return cel.List(cel.PatchOp("add", p, val)), nil
	}
	if len(keys) > 1 {
		return nil, errorf(field, "lists merged on several keys (%s) are not supported yet", strings.Join(keys, ", "))
	}
	key := keys[0]
	if key == "" {
		return nil, errorf(field, "merging lists of values (a merge strategy without a merge key) is not supported yet")
	}
	if len(patch) == 1 {
		if m, ok := patch[0].(map[string]any); ok && itemAnchored(m) {
			if !static {
				return nil, errorf(field, "anchors in a list inside a list item are not supported yet")
			}
			return g.conditionalItems(p, parent, name, m, s.Elements(), item(0), key)
		}
	}
	var elems []map[string]any
	var values []cel.Expr
	var kept []any    // the items Kyverno adds where the object has no list
	var dirs []string // each item's $patch
	var elemField []string
	var deleted []cel.Expr // the keys of the items $patch: delete removes
	seen := map[string]bool{}
	for i, e := range patch {
		m, ok := e.(map[string]any)
		f := item(i)
		if _, isVar := e.(expr); isVar && !ok {
			return nil, errorf(f, "a variable as a whole item of a list merged on %q is not supported yet: Kyverno merges the object it gives into the item of the same %s; write the item's %s and fields in the patch", key, key, key)
		}
		if !ok {
			return nil, errorf(f, "an item of a list merged on %q must be an object", key)
		}
		if len(m) == 1 && m["$patch"] != nil {
			return nil, errorf(f, "$patch on a whole list is not supported: where the object has no such list, Kyverno's merge writes the directive into the object as a list item")
		}
		d, err := directive(m, f)
		if err != nil {
			return nil, err
		}
		if itemAnchored(m) {
			return nil, errorf(f, "anchors in a list of several patch items are not supported yet: Kyverno patches every item of the object's list that passes an anchored item's conditions with that item, its own name replaced by the item's")
		}
		kv, ok := m[key]
		if !ok {
			return nil, errorf(f, "has no %q, the list's merge key: Kyverno's merge cannot place it; the rule cannot be translated", key)
		}
		switch kv.(type) {
		case string, int64, float64, bool:
		case expr:
			return nil, errorf(f+"."+key, "a variable as the merge key is not supported here")
		default:
			return nil, errorf(f+"."+key, "the merge key must be a scalar")
		}
		id := fmt.Sprint(kv)
		if seen[id] {
			return nil, errorf(f, "%s %q is patched twice in one list", key, id)
		}
		seen[id] = true
		val, err := cel.Value(kv)
		if err != nil {
			return nil, errorf(f, "%v", err)
		}
		if d == "delete" {
			deleted = append(deleted, val)
			continue
		}
		if d != "" { // kyaml's merge drops it
			m = maps.Clone(m)
			delete(m, "$patch")
		}
		elems = append(elems, m)
		elemField = append(elemField, f)
		values = append(values, val)
		dirs = append(dirs, d)
		kept = append(kept, m)
	}
	// The list is missing: the patch's items, cleaned, make it (those deleted left out: an
	// empty list if nothing is left).
	whole, err := fresh(kept, field, s)
	if err != nil {
		return nil, err
	}
	whenMissing := cel.List(cel.PatchOp("add", p, whole))

	// The list is there: merge each item into the object's item with its key, or add it at the
	// end; then move the patch's items to the front, in the patch's order.
	i, x := cel.Ident("i"), cel.Ident("x")
	matches := func(v cel.Expr) cel.Expr {
		return cel.And(present(x, key), cel.Bin("==", cel.Index(x, cel.Str(key)), v))
	}
	idxVars := make([]string, len(elems))
	var binds []cel.Expr // index lists, bound below
	var parts []cel.Expr
	for j, e := range elems {
		idxVars[j] = g.fresh("k")
		binds = append(binds, cel.Method(cur, "transformList", i, x, matches(values[j]), i))
		ix := cel.Ident(idxVars[j])
		exists := cel.Bin(">", cel.Call("size", ix), cel.Int(0))
		at := cel.Index(ix, cel.Int(0))
		rest := map[string]any{}
		for k, v := range e {
			if k != key && dirs[j] != "replace" { // the key is equal already
				rest[k] = v
			}
		}
		// $patch: replace on an item the object has changes nothing but its place: kyaml's
		// merge replaces the item, then puts the object's item back in its place.
		merged, err := g.mapOps(p.Index(at), cel.Index(cur, at), rest, s.Elements(), elemField[j], false)
		if err != nil {
			return nil, err
		}
		val, err := fresh(e, elemField[j], s.Elements())
		if err != nil {
			return nil, err
		}
		parts = append(parts, cel.CondList(exists, merged, cel.List(cel.PatchOp("add", p.Child("-"), val))))
	}
	// Positions after the merges: an existing item where it was, a new one after the list's
	// items and the new ones before it.
	pos := make([]cel.Expr, len(elems))
	for j := range elems {
		ix := cel.Ident(idxVars[j])
		var newBefore cel.Expr = cel.Int(0)
		for m := 0; m < j; m++ {
			newBefore = cel.Bin("+", newBefore, cel.Cond(cel.Bin(">", cel.Call("size", cel.Ident(idxVars[m])), cel.Int(0)), cel.Int(0), cel.Int(1)))
		}
		pos[j] = cel.Cond(cel.Bin(">", cel.Call("size", ix), cel.Int(0)), cel.Index(ix, cel.Int(0)), cel.Bin("+", cel.Call("size", cur), newBefore))
	}
	// Moving the j-th patch item to position j: the items moved before it that were after it
	// have shifted it right by one each.
	for j := range elems {
		from := pos[j]
		for m := 0; m < j; m++ {
			from = cel.Bin("+", from, cel.Cond(cel.Bin(">", pos[m], pos[j]), cel.Int(1), cel.Int(0)))
		}
		parts = append(parts, cel.List(moveOp(p.Index(from), p.Index(cel.Int(int64(j))))))
	}
	if len(deleted) > 0 {
		// The object's items $patch: delete names, wherever they are after the moves: behind
		// the patch's items, among the object's items not moved, in their order. Removed in
		// that order, each one's place counts the items before it that stay.
		var moved cel.Expr = cel.List()
		for j := range elems {
			ix := cel.Ident(idxVars[j])
			moved = cel.Bin("+", moved, cel.Cond(cel.Bin(">", cel.Call("size", ix), cel.Int(0)), cel.List(cel.Index(ix, cel.Int(0))), cel.List()))
		}
		del := func(y cel.Expr) cel.Expr {
			var cs []cel.Expr
			for _, v := range deleted {
				cs = append(cs, cel.Bin("==", cel.Index(y, cel.Str(key)), v))
			}
			return cel.And(present(y, key), cel.Or(cs...))
		}
		iv, xv, jv, yv := g.fresh("i"), g.fresh("x"), g.fresh("j"), g.fresh("y")
		i, x, j, y := cel.Ident(iv), cel.Ident(xv), cel.Ident(jv), cel.Ident(yv)
		stays := cel.Method(cur, "transformList", j, y, cel.And(cel.Bin("<", j, i), cel.Not(cel.Bin("in", j, moved)), cel.Not(del(y))), cel.True)
		at := cel.Bin("+", cel.Int(int64(len(elems))), cel.Call("size", stays))
		parts = append(parts, cel.Method(cur, "transformList", i, x, del(x), cel.PatchOp("remove", p.Index(at), nil)))
	}
	var whenThere cel.Expr = concat(parts)
	for j := len(elems) - 1; j >= 0; j-- {
		whenThere = cel.Let(idxVars[j], binds[j], whenThere)
	}
	return cel.CondList(present(parent, name), whenThere, whenMissing), nil
}

// conditionalItems patches the list cur with the patch item m that holds anchors, as Kyverno's
// preprocessing does (processListOfMaps): it walks one copy of m down each item of the object's
// list in turn, and each item that passes m's top-level condition anchors and has a name gets
// the copy as it then stands, anchors dropped and its name set to the item's (a name m gives
// is replaced); the patched items move to the front in their order. The walk decides each
// +(key) anchor of the copy once, on the first item that reaches it — a top-level one on the
// list's first item, one below on the first item that passes the conditions —: the key is
// kept (as a plain key) when that item lacks it, dropped otherwise, and the same for every item
// after. A copy left empty (maps with nothing in them are dropped) patches and moves nothing.
func (g *smp) conditionalItems(p cel.Pointer, parent cel.Expr, name string, m map[string]any, s *openapi.ResourceSchema, field, key string) (cel.Expr, error) {
	cur := cel.Index(parent, cel.Str(name))
	if key != "name" {
		return nil, errorf(field, "anchors in a list item select items by name; this list is merged on %q, which is not supported yet", key)
	}
	iv, xv := g.fresh("i"), g.fresh("x")
	i, x := cel.Ident(iv), cel.Ident(xv)
	rest := map[string]any{}
	var conds []cel.Expr
	named := false // the copy keeps a name, so it is never empty
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kind, name := anchor(k)
		switch {
		case kind == "(":
			c, err := condition(x, name, m[k], join(field, k))
			if err != nil {
				return nil, err
			}
			conds = append(conds, c)
			continue
		case k == "name":
			switch m[k].(type) {
			case string, int64, float64, bool, expr:
			default:
				return nil, errorf(join(field, k), "the name of a patch item with anchors must be a scalar (Kyverno replaces it with each item's)")
			}
			named = true
			continue
		}
		rest[k] = m[k]
	}
	adds, err := addAnchors(rest, nil, field)
	if err != nil {
		return nil, err
	}
	linear := len(adds) > 0 && g.linearAdds(rest, adds)
	if !linear && len(adds) > maxAddAnchors {
		return nil, errorf(field, "%d +(key) anchors in a patch item with anchors: more than %d are not supported here (each decision is a case of its own where the item holds $patch, a null behind an anchor, or a key both with and without one)", len(adds), maxAddAnchors)
	}
	passes := func(item cel.Expr) cel.Expr {
		cs := make([]cel.Expr, len(conds))
		for n, c := range conds {
			cs[n] = cel.Substitute(c, xv, item)
		}
		return cel.And(cs...)
	}
	selected := func(item cel.Expr) cel.Expr { return cel.And(present(item, "name"), passes(item)) }
	// The items that decide the +(key) anchors: the first, and the first that passes.
	jv, yv := g.fresh("j"), g.fresh("y")
	first := cel.Index(cur, cel.Int(0))
	// By its index: what it reads of the item stays a path of the list's items.
	firstPassing := cel.Index(cur, cel.Index(cel.Method(cur, "transformList", cel.Ident(jv), cel.Ident(yv), passes(cel.Ident(yv)), cel.Ident(jv)), cel.Int(0)))
	if len(conds) == 0 {
		firstPassing = first
	}
	lacks := make([]cel.Expr, len(adds))
	for n, a := range adds {
		d := firstPassing
		if len(a.path) == 0 {
			d = first
		}
		for _, k := range a.path {
			d = cel.OptIndex(d, cel.Str(k))
		}
		lacks[n] = cel.Bin("==", cel.Method(cel.OptIndex(d, cel.Str(a.key)), "orValue", cel.Null()), cel.Null())
	}
	rank := cel.Call("size", cel.Method(cur, "transformList", cel.Ident(jv), cel.Ident(yv),
		cel.And(cel.Bin("<", cel.Ident(jv), i), selected(cel.Ident(yv))), cel.True))
	if linear {
		body, err := g.decidedItem(p.Index(i), x, rest, adds, lacks, s, field, named)
		if err != nil {
			return nil, err
		}
		body = concat([]cel.Expr{body, cel.List(moveOp(p.Index(i), p.Index(rank)))})
		if !named {
			// A copy left empty (no plain key, every anchor dropped) patches and moves nothing.
			kept := slices.Clone(lacks)
			if plain, _ := pruned(decideAdds(rest, 0, adds, nil)).(map[string]any); len(plain) > 0 {
				kept = append(kept, cel.True)
			}
			body = cel.Guarded(cel.Or(kept...), body)
		}
		body = cel.Guarded(selected(x), body)
		ops := cel.Method(cel.Method(cur, "transformList", i, x, body), "flatten")
		return cel.Guarded(present(parent, name), ops), nil
	}
	// One case per combination of the decisions (bit n set: the n-th key is kept).
	var whens, each []cel.Expr
	for c := 0; c < 1<<len(adds); c++ {
		var when []cel.Expr
		for n := range adds {
			if c&(1<<n) != 0 {
				when = append(when, lacks[n])
			} else {
				when = append(when, cel.Not(lacks[n]))
			}
		}
		cp, _ := pruned(decideAdds(rest, c, adds, nil)).(map[string]any)
		var ops cel.Expr = cel.List()
		if len(cp) > 0 || named {
			merged, err := g.mapOps(p.Index(i), x, cp, s, field, false)
			if err != nil {
				return nil, err
			}
			ops = concat([]cel.Expr{merged, cel.List(moveOp(p.Index(i), p.Index(rank)))})
		}
		whens, each = append(whens, cel.And(when...)), append(each, ops)
	}
	if !slices.ContainsFunc(each, func(e cel.Expr) bool { return !cel.IsEmpty(e) }) {
		return cel.List(), nil // every copy is empty: nothing is patched or moved
	}
	body := each[len(each)-1]
	for n := len(each) - 2; n >= 0; n-- {
		body = cel.CondList(whens[n], each[n], body)
	}
	body = cel.Guarded(selected(x), body)
	ops := cel.Method(cel.Method(cur, "transformList", i, x, body), "flatten")
	return cel.Guarded(present(parent, name), ops), nil
}

// itemAnchored: does v hold what makes Kyverno's preprocessing patch every item of a list with
// the list item v (hasAnchors with hasAnchor): a condition, global or +(key) anchor as a key
// anywhere, or a condition or global anchor as a string.
func itemAnchored(v any) bool { return anchoredBy(v, "(<+") }

// Anchor is anchor, for the backend's analyses of what a patch writes.
func Anchor(key string) (kind, name string) { return anchor(key) }

// ItemAnchored is itemAnchored, for the planning of mutations: such an item patches the items
// the list has, and adds none.
func ItemAnchored(v any) bool { return itemAnchored(v) }

// anchoredBy: does v hold a key anchored by one of kinds anywhere, or a string value that reads
// as a condition or global anchor (which Kyverno's hasAnchors finds in scalars)?
func anchoredBy(v any, kinds string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if kind, _ := anchor(k); kind != "" && strings.Contains(kinds, kind) || anchoredBy(e, kinds) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return anchoredBy(e, kinds) })
	case string:
		kind, _ := anchor(strings.TrimSpace(x))
		return kind == "(" || kind == "<"
	}
	return false
}

// linearAdds: can the +(key) anchors adds of the patch item's fields rest be lowered one by one
// (decidedItem), rather than one case per combination of the decisions? Not where rest holds a
// directive, an anchor's value is null or prunes to nothing, or a key is written both with an
// anchor and without.
func (g *smp) linearAdds(rest map[string]any, adds []addAnchor) bool {
	if hasDirective(rest) {
		return false
	}
	plain := decideAdds(rest, 0, adds, nil)
	for _, a := range adds {
		v := anchorValue(rest, a)
		if v == nil || prunable(v) {
			return false
		}
		at := any(plain)
		for _, k := range a.path {
			m, _ := at.(map[string]any)
			at = m[k]
		}
		if m, ok := at.(map[string]any); ok {
			if _, both := m[a.key]; both {
				return false
			}
		}
	}
	return true
}

// anchorValue is the value of the +(key) anchor a in the patch item's fields rest.
func anchorValue(rest map[string]any, a addAnchor) any {
	m := rest
	for _, k := range a.path {
		m, _ = m[k].(map[string]any)
	}
	return m["+("+a.key+")"]
}

// decidedItem merges the copy of the patch item's fields rest that Kyverno's walk decides into
// the item x at p, without a case per combination of the decisions: first the fields without
// anchors, then each map on the way to a kept anchor's key that neither the item nor those
// fields have (empty, in order from the top), then each kept key (kept[n]: the n-th anchor of
// adds is kept), merged as a field without anchor. What the item has is read from x as the
// request brings it: a map created on the way holds none of the keys, and the plain fields
// never write an anchor's key (linearAdds).
func (g *smp) decidedItem(p cel.Pointer, x cel.Expr, rest map[string]any, adds []addAnchor, kept []cel.Expr, s *openapi.ResourceSchema, field string, named bool) (cel.Expr, error) {
	plain, _ := pruned(decideAdds(rest, 0, adds, nil)).(map[string]any)
	var parts []cel.Expr
	if len(plain) > 0 || named {
		ops, err := g.mapOps(p, x, plain, s, field, false)
		if err != nil {
			return nil, err
		}
		parts = append(parts, ops)
	}
	at := func(path []string) (cel.Pointer, cel.Expr, *openapi.ResourceSchema, cel.Expr) {
		ptr, cur, sch := p, x, s
		var has []cel.Expr
		for _, k := range path {
			has = append(has, present(cur, k))
			ptr, cur = ptr.Child(k), cel.Index(cur, cel.Str(k))
			if sch != nil {
				sch = sch.Field(k)
			}
		}
		return ptr, cur, sch, cel.And(has...)
	}
	// The maps on the way, each once, from the top.
	var ways [][]string
	for _, a := range adds {
		for n := 1; n <= len(a.path); n++ {
			if w := a.path[:n]; !slices.ContainsFunc(ways, func(v []string) bool { return slices.Equal(v, w) }) {
				ways = append(ways, w)
			}
		}
	}
	slices.SortStableFunc(ways, func(a, b []string) int { return len(a) - len(b) })
	for _, w := range ways {
		if m, _ := patchAt(plain, w).(map[string]any); m != nil {
			continue // the fields without anchors make it
		}
		var below []cel.Expr
		for n, a := range adds {
			if len(a.path) >= len(w) && slices.Equal(a.path[:len(w)], w) {
				below = append(below, kept[n])
			}
		}
		ptr, _, _, has := at(w)
		parts = append(parts, cel.Guarded(cel.And(cel.Not(has), cel.Or(below...)), cel.List(cel.PatchOp("add", ptr, cel.Map(nil, nil)))))
	}
	for n, a := range adds {
		v := anchorValue(rest, a)
		f := join(field, strings.Join(append(slices.Clone(a.path), a.key), "."))
		ptr, cur, sch, has := at(a.path)
		merged, err := g.mapOps(ptr, cur, map[string]any{a.key: v}, sch, f, false)
		if err != nil {
			return nil, err
		}
		var fs *openapi.ResourceSchema
		if sch != nil {
			fs = sch.Field(a.key)
		}
		val, err := fresh(pruned(v), f, fs)
		if err != nil {
			return nil, err
		}
		created := cel.List(cel.PatchOp("add", ptr.Child(a.key), val))
		if len(a.path) == 0 {
			parts = append(parts, cel.Guarded(kept[n], merged))
			continue
		}
		parts = append(parts, cel.Guarded(kept[n], cel.CondList(has, merged, created)))
	}
	return concat(parts), nil
}

// patchAt is the patch v's value at path (nil where it has none).
func patchAt(v any, path []string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// maxAddAnchors bounds the +(key) anchors of a patch item with anchors.
const maxAddAnchors = 3

// addAnchor is a +(key) anchor of a patch item: the plain keys down to its map, and its key.
type addAnchor struct {
	path []string
	key  string
}

// addAnchors lists the +(key) anchors of the patch item m (below plain keys, in sorted order).
func addAnchors(m map[string]any, path []string, field string) ([]addAnchor, error) {
	var out []addAnchor
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kind, name := anchor(k)
		f := join(field, k)
		switch {
		case kind == "+":
			if itemAnchored(m[k]) {
				return nil, errorf(f, "anchors inside a +(key) anchor's value in a list item are not supported yet")
			}
			out = append(out, addAnchor{path: slices.Clone(path), key: name})
		case kind == "(" || kind == "<":
			return nil, errorf(f, "a condition anchor below a list item's top level is not supported yet")
		case kind != "":
			if itemAnchored(m[k]) {
				return nil, errorf(f, "anchors inside a %s(key) anchor's value in a list item are not supported yet", kind)
			}
		default:
			switch x := m[k].(type) {
			case map[string]any:
				below, err := addAnchors(x, append(path, k), f)
				if err != nil {
					return nil, err
				}
				out = append(out, below...)
			case []any:
				if hasAnchor(x) {
					return nil, errorf(f, "anchors in a list inside a list item are not supported yet")
				}
			}
		}
	}
	return out, nil
}

// decideAdds is the patch item m with its +(key) anchors decided by the bits of c (see
// addAnchors for their order): a set bit keeps the key as a plain key, a clear one drops it.
func decideAdds(m map[string]any, c int, adds []addAnchor, path []string) map[string]any {
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kind, name := anchor(k)
		if kind == "+" {
			n := slices.IndexFunc(adds, func(a addAnchor) bool { return a.key == name && slices.Equal(a.path, path) })
			if c&(1<<n) != 0 {
				out[name] = m[k]
			}
			continue
		}
		if x, ok := m[k].(map[string]any); ok {
			out[k] = decideAdds(x, c, adds, append(slices.Clone(path), k))
			continue
		}
		out[k] = m[k]
	}
	return out
}

// pruned is v as Kyverno's preprocessing leaves it when it drops anchors (deleteAnchors, on a
// value without any): maps and lists left with nothing in them are dropped, scalars stay.
func pruned(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if !prunable(e) {
				out[k] = pruned(e)
			}
		}
		return out
	case []any:
		var out []any
		for _, e := range x {
			if !prunable(e) {
				out = append(out, pruned(e))
			}
		}
		if out == nil {
			out = []any{}
		}
		return out
	}
	return v
}

func moveOp(from, to cel.Pointer) cel.Expr {
	return cel.Object("JSONPatch", []string{"op", "from", "path"}, []cel.Expr{cel.Str("move"), from.Expr(), to.Expr()})
}

// condition is Kyverno's condition anchor (key) or <(key): pattern on the map cur. Patterns
// supported: strings with the wildcards * and ?, other scalars compared for equality, and {}
// (any map).
func condition(cur cel.Expr, key string, pattern any, field string) (cel.Expr, error) {
	val := cel.Index(cur, cel.Str(key))
	switch x := pattern.(type) {
	case string:
		if x == "" || strings.ContainsAny(x, "|!<>=&") || strings.Contains(x, "-") && isRange(x) {
			return nil, errorf(field, "the pattern %q uses Kyverno's pattern operators, which are not supported yet", x)
		}
		return cel.And(present(cur, key), cel.Bin("==", cel.Call("type", val), cel.Ident("string")), Glob(x, val)), nil
	case expr:
		return nil, errorf(field, "variables in condition anchors are not supported yet")
	case bool, int64, float64:
		v, _ := cel.Value(x)
		return cel.And(present(cur, key), cel.Bin("==", val, v)), nil
	case map[string]any:
		if len(x) == 0 { // Kyverno's pattern {} matches any map
			return cel.And(present(cur, key), cel.Bin("==", cel.Call("type", val), cel.Ident("map"))), nil
		}
	}
	return nil, errorf(field, "a condition anchor on a list, or on a map with fields, is not supported yet (the map pattern {} is)")
}

// unknownDirective is why a key starting with $ other than $patch is refused.
const unknownDirective = "kyaml's merge, which Kyverno uses, knows no directive but $patch ($setElementOrder, $retainKeys, $deleteFromPrimitiveList are not): Kyverno would write the key into the object as a field; the rule cannot be translated"

// directive is the map's $patch: "" when it has none, else delete, replace or merge (what
// kyaml's merge knows; it fails on any other value).
func directive(m map[string]any, field string) (string, error) {
	v, ok := m["$patch"]
	if !ok {
		return "", nil
	}
	if s, ok := v.(string); ok && (s == "delete" || s == "replace" || s == "merge") {
		return s, nil
	}
	return "", errorf(join(field, "$patch"), "%v is not a directive kyaml's merge knows (delete, replace, merge): Kyverno fails the rule; the rule cannot be translated", v)
}

// hasAnchor: does v hold an anchored key anywhere?
func hasAnchor(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if kind, _ := anchor(k); kind != "" || hasAnchor(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasAnchor)
	}
	return false
}

// prunable: does Kyverno drop v from the patch before merging? Its preprocessing deletes every
// map that holds nothing but such values (an empty map first) and every non-empty list of them.
func prunable(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if kind, _ := anchor(k); kind != "" || !prunable(e) {
				return false
			}
		}
		return true
	case []any:
		return len(x) > 0 && !slices.ContainsFunc(x, func(e any) bool { return !prunable(e) })
	}
	return false
}

// isRange: does s look like Kyverno's range pattern "a-b"?
func isRange(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) != 2 {
		return false
	}
	_, e1 := strconv.ParseFloat(strings.TrimPrefix(parts[0], "!"), 64)
	_, e2 := strconv.ParseFloat(parts[1], 64)
	return e1 == nil && e2 == nil
}

// mergeKeys are the list's merge keys in kyaml's schema (none: not associative).
func mergeKeys(s *openapi.ResourceSchema) []string {
	if s == nil {
		return nil
	}
	strategy, keys := s.PatchStrategyAndKeyList()
	merge := false
	for _, st := range strings.Split(strategy, ",") {
		if st == "merge" {
			merge = true
		}
	}
	if !merge {
		return nil
	}
	if len(keys) == 0 {
		return []string{""}
	}
	return keys
}

// hasCondition: does v hold a condition anchor anywhere?
func hasCondition(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if kind, _ := anchor(k); kind == "(" || kind == "<" {
				return true
			}
			if hasCondition(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasCondition(e) {
				return true
			}
		}
	}
	return false
}

// hasGlobal is Kyverno's test of a list item for global anchors: a key <(k) anywhere, or a string
// value that reads as a condition or global anchor.
func hasGlobal(v any) bool { return anchoredBy(v, "<") }

// hasDirective: does v hold a $patch anywhere?
func hasDirective(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "$patch" || hasDirective(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasDirective)
	}
	return false
}

// gate lowers a list item m with global anchors, which only gates the rule (Kyverno drops it from
// the patch): the rule is skipped when the list is missing, or when no item of the list passes
// all of m's conditions and some item fails a global one (an empty list passes).
//
// Kyverno's preprocessing walks the item against each element of the list (walkMap): at each
// level its global anchors first (a failure is a global one), then its condition anchors (a
// condition failure), then the fields without anchors, each against the element's field of that
// name (missing: every anchor there fails); the first failure decides. A map field with anchors
// below is walked so (one per level: the order of several would be the patch's field order);
// scalars and maps without anchors beside the anchors change nothing.
func (g *smp) gate(parent cel.Expr, name string, m map[string]any, s *openapi.ResourceSchema, field string, static bool) error {
	if !static {
		return errorf(field, "a global anchor in a list inside a list is not supported yet")
	}
	if s == nil || s.Elements() == nil || len(s.Elements().Schema.Properties) == 0 {
		return errorf(field, "a global anchor in a list is supported where kyaml's schema of the kind (Kubernetes' built-in kinds) says the list holds objects; here it does not")
	}
	if !hasGlobalKey(m) {
		return errorf(field, "a list item whose only global anchor is a string value is not supported yet")
	}
	xv := g.fresh("x")
	x := cel.Ident(xv)
	globals, conds, nested, err := g.walk(m, x, cel.True, field)
	if err != nil {
		return err
	}
	cur := cel.Index(parent, cel.Str(name))
	var pass cel.Expr
	if nested == nil {
		// Some element passes every anchor, or none fails a global one.
		pass = cel.Or(cel.Method(cur, "exists", x, cel.And(append(globals, conds...)...)), cel.Method(cur, "all", x, cel.And(globals...)))
	} else {
		code := walkCode(globals, conds, nested, cel.True)
		pass = cel.Or(cel.Method(cur, "exists", x, cel.Bin("==", code, cel.Int(0))), cel.Method(cur, "all", x, cel.Bin("!=", code, cel.Int(2))))
	}
	if missingCode(m) == 2 {
		// Where the list is missing, the walk fails a global anchor first: skipped.
		g.conds = append(g.conds, cel.And(g.reach, present(parent, name), pass))
	} else {
		g.conds = append(g.conds, cel.And(g.reach, cel.Cond(present(parent, name), pass, cel.True)))
	}
	return nil
}

// missingCode is walkCode where the element has nothing (Kyverno walks the item against the
// missing list too): the first level with anchors decides.
func missingCode(m map[string]any) int {
	var cond bool
	var nested map[string]any
	for k, v := range m {
		switch kind, _ := anchor(k); kind {
		case "<":
			return 2
		case "(":
			cond = true
		case "":
			if sub, ok := v.(map[string]any); ok && hasAnchor(sub) {
				nested = sub
			}
		}
	}
	if cond {
		return 1
	}
	if nested != nil {
		return missingCode(nested)
	}
	return 0
}

// walk reads the pattern m at one level of Kyverno's walk of a gating list item, on the element
// value cur (present where there holds): its global anchors' and condition anchors' tests, and
// the code of the one map field below with anchors (nil: none; see walkCode).
func (g *smp) walk(m map[string]any, cur, there cel.Expr, field string) (globals, conds []cel.Expr, nested cel.Expr, err error) {
	var nestedKey string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kind, key := anchor(k)
		f := join(field, k)
		switch kind {
		case "<", "(":
			c, err := condition(cur, key, m[k], f)
			if err != nil {
				return nil, nil, nil, err
			}
			if kind == "<" {
				globals = append(globals, c)
			} else {
				conds = append(conds, c)
			}
		case "":
			switch v := m[k].(type) {
			case map[string]any:
				if !hasAnchor(v) {
					continue // walked without failing
				}
				if nestedKey != "" {
					return nil, nil, nil, errorf(f, "anchors in several maps of a list item with a global anchor are not supported: Kyverno walks them in the patch's field order, and the first failure decides whether the rule is skipped")
				}
				nestedKey = k
			case []any:
				if len(v) > 0 {
					if _, ok := v[0].(map[string]any); ok {
						return nil, nil, nil, errorf(f, "a list of maps in a list item with a global anchor is not supported yet")
					}
				}
			}
			// A scalar: Kyverno drops the item from the patch, and ignores it.
		default:
			return nil, nil, nil, errorf(f, "the %s(...) anchor in a list item with a global anchor is not supported yet", kind)
		}
	}
	if nestedKey != "" {
		sub := cel.Index(cur, cel.Str(nestedKey))
		subThere := cel.And(there, present(cur, nestedKey), cel.Bin("==", cel.Call("type", sub), cel.Ident("map")))
		if there == cel.True {
			subThere = cel.And(present(cur, nestedKey), cel.Bin("==", cel.Call("type", sub), cel.Ident("map")))
		}
		gs, cs, n, err := g.walk(m[nestedKey].(map[string]any), sub, subThere, join(field, nestedKey))
		if err != nil {
			return nil, nil, nil, err
		}
		nested = walkCode(gs, cs, n, subThere)
	}
	return globals, conds, nested, nil
}

// walkCode is what Kyverno's walk of one level gives (globals and conds its anchors' tests, nested
// the code of the level below, nil for none; there where the element has the level): 0 no
// failure, 1 a condition fails, 2 a global one does. Globals are tested first, then conditions,
// then the level below; where the element has nothing, every anchor fails.
func walkCode(globals, conds []cel.Expr, nested, there cel.Expr) cel.Expr {
	ok := func(cs []cel.Expr) cel.Expr {
		if len(cs) == 0 {
			return cel.True
		}
		if there == cel.True {
			return cel.And(cs...)
		}
		return cel.Cond(there, cel.And(cs...), cel.False)
	}
	choose := func(c, t, f cel.Expr) cel.Expr {
		if c == cel.True {
			return t
		}
		return cel.Cond(c, t, f)
	}
	if nested == nil {
		nested = cel.Int(0)
	}
	return choose(ok(globals), choose(ok(conds), nested, cel.Int(1)), cel.Int(2))
}

// hasGlobalKey: does v hold a key <(k) anywhere?
func hasGlobalKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if kind, _ := anchor(k); kind == "<" || hasGlobalKey(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasGlobalKey)
	}
	return false
}

func hasTopCondition(m map[string]any) bool {
	for k := range m {
		if kind, _ := anchor(k); kind == "(" {
			return true
		}
	}
	return false
}

// fresh is the value v adds where the object has nothing, s its schema: +(k) anchors stripped,
// null fields and what Kyverno prunes dropped, and $patch read as kyaml's merge reads it where it
// walks the value (maps, and the items of lists it merges). Conditions there are refused by the
// caller.
func fresh(v any, field string, s *openapi.ResourceSchema) (cel.Expr, error) {
	c, err := clean(v, field, s, false)
	if err != nil {
		return nil, err
	}
	e, err := valueOf(c)
	if err != nil {
		return nil, errorf(field, "%v", err)
	}
	return e, nil
}

// clean cleans v; literal says it is inside a list kyaml's merge does not merge, which it adds
// as it is, directives included.
func clean(v any, field string, s *openapi.ResourceSchema, literal bool) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		d, err := directive(x, field)
		if err != nil {
			return nil, err
		}
		if d != "" && literal {
			return nil, errorf(join(field, "$patch"), "$patch in a list without merge keys is not supported: kyaml's merge writes the list into the object as it is, directives included")
		}
		out := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			kind, name := anchor(k)
			switch kind {
			case "", "+":
			default:
				return nil, errorf(join(field, k), "this anchor where the object has nothing is not supported yet")
			}
			if k == "$patch" {
				continue // delete is the caller's; replace and merge are dropped where there is nothing
			}
			if strings.HasPrefix(name, "$") {
				return nil, errorf(join(field, k), "%s", unknownDirective)
			}
			if x[k] == nil || prunable(x[k]) {
				continue // kyaml's merge sets no null; Kyverno drops empty maps first
			}
			if m, ok := x[k].(map[string]any); ok && !literal {
				if d, err := directive(m, join(field, k)); err != nil {
					return nil, err
				} else if d == "delete" {
					continue
				}
			}
			var fs *openapi.ResourceSchema
			if s != nil {
				fs = s.Field(name)
			}
			c, err := clean(x[k], join(field, k), fs, literal)
			if err != nil {
				return nil, err
			}
			out[name] = c
		}
		return out, nil
	case []any:
		keys := mergeKeys(s)
		merged := !literal && len(keys) == 1 && keys[0] != ""
		var es *openapi.ResourceSchema
		if s != nil {
			es = s.Elements()
		}
		out := make([]any, 0, len(x))
		for i, e := range x {
			f := fmt.Sprintf("%s[%d]", field, i)
			if prunable(e) {
				continue
			}
			if m, ok := e.(map[string]any); ok && merged {
				if len(m) == 1 && m["$patch"] != nil {
					return nil, errorf(f, "$patch on a whole list is not supported: where the object has no such list, Kyverno's merge writes the directive into the object as a list item")
				}
				if d, err := directive(m, f); err != nil {
					return nil, err
				} else if d == "delete" {
					continue
				}
			}
			c, err := clean(e, f, es, !merged)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	return v, nil
}

// concat joins lists of operations with +, leaving out empty ones and writing neighbouring list
// literals as one (the API server's type checker takes time with every list it checks).
func concat(parts []cel.Expr) cel.Expr {
	var terms []cel.Expr
	for _, p := range parts {
		if cel.IsEmpty(p) {
			continue
		}
		if n := len(terms); n > 0 {
			prev, ok1 := cel.AsList(terms[n-1])
			cur, ok2 := cel.AsList(p)
			if ok1 && ok2 {
				terms[n-1] = cel.List(append(append([]cel.Expr(nil), prev...), cur...)...)
				continue
			}
		}
		terms = append(terms, p)
	}
	if len(terms) == 0 {
		return cel.List()
	}
	out := terms[0]
	for _, t := range terms[1:] {
		out = cel.Bin("+", out, t)
	}
	return out
}

// dropEquality takes out of a patch the keys with the =(key) anchor where Kyverno's merge
// leaves the object as it was. =(key) is a validate anchor, none of mutate's: Kyverno's
// preprocessing walks it as a plain field literally named "=(key)", which the object never has.
// Its value is refused unless it is a list of maps each with a (key) condition anchor at its top
// (what policies that also cover initContainers or ephemeralContainers write): with no object
// list to compare with, every item fails its condition and is deleted, and the emptied field
// with it, so it leaves nothing to merge. Anything else would be merged as the unknown field
// "=(key)" (which the API server drops from a built-in kind, but not from a custom resource,
// a map's keys or a preserved value), or skip the rule (a condition or global anchor on a map,
// a global anchor in an item), or fail it (a variable that cannot be read). s is the schema of
// v's place: only where it names a struct's fields is a key taken out. The maps and lists
// returned are new; the rest is shared with v.
func dropEquality(v any, s *openapi.ResourceSchema, field string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, key := range slices.Sorted(maps.Keys(x)) {
			kind, name := anchor(key)
			f := join(field, key)
			if kind == "=" {
				if s == nil || s.Schema == nil || len(s.Schema.Properties) == 0 {
					return nil, errorf(f, "the =(...) anchor is not supported in a mutate rule's patch here: Kyverno's mutate anchors are (key), +(key) and <(key), and Kyverno merges =(%s) as a field of that name, which only the typed fields of a built-in kind drop", name)
				}
				if err := inertEquality(x[key], f); err != nil {
					return nil, err
				}
				continue
			}
			var fs *openapi.ResourceSchema
			if s != nil {
				fs = s.Field(name)
			}
			e, err := dropEquality(x[key], fs, f)
			if err != nil {
				return nil, err
			}
			out[key] = e
		}
		return out, nil
	case []any:
		var es *openapi.ResourceSchema
		if s != nil {
			es = s.Elements()
		}
		out := make([]any, len(x))
		for i, e := range x {
			d, err := dropEquality(e, es, fmt.Sprintf("%s[%d]", field, i))
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	}
	return v, nil
}

// inertEquality checks that the value of an =(key) anchor leaves nothing to merge (see
// dropEquality).
func inertEquality(v any, field string) error {
	const want = "Kyverno's mutate anchors are (key), +(key) and <(key); an =(key) is translated only as a list of maps each with a (key) condition anchor at its top and no global anchor, variable or directive, which Kyverno's merge drops whole (it finds no list named \"=(key)\" in the object)"
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		return errorf(field, "the =(...) anchor is not supported in a mutate rule's patch: %s", want)
	}
	for i, e := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		m, ok := e.(map[string]any)
		if !ok || !hasTopCondition(m) {
			return errorf(f, "the =(...) anchor is not supported in a mutate rule's patch: %s", want)
		}
		if hasGlobal(m) || hasDirective(m) || hasVariable(m) {
			return errorf(f, "the =(...) anchor is not supported in a mutate rule's patch: %s", want)
		}
	}
	return nil
}

// hasVariable: does v hold a value with variables (or a key with one)?
func hasVariable(v any) bool {
	switch x := v.(type) {
	case expr:
		return true
	case string:
		return strings.Contains(x, "{{")
	case map[string]any:
		for k, e := range x {
			if strings.Contains(k, "{{") || hasVariable(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasVariable)
	}
	return false
}
