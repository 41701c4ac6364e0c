package backend

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
)

// TestScheduleKeepsDependentOrder: schedule may move steps, but never one past a step it does
// not commute with, and it keeps every step exactly once and every
// coupled unit together. Checked on the groups of the docs examples (one of eleven mutators in
// five rounds) and of the benchmark sets, and on all their groups in one sequence.
func TestScheduleKeepsDependentOrder(t *testing.T) {
	fz := plan.NewFuser()
	for _, path := range []string{"../../../examples/gatekeeper", "../../../testdata/bench/realistic-20/mutators.yaml", "../../../testdata/bench/realistic-50/mutators.yaml", "../../../testdata/bench/realistic-100/mutators.yaml", "../../../testdata/golden/gatekeeper/fused-reordered-chains/mutators.yaml"} {
		docs, err := source.ReadPaths([]string{path}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := Compile(docs, route.Options{Layout: route.LayoutFused}).Detail.(*Plan)
		gis := make([]int, len(out.Groups))
		for i := range gis {
			gis[i] = i
		}
		seq := sequence(out.Groups, gis, nil)
		chunks := schedule(fz, seq)
		pos := map[[2]any]int{} // (mutation, round) -> position in the schedule
		n := 0
		for _, ch := range chunks {
			for i, s := range ch {
				if i > 0 && s.unit != ch[0].unit {
					t.Fatalf("%s: a chunk mixes units", path)
				}
				k := [2]any{s.m, s.round}
				if _, dup := pos[k]; dup {
					t.Fatalf("%s: %s round %d scheduled twice", path, s.m.Source, s.round)
				}
				pos[k] = n
				n++
			}
		}
		if n != len(seq) {
			t.Fatalf("%s: %d steps scheduled, want %d", path, n, len(seq))
		}
		moved := 0
		for i, a := range seq {
			for _, b := range seq[i+1:] {
				pa, pb := pos[[2]any{a.m, a.round}], pos[[2]any{b.m, b.round}]
				if pa > pb {
					moved++
					if !fz.Commute(a.m, b.m) {
						t.Errorf("%s: %s (round %d) now runs after %s (round %d), which it does not commute with", path, a.m.Source, a.round, b.m.Source, b.round)
					}
				}
			}
		}
		if moved == 0 && !strings.Contains(path, "/realistic-") { // their steps need no reordering
			t.Errorf("%s: nothing was reordered; the check above would test nothing", path)
		}
	}
}
