package plan

import "github.com/mapc-dev/mapc/compiler/gatekeeper/ir"

// PlanAllPairs is Plan testing every ordered pair, as the planner did before its index.
func PlanAllPairs(ms []*ir.Mutation) []*Group {
	fps := make([]*footprint, len(ms))
	all := make([][]int, len(ms))
	for i, m := range ms {
		fps[i] = footprintOf(m)
		for j := range ms {
			if j != i {
				all[i] = append(all[i], j)
			}
		}
	}
	return plan(ms, fps, all)
}
