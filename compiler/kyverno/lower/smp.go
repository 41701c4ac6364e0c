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
// maps: the patch applies to the items that pass), +(key) add-if-not-present.
func StrategicMerge(apiVersion, kind string, patch map[string]any) (cond, ops cel.Expr, err error) {
	g := &smp{always: rootMaps(apiVersion, kind)}
	s := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind})
	g.reach = cel.True
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
			fmt.Fprintf(&b, "%s=%s;", path, strings.Join(mergeKeys(s), ","))
			var es *openapi.ResourceSchema
			if s != nil {
				es = s.Elements()
			}
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
		if strings.HasPrefix(name, "$") {
			return nil, errorf(f, "strategic merge directives ($patch, $setElementOrder, ...) are not supported yet")
		}
		var fs *openapi.ResourceSchema
		if s != nil {
			fs = s.Field(name)
		}
		child := cel.Index(cur, cel.Str(name))
		cp := p.Child(name)
		switch kind {
		case "(":
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
			val, err := fresh(v, f)
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
			var whenMissing cel.Expr = cel.List()
			if !hasCondition(x) {
				val, err := fresh(x, f)
				if err != nil {
					return nil, err
				}
				if !isEmptyValue(val) {
					whenMissing = cel.List(cel.PatchOp("add", cp, val))
				}
			}
			parts = append(parts, cel.CondList(present(cur, name), inner, whenMissing))
		case []any:
			ops, err := g.listOps(cp, cur, name, x, fs, f, static)
			if err != nil {
				return nil, err
			}
			parts = append(parts, ops)
		default:
			val, err := valueOf(x)
			if err != nil {
				return nil, errorf(f, "%v", err)
			}
			parts = append(parts, cel.List(cel.PatchOp("add", cp, val)))
		}
	}
	return concat(parts), nil
}

// listOps merges the list patch into cur[name] at p.
func (g *smp) listOps(p cel.Pointer, parent cel.Expr, name string, patch []any, s *openapi.ResourceSchema, field string, static bool) (cel.Expr, error) {
	cur := cel.Index(parent, cel.Str(name))
	keys := mergeKeys(s)
	if len(keys) == 0 {
		// Not associative: the patch's list replaces the object's.
		if hasCondition(patch) {
			return nil, errorf(field, "a condition anchor in a list without merge keys is not supported yet")
		}
		val, err := fresh(patch, field)
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
		if m, ok := patch[0].(map[string]any); ok && hasTopCondition(m) {
			if !static {
				return nil, errorf(field, "a condition anchor in a list inside a list is not supported yet")
			}
			return g.conditionalItems(p, parent, name, m, s.Elements(), field+"[0]", key)
		}
	}
	var elems []map[string]any
	var values []cel.Expr
	seen := map[string]bool{}
	for i, e := range patch {
		m, ok := e.(map[string]any)
		f := fmt.Sprintf("%s[%d]", field, i)
		if !ok {
			return nil, errorf(f, "an item of a list merged on %q must be an object", key)
		}
		if hasCondition(m) {
			return nil, errorf(f, "condition anchors in a list of several patch items are not supported yet")
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
		elems = append(elems, m)
		values = append(values, val)
	}
	// The list is missing: the patch's items, cleaned, make it.
	whole, err := fresh(patch, field)
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
			if k != key { // equal already
				rest[k] = v
			}
		}
		merged, err := g.mapOps(p.Index(at), cel.Index(cur, at), rest, s.Elements(), fmt.Sprintf("%s[%d]", field, j), false)
		if err != nil {
			return nil, err
		}
		val, err := fresh(e, fmt.Sprintf("%s[%d]", field, j))
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
	var whenThere cel.Expr = concat(parts)
	for j := len(elems) - 1; j >= 0; j-- {
		whenThere = cel.Let(idxVars[j], binds[j], whenThere)
	}
	return cel.CondList(present(parent, name), whenThere, whenMissing), nil
}

// conditionalItems patches, with the patch item m (whose top-level condition anchors select
// them), each item of the list cur that passes, by name as Kyverno does (items without a name
// are skipped), and moves them to the front in their order.
func (g *smp) conditionalItems(p cel.Pointer, parent cel.Expr, name string, m map[string]any, s *openapi.ResourceSchema, field, key string) (cel.Expr, error) {
	cur := cel.Index(parent, cel.Str(name))
	if key != "name" {
		return nil, errorf(field, "condition anchors select list items by name; this list is merged on %q, which is not supported yet", key)
	}
	if _, ok := m["name"]; ok {
		return nil, errorf(field+".name", "a patch item with condition anchors takes the name of each item it selects; giving a name too is not supported yet")
	}
	iv, xv := g.fresh("i"), g.fresh("x")
	i, x := cel.Ident(iv), cel.Ident(xv)
	rest := map[string]any{}
	var conds []cel.Expr
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kind, name := anchor(k)
		if kind == "(" {
			c, err := condition(x, name, m[k], join(field, k))
			if err != nil {
				return nil, err
			}
			conds = append(conds, c)
			continue
		}
		rest[k] = m[k]
	}
	selected := func(item cel.Expr) cel.Expr {
		cs := []cel.Expr{present(item, "name")}
		for _, c := range conds {
			cs = append(cs, cel.Substitute(c, xv, item))
		}
		return cel.And(cs...)
	}
	merged, err := g.mapOps(p.Index(i), x, rest, s, field, false)
	if err != nil {
		return nil, err
	}
	jv, yv := g.fresh("j"), g.fresh("y")
	rank := cel.Call("size", cel.Method(cur, "transformList", cel.Ident(jv), cel.Ident(yv),
		cel.And(cel.Bin("<", cel.Ident(jv), i), selected(cel.Ident(yv))), cel.True))
	body := cel.Guarded(selected(x), concat([]cel.Expr{merged, cel.List(moveOp(p.Index(i), p.Index(rank)))}))
	ops := cel.Method(cel.Method(cur, "transformList", i, x, body), "flatten")
	return cel.Guarded(present(parent, name), ops), nil
}

func moveOp(from, to cel.Pointer) cel.Expr {
	return cel.Object("JSONPatch", []string{"op", "from", "path"}, []cel.Expr{cel.Str("move"), from.Expr(), to.Expr()})
}

// condition is Kyverno's condition anchor (key): pattern on the map cur. Patterns supported:
// strings with the wildcards * and ?, and other scalars compared for equality.
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
	}
	return nil, errorf(field, "a condition anchor on a map or list value is not supported yet")
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

func hasTopCondition(m map[string]any) bool {
	for k := range m {
		if kind, _ := anchor(k); kind == "(" {
			return true
		}
	}
	return false
}

// fresh is the value v adds where the object has nothing: +(k) anchors stripped, null fields
// and empty maps dropped (as kyaml's merge drops them). Conditions there are refused by the
// caller.
func fresh(v any, field string) (cel.Expr, error) {
	c, err := clean(v, field)
	if err != nil {
		return nil, err
	}
	e, err := valueOf(c)
	if err != nil {
		return nil, errorf(field, "%v", err)
	}
	return e, nil
}

func clean(v any, field string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			kind, name := anchor(k)
			switch kind {
			case "", "+":
			default:
				return nil, errorf(join(field, k), "this anchor where the object has nothing is not supported yet")
			}
			if strings.HasPrefix(name, "$") {
				return nil, errorf(join(field, k), "strategic merge directives ($patch, ...) are not supported yet")
			}
			if x[k] == nil {
				continue
			}
			c, err := clean(x[k], join(field, k))
			if err != nil {
				return nil, err
			}
			if m, ok := c.(map[string]any); ok && len(m) == 0 {
				continue // kyaml's merge adds no empty map where there is none
			}
			out[name] = c
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(x))
		for i, e := range x {
			c, err := clean(e, fmt.Sprintf("%s[%d]", field, i))
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, nil
	}
	return v, nil
}

func isEmptyValue(e cel.Expr) bool { return cel.String(e) == "{}" }

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
