package admission

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func TestTraceIgnored(t *testing.T) {
	e := evaluator(t)
	ignore := withFailurePolicy(admissionregistrationv1.Ignore)
	fail := withFailurePolicy(admissionregistrationv1.Fail)
	missingArgs := jsonPatch(`[JSONPatch{op: "add", path: "/spec/containers/0/args/-", value: "x"}]`) // no args: the patch fails
	missingKey := applyConfig(`Object{metadata: Object.metadata{labels: {"x": object.metadata.labels["missing"]}}}`)
	ok := applyConfig(`Object{metadata: Object.metadata{labels: {"ok": "yes"}}}`)
	badMatch := `object.metadata.labels["missing"] == "x"`

	tests := []struct {
		name    string
		set     PolicySet
		wantErr bool
		want    []string // "expression|error substring", in order
	}{
		{name: "mutation fails to evaluate under Ignore",
			set:  policy("p", missingKey, ignore),
			want: []string{"spec.mutations[0]|no such key"}},
		{name: "the patch fails to apply under Ignore",
			set:  policy("p", missingArgs, ignore),
			want: []string{"spec.mutations[0]|missing value"}},
		{name: "second mutation fails",
			set: func() PolicySet {
				s := policy("p", ok, ignore)
				s.Policy.Spec.Mutations = append(s.Policy.Spec.Mutations, missingKey)
				return s
			}(),
			want: []string{"spec.mutations[1]|no such key"}},
		{name: "compile error under Ignore",
			set:  policy("p", applyConfig(`Object{metadata: Object.metadata{labels: {"x": nosuchvariable}}}`), ignore),
			want: []string{"spec.mutations[0]|nosuchvariable"}},
		{name: "match condition fails under Ignore",
			set:  policy("p", ok, ignore, withMatchConditions(badMatch)),
			want: []string{"spec.matchConditions[0] (c0)|no such key"}},
		{name: "match condition fails, but another is false: nothing is swallowed",
			set: policy("p", ok, ignore, withMatchConditions(badMatch, `false`))},
		{name: "under Fail the request is denied, nothing is swallowed",
			set: policy("p", missingKey, fail), wantErr: true},
		{name: "match condition under Fail",
			set: policy("p", ok, fail, withMatchConditions(badMatch)), wantErr: true},
		{name: "no failure",
			set: policy("p", ok, ignore)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Trace{}
			_, err := e.Admit(WithTrace(context.Background(), tr), []PolicySet{tc.set}, Request{Object: pod("prod", nil)})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Admit error = %v, want error: %v", err, tc.wantErr)
			}
			got := tr.Ignored()
			if len(got) != len(tc.want) {
				t.Fatalf("ignored = %v, want %v", got, tc.want)
			}
			for i, w := range tc.want {
				expr, msg, _ := strings.Cut(w, "|")
				if got[i].Policy != "p" || got[i].Expression != expr || !strings.Contains(got[i].Err, msg) {
					t.Errorf("ignored[%d] = %+v, want %s with an error containing %q", i, got[i], expr, msg)
				}
			}
		})
	}
}

func TestTraceIgnoredOnce(t *testing.T) {
	// An IfNeeded policy is run again when a later policy changes the object: its failure is
	// reported once.
	e := evaluator(t)
	failing := policy("failing", applyConfig(`Object{metadata: Object.metadata{labels: {"x": object.metadata.labels["missing"]}}}`),
		withFailurePolicy(admissionregistrationv1.Ignore), withReinvocation(admissionregistrationv1.IfNeededReinvocationPolicy))
	tr := &Trace{}
	if _, err := e.Admit(WithTrace(context.Background(), tr), []PolicySet{failing, setLabelTeam}, Request{Object: pod("prod", nil)}); err != nil {
		t.Fatal(err)
	}
	if got := tr.Ignored(); len(got) != 1 {
		t.Errorf("ignored = %v, want one failure", got)
	}
}

func TestFailureString(t *testing.T) {
	m := Failure{Policy: "p", Expression: "spec.mutations[1]", Err: "boom"}
	if got, want := m.String(), "policy p: spec.mutations[1] failed, and failurePolicy Ignore admitted the object without it: boom"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	c := Failure{Policy: "p", Expression: "spec.matchConditions[0] (c0)", Err: "boom"}
	if got, want := c.String(), "policy p: spec.matchConditions[0] (c0) failed, and failurePolicy Ignore skipped the policy: boom"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
