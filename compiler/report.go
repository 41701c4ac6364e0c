package compiler

import (
	"sort"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
)

// Status says what became of one mutator.
type Status string

const (
	// Compiled: the mutator's mutation is in the policies named.
	Compiled Status = "compiled"
	// LeftOut: no mutation was emitted, because the mutator never changes an object (it never
	// applies to an admission request, or another mutator makes its write moot), as the reason says.
	LeftOut Status = "left-out"
	// Refused: the mutator cannot be translated exactly, or is invalid; see the problems.
	Refused Status = "refused"
)

// MutatorStatus is one mutator's line of the compile report.
type MutatorStatus struct {
	Mutator  string   `json:"mutator"` // Kind/name
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Status   Status   `json:"status"`
	Policies []string `json:"policies,omitempty"`
	// Reasons say why a mutator was left out or refused (every problem found with it).
	Reasons []string `json:"reasons,omitempty"`
}

// report lists every mutator document with what became of it: refused if a problem names it,
// compiled if a policy computes it, otherwise left out with the notes that say why.
func report(docs []*source.Document, out *Output) []MutatorStatus {
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
	var list []MutatorStatus
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
		st := MutatorStatus{Mutator: name, File: d.File, Line: d.Line}
		switch {
		case len(problems[k]) > 0:
			st.Status, st.Reasons = Refused, problems[k]
		case len(policies[k]) > 0:
			st.Status, st.Policies = Compiled, dedupe(policies[k])
		case redundant[k] != "":
			st.Status, st.Reasons = LeftOut, []string{redundant[k]}
		default:
			st.Status = LeftOut
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

// Count returns how many mutators have status s.
func Count(list []MutatorStatus, s Status) int {
	n := 0
	for _, m := range list {
		if m.Status == s {
			n++
		}
	}
	return n
}
