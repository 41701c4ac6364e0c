package backend

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/kyverno/lower"
)

// foreachWrites are the places (field names below the object) a foreach entry can write: its
// list, the ways of its strategic merge patches down to their leaves or lists (a directive, or a
// key with a variable, writes the map that holds it), its JSON patches' paths up to their first
// variable, and its nested entries' places.
func foreachWrites(fe kyverno.ForEach) [][]string {
	var out [][]string
	if path, err := lower.ListPath(fe.List); err == nil {
		out = append(out, path)
	}
	var smp func(m map[string]any, at []string)
	smp = func(m map[string]any, at []string) {
		for k, v := range m {
			if strings.HasPrefix(k, "$") || strings.Contains(k, "{{") {
				out = append(out, at)
				continue
			}
			_, name := lower.Anchor(k)
			path := append(slices.Clone(at), name)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				smp(sub, path)
				continue
			}
			out = append(out, path)
		}
	}
	smp(fe.StrategicMerge, nil)
	for _, op := range fe.JSON6902 {
		var path []string
		for _, t := range lower.PathTokens(op.Path) {
			if strings.Contains(t, "{{") {
				break
			}
			path = append(path, t)
		}
		out = append(out, path)
	}
	for _, sub := range fe.ForEach {
		out = append(out, foreachWrites(sub)...)
	}
	return out
}

// entryError is a refusal of a context entry, with where it is written below the rule.
type entryError struct {
	sub string
	msg string
}

func (e *entryError) Error() string { return e.msg }

// entriesConstant checks that the rule's variable context entries that read the object read
// nothing its foreach entries write. Kyverno loads the rule's context again for each element, as
// the patched object then stands; the compiled policy reads the entries once, on the object
// before the rule: the two agree where no element's patch changes what an entry reads.
func entriesConstant(r *kyverno.Rule, sc lower.Scope) *entryError {
	names, reads := lower.ObjectReads(sc)
	var writes [][]string
	for _, fe := range r.ForEach {
		writes = append(writes, foreachWrites(fe)...)
	}
	for i, name := range names {
		for _, read := range reads[i] {
			for _, w := range writes {
				if !isPrefix(read, w) && !isPrefix(w, read) {
					continue
				}
				j := slices.IndexFunc(r.Variables, func(v kyverno.Variable) bool { return v.Entry == name })
				what := "the whole object"
				if len(read) > 0 {
					what = strings.Join(read, ".")
				}
				return &entryError{sub: strings.TrimPrefix(r.Variables[j].Field, r.Field+"."),
					msg: fmt.Sprintf("reads %s, which the rule's foreach can change: Kyverno loads the rule's context entries again for each element, as the patched object then stands, the compiled policy once, before the rule; supported where the entry reads nothing the foreach writes", what)}
			}
		}
	}
	return nil
}
