package bench

import (
	"context"
	"testing"

	"github.com/mapc-dev/mapc/verify"
)

// TestExpertPoliciesMatchGatekeeper: the hand-written baselines are only fair if they are
// correct: every bench object, admitted through them in every order and again (idempotence),
// gives Gatekeeper's object.
func TestExpertPoliciesMatchGatekeeper(t *testing.T) {
	for _, wl := range Workloads() {
		if wl.Expert == "" {
			continue
		}
		t.Run(wl.Name, func(t *testing.T) {
			w := load(t, wl)
			sets, err := ReadPolicies(Path(wl.Expert))
			if err != nil {
				t.Fatal(err)
			}
			v, err := verify.NewSets(w.Mutators, sets, verify.Options{Namespaces: w.Namespaces, Idempotence: true})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			var rs []verify.Result
			for _, obj := range w.Objects {
				rs = append(rs, v.Check(context.Background(), verify.Case{Object: obj}))
			}
			for _, r := range rs {
				if !r.Pass {
					t.Errorf("%s", verify.Report([]verify.Result{r}))
				}
			}
		})
	}
}

func load(t testing.TB, wl WorkloadSpec) *Workload {
	t.Helper()
	w, err := wl.Load()
	if err != nil {
		t.Fatal(err)
	}
	return w
}
