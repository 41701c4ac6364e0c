package backend

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
)

// sequenceOf is the steps of all the groups of the mutators at path, fused, in Gatekeeper's order.
func sequenceOf(t *testing.T, path string) []step {
	t.Helper()
	docs, err := source.ReadPaths([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := Compile(docs, route.Options{Layout: route.LayoutFused}).Detail.(*Plan)
	gis := make([]int, len(out.Groups))
	for i := range gis {
		gis[i] = i
	}
	return sequence(out.Groups, gis, nil)
}

// TestScheduleKeepsDependentOrder: schedule may move steps, but never one past a step it does
// not commute with, and it keeps every step exactly once and every
// coupled unit together. Checked on the groups of the docs examples (one of eleven mutators in
// five rounds) and of the benchmark sets, and on all their groups in one sequence.
func TestScheduleKeepsDependentOrder(t *testing.T) {
	fz := plan.NewFuser()
	for _, path := range []string{"../../../examples/gatekeeper", "../../../testdata/bench/realistic-20/mutators.yaml", "../../../testdata/bench/realistic-50/mutators.yaml", "../../../testdata/bench/realistic-100/mutators.yaml", "../../../testdata/golden/gatekeeper/fused-reordered-chains/mutators.yaml"} {
		seq := sequenceOf(t, path)
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

// TestPackKeepsDependentOrder: pack puts every step in exactly one mutation and moves a chunk
// into an earlier mutation only past mutations whose steps it commutes with: of two steps that
// do not commute, the one scheduled first stays in an earlier mutation, or earlier in the same
// one. Checked on the benchmark sets and the docs examples, with sizes that never split (only
// conflicts do) and with a small size bound; at least one chunk moves.
func TestPackKeepsDependentOrder(t *testing.T) {
	fz := plan.NewFuser()
	moved := 0
	for _, path := range []string{"../../../examples/gatekeeper", "../../../testdata/bench/realistic-50/mutators.yaml", "../../../testdata/bench/realistic-100/mutators.yaml", "../../../testdata/golden/gatekeeper/fused-reordered-chains/mutators.yaml"} {
		chunks := schedule(fz, sequenceOf(t, path))
		for _, size := range []func(c, _ []step) int{
			func(c, _ []step) int { return 0 },
			func(c, _ []step) int { return len(c) * maxFusedLength / 10 }, // at most ten steps a mutation
		} {
			moved += checkPack(t, fz, path, chunks, pack(fz, chunks, size, true))
		}
	}
	if moved == 0 {
		t.Error("no chunk went into an earlier mutation: the check above would test nothing")
	}
}

// checkPack checks bins, chunks packed, as TestPackKeepsDependentOrder says, and counts the
// chunks that went into an earlier mutation than one before them.
func checkPack(t *testing.T, fz *plan.Fuser, path string, chunks [][]step, bins []*bin) int {
	t.Helper()
	moved := 0
	type place struct{ bin, at int }
	where := map[[2]any]place{}
	for bi, b := range bins {
		for i, s := range b.steps {
			k := [2]any{s.m, s.round}
			if _, dup := where[k]; dup {
				t.Errorf("%s: %s round %d packed twice", path, s.m.Source, s.round)
			}
			where[k] = place{bi, i}
		}
	}
	var seq []step
	for _, c := range chunks {
		seq = append(seq, c...)
	}
	if len(where) != len(seq) {
		t.Errorf("%s: %d steps packed, want %d", path, len(where), len(seq))
	}
	last := -1
	for _, c := range chunks {
		p := where[[2]any{c[0].m, c[0].round}]
		if p.bin < last {
			moved++
		}
		last = max(last, p.bin)
	}
	for i, a := range seq {
		for _, b := range seq[i+1:] {
			pa, pb := where[[2]any{a.m, a.round}], where[[2]any{b.m, b.round}]
			if (pa.bin > pb.bin || pa.bin == pb.bin && pa.at > pb.at) && !fz.Commute(a.m, b.m) {
				t.Errorf("%s: %s (round %d) now runs after %s (round %d), which it does not commute with", path, a.m.Source, a.round+1, b.m.Source, b.round+1)
			}
		}
	}
	return moved
}

// TestLayersAsComparingAll: layers, which compares a chunk with the earlier chunks of its group
// from the highest layer down and stops where none can force a higher one, gives every chunk the
// layer that comparing it with all of them gives. On the docs examples, the benchmark sets and
// the golden cases (whose chains force several layers).
func TestLayersAsComparingAll(t *testing.T) {
	fz := plan.NewFuser()
	deepest := 0
	goldens, err := filepath.Glob("../../../testdata/golden/gatekeeper/*/mutators.yaml")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden cases (%v)", err)
	}
	for _, path := range append([]string{"../../../examples/gatekeeper", "../../../testdata/bench/realistic-50/mutators.yaml", "../../../testdata/bench/realistic-100/mutators.yaml"}, goldens...) {
		chunks := chunksOf(sequenceOf(t, path))
		want := make([]int, len(chunks))
		for c := range chunks {
			for p := 0; p < c; p++ {
				if chunks[p][0].group != chunks[c][0].group {
					continue
				}
				switch {
				case !allFusable(fz, chunks[p], chunks[c], true):
					want[c] = max(want[c], want[p]+1)
				case !allFusable(fz, chunks[p], chunks[c], false):
					want[c] = max(want[c], want[p])
				}
			}
		}
		got := layers(fz, chunks)
		for c := range chunks {
			deepest = max(deepest, want[c])
			if got[c] != want[c] {
				t.Errorf("%s: %s (round %d) in layer %d, want %d", path, chunks[c][0].m.Source, chunks[c][0].round, got[c], want[c])
			}
		}
	}
	if deepest < 2 {
		t.Errorf("no chunk deeper than layer %d: the comparison above would test little", deepest)
	}
}

// TestIsolate: a group too large for one policy by itself gets a part of its own, its
// neighbours staying together in order; other parts are left as divide made them.
func TestIsolate(t *testing.T) {
	heavy := map[int]bool{3: true, 7: true, 9: true}
	for _, c := range []struct {
		parts, want [][]int
	}{
		{[][]int{{1, 2}, {4, 5}}, [][]int{{1, 2}, {4, 5}}},
		{[][]int{{1, 2, 3, 4}, {5, 6}}, [][]int{{1, 2}, {3}, {4}, {5, 6}}},
		{[][]int{{3, 4}, {7}, {8, 9}}, [][]int{{3}, {4}, {7}, {8}, {9}}},
		{[][]int{{7, 9}}, [][]int{{7}, {9}}},
	} {
		got := isolate(c.parts, func(gi int) bool { return heavy[gi] })
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("isolate(%v) = %v, want %v", c.parts, got, c.want)
		}
	}
}
