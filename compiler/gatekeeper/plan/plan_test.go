package plan_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/plan"
	"github.com/mapc-dev/mapc/compiler/source"
)

// assign is a Pod Assign mutator; extra is appended under spec.parameters.
func assign(name, location, value, extra string) string {
	return fmt.Sprintf(`apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: %s
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: '%s'
  parameters:
    assign:
      value: %s
%s`, name, location, value, extra)
}

// image is a Pod AssignImage mutator setting the non-empty parts.
func image(name, location, domain, path, tag string) string {
	params := ""
	for _, kv := range [][2]string{{"assignDomain", domain}, {"assignPath", path}, {"assignTag", tag}} {
		if kv[1] != "" {
			params += fmt.Sprintf("    %s: '%s'\n", kv[0], kv[1])
		}
	}
	return fmt.Sprintf(`apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata:
  name: %s
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: '%s'
  parameters:
%s`, name, location, params)
}

// named indexes ms by their names.
func named(ms []*ir.Mutation) map[string]*ir.Mutation {
	out := map[string]*ir.Mutation{}
	for _, m := range ms {
		out[m.Source.Name] = m
	}
	return out
}

// groupsOf names each group's members ("a+b") and gives its rounds.
func groupsOf(gs []*plan.Group) (names []string, rounds []int) {
	for _, g := range gs {
		var members []string
		for _, m := range g.Mutations {
			members = append(members, m.Source.String())
		}
		names = append(names, strings.Join(members, "+"))
		rounds = append(rounds, g.Rounds)
	}
	return names, rounds
}

func mutations(t *testing.T, docs ...string) []*ir.Mutation {
	t.Helper()
	ds, err := source.Parse("m.yaml", []byte(strings.Join(docs, "---\n")))
	if err != nil {
		t.Fatal(err)
	}
	res := gatekeeper.Compile(ds)
	for _, p := range res.Problems {
		t.Fatal(p)
	}
	return res.Mutations
}

func TestPlanGroupsAndRounds(t *testing.T) {
	mustNotExist := "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustNotExist\n"
	cases := []struct {
		name   string
		docs   []string
		groups []string // members of each group, "+"-joined, in plan order
		rounds []int
	}{
		{"disjoint fields stay apart",
			[]string{assign("a", "spec.dnsPolicy", "Default", ""), assign("b", "spec.hostname", "h", "")},
			[]string{"Assign/a", "Assign/b"}, []int{1, 1}},
		{"siblings under a parent both create commute",
			[]string{assign("a", "spec.securityContext.runAsNonRoot", "true", ""), assign("b", "spec.securityContext.fsGroup", "1", "")},
			[]string{"Assign/a", "Assign/b"}, []int{1, 1}},
		{"two writers of one field are ordered, one round",
			[]string{assign("a", "spec.dnsPolicy", "Default", ""), assign("b", "spec.dnsPolicy", "None", "")},
			[]string{"Assign/a+Assign/b"}, []int{1}},
		{"identical writers commute",
			[]string{assign("a", "spec.dnsPolicy", "Default", ""), assign("b", "spec.dnsPolicy", "Default", "")},
			[]string{"Assign/a", "Assign/b"}, []int{1, 1}},
		{"sidecar sorted after a glob needs a second round",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			[]string{"Assign/a-pull+Assign/b-sidecar"}, []int{2}},
		{"sidecar sorted before a glob needs one round",
			[]string{assign("a-sidecar", "spec.containers[name: proxy].image", "envoy", ""), assign("b-pull", "spec.containers[name: *].imagePullPolicy", "Always", "")},
			[]string{"Assign/a-sidecar+Assign/b-pull"}, []int{1}},
		{"keyed lookups of different keys do not interact",
			[]string{assign("a", "spec.containers[name: x].image", "i", ""), assign("b", "spec.containers[name: y].image", "j", "")},
			[]string{"Assign/a+Assign/b"}, []int{1}}, // both append to containers: their order matters
		{"a glob that never creates does not feed a keyed lookup",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-tty", "spec.containers[name: app].tty", "true", "    pathTests:\n    - subPath: 'spec.containers[name: app]'\n      condition: MustExist\n")},
			[]string{"Assign/a-pull", "Assign/b-tty"}, []int{1, 1}},
		{"writer sorted after a MustNotExist test needs a second round",
			[]string{assign("a-test", "spec.containers[name: *].imagePullPolicy", "Never", mustNotExist), assign("b-set", "spec.containers[name: *].imagePullPolicy", "Always", "")},
			[]string{"Assign/a-test+Assign/b-set"}, []int{2}},
		{"the same value through a key and a glob commutes",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", mustNotExist), assign("b-sidecar-pull", "spec.containers[name: sidecar].imagePullPolicy", "Always", "    pathTests:\n    - subPath: 'spec.containers[name: sidecar]'\n      condition: MustExist\n")},
			[]string{"Assign/a-pull", "Assign/b-sidecar-pull"}, []int{1, 1}},
		{"a created element holding the glob's value commutes with it",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", mustNotExist), assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy, imagePullPolicy: Always}", "")},
			[]string{"Assign/a-pull", "Assign/b-sidecar"}, []int{1, 1}},
		{"a created element with another value does not",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy, imagePullPolicy: Never}", "")},
			[]string{"Assign/a-pull+Assign/b-sidecar"}, []int{2}},
		{"a key created with the glob's value commutes with it",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-foo-pull", "spec.containers[name: foo].imagePullPolicy", "Always", "")},
			[]string{"Assign/a-pull", "Assign/b-foo-pull"}, []int{1, 1}},
		{"two whole elements of one key need only their order",
			[]string{assign("a-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy}", ""), assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: nginx}", "")},
			[]string{"Assign/a-sidecar+Assign/b-sidecar"}, []int{1}},
		{"an image set whole is not fed back to a tag set alike",
			[]string{image("a-tag", "spec.containers[name: *].image", "", "", ":v1"), image("b-full", "spec.containers[name: *].image", "my.reg", "app", ":v1")},
			[]string{"AssignImage/a-tag+AssignImage/b-full"}, []int{1}},
		{"an image set whole is fed back to another tag", // b-full writes one constant, reading nothing: a chain of two
			[]string{image("a-tag", "spec.containers[name: *].image", "", "", ":v2"), image("b-full", "spec.containers[name: *].image", "my.reg", "app", ":v1")},
			[]string{"AssignImage/a-tag+AssignImage/b-full"}, []int{2}},
		{"an image's tag rewritten twice, each reading the other's", // a cycle of two: the bound for a cycle
			[]string{image("a-tag", "spec.containers[name: *].image", "", "", ":v2"), image("b-domain-tag", "spec.containers[name: *].image", "my.reg", "", ":v1")},
			[]string{"AssignImage/a-tag+AssignImage/b-domain-tag"}, []int{3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gs := plan.Plan(mutations(t, c.docs...))
			got, rounds := groupsOf(gs)
			if fmt.Sprint(got) != fmt.Sprint(c.groups) || fmt.Sprint(rounds) != fmt.Sprint(c.rounds) {
				t.Errorf("got %v rounds %v, want %v rounds %v", got, rounds, c.groups, c.rounds)
				for _, g := range gs {
					t.Log(strings.Join(g.Why, "\n"))
				}
			}
		})
	}
}

func TestSharedCreations(t *testing.T) {
	ms := mutations(t,
		assign("a", "spec.containers[name: *].securityContext.privileged", "false", ""),
		assign("b", "spec.containers[name: *].securityContext.runAsNonRoot", "true", ""),
		assign("c", "spec.dnsPolicy", "Default", ""),
	)
	nodes, assume := plan.SharedCreations(ms)
	var got []string
	for _, n := range nodes {
		var names []string
		for _, m := range n.Creators {
			names = append(names, m.Source.Name)
		}
		got = append(got, fmt.Sprintf("%d:%v", len(n.Path), names))
	}
	// spec is on all three paths but only c creates it (a glob over a new list writes nothing,
	// so a and b never do): c creates it alone. securityContext is created by a and b.
	if want := "[4:[a b]]"; fmt.Sprint(got) != want {
		t.Errorf("shared nodes %v, want %s", got, want)
	}
	if assume[ms[0]] != 4 || assume[ms[2]] != 0 {
		t.Errorf("assume %v", assume)
	}
}

func TestFusable(t *testing.T) {
	ms := mutations(t,
		assign("a", "spec.securityContext.runAsNonRoot", "true", ""),
		assign("b", "spec.securityContext.fsGroup", "1", ""),
		assign("c", "spec.dnsPolicy", "Default", ""),
		assign("d", "spec.dnsPolicy", "None", ""),
		assign("e", "spec.hostname", "h", "    pathTests:\n    - {subPath: spec, condition: MustExist}\n"),
		assign("f", "spec.subdomain", "s", "    pathTests:\n    - {subPath: spec, condition: MustExist}\n"),
		assign("g", "spec.containers[name: foo].image", "i", ""),
		assign("h", "spec.containers[name: foo].imagePullPolicy", "Always", ""),
		assign("i", "spec.containers[name: *].securityContext.privileged", "false", ""),
		assign("j", "spec.containers[name: *].securityContext.runAsNonRoot", "true", ""),
		assign("k", "spec.containers[name: foo].imagePullPolicy", "Always", ""),
		assign("l", "spec.containers[name: *].imagePullPolicy", "Always", ""),
		assign("m", "spec.containers[name: bar].imagePullPolicy", "Never", ""),
	)
	byName := named(ms)
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a", "b", true},  // both may create spec.securityContext: created once, first
		{"a", "c", true},  // both may create spec
		{"c", "d", false}, // one place
		{"e", "f", true},  // spec must exist: nothing shared is created
		{"g", "h", false}, // both may append the element foo
		{"i", "j", true},  // both may create securityContext in every container
		{"k", "l", true},  // one constant at one field; only k may append foo, with it
		{"h", "k", false}, // both may append foo
		{"m", "l", false}, // bar is appended with another value than l sets in it
	} {
		if got := plan.Fusable(byName[c.a], byName[c.b]); got != c.want {
			t.Errorf("Fusable(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestFusableCompleted: a whole element written with what a glob sorted after it sets in it
// (plan.Complete) is computed with that glob in one expression, when the glob's operation is one
// "add" right below the element; not otherwise.
func TestFusableCompleted(t *testing.T) {
	notSet := "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustNotExist\n"
	onlyNew := "    pathTests:\n    - subPath: 'spec.containers[name: proxy]'\n      condition: MustNotExist\n"
	for _, c := range []struct {
		name, test, glob string
		want             bool
	}{
		{"one add below the element", "", assign("c-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), true},
		{"with a test", "", assign("c-pull", "spec.containers[name: *].imagePullPolicy", "Always", notSet), false},
		{"deeper in the element", "", assign("c-priv", "spec.containers[name: *].securityContext.privileged", "false", ""), false},
		// Added only where missing: the glob's operations reach the elements that were there.
		{"an element only added, a test", onlyNew, assign("c-pull", "spec.containers[name: *].imagePullPolicy", "Always", notSet), true},
		{"an element only added, deeper", onlyNew, assign("c-priv", "spec.containers[name: *].securityContext.privileged", "false", ""), true},
		{"an element only added, an image rewrite", onlyNew, image("c-image", "spec.containers[name: *].image", "my.reg", "", ""), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := mutations(t, assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy}", c.test), c.glob)
			plan.Complete(ms)
			if len(ms[0].Completions) != 1 {
				t.Fatalf("b-sidecar should be completed: %+v", ms[0].Completions)
			}
			z := plan.NewFuser()
			if got := z.Fusable(ms[0], ms[1]); got != c.want {
				t.Errorf("Fusable = %v, want %v (%s)", got, c.want, z.WhyNot(ms[0], ms[1]))
			}
		})
	}
}

// TestFusableInOrder: appends of different keys to one list fuse when their operations keep
// Gatekeeper's order, and only then; nothing else changes.
func TestFusableInOrder(t *testing.T) {
	ms := mutations(t,
		assign("a", "spec.containers[name: foo].image", "i", ""),
		assign("b", "spec.containers[name: bar]", "{name: bar, image: j}", ""),
		assign("c", "spec.containers[name: foo].imagePullPolicy", "Always", ""),
		assign("d", "spec.initContainers[name: foo].image", "i", ""),
		assign("e", "spec.containers[name: *].env[name: A].value", "x", ""),
		assign("f", "spec.containers[name: *].env[name: B].value", "y", ""),
		assign("g", "spec.containers[name: *].tty", "true", ""),
		assign("h", "spec.containers[name: *].env[name: A].value", "z", ""),
		assign("i", "spec.containers[name: foo].env[name: C].value", "w", ""),
	)
	byName := named(ms)
	z := plan.NewFuser()
	for _, c := range []struct {
		a, b           string
		fusable, after bool
	}{
		{"a", "b", false, true},  // different keys, one list: in order only
		{"b", "a", false, true},  // either order, as long as it is kept
		{"a", "c", false, false}, // one key: the same element
		{"a", "d", true, true},   // different lists
		{"e", "f", false, true},  // a list in every element of a list: in order only
		{"f", "e", false, true},
		{"e", "h", false, false}, // one key in every element: the same element
		{"e", "i", false, false}, // i may create the element foo, which e's glob selects
		{"a", "g", false, false}, // the glob selects the new element
	} {
		x, y := byName[c.a], byName[c.b]
		if got := z.Fusable(x, y); got != c.fusable {
			t.Errorf("Fusable(%s, %s) = %v, want %v", c.a, c.b, got, c.fusable)
		}
		if got := z.FusableInOrder(x, y); got != c.after {
			t.Errorf("FusableInOrder(%s, %s) = %v, want %v (%s)", c.a, c.b, got, c.after, z.WhyNotInOrder(x, y))
		}
		if z.FusableInOrder(x, y) && !c.fusable && z.Commute(x, y) {
			t.Errorf("%s, %s: fusable only in order, yet said to commute", c.a, c.b)
		}
	}
}

// TestDefaultingCouplings: pairs whose second member reads a field the API server's defaulting
// fills after the first member's mutation (and only those) are coupled.
func TestDefaultingCouplings(t *testing.T) {
	notSet := func(p string) string {
		return fmt.Sprintf("    pathTests:\n    - subPath: '%s'\n      condition: MustNotExist\n", p)
	}
	deployment := func(doc string) string {
		return strings.Replace(doc, `[{groups: [""], kinds: [Pod], versions: [v1]}]`, `[{groups: [apps], kinds: [Deployment], versions: [v1]}]`, 1)
	}
	for _, c := range []struct {
		name string
		docs []string
		want string // "A>B" couplings, sorted
	}{
		{"a new limit is copied to the missing request",
			[]string{assign("a-limit", "spec.containers[name: *].resources.limits.memory", `"1Gi"`, notSet("spec.containers[name: *].resources.limits.memory")),
				assign("b-request", "spec.containers[name: *].resources.requests.memory", `"1Gi"`, notSet("spec.containers[name: *].resources.requests.memory"))},
			"[a-limit>b-request]"},
		{"a whole resources object counts as a limit",
			[]string{assign("a-res", "spec.containers[name: app].resources", "{limits: {cpu: '1'}}", ""),
				assign("b-request", "spec.containers[name: app].resources.requests", "{cpu: '1'}", notSet("spec.containers[name: app].resources.requests"))},
			"[a-res>b-request]"},
		{"another container's request is not affected",
			[]string{assign("a-limit", "spec.containers[name: a].resources.limits.cpu", `"1"`, ""),
				assign("b-request", "spec.containers[name: b].resources.requests.cpu", `"1"`, notSet("spec.containers[name: b].resources.requests.cpu"))},
			"[]"},
		{"an unconditional request is not a reader",
			[]string{assign("a-limit", "spec.containers[name: *].resources.limits.memory", `"1Gi"`, ""),
				assign("b-request", "spec.containers[name: *].resources.requests.memory", `"1Gi"`, "")},
			"[]"},
		{"pod templates are not defaulted from limits",
			[]string{deployment(assign("a-limit", "spec.template.spec.containers[name: *].resources.limits.memory", `"1Gi"`, "")),
				deployment(assign("b-request", "spec.template.spec.containers[name: *].resources.requests.memory", `"1Gi"`, notSet("spec.template.spec.containers[name: *].resources.requests.memory")))},
			"[]"},
		{"a new container gets a pull policy",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", notSet("spec.containers[name: *].imagePullPolicy")),
				assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[b-sidecar>a-pull]"},
		{"a new template container too",
			[]string{deployment(assign("a-pull", "spec.template.spec.containers[name: *].imagePullPolicy", "Always", notSet("spec.template.spec.containers[name: *].imagePullPolicy"))),
				deployment(assign("b-sidecar", "spec.template.spec.containers[name: proxy].image", "envoy", ""))},
			"[b-sidecar>a-pull]"},
		{"an image change does not reset the pull policy",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", notSet("spec.containers[name: *].imagePullPolicy")),
				assign("b-image", "spec.containers[name: *].image", "nginx", "")},
			"[]"},
		{"serviceAccountName is copied to serviceAccount",
			[]string{assign("a-sa", "spec.serviceAccountName", "robot", ""),
				assign("b-legacy", "spec.serviceAccount", "robot", notSet("spec.serviceAccount"))},
			"[a-sa>b-legacy]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, g := range plan.Plan(mutations(t, c.docs...)) {
				for _, cp := range g.Couplings {
					got = append(got, cp.A.Source.Name+">"+cp.B.Source.Name)
				}
			}
			sort.Strings(got)
			if fmt.Sprint(got) != c.want {
				t.Errorf("couplings %v, want %s", got, c.want)
			}
		})
	}
}

// TestComplete: which values of earlier mutators a new element is written with.
func TestComplete(t *testing.T) {
	mustNotExistPull := "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustNotExist\n"
	inProd := "  match:\n    namespaces: [prod]\n"
	withMatch := func(doc, match string) string {
		return strings.Replace(doc, "  location:", match+"  location:", 1)
	}
	labelled := "  match:\n    labelSelector: {matchLabels: {a: b}}\n"
	labelA := "apiVersion: mutations.gatekeeper.sh/v1\nkind: AssignMetadata\nmetadata:\n  name: c-label\nspec:\n  location: metadata.labels.a\n  parameters:\n    assign:\n      value: b\n"
	onlyNew := "    pathTests:\n    - subPath: 'spec.containers[name: proxy]'\n      condition: MustNotExist\n"
	for _, c := range []struct {
		name string
		docs []string
		want string // b-sidecar's completions
	}{
		{"a glob sorted before the creator",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[a-pull]"},
		{"a glob sorted after it, in the same pass",
			[]string{assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", ""), assign("c-pull", "spec.containers[name: *].imagePullPolicy", "Always", "")},
			"[c-pull]"},
		{"a whole element is replaced in every pass, after what is sorted before it",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy}", "")},
			"[]"},
		{"a whole element, and a glob sorted after it",
			[]string{assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy}", ""), assign("c-pull", "spec.containers[name: *].imagePullPolicy", "Always", "")},
			"[c-pull]"},
		{"an AssignImage sorted after it that sets every part",
			[]string{assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy}", ""), image("c-image", "spec.containers[name: *].image", "my.reg", "envoy", ":v1")},
			"[c-image]"},
		{"an AssignImage that keeps a part, as Gatekeeper's own mutator computes it",
			[]string{assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy}", ""), image("c-image", "spec.containers[name: *].image", "my.reg", "", ":v1")},
			"[c-image]"},
		{"a whole element added only where it is missing gets what is sorted before it, in the next pass",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy}", onlyNew)},
			"[a-pull]"},
		{"appends to a list in the new element, and merges",
			[]string{assign("a-env-x", "spec.containers[name: *].env[name: A].value", "1", ""), assign("a-env-y", "spec.containers[name: *].env[name: B]", "{name: B, value: '2'}", ""), assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy}", onlyNew), merge("c-drop", "spec.containers[name: *].securityContext.capabilities.drop", "[ALL]", "")},
			"[a-env-x a-env-y c-drop]"},
		{"a prune that removes nothing from what the element holds",
			[]string{assign("b-sidecar", "spec.containers[name: proxy]", "{name: proxy, image: envoy, args: [-v]}", onlyNew), prune("c-prune", "spec.containers[name: *].args", "[--debug]")},
			"[]"},
		{"not past four conditional ones",
			[]string{withMatch(assign("a-1", "spec.containers[name: *].tty", "true", ""), inProd), withMatch(assign("a-2", "spec.containers[name: *].stdin", "true", ""), inProd), withMatch(assign("a-3", "spec.containers[name: *].workingDir", "/", ""), inProd), withMatch(assign("a-4", "spec.containers[name: *].imagePullPolicy", "Always", ""), inProd), withMatch(assign("a-5", "spec.containers[name: *].terminationMessagePolicy", "File", ""), inProd), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[]"},
		{"a field the creator writes again in every pass: the writer sorted before it takes part, undone",
			[]string{assign("a-pull", "spec.containers[name: *].image", "nginx", ""), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[a-pull]"},
		{"a conditional writer, in nested fields",
			[]string{withMatch(assign("a-priv", "spec.containers[name: *].securityContext.privileged", "false", ""), inProd), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[a-priv]"},
		{"not from a writer that never applies along with the creator",
			[]string{withMatch(assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), inProd), withMatch(assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", ""), "  match:\n    namespaces: [staging]\n")},
			"[]"},
		{"from one that applies along with it somewhere",
			[]string{withMatch(assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), inProd), withMatch(assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", ""), "  match:\n    namespaces: [staging, prod]\n")},
			"[a-pull]"},
		{"with a label selector no mutator writes, under its condition",
			[]string{withMatch(assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), labelled), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[a-pull]"},
		{"not with a label selector on a label a mutator writes",
			[]string{withMatch(assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), labelled), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", ""), labelA},
			"[]"},
		{"one that reads on the way, as Gatekeeper runs it",
			[]string{assign("a-nonroot", "spec.containers[name: *].securityContext.runAsNonRoot", "true", ""), assign("a-priv", "spec.containers[name: *].securityContext.privileged", "false", "    pathTests:\n    - subPath: 'spec.containers[name: *].securityContext'\n      condition: MustNotExist\n"), assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[a-nonroot a-pull]"},
		{"two writers of one field, the last one's value",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("a-pull-2", "spec.containers[name: *].imagePullPolicy", "Never", ""), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[a-pull a-pull-2]"},
		{"a writer of the same value is no obstacle",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("a-pull-2", "spec.containers[name: *].imagePullPolicy", "Always", mustNotExistPull), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[a-pull]"},
		{"not when another mutator writes the whole list",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", ""), assign("a-set", "spec.containers", "[{name: app, image: nginx}]", ""), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[]"},
		{"not with a test the new element fails",
			[]string{assign("a-pull", "spec.containers[name: *].imagePullPolicy", "Always", "    pathTests:\n    - subPath: 'spec.containers[name: *].imagePullPolicy'\n      condition: MustExist\n"), assign("b-sidecar", "spec.containers[name: proxy].image", "envoy", "")},
			"[]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := mutations(t, c.docs...)
			plan.Complete(ms)
			var got []string
			for _, cp := range named(ms)["b-sidecar"].Completions {
				got = append(got, cp.By.Source.Name)
			}
			if fmt.Sprint(got) != c.want && !(len(got) == 0 && c.want == "[]") {
				t.Errorf("completions %v, want %s", got, c.want)
			}
		})
	}
}

// prune is a Pod ModifySet mutator removing values.
func prune(name, location, values string) string {
	return fmt.Sprintf(`apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata:
  name: %s
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: '%s'
  parameters:
    operation: prune
    values:
      fromList: %s
`, name, location, values)
}

// TestPrunedAround: a prune through every element of a list and a whole-element Assign of that
// list may share an expression, the prune leaving out the replaced element, exactly when the
// prune removes nothing from the assigned element.
func TestPrunedAround(t *testing.T) {
	cases := []struct {
		name     string
		assign   string
		prune    string
		fuses    bool
		commutes bool
		pruned   bool // PrunedAround: the prune leaves out the element a replaces
	}{
		{"the element has no such list",
			assign("a", "spec.containers[name: s]", "{name: s, image: x}", ""),
			prune("b", "spec.containers[name: *].args", "[--debug]"), true, true, true},
		{"the element lacks a parent of the list, which the prune creates (empty)",
			assign("a", "spec.containers[name: s]", "{name: s, image: x}", ""),
			prune("b", "spec.containers[name: *].securityContext.capabilities.add", "[SYS_ADMIN]"), false, false, false},
		{"the element has the parents of the list",
			assign("a", "spec.containers[name: s]", "{name: s, securityContext: {capabilities: {}}}", ""),
			prune("b", "spec.containers[name: *].securityContext.capabilities.add", "[SYS_ADMIN]"), true, true, true},
		{"the element's list holds none of the values",
			assign("a", "spec.containers[name: s]", "{name: s, args: [-v, '1']}", ""),
			prune("b", "spec.containers[name: *].args", "[--debug, 1]"), true, true, true},
		{"the prune through the same key, which creates the element too",
			assign("a", "spec.containers[name: s]", "{name: s}", ""),
			prune("b", "spec.containers[name: s].args", "[--debug]"), false, false, false},
		{"the element's list holds a value",
			assign("a", "spec.containers[name: s]", "{name: s, args: [-v, --debug]}", ""),
			prune("b", "spec.containers[name: *].args", "[--debug]"), false, false, false},
		{"a number equal as JSON",
			assign("a", "spec.containers[name: s]", "{name: s, args: [1]}", ""),
			prune("b", "spec.containers[name: *].args", "[1.0]"), false, false, false},
		{"the list of another key",
			assign("a", "spec.initContainers[name: s]", "{name: s, args: [--debug]}", ""),
			prune("b", "spec.containers[name: *].args", "[--debug]"), true, true, false},
		{"an element of a list inside elements",
			assign("a", "spec.containers[name: *].env[name: E]", "{name: E}", ""),
			prune("b", "spec.containers[name: *].env[name: *].x", "[y]"), false, false, false},
		{"an element created on the way, holding no such list",
			assign("a", "spec.containers[name: s].image", "x", ""),
			prune("b", "spec.containers[name: *].args", "[--debug]"), true, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := named(mutations(t, c.assign, c.prune))
			a, b := ms["a"], ms["b"]
			z := plan.NewFuser()
			if got := z.Fusable(a, b); got != c.fuses {
				t.Errorf("Fusable = %v (%s), want %v", got, z.WhyNot(a, b), c.fuses)
			}
			if got := z.Commute(a, b); got != c.commutes {
				t.Errorf("Commute = %v, want %v", got, c.commutes)
			}
			if got := z.PrunedAround(a, b); got != c.pruned {
				t.Errorf("PrunedAround = %v, want %v", got, c.pruned)
			}
		})
	}
}

// merge is a Pod ModifySet mutator adding values; extra is appended under spec.
func merge(name, location, values, extra string) string {
	return fmt.Sprintf(`apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata:
  name: %s
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: '%s'
  parameters:
    operation: merge
    values:
      fromList: %s
%s`, name, location, values, extra)
}

// TestMergesIntoOneList: merges into one list only add values, so none of them changes what the
// others leave in the list and another pass adds nothing: they need one round, only their order
// matters, and in that order they are computed in one expression (a union of their values,
// plan.UnionKey). Whatever else reads or writes the list still interacts with them.
func TestMergesIntoOneList(t *testing.T) {
	tol := func(k string) string { return fmt.Sprintf("[{key: %s, operator: Exists}]", k) }
	inProd := "  match:\n    namespaces: [prod]\n"
	mustExist := "  parameters:\n    pathTests:\n    - {subPath: spec.tolerations, condition: MustExist}\n"
	notThere := "  parameters:\n    pathTests:\n    - {subPath: 'spec.containers[name: app]', condition: MustNotExist}\n"
	withTests := func(doc, tests string) string {
		return strings.Replace(doc, "  parameters:\n", tests, 1)
	}
	cases := []struct {
		name    string
		docs    []string
		groups  []string
		rounds  []int
		inOrder bool // FusableInOrder(first, second)
	}{
		{"distinct values",
			[]string{merge("a", "spec.tolerations", tol("a"), ""), merge("b", "spec.tolerations", tol("b"), ""), merge("c", "spec.tolerations", tol("c"), "")},
			[]string{"ModifySet/a+ModifySet/b+ModifySet/c"}, []int{1}, true},
		{"distinct matches",
			[]string{merge("a", "spec.tolerations", tol("a"), inProd), merge("b", "spec.tolerations", tol("b"), "")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{1}, true},
		{"the same value twice",
			[]string{merge("a", "spec.tolerations", tol("a"), inProd), merge("b", "spec.tolerations", tol("a"), "")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{1}, true},
		{"in every container",
			[]string{merge("a", "spec.containers[name: *].args", "[--a]", ""), merge("b", "spec.containers[name: *].args", "[--b, --a]", "")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{1}, true},
		{"one key: either creates the container as the other would",
			[]string{merge("a", "spec.containers[name: app].args", "[--a]", ""), merge("b", "spec.containers[name: app].args", "[--b]", inProd)},
			[]string{"ModifySet/a+ModifySet/b"}, []int{1}, true},
		{"one key that must not exist: the first to create it decides",
			[]string{withTests(merge("a", "spec.containers[name: app].args", "[--a]", ""), notThere), withTests(merge("b", "spec.containers[name: app].args", "[--b]", ""), notThere)},
			[]string{"ModifySet/a+ModifySet/b"}, []int{3}, false},
		{"a key and a glob: the new container is merged into in the next pass",
			[]string{merge("a", "spec.containers[name: *].args", "[--a]", ""), merge("b", "spec.containers[name: app].args", "[--b]", "")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{2}, false},
		{"other path tests",
			[]string{merge("a", "spec.tolerations", tol("a"), ""), withTests(merge("b", "spec.tolerations", tol("b"), ""), mustExist)},
			[]string{"ModifySet/a+ModifySet/b"}, []int{1}, false},
		{"a value twice in one merge",
			[]string{merge("a", "spec.tolerations", tol("a"), ""), merge("b", "spec.tolerations", "[{key: b}, {key: b}]", "")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{1}, false},
		{"a prune of the list",
			[]string{merge("a", "spec.tolerations", tol("a"), ""), prune("b", "spec.tolerations", tol("a")), merge("c", "spec.tolerations", tol("c"), "")},
			[]string{"ModifySet/a+ModifySet/b+ModifySet/c"}, []int{4}, false},
		{"a prune of other values (strings): either order",
			[]string{merge("a", "spec.containers[name: *].securityContext.capabilities.add", "[NET_BIND_SERVICE]", ""), prune("b", "spec.containers[name: *].securityContext.capabilities.add", "[NET_RAW, SYS_ADMIN]")},
			[]string{"ModifySet/a", "ModifySet/b"}, []int{1, 1}, false},
		{"two prunes: either order, and one expression removes both (lower.PruneUnion)",
			[]string{prune("a", "spec.containers[name: *].args", "[--debug]"), prune("b", "spec.containers[name: *].args", "[--verbose]")},
			[]string{"ModifySet/a", "ModifySet/b"}, []int{1, 1}, true},
		{"two prunes, one testing the list exists: the other may empty it, two expressions",
			[]string{prune("a", "spec.containers[name: *].args", "[--debug]"), withTests(prune("b", "spec.containers[name: *].args", "[--verbose]"), "  parameters:\n    pathTests:\n    - {subPath: 'spec.containers[name: *].args', condition: MustExist}\n")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{1}, false},
		{"a prune of a value the merge adds",
			[]string{merge("a", "spec.containers[name: *].args", "[--debug, --x]", ""), prune("b", "spec.containers[name: *].args", "[--debug]")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{3}, false},
		{"a prune and a merge of a value twice",
			[]string{merge("a", "spec.containers[name: *].args", "[--x, --x]", ""), prune("b", "spec.containers[name: *].args", "[--debug]")},
			[]string{"ModifySet/a+ModifySet/b"}, []int{3}, false},
		{"the whole list assigned (Gatekeeper sorts Assigns first)",
			[]string{merge("a", "spec.tolerations", tol("a"), ""), assign("b", "spec.tolerations", tol("b"), "")},
			[]string{"Assign/b+ModifySet/a"}, []int{1}, false},
		{"other lists",
			[]string{merge("a", "spec.tolerations", tol("a"), ""), merge("b", "spec.containers[name: *].args", "[--b]", "")},
			[]string{"ModifySet/a", "ModifySet/b"}, []int{1, 1}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := mutations(t, c.docs...)
			gs := plan.Plan(ms)
			got, rounds := groupsOf(gs)
			if fmt.Sprint(got) != fmt.Sprint(c.groups) || fmt.Sprint(rounds) != fmt.Sprint(c.rounds) {
				t.Errorf("got %v rounds %v, want %v rounds %v", got, rounds, c.groups, c.rounds)
				for _, g := range gs {
					t.Log(strings.Join(g.Why, "\n"))
				}
			}
			z := plan.NewFuser()
			a, b := ms[0], ms[len(ms)-1]
			if len(ms) == 3 {
				a, b = ms[0], ms[1]
			}
			if got := z.FusableInOrder(a, b); got != c.inOrder {
				t.Errorf("FusableInOrder(%s, %s) = %v, want %v (%s)", a.Source, b.Source, got, c.inOrder, z.WhyNotInOrder(a, b))
			}
			if len(gs) == 1 && (z.Commute(a, b) || z.Fusable(a, b)) {
				t.Errorf("%s, %s: said to commute, though their order decides the list's", a.Source, b.Source)
			}
		})
	}
}

func TestImagesCommute(t *testing.T) {
	const all, app = "spec.containers[name: *].image", "spec.containers[name: app].image"
	// A pin of one container's image where that container exists (else Gatekeeper creates the
	// container, which the mutators of every container select).
	digest := "@sha256:" + strings.Repeat("0f", 32)
	image := func(name, location, domain, path, tag string) string {
		doc := image(name, location, domain, path, tag)
		if location == app {
			doc += "    pathTests:\n    - {subPath: 'spec.containers[name: app]', condition: MustExist}\n"
		}
		return doc
	}
	cases := []struct {
		name   string
		docs   []string
		groups []string
		rounds []int
	}{
		{"a domain and a tag: either order",
			[]string{image("a", all, "mirror.example.com", "", ""), image("b", app, "", "", ":1.2")},
			[]string{"AssignImage/a", "AssignImage/b"}, []int{1, 1}},
		{"a path and a digest: either order",
			[]string{image("a", app, "", "team/app", ""), image("b", all, "", "", digest)},
			[]string{"AssignImage/a", "AssignImage/b"}, []int{1, 1}},
		{"a domain and a path with a tag: either order",
			[]string{image("a", all, "mirror.example.com:5000", "", ""), image("b", app, "", "team/app", ":2")},
			[]string{"AssignImage/a", "AssignImage/b"}, []int{1, 1}},
		{"two tags: the one sorted last wins",
			[]string{image("a", all, "", "", ":stable"), image("b", app, "", "", ":1.2")},
			[]string{"AssignImage/a+AssignImage/b"}, []int{3}},
		{"a domain, and a domain with a tag: the one sorted last wins",
			[]string{image("a", all, "a.example.com", "", ""), image("b", app, "b.example.com", "", ":1")},
			[]string{"AssignImage/a+AssignImage/b"}, []int{3}},
		{"a tag, and the container created: the mutator of every container changes it in the next pass",
			[]string{image("a", all, "mirror.example.com", "", ""), image("b", "spec.containers[name: sidecar].image", "", "", ":1.2")},
			[]string{"AssignImage/a+AssignImage/b"}, []int{2}},
		{"other images",
			[]string{image("a", all, "mirror.example.com", "", ""), image("b", "spec.initContainers[name: *].image", "other.example.com", "", "")},
			[]string{"AssignImage/a", "AssignImage/b"}, []int{1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms := mutations(t, c.docs...)
			gs := plan.Plan(ms)
			got, rounds := groupsOf(gs)
			if fmt.Sprint(got) != fmt.Sprint(c.groups) || fmt.Sprint(rounds) != fmt.Sprint(c.rounds) {
				t.Errorf("got %v rounds %v, want %v rounds %v", got, rounds, c.groups, c.rounds)
				for _, g := range gs {
					t.Log(strings.Join(g.Why, "\n"))
				}
			}
			if z := plan.NewFuser(); len(gs) == 1 && z.Commute(ms[0], ms[1]) {
				t.Errorf("%s, %s: said to commute, though their order decides the image", ms[0].Source, ms[1].Source)
			}
		})
	}
}

// TestWhyOneLinePerSet: mutators whose order decides the result for one reason (appends of
// different keys to one list) are named in one line, not in a line for each pair; a pair
// keeps its "both".
func TestWhyOneLinePerSet(t *testing.T) {
	env := func(name, key string) string {
		return assign(name, "spec.containers[name: *].env[name: "+key+"]", "{name: "+key+", value: x}", "")
	}
	for _, c := range []struct {
		docs []string
		want string
	}{
		{[]string{env("a", "A"), env("b", "B"), env("c", "C")},
			"Assign/a, Assign/b, Assign/c: all append to spec.containers[name: *].env, so the order of the new elements depends on which runs first (their order decides the result)"},
		{[]string{env("a", "A"), env("b", "B")},
			"Assign/a, Assign/b: both append to spec.containers[name: *].env, so the order of the new elements depends on which runs first (their order decides the result)"},
	} {
		gs := plan.Plan(mutations(t, c.docs...))
		if len(gs) != 1 || len(gs[0].Why) != 1 || gs[0].Why[0] != c.want {
			var why [][]string
			for _, g := range gs {
				why = append(why, g.Why)
			}
			t.Errorf("why %q, want one group and [%q]", why, c.want)
		}
	}
}
