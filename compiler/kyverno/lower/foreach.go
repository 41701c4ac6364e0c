package lower

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// ForEach lowers one foreach entry of a mutate rule (pkg/engine/handlers/mutation forEachMutator)
// for objects of apiVersion/kind. Kyverno evaluates the list once, then patches the object
// element by element, each patch on the previous one's result. Supported are the entries whose
// elements' patches each touch only their own element of the list, so that the order of the
// patches changes nothing but where Kyverno's merge puts the items:
//
//   - a list below request.object (a path of names), and
//   - patchStrategicMerge down to that list with one item keyed by the element's merge key
//     ({{element.name}} for containers), merged into the element (Kyverno's merge moves each
//     patched item first: patched in reverse order, the default, they end up first in their
//     order; in ascending order, first in reverse order), or
//   - patchesJson6902 operations below /<the list's path>/{{elementIndex}}/, or
//   - one nested entry (a foreach inside the entry, depth upon depth) over a list below the
//     element (element.env), whose patch touches only its own element of that list: strategic
//     merge down each enclosing list to the item keyed by that loop's element
//     ({{element0.name}}, then {{element.name}} or {{element1.name}}), JSON patch below
//     /<list>/{{elementIndex0}}/<inner list>/{{elementIndex1}}/. Kyverno runs the nested entry
//     for each element of the outer list that is not null and passes the outer entry's
//     preconditions, reading the inner list from that element as the outer list held it; an
//     entry holding a nested foreach has no patch of its own, so it runs in ascending order
//     unless its order says otherwise, and Kyverno's merge moves the outer item first each time
//     an inner patch merges into it.
//
// Per-element preconditions are supported at every depth; an entry's own context is not. The
// rule's context entries (rule, of the rule's scope) are read as they are: only those that read
// the same for every element (the request's namespace) reach a rule with foreach.
func ForEach(apiVersion, kind string, fe kyverno.ForEach, field string, rule Scope) (cel.Expr, error) {
	if !rule.Features.Flatten || !rule.Features.TwoVar {
		// Each element's operations are a list: the loop is transformList(...).flatten().
		return nil, errorf(field, "foreach needs CEL's lists library (flatten) and two-variable comprehensions (transformList), which the API server has for new expressions from Kubernetes 1.35: compile for 1.35 or later (--kubernetes-version)")
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	r := &forEachLowering{
		apiVersion: apiVersion, kind: kind,
		obj:      ObjectShape(Kind{Group: group, Version: version, Kind: kind}),
		schema:   openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: kind}),
		features: rule.Features, vars: rule.Vars, registry: rule.Registry, written: rule.Written,
	}
	l, err := r.entry(fe, field, nil)
	if err != nil {
		return nil, err
	}
	return l.ops, nil
}

type forEachLowering struct {
	apiVersion, kind string
	obj              Shape
	schema           *openapi.ResourceSchema // of the object (nil: unknown)
	features         cel.Features            // of the target Kubernetes version
	vars             []contextVar            // the rule's context entries
	registry         []string                // Scope.Registry
	written          [][]string              // Scope.Written
}

// loop is one foreach loop of an entry and the entries it is nested in.
type loop struct {
	path   []string                // the list: its path below the object (depth 0) or the enclosing element
	at     cel.Pointer             // where the list is in the object (with the enclosing loops' indices)
	list   cel.Expr                // the list, as the entry reads it
	iv, xv string                  // the identifiers of the index and the element
	shape  Shape                   // of the elements
	schema *openapi.ResourceSchema // of the list in kyaml's schema (nil: unknown)
	vars   []contextVar            // the entry's context entries, lowered
}

func (l loop) i() cel.Expr { return cel.Ident(l.iv) }
func (l loop) x() cel.Expr { return cel.Ident(l.xv) }

// loweredLoop is an entry's operations on the whole list, and, when its patches are strategic
// merges, the condition that one of them merges into the list (Kyverno's merge then moves the
// enclosing item first); nil for JSON patches, which move nothing.
type loweredLoop struct {
	ops, merges cel.Expr
}

// entry lowers the foreach entry fe inside the loops outer.
func (r *forEachLowering) entry(fe kyverno.ForEach, field string, outer []loop) (loweredLoop, error) {
	d := len(outer)
	var lp loop
	var spread bool
	var several []string // the lists of a multi-select list (request.object.spec.[initContainers, containers][])
	if d == 0 {
		path, sp, err := listPathOf(fe.List)
		if err != nil {
			prefix, lists, ok := multiSelectOf(fe.List)
			if !ok {
				return loweredLoop{}, errorf(field+".list", "%v", err)
			}
			if fe.StrategicMerge == nil || len(fe.ForEach) > 0 {
				return loweredLoop{}, errorf(field+".list", "%q: a multi-select list is supported for a strategic merge of fields beside the containers (labels, annotations), not yet for patches of the elements (JSON patch indices count the elements of all the lists)", fe.List)
			}
			path, several = prefix, lists
		}
		spread = sp
		lp = loop{path: path, iv: "i", xv: "e", list: object, shape: r.obj, schema: r.schema.Lookup(path...)}
	} else {
		o := outer[d-1]
		path, sp, err := elementPathOf(fe.List, d)
		if err != nil {
			return loweredLoop{}, errorf(field+".list", "%v", err)
		}
		spread = sp
		var s *openapi.ResourceSchema
		if o.schema != nil {
			if s = o.schema.Elements(); s != nil {
				s = s.Lookup(path...)
			}
		}
		lp = loop{path: path, iv: fmt.Sprintf("i_%d", d), xv: fmt.Sprintf("e_%d", d), list: o.x(), at: o.at.Index(o.i()), shape: o.shape.item(), schema: s}
	}
	if several != nil {
		// [a, b, c][]: JMESPath's multi-select list gives each list, or null where there is none,
		// and the flatten splices the lists; Kyverno's loop neither runs for a null nor counts it
		// in elementIndex. The way to the lists is always there (a Pod's spec, a template's).
		at := lp.list
		for _, s := range lp.path {
			at = cel.Index(at, cel.Str(s))
			lp.shape = lp.shape.field(s)
		}
		var parts []cel.Expr
		for _, l := range several {
			parts = append(parts, cel.Cond(present(at, l), dyn(cel.Index(at, cel.Str(l))), cel.Call("dyn", cel.List())))
		}
		lp.list = parts[0]
		for _, e := range parts[1:] {
			lp.list = cel.Bin("+", lp.list, e)
		}
		lp.shape = lp.shape.field(several[0])
		lp.schema = nil
	} else if spread {
		// list[]: Kyverno's flatten gives null where the path has no value (no elements, where
		// a plain path fails the rule) and splices the items that are lists. Where the schema
		// says every step is an object and the items are objects, it is the list itself, or
		// none.
		if !lp.shape.types().only(tMap) {
			return loweredLoop{}, errorf(field+".list", "%q: [] on a list whose parent the schema does not make an object (a custom resource's, say) is not supported yet: Kyverno's flatten splices items that are lists and gives null on anything but a list, which the schema does not rule out here; write the list without [] (where it is missing, the rule then fails)", fe.List)
		}
		opt := lp.list
		for n, s := range lp.path {
			opt = cel.OptIndex(opt, cel.Str(s))
			lp.at = lp.at.Child(s)
			lp.shape = lp.shape.field(s)
			if n < len(lp.path)-1 && !lp.shape.types().only(tMap) || n == len(lp.path)-1 && (lp.shape.types() != tList || !lp.shape.item().types().only(tMap)) {
				return loweredLoop{}, errorf(field+".list", "%q: [] is supported where the schema makes the path a list of objects below objects, and it does not here: Kyverno's flatten splices items that are lists and gives null on anything but a list; write the list without [] (where it is missing, the rule then fails)", fe.List)
			}
		}
		lp.list = cel.Method(opt, "orValue", cel.Call("dyn", cel.List())) // dyn: the items of [] are of no type CEL can infer
	} else {
		for _, s := range lp.path {
			lp.list = cel.Index(lp.list, cel.Str(s))
			lp.at = lp.at.Child(s)
			lp.shape = lp.shape.field(s)
		}
	}
	loops := append(append([]loop(nil), outer...), lp)
	sc := Scope{Object: r.obj, Features: r.features, Vars: r.vars, Registry: r.registry, Written: r.written}
	for _, l := range loops {
		sc.Elements = append(sc.Elements, l.x())
		sc.Indexes = append(sc.Indexes, l.i())
		sc.ElementShapes = append(sc.ElementShapes, l.shape.item())
		sc.Vars = append(append([]contextVar(nil), sc.Vars...), l.vars...) // the enclosing entries' context
	}
	// The entry's context, which Kyverno loads for each element (and the nested entries see).
	before := len(sc.Vars)
	sc, err := r.context(fe.Variables, sc)
	if err != nil {
		return loweredLoop{}, err
	}
	loops[d].vars = sc.Vars[before:]
	i, x := lp.i(), lp.x()
	pre, err := Preconditions(fe.Preconditions, sc, field+".preconditions")
	if err != nil {
		return loweredLoop{}, err
	}
	var body cel.Expr // the operations for element x at index i
	var vars []cel.Expr
	reverse := fe.StrategicMerge != nil
	switch fe.Order {
	case "Ascending":
		reverse = false
	case "Descending":
		reverse = true
	}
	var merges cel.Expr    // element x at index i gets a strategic merge (nil: no moves)
	var besideOps cel.Expr // the operations of the fields beside the list (nil: none)
	var eachOps cel.Expr   // the operations of each element's labels and annotations beside the list (nil: none)
	var eachVars []cel.Expr
	var eachPrefix, eachWritten []string // where the metadata of eachOps is, the maps they write
	switch {
	case len(fe.ForEach) > 1:
		return loweredLoop{}, errorf(field+".foreach", "a nested foreach with several entries is not supported yet: the entries after the first read request.object as the earlier ones left it, element by element; nest one entry, or write the others in a rule of their own")
	case len(fe.ForEach) == 1:
		inner, err := r.entry(fe.ForEach[0], field+".foreach[0]", loops)
		if err != nil {
			return loweredLoop{}, err
		}
		body, merges = inner.ops, inner.merges
	case fe.StrategicMerge != nil:
		raw := fe.StrategicMerge
		if d == 0 {
			// Fields beside the way to the list: merged with each element's patch.
			var chain, beside map[string]any
			if several != nil {
				if reachesLists(raw, lp.path, several) {
					return loweredLoop{}, errorf(field+".patchStrategicMerge", "patches the lists of the multi-select list %q, which is not supported yet: only fields beside them (labels, annotations)", fe.List)
				}
				chain, beside = map[string]any{}, raw
			} else {
				chain, beside = splitBeside(raw, lp.path)
			}
			switch {
			case beside == nil:
			case len(Variables(beside)) > 0:
				// Labels and annotations of each element (keys and values with its variables).
				if eachOps, eachVars, eachPrefix, eachWritten, err = r.besideEach(beside, sc, field+".patchStrategicMerge"); err != nil {
					return loweredLoop{}, err
				}
				raw = chain
			default:
				// The same each time: as once.
				if besideOps, err = r.besideOps(beside, field+".patchStrategicMerge"); err != nil {
					return loweredLoop{}, err
				}
				raw = chain
			}
		}
		if hollow(raw) {
			// Nothing merges into the list: no element moves.
			body = cel.List()
			break
		}
		cases, vs, err := SubstituteCases(raw, sc, "")
		if err != nil {
			return loweredLoop{}, errorf(field+".patchStrategicMerge", "%v", err)
		}
		vars = vs
		each := make([]cel.Expr, len(cases))
		for n, c := range cases {
			rest, err := patchedItem(c.Patch, loops)
			if err != nil {
				return loweredLoop{}, errorf(field+".patchStrategicMerge", "%v", err)
			}
			if itemAnchored(rest) {
				if ops, ok, err := r.anchoredEntry(fe, d, lp, pre, rest, len(cases), besideOps != nil || eachOps != nil, field); ok || err != nil {
					return loweredLoop{ops: ops}, err
				}
				// processListOfMaps: see conditionalItems.
				return loweredLoop{}, errorf(field+".patchStrategicMerge", "anchors in the patched item of %s are not supported yet: Kyverno then patches every item of the list with it (the name it gives replaced by each item's), its +(key) anchors decided on the list's first item", strings.Join(lp.path, "."))
			}
			g := &smp{reach: cel.True}
			if each[n], err = g.mapOps(lp.at.Index(i), x, rest, lp.schema.Elements(), field+".patchStrategicMerge", false); err != nil {
				return loweredLoop{}, err
			}
			if len(g.conds) > 0 {
				return loweredLoop{}, errorf(field+".patchStrategicMerge", "condition anchors in a foreach patch are not supported yet")
			}
		}
		body = ChooseCase(cases, each)
		merges = cel.True
	case fe.JSON6902 != nil:
		var ops []kyverno.Op
		for n, op := range fe.JSON6902 {
			f := fmt.Sprintf("%s.patchesJson6902[%d]", field, n)
			toks, err := pointer(op.Path)
			if err != nil {
				return loweredLoop{}, errorf(f, "%v", err)
			}
			rel, ok := belowElement(toks, loops)
			if !ok {
				return loweredLoop{}, errorf(f, "the path must be below %s: operations elsewhere are not supported yet", elementPointer(loops))
			}
			for _, t := range rel {
				if strings.Contains(t, "{{") {
					return loweredLoop{}, errorf(f, "variables in paths are not supported here")
				}
			}
			v, vs, err := SubstituteText(op.Value, sc, "")
			if err != nil {
				return loweredLoop{}, errorf(f+".value", "%v", err)
			}
			vars = append(vars, vs...)
			ops = append(ops, kyverno.Op{Op: op.Op, Path: "/" + strings.Join(escapeAll(rel), "/"), Value: v})
		}
		body, err = json6902At(lp.at.Index(i), x, nil, ops)
		if err != nil {
			return loweredLoop{}, errorf(field+".patchesJson6902", "%v", err)
		}
	default:
		return loweredLoop{}, errorf(field, "has no patch: give patchStrategicMerge, patchesJson6902 or a nested foreach")
	}
	noElementOps := cel.IsEmpty(body) // only fields beside the list
	if noElementOps && eachOps == nil && besideOps == nil {
		return loweredLoop{ops: cel.List()}, nil
	}
	if merges != nil {
		// Where Kyverno's merge leaves the item: first, among the items merged into so far.
		moveTo := cel.Expr(cel.Int(0))
		if reverse {
			jv, yv := "j", "y"
			if d > 0 {
				jv, yv = fmt.Sprintf("j_%d", d), fmt.Sprintf("y_%d", d)
			}
			at := func(e cel.Expr) cel.Expr {
				return cel.Substitute(cel.Substitute(e, lp.xv, cel.Ident(yv)), lp.iv, cel.Ident(jv))
			}
			moveTo = cel.Call("size", cel.Method(lp.list, "transformList", cel.Ident(jv), cel.Ident(yv),
				cel.And(cel.Bin("<", cel.Ident(jv), i), cel.Bin("!=", cel.Ident(yv), cel.Null()), at(pre), at(merges)), cel.True))
		}
		body = concat([]cel.Expr{body, cel.Guarded(merges, cel.List(moveOp(lp.at.Index(i), lp.at.Index(moveTo))))})
	}
	body = cel.Guarded(Resolved(vars), body)
	if pre != cel.True {
		body = cel.Guarded(pre, body)
	}
	// Null elements are skipped.
	body = cel.Guarded(cel.Bin("!=", x, cel.Null()), body)
	out := loweredLoop{
		// Operations on distinct elements: besides the moves, their order changes nothing.
		ops: cel.Method(cel.Method(lp.list, "transformList", i, x, body), "flatten"),
	}
	if noElementOps {
		out.ops = cel.List()
	}
	if merges != nil {
		out.merges = cel.Bin(">", cel.Call("size", cel.Method(lp.list, "transformList", i, x,
			cel.And(cel.Bin("!=", x, cel.Null()), pre, merges), cel.True)), cel.Int(0))
	}
	merged := cel.Bin(">", cel.Call("size", cel.Method(lp.list, "transformList", i, x,
		cel.And(cel.Bin("!=", x, cel.Null()), pre), cel.True)), cel.Int(0))
	if besideOps != nil {
		// Kyverno merges them with the first element's patch, and again, unchanged, with every
		// later one: as once, where some element is merged.
		out.ops = concat([]cel.Expr{out.ops, cel.Guarded(merged, besideOps)})
	}
	if eachOps != nil {
		// After the list's own operations (they touch other fields), in Kyverno's order of the
		// elements: where two give one key, the later one's value stays.
		one := cel.Guarded(cel.Bin("!=", x, cel.Null()), cel.Guarded(pre, cel.Guarded(Resolved(eachVars), eachOps)))
		jv, yv := "j", "y"
		if reverse {
			last := cel.Bin("-", cel.Bin("-", cel.Call("size", lp.list), cel.Int(1)), cel.Ident(jv))
			one = cel.Substitute(cel.Substitute(one, lp.xv, cel.Index(lp.list, last)), lp.iv, last)
		} else {
			one = cel.Substitute(cel.Substitute(one, lp.xv, cel.Ident(yv)), lp.iv, cel.Ident(jv))
		}
		all := cel.Method(cel.Method(lp.list, "transformList", cel.Ident(jv), cel.Ident(yv), one), "flatten")
		out.ops = concat([]cel.Expr{out.ops, ensureMaps(eachPrefix, eachWritten, merged), all})
	}
	return out, nil
}

// besideMetadata reads the fields beside a foreach's list whose labels and annotations hold
// variables: the metadata they are in (the object's, or a Pod template's, as Kyverno's autogen
// writes them), and the path to it.
func (r *forEachLowering) besideMetadata(beside map[string]any, field string) ([]string, map[string]any, error) {
	var prefix []string
	cur := beside
	for {
		if md, ok := cur["metadata"].(map[string]any); ok && len(cur) == 1 {
			return prefix, md, nil
		}
		if len(cur) != 1 {
			break
		}
		var k string
		for k = range cur {
		}
		next, ok := cur[k].(map[string]any)
		if !ok {
			break
		}
		prefix = append(prefix, k)
		cur = next
	}
	return nil, nil, errorf(field, "fields beside the list with variables are supported in labels and annotations only (the object's metadata, or a Pod template's), not yet elsewhere: Kyverno merges them with each element's patch, their values differing from one element to the next")
}

// ensureMaps adds the maps (labels, annotations) of the metadata at prefix that the object lacks,
// and the objects above them, where some element is merged (Kyverno's merge creates them).
func ensureMaps(prefix, ms []string, merged cel.Expr) cel.Expr {
	segs := append(append([]string(nil), prefix...), "metadata")
	// created is the value that makes segs[n:] with the maps at its end.
	var created func(n int) cel.Expr
	created = func(n int) cel.Expr {
		if n == len(segs) {
			vals := make([]cel.Expr, len(ms))
			keys := make([]cel.Expr, len(ms))
			for i, m := range ms {
				keys[i], vals[i] = cel.Str(m), cel.Map(nil, nil)
			}
			return cel.Map(keys, vals)
		}
		return cel.Map([]cel.Expr{cel.Str(segs[n])}, []cel.Expr{created(n + 1)})
	}
	var at func(n int, cur cel.Expr, p cel.Pointer) cel.Expr
	at = func(n int, cur cel.Expr, p cel.Pointer) cel.Expr {
		if n == len(segs) {
			var ops []cel.Expr
			for _, m := range ms {
				ops = append(ops, cel.Guarded(cel.Not(present(cur, m)), cel.List(cel.PatchOp("add", p.Child(m), cel.Map(nil, nil)))))
			}
			return concat(ops)
		}
		s := segs[n]
		return cel.CondList(present(cur, s), at(n+1, cel.Index(cur, cel.Str(s)), p.Child(s)),
			cel.List(cel.PatchOp("add", p.Child(s), created(n+1))))
	}
	return cel.Guarded(merged, at(0, object, cel.Pointer{}))
}

// besideEach lowers the labels and annotations beside a foreach's list whose keys or values hold
// variables: for each element, an add of each entry (which sets it, whether it is there or not,
// as Kyverno's merge does); and the maps it writes. Other fields, anchors and values that are not
// strings are refused.
func (r *forEachLowering) besideEach(beside map[string]any, sc Scope, field string) (cel.Expr, []cel.Expr, []string, []string, error) {
	var ops, vars []cel.Expr
	var written []string
	prefix, md, err := r.besideMetadata(beside, field)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	for _, s := range prefix {
		field = join(field, s)
	}
	field = join(field, "metadata")
	base := cel.Pointer{}
	for _, s := range prefix {
		base = base.Child(s)
	}
	for _, m := range slices.Sorted(maps.Keys(md)) {
		f := join(field, m)
		entries, ok := md[m].(map[string]any)
		if m != "labels" && m != "annotations" || !ok {
			return nil, nil, nil, nil, errorf(f, "fields beside the list with variables are supported in metadata.labels and metadata.annotations only, not yet here")
		}
		written = append(written, m)
		for _, key := range slices.Sorted(maps.Keys(entries)) {
			ef := join(f, key)
			if kind, _ := anchor(key); kind != "" || strings.HasPrefix(key, "$") {
				return nil, nil, nil, nil, errorf(ef, "anchors and directives beside the list of a foreach, with variables, are not supported yet")
			}
			text := func(s any, what string) (cel.Expr, error) {
				v, vs, _, err := substitute(s, sc, ef, false)
				if err != nil {
					return nil, err
				}
				vars = append(vars, vs...)
				switch x := v.(type) {
				case string:
					return cel.Str(x), nil
				case expr:
					if !x.t.only(tStr) {
						return nil, errorf(ef, "the %s can be %s: a label's or annotation's must be a string", what, typeNames(x.t))
					}
					return x.e, nil
				}
				return nil, errorf(ef, "the %s must be a string", what)
			}
			k, err := text(key, "key")
			if err != nil {
				return nil, nil, nil, nil, err
			}
			v, err := text(entries[key], "value")
			if err != nil {
				return nil, nil, nil, nil, err
			}
			esc := cel.Method(cel.Method(k, "replace", cel.Str("~"), cel.Str("~0")), "replace", cel.Str("/"), cel.Str("~1"))
			ops = append(ops, cel.PatchOp("add", base.Child("metadata").Child(m).Index(esc), v))
		}
	}
	return cel.List(ops...), vars, prefix, written, nil
}

// multiSelectOf reads a foreach list that is a multi-select list of container lists, flattened:
// request.object.<path>.[ephemeralContainers, initContainers, containers][] (the path below
// request.object, and the lists).
func multiSelectOf(list string) ([]string, []string, bool) {
	s := strings.TrimSpace(list)
	body, ok := strings.CutSuffix(s, "][]")
	at := strings.LastIndex(body, ".[")
	if !ok || at < 0 {
		return nil, nil, false
	}
	segs, err := pathOf(body[:at])
	if err != nil || len(segs) < 3 || segs[0] != "request" || segs[1] != "object" {
		return nil, nil, false
	}
	prefix, err := names(list, segs[2:])
	if err != nil {
		return nil, nil, false
	}
	var lists []string
	for _, l := range strings.Split(body[at+2:], ",") {
		l = strings.TrimSpace(l)
		if !slices.Contains(imageLists, l) || slices.Contains(lists, l) {
			return nil, nil, false
		}
		lists = append(lists, l)
	}
	return prefix, lists, true
}

// reachesLists: does the strategic merge patch reach one of the lists below path?
func reachesLists(patch map[string]any, path, lists []string) bool {
	var at any = patch
	for _, k := range path {
		m, ok := at.(map[string]any)
		if !ok {
			return false
		}
		if at, ok = m[k]; !ok {
			return false
		}
	}
	m, ok := at.(map[string]any)
	if !ok {
		return at != nil
	}
	for k := range m {
		if slices.Contains(lists, strings.TrimSuffix(strings.TrimLeft(k, "+<("), ")")) || strings.HasPrefix(k, "$") || strings.Contains(k, "{{") {
			return true
		}
	}
	return false
}

// hollow: does m hold nothing but maps that hold nothing?
func hollow(m map[string]any) bool {
	for _, v := range m {
		sub, ok := v.(map[string]any)
		if !ok || !hollow(sub) {
			return false
		}
	}
	return true
}

// splitBeside splits a foreach's strategic merge patch into the way to its list (path, from the
// object) and the fields beside it (nil when there are none).
func splitBeside(patch map[string]any, path []string) (chain, beside map[string]any) {
	chain = map[string]any{}
	var walk func(m map[string]any, path []string, ch map[string]any) map[string]any
	walk = func(m map[string]any, path []string, ch map[string]any) map[string]any {
		var out map[string]any
		for k, v := range m {
			if k == path[0] {
				sub, ok := v.(map[string]any)
				if len(path) == 1 || !ok {
					ch[k] = v
					continue
				}
				next := map[string]any{}
				ch[k] = next
				if b := walk(sub, path[1:], next); b != nil {
					if out == nil {
						out = map[string]any{}
					}
					out[k] = b
				}
				continue
			}
			if out == nil {
				out = map[string]any{}
			}
			out[k] = v
		}
		return out
	}
	beside = walk(patch, path, chain)
	return chain, beside
}

// besideOps lowers the fields of a foreach's strategic merge beside the way to its list: a
// patch of their own, the same for every element (no variables), which neither reads nor
// changes the list (no anchors but add-if-not-present ones, no directives), so that merging it
// with every element's patch is merging it once.
func (r *forEachLowering) besideOps(beside map[string]any, field string) (cel.Expr, error) {
	var check func(v any, at string) error
	check = func(v any, at string) error {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if kind, _ := anchor(k); kind != "" && kind != "+" {
					return errorf(join(at, k), "anchors beside the list of a foreach are not supported yet (add-if-not-present ones are): Kyverno decides them with each element's patch, which they can skip")
				}
				if strings.HasPrefix(k, "$") {
					return errorf(join(at, k), "directives beside the list of a foreach are not supported yet")
				}
				if err := check(e, join(at, k)); err != nil {
					return err
				}
			}
		case []any:
			for n, e := range x {
				if err := check(e, fmt.Sprintf("%s[%d]", at, n)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := check(beside, field); err != nil {
		return nil, err
	}
	cond, ops, err := StrategicMerge(r.apiVersion, r.kind, beside)
	if err != nil {
		return nil, errorf(field, "%v", err)
	}
	return cel.Guarded(cond, ops), nil
}

// anchoredEntry lowers a top-level entry whose strategic merge patches an item with anchors
// (rest: its fields but the element's name) into its own list of containers. Kyverno's
// preprocessing patches every container of the list with such an item, its name replaced by
// each container's (see conditionalItems), once for each element; where the item reads no
// variable, each time after the first patches nothing new: the first container now has every
// key the first time kept (so each +(key) is dropped) and the keys without anchors again, and
// the patched containers are first already. So it is the item's patch once, where the loop
// has an element (a list missing fails the rule as the loop does). ok is false where that does
// not hold: the entry is nested, reads a variable there or has per-element preconditions, its own context,
// cases of null variables (cases) or fields beside the list (beside), the item has condition
// anchors, or the list is another.
func (r *forEachLowering) anchoredEntry(fe kyverno.ForEach, d int, lp loop, pre cel.Expr, rest map[string]any, cases int, beside bool, field string) (cel.Expr, bool, error) {
	containerList := len(lp.path) > 0 && slices.Contains(imageLists, lp.path[len(lp.path)-1])
	if d > 0 || !containerList || pre != cel.True || len(fe.Variables) > 0 || cases != 1 || beside || len(lp.path) == 0 || hasExpr(rest) {
		return nil, false, nil
	}
	for k := range rest {
		if kind, _ := anchor(k); kind == "(" || kind == "<" {
			// The patched containers move first: a +(key) at the item's top is decided the
			// next time on another container than the first time.
			return nil, false, nil
		}
	}
	m := maps.Clone(rest)
	m["name"] = "" // replaced by each container's: the copy keeps a name
	parent := object
	for _, k := range lp.path[:len(lp.path)-1] {
		parent = cel.Index(parent, cel.Str(k))
	}
	g := &smp{reach: cel.True}
	ops, err := g.conditionalItems(lp.at, parent, lp.path[len(lp.path)-1], m, lp.schema.Elements(), field+".patchStrategicMerge", "name")
	if err != nil {
		return nil, true, err
	}
	i, x := lp.i(), lp.x()
	some := cel.Bin(">", cel.Call("size", cel.Method(lp.list, "transformList", i, x, cel.Bin("!=", x, cel.Null()), cel.True)), cel.Int(0))
	return cel.Guarded(some, ops), true, nil
}

// patchedItem follows a strategic merge patch down the loops' lists to the innermost element's
// item: at each loop, the path to its list and one item there keyed by that loop's element on
// the list's merge key; the items of the enclosing loops hold their key and the way down, nothing
// else. It gives the innermost item's other fields.
func patchedItem(patch any, loops []loop) (map[string]any, error) {
	cur := patch
	var where []string
	for d, l := range loops {
		item, err := itemOf(cur, l.path, strings.Join(append(where, l.path...), "."))
		if err != nil {
			return nil, err
		}
		where = append(where, l.path...)
		keys := mergeKeys(l.schema)
		if len(keys) != 1 || keys[0] == "" {
			return nil, fmt.Errorf("the list %s is not merged on one key in Kyverno's schema: not supported yet", strings.Join(where, "."))
		}
		key := keys[0]
		want := fmt.Sprintf("{{element%d.%s}}", d, key)
		if d == len(loops)-1 {
			want = fmt.Sprintf("{{element.%s}}", key)
		}
		kv, ok := item[key].(expr)
		if !ok || cel.String(kv.e) != cel.String(cel.Index(l.x(), cel.Str(key))) {
			return nil, fmt.Errorf("the patched item of %s must have %s %s: patches of other items are not supported yet", strings.Join(where, "."), key, want)
		}
		rest := map[string]any{}
		for k, v := range item {
			if k != key {
				rest[k] = v
			}
		}
		if d == len(loops)-1 {
			return rest, nil
		}
		cur = rest
		where[len(where)-1] += "[]"
	}
	return nil, nil
}

// belowElement reads the tokens of a JSON patch path as the innermost element's path
// (/<list>/{{elementIndex0}}/<list>/{{elementIndex1}}/..., the innermost index also
// {{elementIndex}}) and gives the tokens below it.
func belowElement(toks []string, loops []loop) ([]string, bool) {
	for d, l := range loops {
		if len(toks) <= len(l.path)+1 || !prefixed(toks, l.path) {
			return nil, false
		}
		idx := strings.ReplaceAll(toks[len(l.path)], " ", "")
		if idx != fmt.Sprintf("{{elementIndex%d}}", d) && (d < len(loops)-1 || idx != "{{elementIndex}}") {
			return nil, false
		}
		toks = toks[len(l.path)+1:]
	}
	return toks, true
}

// elementPointer is the pointer belowElement reads, for messages.
func elementPointer(loops []loop) string {
	var b strings.Builder
	for d, l := range loops {
		b.WriteString("/" + strings.Join(l.path, "/"))
		if len(loops) == 1 {
			b.WriteString("/{{elementIndex}}")
		} else {
			fmt.Fprintf(&b, "/{{elementIndex%d}}", d)
		}
	}
	return b.String() + "/"
}

// itemOf follows the patch down path to a list of one item and returns the item (name: the
// list's name in messages).
func itemOf(patch any, path []string, name string) (map[string]any, error) {
	cur := patch
	for _, s := range path {
		m, ok := cur.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf("the patch must lead to the list %s and patch nothing else: not supported yet", name)
		}
		if cur, ok = m[s]; !ok {
			return nil, fmt.Errorf("the patch must lead to the list %s, the foreach's list: patches of other fields are not supported yet", name)
		}
	}
	l, ok := cur.([]any)
	if !ok || len(l) != 1 {
		return nil, fmt.Errorf("the patch must hold one item of the list %s", name)
	}
	item, ok := l[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the patched item must be an object")
	}
	return item, nil
}

// ListPath is the path below request.object of a foreach's list (an error when the list is not
// a path of names below request.object, with or without a final [] or || `[]`).
func ListPath(list string) ([]string, error) {
	path, _, err := listPathOf(list)
	return path, err
}

// ElementListPath is the path below the enclosing element of the list of a foreach nested depth
// deep (an error when it is not a path of names below element or element<depth-1>).
func ElementListPath(list string, depth int) ([]string, error) {
	path, _, err := elementPathOf(list, depth)
	return path, err
}

// cutSpread cuts a final [] (Kyverno's flatten) off a foreach list, or a final || `[]`, which
// gives what [] gives on a list of objects: its items, and none where the path has no value.
func cutSpread(list string) (string, bool) {
	s := strings.TrimSpace(list)
	if i := strings.LastIndex(s, "||"); i >= 0 {
		lit := strings.TrimSpace(s[i+2:])
		var items []any
		if inner, ok := strings.CutPrefix(lit, "`"); ok && strings.HasSuffix(inner, "`") && json.Unmarshal([]byte(inner[:len(inner)-1]), &items) == nil && items != nil && len(items) == 0 {
			s = strings.TrimSpace(s[:i])
			if rest, ok := strings.CutSuffix(s, "[]"); ok {
				s = strings.TrimSpace(rest)
			}
			return s, true
		}
	}
	if rest, ok := strings.CutSuffix(s, "[]"); ok {
		return strings.TrimSpace(rest), true
	}
	return s, false
}

// listPathOf reads a foreach list: a path of names below request.object, and whether it ends in
// [].
func listPathOf(list string) ([]string, bool, error) {
	s, spread := cutSpread(list)
	segs, err := pathOf(s)
	if err != nil {
		return nil, false, fmt.Errorf("%q: %v (a path below request.object is supported, with or without a final [] or || `[]`)", list, err)
	}
	if len(segs) < 3 || segs[0] != "request" || segs[1] != "object" {
		return nil, false, fmt.Errorf("%q: only a list below request.object is supported yet", list)
	}
	path, err := names(list, segs[2:])
	return path, spread, err
}

func prefixed(toks, prefix []string) bool {
	for i, p := range prefix {
		if toks[i] != p {
			return false
		}
	}
	return true
}

func escapeAll(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
	}
	return out
}

// elementPathOf reads the list of a foreach nested depth deep: a path of names below the
// enclosing element ({{element}}, or {{elementN}} with N = depth-1).
func elementPathOf(list string, depth int) ([]string, bool, error) {
	s, spread := cutSpread(list)
	segs, err := pathOf(s)
	if err != nil {
		return nil, false, fmt.Errorf("%q: %v (a path below the enclosing element is supported, with or without a final [] or || `[]`)", list, err)
	}
	if len(segs) < 2 || segs[0] != "element" && segs[0] != fmt.Sprintf("element%d", depth-1) {
		return nil, false, fmt.Errorf("%q: only a list below the enclosing element (element.<path>) is supported in a nested foreach yet", list)
	}
	path, err := names(list, segs[1:])
	return path, spread, err
}

// names are the segments of a foreach list's path, which must all be field names.
func names(list string, segs []any) ([]string, error) {
	var out []string
	for _, s := range segs {
		name, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("%q: list indices in the path are not supported yet", list)
		}
		out = append(out, name)
	}
	return out, nil
}

// context lowers a foreach entry's context entries on the element's scope. Kyverno loads them for
// each element, as the patched object then stands: an entry that reads a place of the object
// the rule's foreach writes (Scope.Written) is refused.
func (r *forEachLowering) context(vars []kyverno.Variable, sc Scope) (Scope, error) {
	for _, v := range vars {
		field := v.Field
		if i := strings.Index(field, ".mutate."); i >= 0 {
			field = field[i+len(".mutate."):]
		}
		if slices.ContainsFunc(sc.Vars, func(cv contextVar) bool { return cv.name == v.Entry }) {
			return sc, errorf(field, "names the entry %s, as a context entry of the rule or of an enclosing foreach entry does: which one a variable reads depends on Kyverno's loading order; give it another name", v.Entry)
		}
		cv, err := contextVariable(v, field, sc)
		if err != nil {
			return sc, err
		}
		if cv.v.virt == real {
			for _, read := range cel.Reads(cv.v.e, "object") {
				for _, w := range sc.Written {
					if n := min(len(w), len(read)); slices.Equal(read[:n], w[:n]) { // one is a prefix of the other
						what := "the whole object"
						if len(read) > 0 {
							what = strings.Join(read, ".")
						}
						return sc, errorf(field, "reads %s, which the rule's foreach can change: Kyverno loads a foreach entry's context for each element, as the patched object then stands; supported where the entry reads nothing the foreach writes", what)
					}
				}
			}
		}
		sc.Vars = append(append([]contextVar(nil), sc.Vars...), cv)
	}
	return sc, nil
}
