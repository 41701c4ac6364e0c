package gen

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/internal/typed"
)

// canonical returns v as the API server stores it when it sits at location p of an object of
// target t: decoded into the Go type and encoded again (empty lists and maps of omitempty fields
// dropped, required fields added, quantities in canonical form). ok is false when v does not
// decode there.
//
// ModifySet merge compares values with what the object holds; a value in another form than the
// stored one is never found, so it is added again whenever the mutator runs again (see
// testdata/diff-failures/modifyset-merge-noncanonical.yaml). The generator gives ModifySet values
// in canonical form so that such cases do not hide other differences.
func canonical(t target, p path, v any) (out any, ok bool) {
	// A skeleton object holding v at p, with one element for every list step.
	var build func(i int) any
	build = func(i int) any {
		if i == len(p) {
			return v
		}
		s := p[i]
		if s.list {
			e := map[string]any{}
			if i+1 < len(p) {
				if m, ok := build(i + 1).(map[string]any); ok {
					e = m
				}
			} else if m, ok := v.(map[string]any); ok {
				e = m
			}
			if !s.glob {
				e[s.keyField] = s.keyValue
			}
			return []any{e}
		}
		return map[string]any{s.field: build(i + 1)}
	}
	objMap, _ := build(0).(map[string]any)
	if objMap == nil {
		return nil, false
	}
	objMap["apiVersion"] = schema.GroupVersion{Group: t.group, Version: t.version}.String()
	objMap["kind"] = t.kind
	gvk := schema.GroupVersionKind{Group: t.group, Version: t.version, Kind: t.kind}
	m, err := typed.RoundTrip(gvk, objMap, true)
	if err != nil {
		return nil, false
	}
	// Walk back down.
	var cur any = m
	for _, s := range p {
		if s.list {
			l, ok := cur.([]any)
			if !ok || len(l) != 1 {
				return nil, false
			}
			cur = l[0]
			continue
		}
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		x, exists := mm[s.field]
		if !exists {
			// Dropped as empty: the canonical form is absence, which no value has.
			return nil, false
		}
		cur = x
	}
	return cur, true
}

// nonEmpty is a fixed value of n that the API server keeps (not empty, not zero), for a canonical
// case whose generated value it would drop.
func nonEmpty(n *node, keyField, keyValue string) any {
	switch n.kind {
	case kObject:
		m := map[string]any{}
		for _, f := range n.fields {
			m[f.name] = nonEmpty(f.n, "", "")
			break
		}
		for _, r := range n.required {
			m[r] = nonEmpty(n.field(r), "", "")
		}
		if keyField != "" {
			m[keyField] = keyValue
		}
		return m
	case kMap:
		return map[string]any{n.keys[0]: nonEmpty(n.elem, "", "")}
	case kList:
		k := n.keys[0]
		return []any{nonEmpty(n.elem, k, keyValues(n.elem, k)[0])}
	case kScalarList:
		return []any{nonEmpty(n.elem, "", "")}
	case kString:
		for _, s := range n.strs {
			if s != "" {
				return s
			}
		}
		return "x"
	case kInt:
		for _, i := range n.ints {
			if i != 0 {
				return i
			}
		}
		return int64(1)
	case kBool:
		return true
	case kQuantity:
		return "1"
	case kImage:
		return Images[0]
	}
	return "x"
}
