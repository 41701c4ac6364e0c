package gen

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objects generates the namespaces and the objects to admit. Objects often already hold what the
// mutators write (so that both "exists" and "missing" paths are taken), and carry labels the
// selectors look for about half of the time.
func (g *generator) objects() {
	r := g.r
	hasNSTarget, hasDeploy := false, false
	for _, t := range g.targets {
		hasNSTarget = hasNSTarget || t.kind == "Namespace"
		hasDeploy = hasDeploy || t.kind == "Deployment"
	}
	for _, ns := range g.namespaces {
		labels := map[string]any{"kubernetes.io/metadata.name": ns.name}
		for k, v := range ns.labels {
			labels[k] = v
		}
		o := map[string]any{
			"apiVersion": "v1",
			"kind":       "Namespace",
			"metadata":   map[string]any{"name": ns.name, "labels": labels},
		}
		if hasNSTarget {
			if r.chance(0.5) {
				o["spec"] = r.value(namespaceRoot.field("spec"), 0.7, 2)
			}
			o = g.materialize(o, namespaceTarget)
		}
		g.c.Namespaces = append(g.c.Namespaces, &unstructured.Unstructured{Object: o})
	}
	for i, n := 0, 1+boolInt(r.chance(0.4)); i < n; i++ {
		g.c.Objects = append(g.c.Objects, &unstructured.Unstructured{Object: g.pod()})
	}
	if hasDeploy || r.chance(0.05) {
		g.c.Objects = append(g.c.Objects, &unstructured.Unstructured{Object: g.deployment()})
	}
	if r.chance(0.15) {
		g.c.Operation = "UPDATE"
	}
}

func (g *generator) meta(names []string) map[string]any {
	r := g.r
	md := map[string]any{"namespace": pick(r, g.namespaces).name}
	if r.chance(0.04) {
		md["generateName"] = pick(r, []string{"web-", "api-"})
	} else {
		md["name"] = pick(r, names)
	}
	if labels := g.labels(); len(labels) > 0 {
		md["labels"] = labels
	}
	if r.chance(0.3) {
		ann := map[string]any{}
		for _, k := range subset(r, AnnotationKeys, 2) {
			ann[k] = pick(r, freeStrings)
		}
		md["annotations"] = ann
	}
	return md
}

// labels are random labels, often including ones selectors wait for.
func (g *generator) labels() map[string]any {
	r := g.r
	labels := map[string]any{}
	for _, k := range subset(r, LabelKeys, 2) {
		labels[k] = pick(r, LabelValues)
	}
	for _, k := range sortedKeys(g.waiting) {
		if r.chance(0.4) {
			labels[k] = pick(r, g.waiting[k])
		}
	}
	return labels
}

func (g *generator) podSpec() map[string]any {
	r := g.r
	spec := r.value(podSpec, 0.2, 3).(map[string]any)
	spec["containers"] = r.elements(podSpec.field("containers"), 1+r.IntN(3), 0.35, 2)
	return spec
}

func (g *generator) pod() map[string]any {
	o := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   g.meta(podNames),
		"spec":       g.podSpec(),
	}
	o = g.materialize(o, podTarget)
	g.keepContainers(o, "spec")
	return o
}

// keepContainers gives back containers to a pod spec that materialize replaced by one without:
// the API server would send Gatekeeper "containers": null, on which its walk fails (see
// testdata/diff-failures/request-null-field.yaml).
func (g *generator) keepContainers(o map[string]any, path ...string) {
	spec, ok, _ := unstructured.NestedMap(o, path...)
	if !ok {
		return
	}
	if cs, _ := spec["containers"].([]any); len(cs) == 0 {
		spec["containers"] = g.r.elements(podSpec.field("containers"), 1, 0.35, 2)
		_ = unstructured.SetNestedField(o, spec, path...)
	}
}

func (g *generator) deployment() map[string]any {
	r := g.r
	spec := r.value(deploymentRoot.field("spec"), 0.3, 2).(map[string]any)
	delete(spec, "template")
	tmd := map[string]any{"labels": map[string]any{"app": "web"}}
	spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": "web"}}
	spec["template"] = map[string]any{"metadata": tmd, "spec": g.podSpec()}
	o := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   g.meta([]string{"web", "api-1"}),
		"spec":       spec,
	}
	o = g.materialize(o, deploymentTarget)
	g.keepContainers(o, "spec", "template", "spec")
	if sel, _, _ := unstructured.NestedMap(o, "spec", "selector"); sel == nil {
		_ = unstructured.SetNestedField(o, map[string]any{"matchLabels": map[string]any{"app": "web"}}, "spec", "selector")
	}
	return o
}

// materialize makes o hold, now and then, each location the mutators of t write.
func (g *generator) materialize(o map[string]any, t target) map[string]any {
	for _, p := range g.paths[t.kind] {
		if g.r.chance(0.4) {
			g.r.fill(o, p)
		}
	}
	return o
}

// fill makes the value cur hold the location p (creating what is missing along the way, with a
// random value at the end), and returns the new value.
func (r *rng) fill(cur any, p path) any {
	if len(p) == 0 {
		return cur
	}
	s := p[0]
	if !s.list {
		m, ok := cur.(map[string]any)
		if !ok {
			return cur
		}
		if len(p) == 1 {
			if _, exists := m[s.field]; !exists || r.chance(0.5) {
				m[s.field] = r.value(s.n, 0.5, 2)
			}
			return m
		}
		next, exists := m[s.field]
		if !exists {
			if p[1].list {
				next = []any{}
			} else {
				next = map[string]any{}
			}
		}
		m[s.field] = r.fill(next, p[1:])
		return m
	}
	l, ok := cur.([]any)
	if !ok {
		return cur
	}
	idx := -1
	for i, e := range l {
		em, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if s.glob || em[s.keyField] == s.keyValue {
			idx = i
			break
		}
	}
	if idx < 0 {
		e := r.value(s.n, 0.4, 1).(map[string]any)
		if s.glob {
			e[s.keyField] = pick(r, keyValues(s.n, s.keyField))
		} else {
			e[s.keyField] = s.keyValue
		}
		l = append(l, e)
		idx = len(l) - 1
	}
	if len(p) > 1 {
		l[idx] = r.fill(l[idx], p[1:])
	}
	return l
}
