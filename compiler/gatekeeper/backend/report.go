package backend

import (
	"sort"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
)

// report lists every mutator document with what became of it: refused if a problem names it,
// compiled if a policy computes it, otherwise left out with the notes that say why.
func report(docs []*source.Document, out *output) []route.MutatorStatus {
	type key struct{ file, name string }
	policies := map[key][]string{}
	for i, g := range out.Groups {
		for _, m := range g.Mutations {
			k := key{m.Source.File, m.Source.String()}
			if i < len(out.PolicyOf) && out.PolicyOf[i] != nil {
				policies[k] = append(policies[k], out.PolicyOf[i].Policy.Name)
			}
			if i < len(out.AlsoIn) {
				for _, p := range out.AlsoIn[i] {
					policies[k] = append(policies[k], p.Policy.Name)
				}
			}
		}
	}
	problems := map[key][]string{}
	for _, e := range out.Problems {
		if p, ok := e.(*diag.Problem); ok {
			k := key{p.File, p.Object}
			problems[k] = append(problems[k], p.Reason())
		}
	}
	redundant := map[key]string{}
	for _, r := range out.Redundant {
		redundant[key{r.M.Source.File, r.M.Source.String()}] = redundantReason + r.Why
	}
	var list []route.MutatorStatus
	seen := map[key]bool{}
	for _, d := range docs {
		obj := d.Object
		if _, msg := gatekeeper.Misnamed(obj); !gatekeeper.IsMutator(obj) && msg == "" {
			continue
		}
		name := obj.GetKind() + "/" + obj.GetName()
		k := key{d.File, name}
		if seen[k] {
			continue
		}
		seen[k] = true
		st := route.MutatorStatus{Mutator: name, File: d.File, Line: d.Line}
		switch {
		case len(problems[k]) > 0:
			st.Status, st.Reasons = route.Refused, problems[k]
		case len(policies[k]) > 0:
			st.Status, st.Policies = route.Compiled, dedupe(policies[k])
		case redundant[k] != "":
			st.Status, st.Reasons = route.LeftOut, []string{redundant[k]}
		default:
			st.Status = route.LeftOut
			for _, n := range out.Notes {
				if n.About(d.File, d.Line, name) {
					st.Reasons = append(st.Reasons, n.Msg)
				}
			}
			if len(st.Reasons) == 0 {
				st.Reasons = []string{"no mutation emitted: it can never write anything"}
			}
		}
		list = append(list, st)
	}
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].File != list[j].File {
			return list[i].File < list[j].File
		}
		return list[i].Line < list[j].Line
	})
	return list
}
