package backend

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/internal/par"
	"github.com/mapc-dev/mapc/internal/typed"
)

// checkCanonical refuses values that the API server would not store as written. Gatekeeper
// applies all its mutators to one in-memory object, so the next mutator sees a value exactly as
// the previous one wrote it (an empty list, a null, hostnames: []); the API server re-encodes the
// typed object after every policy mutation and drops what the type omits when empty. The two
// then disagree about what exists, and no policy can reproduce Gatekeeper. A value that the API
// server keeps as written has no such problem.
//
// Only built-in kinds are checked (their Go types are the schema); a value that does not fit the
// type at all is refused too, as the API server would reject the patched object.
func (sc schemaCache) checkCanonical(m *ir.Mutation) error {
	var values []any
	switch op := m.Op.(type) {
	case ir.SetValue:
		if op.FromMetadata != "" {
			return nil
		}
		values = []any{op.Value}
	case ir.MergeSet:
		values = []any{op.Values}
	case ir.PruneSet:
		values = []any{op.Values}
	default:
		return nil
	}
	for _, r := range m.Match.Rules {
		gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
		if !typed.Known(gvk) || sc.outsideSchema(m, r) {
			continue
		}
		for _, v := range values {
			stored, err := sc.roundTrip(gvk, m.Path, v)
			if err != nil {
				return fmt.Errorf("the value does not fit %s at this location: %v", gvk.Kind, err)
			}
			_, isSet := m.Op.(ir.SetValue)
			if !isSet && !drops(norm(v), norm(stored)) && !reflect.DeepEqual(norm(v), norm(stored)) {
				// A ModifySet compares its values with the list's elements: stored with the fields
				// the type adds, they no longer compare equal, and a later merge appends again.
				s, _ := json.Marshal(stored)
				w, _ := json.Marshal(v)
				return fmt.Errorf("the API server stores the values %s as %s (a %s adds the fields its type requires); "+
					"Gatekeeper compares later merges and prunes with the values as written, the API server with the values as stored, so no policy can match Gatekeeper: write the values as the API server stores them",
					w, s, gvk.Kind)
			}
			if drops(norm(v), norm(stored)) {
				s, _ := json.Marshal(stored)
				w, _ := json.Marshal(v)
				as := "as " + string(s)
				if stored == nil {
					as = "as nothing at all"
				}
				return fmt.Errorf("the API server stores the value %s %s (a %s has no room for empty lists and maps and nulls in optional fields); "+
					"Gatekeeper's later mutators see the value as written, the API server's the value as stored, so no policy can match Gatekeeper: write the value as the API server stores it",
					w, as, gvk.Kind)
			}
		}
	}
	return nil
}

// outsideSchema: is m's location a field r's kind does not have? The API server drops unknown
// fields from what Gatekeeper's webhook returns, so Gatekeeper's write there changes nothing that
// is stored (a MAP's JSONPatch, decoded strictly, would fail instead).
func (sc schemaCache) outsideSchema(m *ir.Mutation, r ir.Rule) bool {
	gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	if !typed.Known(gvk) {
		return false
	}
	var v any = "x"
	if sv, ok := m.Op.(ir.SetValue); ok && sv.FromMetadata == "" {
		v = sv.Value
	}
	_, err := sc.roundTrip(gvk, m.Path, v)
	return err != nil && strings.Contains(err.Error(), "unknown field")
}

// createdInSchema: when m's location is outside r's kind's schema, the longest part of it the
// kind has, as a path, if Gatekeeper may create a node of that part (the walk goes on from it
// to the leaf where they are missing); "" when the location leaves the schema at its first field or every node of the
// part must exist already.
func (sc schemaCache) createdInSchema(m *ir.Mutation, r ir.Rule) string {
	gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	if !typed.Known(gvk) {
		return ""
	}
	known := 0
	for i := 1; i < len(m.Path); i++ {
		_, err := sc.roundTrip(gvk, m.Path[:i], map[string]any{})
		if err != nil && strings.Contains(err.Error(), "unknown field") {
			break
		}
		known = i
	}
	// Gatekeeper tests the whole path first: a node is created only where every node from it to
	// the leaf may be missing.
	from := len(m.MissingOK)
	for from > 0 && m.MissingOK[from-1] {
		from--
	}
	if from < known {
		return ir.PathString(m.Path[:known])
	}
	return ""
}

// schemaCache remembers roundTrip's results during one Compile: a mutator's value is
// round-tripped up to three times (outsideSchema twice, checkCanonical), and many mutators share
// kind, path and value. Not safe for concurrent use.
type schemaCache map[string]roundTripResult

type roundTripResult struct {
	stored any
	err    error
}

// roundTrip puts v at path in an otherwise empty object of kind gvk, passes it through the Go type
// as the API server does, and returns what is at path afterwards (nil when it is gone). The
// result is shared: it must not be modified.
func (sc schemaCache) roundTrip(gvk schema.GroupVersionKind, path []ir.Step, v any) (any, error) {
	key, ok := roundTripKey(gvk, path, v)
	if !ok {
		return roundTripOnce(gvk, path, v)
	}
	if r, ok := sc[key]; ok {
		return r.stored, r.err
	}
	stored, err := roundTripOnce(gvk, path, v)
	sc[key] = roundTripResult{stored, err}
	return stored, err
}

func roundTripKey(gvk schema.GroupVersionKind, path []ir.Step, v any) (string, bool) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return gvk.String() + "\x00" + ir.PathKey(path) + "\x00" + string(data), true
}

// prefetch fills the cache with the round trips outsideSchema and checkCanonical will ask for
// the mutations ms, computed on every core (each passes a small object through a Go type and
// back; a set of generated mutators rarely shares one).
func (sc schemaCache) prefetch(ms []*ir.Mutation) {
	type job struct {
		key  string
		gvk  schema.GroupVersionKind
		path []ir.Step
		v    any
	}
	var jobs []job
	add := func(gvk schema.GroupVersionKind, path []ir.Step, v any) {
		if key, ok := roundTripKey(gvk, path, v); ok {
			if _, done := sc[key]; !done {
				sc[key] = roundTripResult{} // a placeholder, filled below
				jobs = append(jobs, job{key, gvk, path, v})
			}
		}
	}
	for _, m := range ms {
		for _, r := range m.Match.Rules {
			gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
			if !typed.Known(gvk) {
				continue
			}
			var v any = "x"
			switch op := m.Op.(type) {
			case ir.SetValue:
				if op.FromMetadata == "" {
					v = op.Value
				}
			case ir.MergeSet:
				add(gvk, m.Path, op.Values)
			case ir.PruneSet:
				add(gvk, m.Path, op.Values)
			}
			add(gvk, m.Path, v)
		}
	}
	results := make([]roundTripResult, len(jobs))
	par.Do(len(jobs), func(i int) {
		j := jobs[i]
		results[i].stored, results[i].err = roundTripOnce(j.gvk, j.path, j.v)
	})
	for i, j := range jobs {
		sc[j.key] = results[i]
	}
}

func roundTripOnce(gvk schema.GroupVersionKind, path []ir.Step, v any) (any, error) {
	root, ok := build(path, 0, v).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the location does not start with a field")
	}
	root["apiVersion"], root["kind"] = gvk.GroupVersion().String(), gvk.Kind
	back, err := typed.RoundTrip(gvk, root, true)
	if err != nil {
		return nil, err
	}
	var cur any = back
	for _, st := range path {
		switch c := cur.(type) {
		case map[string]any:
			if st.List {
				return nil, nil
			}
			cur = c[st.Field]
		case []any:
			if len(c) == 0 {
				return nil, nil
			}
			cur = c[0]
		default:
			return nil, nil
		}
	}
	return cur, nil
}

// build is the smallest value in which path[i:] leads to v: a map for a field step, a list of one
// element (carrying its key) for a list step.
func build(path []ir.Step, i int, v any) any {
	if i == len(path) {
		return v
	}
	st := path[i]
	if !st.List {
		return map[string]any{st.Field: build(path, i+1, v)}
	}
	if i == len(path)-1 {
		return []any{v}
	}
	elem, _ := build(path, i+1, v).(map[string]any)
	if elem == nil {
		elem = map[string]any{}
	}
	key := st.KeyValue
	if st.Glob {
		key = "x"
	}
	if _, ok := elem[st.KeyField]; !ok {
		elem[st.KeyField] = key
	}
	return []any{elem}
}

// norm is v as plain JSON values (numbers as float64).
func norm(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// drops reports whether stored lacks or changes anything written has. Fields the type adds
// (an empty resources: {} in a container) do not count: the API server adds them to every
// object, including the ones Gatekeeper sees in the request.
func drops(written, stored any) bool {
	switch w := written.(type) {
	case map[string]any:
		s, ok := stored.(map[string]any)
		if !ok {
			return true
		}
		for k, wv := range w {
			sv, ok := s[k]
			if !ok || drops(wv, sv) {
				return true
			}
		}
		return false
	case []any:
		s, ok := stored.([]any)
		if !ok || len(s) != len(w) {
			return true
		}
		for i := range w {
			if drops(w[i], s[i]) {
				return true
			}
		}
		return false
	}
	return !reflect.DeepEqual(written, stored)
}
