package plan_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
)

// metadata is an AssignMetadata mutator; match is the YAML of spec.match ("" for none).
func metadata(name, location, value, match string) string {
	if match != "" {
		match = "  match: " + match + "\n"
	}
	return fmt.Sprintf(`apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: %s
spec:
%s  location: '%s'
  parameters:
    assign:
      value: %s
`, name, match, location, value)
}

// samePairs checks that rs are want ("M by By", in any order).
func samePairs(t *testing.T, what string, rs []plan.Redundancy, want []string) {
	t.Helper()
	var got []string
	for _, r := range rs {
		got = append(got, r.M.Source.Name+" by "+r.By.Source.Name)
	}
	sort.Strings(got)
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func TestRedundant(t *testing.T) {
	glob := "spec.containers[name: *].imagePullPolicy"
	mustNotExist := "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustNotExist\n"
	mustExist := func(key string) string {
		return fmt.Sprintf("    pathTests:\n    - subPath: 'spec.containers[name: %s]'\n      condition: MustExist\n", key)
	}
	inProd := func(doc string) string {
		return strings.Replace(doc, "spec:\n", "spec:\n  match: {namespaces: [prod]}\n", 1)
	}
	cases := []struct {
		name string
		docs []string
		want []string // "mutator by mutator"
	}{
		{"the same value before, narrower", []string{
			assign("a", glob, "Always", ""), inProd(assign("b", glob, "Always", "")),
		}, []string{"b by a"}},
		{"the same value before, only where missing", []string{
			assign("a", glob, "Always", ""), assign("b", glob, "Never", mustNotExist),
		}, []string{"b by a"}},
		{"the same value in one container that must exist", []string{
			assign("a", glob, "Always", ""), assign("b", "spec.containers[name: x].imagePullPolicy", "Always", mustExist("x")),
		}, []string{"b by a"}},
		{"a chain: every one moot because of the first, which stays", []string{
			assign("a", glob, "Always", ""), assign("b", glob, "Always", ""), assign("c", glob, "Always", ""),
		}, []string{"b by a", "c by a"}},
		{"another value", []string{
			assign("a", glob, "Always", ""), assign("b", glob, "Never", ""),
		}, nil},
		{"the first applies to fewer requests", []string{
			inProd(assign("a", glob, "Always", "")), assign("b", glob, "Always", mustNotExist),
		}, nil},
		{"the first has a test", []string{
			assign("a", glob, "Always", mustNotExist), assign("b", glob, "Always", ""),
		}, nil},
		{"a key that creates its container", []string{
			assign("a", glob, "Always", ""), assign("b", "spec.containers[name: x].imagePullPolicy", "Always", ""),
		}, nil},
		{"the same value after, overwriting", []string{
			inProd(assign("a", glob, "Always", "")), assign("b", glob, "Always", ""),
		}, nil},
		{"another value written between", []string{
			assign("a", glob, "Always", ""), assign("b", glob, "Never", ""), assign("c", glob, "Always", ""),
		}, nil},
		{"a container added between", []string{
			assign("a", glob, "Always", ""), assign("b", "spec.containers[name: proxy]", "{name: proxy, image: nginx}", ""), assign("c", glob, "Always", ""),
		}, nil},
		{"a container replaced whole between", []string{
			assign("a", glob, "Always", ""), assign("b", "spec.containers", "[{name: proxy, image: nginx}]", ""), assign("c", glob, "Always", ""),
		}, nil},
		{"another field written between", []string{
			assign("a", glob, "Always", ""), assign("b", "spec.containers[name: *].workingDir", "/w", ""), assign("c", glob, "Always", ""),
		}, []string{"c by a"}},
		{"labels: the same value added later, everywhere", []string{
			metadata("a", "metadata.labels.team", "x", "{name: web-*}"), metadata("b", "metadata.labels.team", "x", ""),
		}, []string{"a by b"}},
		{"labels: another value added later", []string{
			metadata("a", "metadata.labels.team", "x", "{name: web-*}"), metadata("b", "metadata.labels.team", "ops", ""),
		}, nil},
		{"labels: another value added before, everywhere", []string{
			metadata("a", "metadata.labels.team", "x", ""), metadata("b", "metadata.labels.team", "ops", "{name: web-*}"),
		}, []string{"b by a"}},
		{"labels: a selector between looks at the label", []string{
			metadata("a", "metadata.labels.team", "x", "{name: web-*}"),
			metadata("b", "metadata.labels.tier", "ops", "{labelSelector: {matchLabels: {team: x}}}"),
			metadata("c", "metadata.labels.team", "x", ""),
		}, nil},
		{"labels: another label between", []string{
			metadata("a", "metadata.labels.team", "x", "{name: web-*}"),
			metadata("b", "metadata.labels.tier", "ops", ""),
			metadata("c", "metadata.labels.team", "x", ""),
		}, []string{"a by c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := mutations(t, tc.docs...)
			rs := plan.Redundant(ms)
			dropped := map[string]bool{}
			for _, r := range rs {
				dropped[r.M.Source.Name] = true
				if r.Why == "" || !strings.Contains(r.Why, r.By.Source.String()) {
					t.Errorf("%s: the reason should name %s: %q", r.M.Source, r.By.Source, r.Why)
				}
			}
			for _, r := range rs {
				if dropped[r.By.Source.Name] {
					t.Errorf("%s is left out because of %s, which is left out too", r.M.Source, r.By.Source)
				}
			}
			samePairs(t, "redundant", rs, tc.want)
		})
	}
}

func TestForward(t *testing.T) {
	glob := "spec.containers[name: *].imagePullPolicy"
	inProd := func(doc string) string {
		return strings.Replace(doc, "spec:\n", "spec:\n  match: {namespaces: [prod]}\n", 1)
	}
	notSet := "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustNotExist\n"
	cases := []struct {
		name string
		docs []string
		want []string // "mutator by mutator"
	}{
		{"a later constant over a glob", []string{
			assign("a", glob, "Never", ""), assign("b", glob, "Always", ""),
		}, []string{"a by b"}},
		{"a key, and a later glob", []string{
			assign("a", "spec.containers[name: x].imagePullPolicy", "Never", ""), assign("b", glob, "Always", ""),
		}, []string{"a by b"}},
		{"an image tag, and a later AssignImage that sets every part", []string{
			image("a", "spec.containers[name: nginx].image", "", "", "@sha256:0123456789012345678901234567890123456789012345678901234567890123"),
			image("b", "spec.containers[name: *].image", "my.reg", "app", ":v1"),
		}, []string{"a by b"}},
		{"the later one applies to fewer requests", []string{
			assign("a", glob, "Never", ""), inProd(assign("b", glob, "Always", "")),
		}, nil},
		{"the later one writes only where nothing is", []string{
			assign("a", glob, "Never", ""), assign("b", glob, "Always", notSet),
		}, nil},
		{"a glob, and a later key", []string{
			assign("a", glob, "Never", ""), assign("b", "spec.containers[name: x].imagePullPolicy", "Always", ""),
		}, nil},
		{"a rewrite between, overwritten too: a chain", []string{
			image("a", "spec.containers[name: nginx].image", "", "", ":v2"),
			image("ab", "spec.containers[name: *].image", "", "mirror/app", ""),
			image("b", "spec.containers[name: *].image", "my.reg", "app", ":v1"),
		}, []string{"a by ab", "ab by b"}},
		{"something between writes it only where it is missing", []string{
			assign("a", glob, "Never", ""), assign("ab", glob, "IfNotPresent", notSet), assign("b", glob, "Always", ""),
		}, []string{"ab by b"}},
		{"something between appends to the list", []string{
			assign("a", glob, "Never", ""), assign("ab", "spec.containers[name: proxy].image", "envoy", ""), assign("b", glob, "Always", ""),
		}, nil},
		{"an AssignImage that keeps a part is no constant", []string{
			image("a", "spec.containers[name: nginx].image", "", "", ":v2"),
			image("b", "spec.containers[name: *].image", "my.reg", "", ":v1"),
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := mutations(t, tc.docs...)
			rs := plan.Forward(ms)
			for _, r := range rs {
				if sv, ok := r.M.Op.(ir.SetValue); !ok || sv.Value == nil {
					t.Errorf("%s: computed as %#v, want an Assign of a constant", r.M.Source, r.M.Op)
				}
			}
			samePairs(t, "forwarded", rs, tc.want)
		})
	}
}

func TestCreateOnly(t *testing.T) {
	glob := "spec.containers[name: *].imagePullPolicy"
	key := "spec.containers[name: x].imagePullPolicy"
	mustNotExist := "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustNotExist\n"
	mustExist := "    pathTests:\n    - subPath: 'spec.containers[name: x]'\n      condition: MustExist\n"
	mustExistField := "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustExist\n"
	inProd := func(doc string) string {
		return strings.Replace(doc, "spec:\n", "spec:\n  match: {namespaces: [prod]}\n", 1)
	}
	cases := []struct {
		name string
		docs []string
		skip string
		want []string // "mutator by mutator"
	}{
		{"a key, the same value set before by a glob", []string{
			assign("a", glob, "Always", ""), assign("b", key, "Always", ""),
		}, "", []string{"b by a"}},
		{"a key, another value before", []string{
			assign("a", glob, "Never", ""), assign("b", key, "Always", ""),
		}, "", nil},
		{"a key, overwritten by a later glob", []string{
			assign("a", key, "Never", ""), assign("b", glob, "Always", ""),
		}, "", []string{"a by b"}},
		{"a key, overwritten by a later glob that needs the field", []string{
			assign("a", key, "Never", ""), assign("b", glob, "Always", mustExistField),
		}, "", nil},
		{"a whole element, replaced by a later one", []string{
			assign("a", "spec.containers[name: x]", "{name: x, image: a}", ""), assign("b", "spec.containers[name: x]", "{name: x, image: b}", ""),
		}, "", []string{"a by b"}},
		{"the earlier one writes only where nothing is", []string{
			assign("a", glob, "Always", mustNotExist), assign("b", key, "Always", ""),
		}, "", nil},
		{"the earlier one applies to fewer requests", []string{
			inProd(assign("a", glob, "Always", "")), assign("b", key, "Always", ""),
		}, "", nil},
		{"the later one applies to fewer requests", []string{
			assign("a", key, "Never", ""), inProd(assign("b", glob, "Always", "")),
		}, "", nil},
		{"the element added between", []string{
			assign("a", glob, "Always", ""), assign("ab", "spec.containers[name: x]", "{name: x, image: nginx}", ""), assign("b", key, "Always", ""),
		}, "", nil},
		{"another element added between", []string{
			assign("a", glob, "Always", ""), assign("ab", "spec.containers[name: proxy]", "{name: proxy, image: nginx}", ""), assign("b", key, "Always", ""),
		}, "", []string{"b by a"}},
		{"another value written between", []string{
			assign("a", glob, "Always", ""), assign("ab", key, "Never", ""), assign("b", key, "Always", ""),
		}, "", []string{"ab by b"}},
		{"a glob creates nothing", []string{
			assign("a", glob, "Always", ""), assign("b", glob, "Always", ""),
		}, "", nil},
		{"a key that must exist creates nothing", []string{
			assign("a", glob, "Always", ""), assign("b", key, "Always", mustExist),
		}, "", nil},
		{"one mutator is the reason for two", []string{
			assign("a", glob, "Always", ""), assign("b", key, "Always", ""), assign("c", "spec.containers[name: y].imagePullPolicy", "Always", ""),
		}, "", []string{"b by a", "c by a"}},
		{"the reason of another rule keeps its writes", []string{
			assign("a", glob, "Always", ""), assign("b", key, "Always", ""),
		}, "b", nil},
		{"a chain: the reason of one keeps its writes", []string{
			assign("a", key, "Never", ""), assign("b", key, "IfNotPresent", ""), assign("c", glob, "Always", ""),
		}, "", []string{"a by b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := mutations(t, tc.docs...)
			skip := map[*ir.Mutation]bool{}
			for _, m := range ms {
				if m.Source.Name == tc.skip {
					skip[m] = true
				}
			}
			before := fmt.Sprint(ms[len(ms)-1].ExistsOK)
			out := plan.CreateOnly(ms, skip)
			var rs []plan.Redundancy
			by := map[*ir.Mutation]bool{}
			for _, o := range out {
				rs = append(rs, o.Redundancy)
				by[o.By] = true
				if !strings.Contains(o.Why, o.By.Source.String()) {
					t.Errorf("%s: the reason should name %s: %q", o.M.Source, o.By.Source, o.Why)
				}
				if c := o.Test(); c.ExistsOK[o.Elem] || !o.M.ExistsOK[o.Elem] || !c.Path[o.Elem].List {
					t.Errorf("%s: Test should add a MustNotExist test at its list element (step %d) and leave M as it is", o.M.Source, o.Elem)
				}
			}
			for _, o := range out {
				if by[o.M] || skip[o.M] {
					t.Errorf("%s by %s: a mutator that is a reason must keep its writes", o.M.Source, o.By.Source)
				}
			}
			if fmt.Sprint(ms[len(ms)-1].ExistsOK) != before {
				t.Errorf("CreateOnly changed its input")
			}
			samePairs(t, "created only", rs, tc.want)
		})
	}
}

// TestSharesCreation: a pair of CreateOnly (By sorted after, the same constant at the very same
// keyed path, no tests, the same completions) may be fused once the Fuser is told; others not.
func TestSharesCreation(t *testing.T) {
	inProd := func(doc string) string {
		return strings.Replace(doc, "spec:\n", "spec:\n  match: {namespaces: [prod]}\n", 1)
	}
	whole := "spec.containers[name: x]"
	mustExist := "    pathTests:\n    - subPath: 'spec'\n      condition: MustExist\n"
	cases := []struct {
		name    string
		docs    []string
		forward bool // plan.Forward first, as the compiler does
		want    bool
	}{
		{"whole elements, the later one's value", []string{
			inProd(assign("a", whole, "{name: x, image: a}", "")), assign("b", whole, "{name: x, image: b}", ""),
		}, true, true},
		{"a field of one element, the later one's value", []string{
			inProd(assign("a", whole+".image", "a", "")), assign("b", whole+".image", "b", ""),
		}, true, true},
		{"values that differ", []string{
			inProd(assign("a", whole, "{name: x, image: a}", "")), assign("b", whole, "{name: x, image: b}", ""),
		}, false, false},
		{"a test on the earlier one", []string{
			inProd(assign("a", whole, "{name: x, image: a}", mustExist)), assign("b", whole, "{name: x, image: b}", ""),
		}, true, false},
		{"the later one is a glob", []string{
			inProd(assign("a", whole+".image", "a", "")), assign("b", "spec.containers[name: *].image", "b", ""),
		}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := mutations(t, tc.docs...)
			if tc.forward {
				plan.Forward(ms)
			}
			os := plan.CreateOnly(ms, nil)
			got := false
			for _, o := range os {
				if o.SharesCreation() {
					got = true
					z := plan.NewFuser()
					if z.Fusable(o.M, o.By) {
						t.Errorf("%s and %s fusable before ShareCreation", o.M.Source, o.By.Source)
					}
					z.ShareCreation(o)
					// (A field of a new element is also an interaction, which ShareCreation does not lift.)
					if r := z.WhyNotInOrder(o.M, o.By); r != "" && o.Elem == len(o.M.Path)-1 {
						t.Errorf("%s and %s not fusable after ShareCreation: %s", o.M.Source, o.By.Source, r)
					}
				}
			}
			if got != tc.want {
				t.Errorf("shares creation: got %v, want %v (created only: %d)", got, tc.want, len(os))
			}
		})
	}
}
