package gen

import (
	"slices"
)

const group = "mutations.gatekeeper.sh"

var versions = []string{"v1", "v1beta1", "v1alpha1"}

// mutator generates one mutator of a random kind, and where it writes.
func (g *generator) mutator() (map[string]any, *located) {
	r := g.r
	switch x := r.IntN(100); {
	case x < 45:
		return g.assign(g.pickTarget(false), nil)
	case x < 65:
		return g.assignMetadata("", ""), nil
	case x < 80:
		return g.modifySet(g.pickTarget(false), nil)
	default:
		return g.assignImage(g.pickTarget(true), nil)
	}
}

func (g *generator) base(kind, version string) map[string]any {
	return map[string]any{
		"apiVersion": group + "/" + version,
		"kind":       kind,
		"metadata":   map[string]any{"name": g.name(kind)},
	}
}

func (g *generator) pickTarget(imageOnly bool) target {
	var ts []target
	for _, t := range g.targets {
		if imageOnly && t.kind == "Namespace" {
			continue
		}
		ts = append(ts, t)
	}
	return pick(g.r, ts)
}

// wants says whether a location suits a mutator kind.
type wants func(p path) bool

func endsInList(p path) bool {
	if len(p) == 0 || p.endsInElement() {
		return false
	}
	k := p.terminal().kind
	return k == kList || k == kScalarList
}

func endsInImage(p path) bool { return len(p) > 0 && !p.endsInElement() && p.terminal().kind == kImage }

func assignable(p path) bool { return len(p) > 0 && !(p.endsInElement() && p.last().glob) }

// location picks a location in t for a mutator: often one derived from a location an earlier
// mutator writes (the same, a prefix, a longer one, glob for key or key for glob), so that
// mutators interact; otherwise a fresh one.
func (g *generator) location(t target, ok wants, stop func(p path) float64) path {
	r := g.r
	if used := g.paths[t.kind]; len(used) > 0 && r.chance(0.6) {
		for try := 0; try < 6; try++ {
			p := g.derive(t, pick(r, used), stop)
			if ok(p) {
				return p
			}
		}
	}
	for try := 0; try < 50; try++ {
		p := r.randomPath(t.root, stop)
		if ok(p) {
			return p
		}
	}
	return nil
}

func (g *generator) derive(t target, u path, stop func(p path) float64) path {
	r := g.r
	p := u.clone()
	switch pick(r, []int{0, 1, 2, 3, 4, 4, 5}) {
	case 0: // the same location
	case 1: // a prefix
		p = p[:1+r.IntN(len(p))]
	case 2, 3: // toggle glob and key on one list step
		var lists []int
		for i, s := range p {
			if s.list {
				lists = append(lists, i)
			}
		}
		if len(lists) == 0 {
			return p
		}
		i := pick(r, lists)
		s := p[i]
		if s.glob {
			s.glob = false
			s.keyValue = pick(r, keyValues(s.n, s.keyField))
		} else if r.chance(0.5) {
			s.glob, s.keyValue = true, ""
		} else {
			s.keyValue = pick(r, keyValues(s.n, s.keyField))
		}
		p[i] = s
	case 4: // longer: walk on from it (rest[0] is the wrapper's field)
		rest := r.randomPath(&node{kind: kObject, fields: []field{{"_", p.terminal()}}}, stop)
		p = append(p, rest[1:]...)
	case 5: // the list itself, for ModifySet or a whole-list Assign
		for i := len(p) - 1; i > 0; i-- {
			if p[i].list {
				p = p[:i]
				break
			}
		}
	}
	return p
}

func (g *generator) assign(t target, p path) (map[string]any, *located) {
	r := g.r
	if p == nil {
		p = g.location(t, assignable, func(p path) float64 {
			s := p.last()
			switch {
			case s.list && s.glob:
				return 0
			case s.list:
				return 0.2 // a whole element (a sidecar)
			case s.n.kind == kList:
				return 0.1
			}
			return 0.1
		})
		if p == nil {
			return nil, nil
		}
	}
	m := g.base("Assign", pick(r, versions))
	params := map[string]any{}
	params["assign"] = g.assignValue(t, p)
	if pt := g.pathTests(p); pt != nil {
		params["pathTests"] = pt
	}
	m["spec"] = map[string]any{
		"applyTo":    g.applyTo(t),
		"match":      g.match(t, true),
		"location":   format(r, p),
		"parameters": params,
	}
	return m, &located{t, p}
}

// assignValue is Assign's spec.parameters.assign for a location ending at p.
func (g *generator) assignValue(t target, p path) map[string]any {
	r := g.r
	s := p.last()
	n := s.n
	if s.list {
		e := r.value(n, 0.5, 2).(map[string]any)
		if !r.chance(0.02) { // Gatekeeper rejects an element whose key differs
			e[s.keyField] = s.keyValue
		}
		return map[string]any{"value": g.canon(t, p, e)}
	}
	switch {
	case r.chance(0.01):
		return map[string]any{"value": nil} // Gatekeeper rejects: "assign must set one of ..."
	case (n.kind == kString || n.kind == kImage) && r.chance(0.12):
		return map[string]any{"fromMetadata": map[string]any{"field": pick(r, []string{"name", "namespace"})}}
	}
	return map[string]any{"value": g.canon(t, p, r.value(n, 0.5, 2))}
}

// canon gives v in the form the API server stores at p, unless the case keeps values as
// generated (Case.NonCanonical).
func (g *generator) canon(t target, p path, v any) any {
	if g.c.NonCanonical || p.terminal().kind == kQuantity && !p.endsInElement() {
		return v // a quantity is compared by value, whatever its spelling (1.5, "1500m")
	}
	if c, ok := canonical(t, p, v); ok {
		return c
	}
	s := p.last()
	key := ""
	if s.list {
		key = s.keyField
	}
	if c, ok := canonical(t, p, nonEmpty(s.n, key, s.keyValue)); ok {
		return c
	}
	return v
}

// pathTests are 0–2 tests on prefixes of p.
func (g *generator) pathTests(p path) []any {
	r := g.r
	if !r.chance(0.3) {
		return nil
	}
	// Gatekeeper rejects a MustExist below a MustNotExist and two conditions on one node: the
	// second test, on a longer prefix, is MustExist only below a MustExist (almost always).
	a := 1 + r.IntN(len(p))
	conds := []string{"MustExist", "MustNotExist"}
	out := []any{map[string]any{"subPath": format(r, p[:a]), "condition": pick(r, conds)}}
	if a < len(p) && r.chance(0.3) {
		b := a + 1 + r.IntN(len(p)-a)
		cond := "MustNotExist"
		if out[0].(map[string]any)["condition"] == "MustExist" && r.chance(0.5) || r.chance(0.03) {
			cond = "MustExist"
		}
		out = append(out, map[string]any{"subPath": format(r, p[:b]), "condition": cond})
		if r.chance(0.5) {
			out[0], out[1] = out[1], out[0]
		}
	}
	return out
}

func (g *generator) assignMetadata(key, value string) map[string]any {
	r := g.r
	m := g.base("AssignMetadata", pick(r, versions))
	field := "labels"
	if key == "" {
		if r.chance(0.4) {
			field = "annotations"
			key = pick(r, AnnotationKeys)
		} else if len(g.waiting) > 0 && r.chance(0.6) {
			keys := sortedKeys(g.waiting)
			key = pick(r, keys)
			value = pick(r, g.waiting[key])
		} else {
			key = pick(r, LabelKeys)
		}
	}
	var assign map[string]any
	switch {
	case value != "":
		assign = map[string]any{"value": value}
	case r.chance(0.2):
		assign = map[string]any{"fromMetadata": map[string]any{"field": pick(r, []string{"name", "namespace"})}}
	case field == "labels":
		assign = map[string]any{"value": pick(r, LabelValues)}
	default:
		assign = map[string]any{"value": pick(r, freeStrings)}
	}
	if r.chance(0.02) {
		assign = map[string]any{"value": int64(3)} // Gatekeeper rejects non-strings
	}
	loc := format(r, path{{field: "metadata"}, {field: field}, {field: key}})
	if field == "labels" {
		if v, ok := assign["value"].(string); ok {
			g.written[key] = v
		}
	}
	var t target
	if len(g.targets) > 1 && r.chance(0.5) {
		t = pick(r, g.targets)
	} else {
		t = podTarget
	}
	m["spec"] = map[string]any{
		"match":      g.match(t, false),
		"location":   loc,
		"parameters": map[string]any{"assign": assign},
	}
	return m
}

func (g *generator) modifySet(t target, p path) (map[string]any, *located) {
	r := g.r
	if p == nil {
		p = g.location(t, endsInList, func(p path) float64 {
			switch k := p.terminal().kind; {
			case p.last().list:
				return 0
			case k == kScalarList:
				return 0.8
			case k == kList:
				return 0.25 // a set of objects: conflicts with keyed locations into the same list
			}
			return 0
		})
		if p == nil {
			return nil, nil
		}
	}
	m := g.base("ModifySet", pick(r, versions))
	n := p.terminal()
	var values []any
	if n.kind == kList {
		values = r.elements(n, 1+r.IntN(2), 0.4, 2)
		if r.chance(0.06) {
			values = append(values, values[0])
		}
	} else {
		values = r.setValues(n.elem, 1+r.IntN(3), 0.5, 1)
	}
	if l, ok := g.canon(t, p, values).([]any); ok && len(l) == len(values) {
		values = l
	}
	params := map[string]any{"values": map[string]any{"fromList": values}}
	if x := r.IntN(10); x < 4 {
		params["operation"] = "merge"
	} else if x < 8 {
		params["operation"] = "prune"
	}
	if pt := g.pathTests(p); pt != nil {
		params["pathTests"] = pt
	}
	m["spec"] = map[string]any{
		"applyTo":    g.applyTo(t),
		"match":      g.match(t, true),
		"location":   format(r, p),
		"parameters": params,
	}
	return m, &located{t, p}
}

var (
	imageDomains = []string{"my.reg:5000", "localhost", "localhost:5000", "docker.io", "gcr.io", "a.b.c", "reg-1.example.com"}
	imagePaths   = []string{"nginx", "library/busybox", "a/b/c", "app_x", "a-b", "x.y"}
	imageTags    = []string{":latest", ":v1.2", "@sha256:" + hex64, ":1", ":a_b-c.d"}
)

func (g *generator) assignImage(t target, p path) (map[string]any, *located) {
	r := g.r
	if p == nil {
		p = g.location(t, endsInImage, func(p path) float64 { return 0 })
		if p == nil {
			return nil, nil
		}
	}
	version := "v1alpha1"
	if r.chance(0.01) {
		version = "v1" // not served: rejected
	}
	m := g.base("AssignImage", version)
	params := map[string]any{}
	for params["assignDomain"] == nil && params["assignPath"] == nil && params["assignTag"] == nil {
		if r.chance(0.5) {
			params["assignDomain"] = pick(r, imageDomains)
		}
		if r.chance(0.4) {
			params["assignPath"] = pick(r, imagePaths)
		}
		if r.chance(0.5) {
			params["assignTag"] = pick(r, imageTags)
		}
	}
	if r.chance(0.03) {
		params["assignPath"] = "my.reg/x" // domain-like path without a domain: rejected unless a domain is set
	}
	if pt := g.pathTests(p); pt != nil {
		params["pathTests"] = pt
	}
	m["spec"] = map[string]any{
		"applyTo":    g.applyTo(t),
		"match":      g.match(t, true),
		"location":   format(r, p),
		"parameters": params,
	}
	return m, &located{t, p}
}

// applyTo is Assign's, ModifySet's and AssignImage's spec.applyTo for target t.
func (g *generator) applyTo(t target) []any {
	r := g.r
	entry := func(grp, version, kind string) map[string]any {
		e := map[string]any{"groups": []any{grp}, "versions": []any{version}, "kinds": []any{kind}}
		if r.chance(0.25) {
			ops := pick(r, [][]any{{"CREATE"}, {"UPDATE"}, {"*"}, {"CREATE", "UPDATE"}})
			e["operations"] = ops
		}
		return e
	}
	out := []any{entry(t.group, t.version, t.kind)}
	if r.chance(0.1) {
		out = append(out, entry("", "v1", "ConfigMap"))
	}
	if r.chance(0.05) {
		out = append(out, entry(t.group, t.version, t.kind))
	}
	return out
}

// match is spec.match for a mutator of target t (AssignMetadata: t is only a hint).
func (g *generator) match(t target, hasApplyTo bool) map[string]any {
	r := g.r
	m := map[string]any{}
	switch x := r.IntN(100); {
	case x < 65:
		m["kinds"] = []any{map[string]any{"apiGroups": []any{t.group}, "kinds": []any{t.kind}}}
	case x < 72:
		m["kinds"] = []any{map[string]any{"apiGroups": []any{"*"}, "kinds": []any{"*"}}}
	case x < 77:
		m["kinds"] = []any{map[string]any{"kinds": []any{t.kind}}}
	case x < 80:
		m["kinds"] = []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"ConfigMap"}}}
	case x < 85:
		var ks []any
		for _, tt := range g.targets {
			ks = append(ks, map[string]any{"apiGroups": []any{tt.group}, "kinds": []any{tt.kind}})
		}
		m["kinds"] = ks
	}
	if r.chance(0.2) {
		m["scope"] = pick(r, []string{"*", "Namespaced", "Cluster", "Namespaced"})
	}
	if r.chance(0.2) {
		m["namespaces"] = toAny(subset(r, nsWildcards, 2))
	}
	if r.chance(0.15) {
		m["excludedNamespaces"] = toAny(subset(r, nsWildcards, 2))
	}
	if r.chance(0.25) {
		m["labelSelector"] = g.selector(LabelKeys, LabelValues, true)
	}
	if r.chance(0.15) {
		m["namespaceSelector"] = g.selector(append([]string{"kubernetes.io/metadata.name"}, nsLabelKeys...), append(nsLabelValues, namespacePool...), false)
	}
	if r.chance(0.1) {
		m["name"] = pick(r, nameWildcards)
	}
	if r.chance(0.1) {
		m["source"] = pick(r, []string{"All", "Original", "All", "Original", "Generated"})
	}
	return m
}

// selector is a label selector over keys and values; waits records what it looks for, so that
// AssignMetadata mutators may set it.
func (g *generator) selector(keys, values []string, waits bool) map[string]any {
	r := g.r
	s := map[string]any{}
	want := func(k, v string) {
		if waits && !slices.Contains(g.waiting[k], v) {
			g.waiting[k] = append(g.waiting[k], v)
		}
	}
	labelValue := func(k string) string {
		if v, ok := g.written[k]; ok && r.chance(0.5) {
			return v
		}
		return pick(r, values)
	}
	if r.chance(0.6) {
		ml := map[string]any{}
		for _, k := range subset(r, keys, 2) {
			v := labelValue(k)
			ml[k] = v
			want(k, v)
		}
		if len(ml) > 0 {
			s["matchLabels"] = ml
		}
	}
	var exprs []any
	for i, n := 0, r.IntN(3); i < n; i++ {
		k := pick(r, keys)
		op := pick(r, []string{"In", "NotIn", "Exists", "DoesNotExist"})
		e := map[string]any{"key": k, "operator": op}
		switch op {
		case "In", "NotIn":
			var vs []any
			for j, m := 0, 1+r.IntN(2); j < m; j++ {
				v := labelValue(k)
				vs = append(vs, v)
				if op == "In" {
					want(k, v)
				}
			}
			e["values"] = vs
			if r.chance(0.02) {
				delete(e, "values") // invalid: Gatekeeper fails every request
			}
		case "Exists":
			want(k, pick(r, values))
		}
		exprs = append(exprs, e)
	}
	if len(exprs) > 0 {
		s["matchExpressions"] = exprs
	}
	return s
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// scenario adds a few mutators known to interact.
func (g *generator) scenario() {
	r := g.r
	pod := podTarget
	c := func(name string) path {
		return path{{field: "spec", n: podSpec}, {field: "containers", n: podSpec.field("containers")}, {list: true, keyField: "name", keyValue: name, n: container}}
	}
	glob := path{{field: "spec", n: podSpec}, {field: "containers", n: podSpec.field("containers")}, {list: true, keyField: "name", glob: true, n: container}}
	sub := func(p path, names ...string) path {
		p = p.clone()
		n := p.terminal()
		for _, name := range names {
			n = n.field(name)
			p = append(p, step{field: name, n: n})
		}
		return p
	}
	add := func(m map[string]any, loc *located) {
		if m != nil && g.accept(m) {
			g.record(m, loc)
		}
	}
	which := r.IntN(13)
	if which == 11 {
		which = 9 // twice as often: it needs several mutators to line up
	}
	switch which {
	case 12: // two or three writers of one place whose matches no request meets both of, by
		// what admission does not change (namespaces, namespace labels, names, scope, kinds),
		// or that only look so (overlapping globs, values in common, a Namespace whose label a
		// mutator adds)
		meta := r.chance(0.4)
		splits, key := g.splitMatches(2+r.IntN(2), meta)
		var p path
		if !meta {
			spec := path{{field: "spec", n: podSpec}}
			p = pick(r, []path{sub(glob, "imagePullPolicy"), sub(spec, "priorityClassName"), sub(spec, "dnsPolicy"), c(pick(r, ContainerNames))})
		}
		label := pick(r, LabelKeys)
		for _, match := range splits {
			if meta {
				m := g.assignMetadata(label, pick(r, LabelValues))
				m["spec"].(map[string]any)["match"] = match
				add(m, nil)
				continue
			}
			m, loc := g.assign(pod, p)
			if m == nil {
				continue
			}
			spec := m["spec"].(map[string]any)
			spec["match"] = match
			if r.chance(0.5) {
				delete(spec["parameters"].(map[string]any), "pathTests")
			}
			add(m, loc)
		}
		if key != "" && r.chance(0.4) {
			// A Namespace gets the label the selectors look at, within its own request.
			m := g.assignMetadata(key, pick(r, nsLabelValues))
			m["spec"].(map[string]any)["match"] = map[string]any{"kinds": []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"Namespace"}}}}
			add(m, nil)
		}
	case 10: // whole containers of one name and a prune through every container: the prune
		// removes nothing from what they assign (plan.Fuser.PrunedAround: one expression, the
		// prune leaving out the container they replace), or, less often, something
		field := pick(r, []string{"args", "command"})
		pm, ploc := g.modifySet(pod, sub(glob, field))
		if pm == nil {
			return
		}
		params := pm["spec"].(map[string]any)["parameters"].(map[string]any)
		params["operation"] = "prune"
		if r.chance(0.7) {
			delete(params, "pathTests")
		}
		vals, _ := params["values"].(map[string]any)["fromList"].([]any)
		name := pick(r, ContainerNames)
		for i := 0; i < 1+r.IntN(2); i++ {
			sm, sloc := g.assign(pod, c(name))
			if sm == nil {
				continue
			}
			assign := sm["spec"].(map[string]any)["parameters"].(map[string]any)["assign"].(map[string]any)
			if e, ok := assign["value"].(map[string]any); ok {
				switch {
				case r.chance(0.2) && len(vals) > 0:
					e[field] = []any{"-kept", vals[0]}
				case r.chance(0.5):
					e[field] = []any{"-kept"}
				default:
					delete(e, field)
				}
			}
			add(sm, sloc)
		}
		add(pm, ploc)
	case 9: // near-copies that may make one another moot (plan.Redundant): one location, the
		// same value or another, wider or narrower matches, tests, in any order
		if r.chance(0.5) {
			k, v := pick(r, LabelKeys), pick(r, LabelValues)
			for i := 0; i < 2+r.IntN(2); i++ {
				vv := v
				if r.chance(0.25) {
					vv = pick(r, LabelValues)
				}
				m := g.assignMetadata(k, vv)
				if r.chance(0.5) {
					delete(m["spec"].(map[string]any), "match") // every object
				}
				add(m, nil)
			}
			if m, loc := g.assign(pod, nil); m != nil && r.chance(0.3) { // one that looks at the label
				m["spec"].(map[string]any)["match"].(map[string]any)["labelSelector"] = map[string]any{"matchLabels": map[string]any{k: v}}
				add(m, loc)
			}
			return
		}
		if r.chance(0.4) {
			// Whole containers of one name, the later ones often for every object: a later one
			// always replaces an earlier one's (plan.Forward, plan.CreateOnly), and the two
			// may then append the container in one expression (SharesCreation).
			name := pick(r, ContainerNames)
			var applyTo any
			for i := 0; i < 2+r.IntN(2); i++ {
				m, l := g.assign(pod, c(name))
				if m == nil {
					continue
				}
				ms := m["spec"].(map[string]any)
				if applyTo == nil {
					applyTo = ms["applyTo"]
				} else if r.chance(0.8) {
					ms["applyTo"] = applyTo // the same kinds and operations
				}
				if r.chance(0.7) {
					delete(ms["parameters"].(map[string]any), "pathTests")
				}
				if i > 0 && r.chance(0.7) {
					delete(ms, "match")
				}
				add(m, l)
			}
			return
		}
		fields := pick(r, [][]string{{"imagePullPolicy"}, {"workingDir"}, {"securityContext", "privileged"}})
		first, loc := g.assign(pod, sub(glob, fields...))
		if first == nil {
			return
		}
		spec := first["spec"].(map[string]any)
		if r.chance(0.6) {
			delete(spec, "match")
			delete(spec["parameters"].(map[string]any), "pathTests")
		}
		add(first, loc)
		for i := 0; i < 1+r.IntN(3); i++ {
			p := sub(glob, fields...)
			if r.chance(0.4) {
				p = sub(c(pick(r, ContainerNames)), fields...)
			}
			m, l := g.assign(pod, p)
			if m == nil {
				continue
			}
			ms := m["spec"].(map[string]any)
			if r.chance(0.7) {
				ms["parameters"].(map[string]any)["assign"] = spec["parameters"].(map[string]any)["assign"]
			}
			if r.chance(0.8) {
				ms["applyTo"] = spec["applyTo"] // the same kinds and operations
			}
			add(m, l)
		}
	case 8: // a glob sets a field in every container; a later-sorted AssignImage creates one
		fields := pick(r, [][]string{{"imagePullPolicy"}, {"workingDir"}, {"securityContext", "privileged"}})
		gm, gl := g.assign(pod, sub(glob, fields...))
		im, il := g.assignImage(pod, sub(c(pick(r, ContainerNames)), "image"))
		if gm == nil || im == nil {
			return
		}
		spec := gm["spec"].(map[string]any)
		spec["applyTo"] = im["spec"].(map[string]any)["applyTo"] // the same kinds and operations
		switch x := r.IntN(10); {
		case x < 4:
			delete(spec, "match")
		case x < 7:
			spec["match"] = map[string]any{"namespaces": []any{pick(r, g.namespaces).name}}
		}
		if r.chance(0.6) {
			delete(spec["parameters"].(map[string]any), "pathTests")
		}
		add(gm, gl)
		add(im, il)
		if r.chance(0.3) { // another writer of that field: the same value, or not
			om, ol := g.assign(pod, sub(glob, fields...))
			if om != nil && r.chance(0.5) {
				om["spec"].(map[string]any)["parameters"].(map[string]any)["assign"] = spec["parameters"].(map[string]any)["assign"]
			}
			add(om, ol)
		}
	case 6: // a sidecar that already holds what a glob (or a keyed Assign) sets in it
		pp := sub(glob, "imagePullPolicy")
		m, loc := g.assign(pod, pp)
		if m == nil {
			return
		}
		v, ok := m["spec"].(map[string]any)["parameters"].(map[string]any)["assign"].(map[string]any)["value"]
		add(m, loc)
		if !ok {
			return
		}
		name := pick(r, ContainerNames)
		for i := 0; i < 1+r.IntN(2); i++ { // one or two whole-element Assigns of one key
			sm, sloc := g.assign(pod, c(name))
			if sm != nil {
				if e, ok := sm["spec"].(map[string]any)["parameters"].(map[string]any)["assign"].(map[string]any)["value"].(map[string]any); ok && r.chance(0.8) {
					e["imagePullPolicy"] = v
				}
			}
			add(sm, sloc)
		}
		if r.chance(0.5) { // the same value at the same field of that container, which it may create
			km, kloc := g.assign(pod, sub(c(pick(r, []string{name, pick(r, ContainerNames)})), "imagePullPolicy"))
			if km != nil {
				km["spec"].(map[string]any)["parameters"].(map[string]any)["assign"] = map[string]any{"value": v}
			}
			add(km, kloc)
		}
	case 7: // an AssignImage setting every part, and one setting some of them alike
		full := map[string]any{"assignDomain": pick(r, imageDomains), "assignPath": pick(r, imagePaths), "assignTag": pick(r, imageTags)}
		for i, p := range []path{sub(glob, "image"), sub(c(pick(r, ContainerNames)), "image")} {
			if i == 1 && r.chance(0.5) {
				p = sub(glob, "image")
			}
			m, loc := g.assignImage(pod, p)
			if m == nil {
				continue
			}
			params := m["spec"].(map[string]any)["parameters"].(map[string]any)
			for _, k := range []string{"assignDomain", "assignPath", "assignTag"} { // a fixed order: the case is seeded
				v := full[k]
				if i == 0 || r.chance(0.5) {
					params[k] = v
				} else if r.chance(0.7) {
					delete(params, k)
				}
			}
			if params["assignDomain"] == nil && params["assignPath"] == nil && params["assignTag"] == nil {
				params["assignTag"] = full["assignTag"]
			}
			add(m, loc)
		}
	case 0: // a sidecar and a glob over all containers
		name := pick(r, ContainerNames)
		add(g.assign(pod, c(name)))
		add(g.assign(pod, sub(glob, pick(r, []string{"imagePullPolicy", "securityContext"}))))
	case 1: // AssignMetadata adds a label another mutator's selector waits for
		k, v := pick(r, LabelKeys), pick(r, LabelValues)
		g.waiting[k] = append(g.waiting[k], v)
		add(g.assignMetadata(k, v), nil)
		m, loc := g.assign(pod, nil)
		if m != nil {
			spec := m["spec"].(map[string]any)
			spec["match"].(map[string]any)["labelSelector"] = map[string]any{"matchLabels": map[string]any{k: v}}
			add(m, loc)
		}
	case 2: // ModifySet and Assign on one list
		p := sub(c(pick(r, ContainerNames)), pick(r, []string{"args", "command"}))
		if r.chance(0.5) {
			p[2].glob, p[2].keyValue = true, ""
		}
		add(g.modifySet(pod, p))
		add(g.assign(pod, p))
	case 3: // AssignImage and Assign on one image
		p := sub(c(pick(r, ContainerNames)), "image")
		add(g.assign(pod, p))
		if r.chance(0.5) {
			p = sub(glob, "image")
		}
		add(g.assignImage(pod, p))
	case 5: // nested lists: a glob over containers and a keyed or globbed list inside
		inner := pick(r, []string{"env", "ports", "volumeMounts"})
		p := sub(glob, inner)
		l := p.terminal()
		s := step{list: true, keyField: l.keys[0], n: l.elem}
		if r.chance(0.5) {
			s.glob = true
		} else {
			s.keyValue = pick(r, keyValues(l.elem, s.keyField))
		}
		p = append(p, s)
		leaf := pick(r, l.elem.fields)
		if leaf.name == s.keyField || r.chance(0.3) && !s.glob {
			add(g.assign(pod, p)) // the whole element, in every container
		} else {
			add(g.assign(pod, sub(p, leaf.name)))
		}
		if r.chance(0.5) {
			add(g.modifySet(pod, sub(c(pick(r, ContainerNames)), "args")))
		} else {
			add(g.assign(pod, c(pick(r, ContainerNames))))
		}
	case 4: // a default: set only if missing, and another writer
		p := r.randomPath(podRoot, func(path) float64 { return 0.1 })
		if !assignable(p) {
			return
		}
		m, loc := g.assign(pod, p)
		if m != nil {
			params := m["spec"].(map[string]any)["parameters"].(map[string]any)
			params["pathTests"] = []any{map[string]any{"subPath": format(r, p), "condition": "MustNotExist"}}
			add(m, loc)
		}
		add(g.assign(pod, p))
	}
}

// splitMatches is n matches that split requests by one criterion admission does not change,
// often into parts no request is in two of, and the namespace label key they select on ("" for
// none); kinds and scope only for AssignMetadata (meta), which then may match Namespaces, and
// every kind.
func (g *generator) splitMatches(n int, meta bool) ([]map[string]any, string) {
	r := g.r
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{}
		if meta && r.chance(0.5) {
			out[i]["kinds"] = []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"Pod", "Namespace"}}}
		}
	}
	criteria := []int{0, 1, 1, 2} // namespace labels twice as often: they have the most forms
	if meta {
		criteria = append(criteria, 3, 4)
	}
	key := ""
	switch pick(r, criteria) {
	case 0: // namespaces, or the namespaces of the others excluded
		var names []string
		for _, ns := range g.namespaces {
			names = append(names, ns.name)
		}
		names = append(names, nsWildcards...)
		var listed []any
		for i := range out {
			if i > 0 && r.chance(0.3) {
				out[i]["excludedNamespaces"] = slices.Clone(listed)
				continue
			}
			ns := toAny(subset(r, names, 1))
			if len(ns) == 0 {
				ns = []any{pick(r, names)}
			}
			out[i]["namespaces"] = ns
			listed = append(listed, ns...)
		}
	case 1: // values of one namespace label
		key = pick(r, nsLabelKeys)
		values := slices.Clone(nsLabelValues)
		r.Shuffle(len(values), func(i, j int) { values[i], values[j] = values[j], values[i] })
		for i := range out {
			v := values[i%len(values)]
			var s map[string]any
			switch r.IntN(5) {
			case 0, 1:
				s = map[string]any{"matchLabels": map[string]any{key: v}}
			case 2:
				vs := []any{v}
				if r.chance(0.3) {
					vs = append(vs, pick(r, values)) // perhaps another's
				}
				s = map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "In", "values": vs}}}
			case 3:
				s = map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "NotIn", "values": toAny(values[:1+r.IntN(2)])}}}
			default:
				op := pick(r, []string{"Exists", "DoesNotExist"})
				s = map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": op}}}
			}
			out[i]["namespaceSelector"] = s
		}
	case 2: // names
		names := append(slices.Clone(podNames), nameWildcards...)
		for i := range out {
			out[i]["name"] = pick(r, names)
		}
	case 3: // scopes
		scopes := pick(r, [][]string{{"Namespaced", "Cluster"}, {"Cluster", "Namespaced"}, {"Namespaced", "*"}})
		for i := range out {
			out[i]["scope"] = scopes[i%2]
		}
	default: // kinds
		kinds := pick(r, [][]string{{"Pod", "Namespace"}, {"Namespace", "Pod"}, {"Pod", "Pod"}})
		for i := range out {
			out[i]["kinds"] = []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{kinds[i%2]}}}
		}
	}
	return out, key
}
