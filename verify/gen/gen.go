// Package gen generates seeded, reproducible differential test cases for mapc: sets of Gatekeeper
// mutators that interact, and the objects (Pods, Deployments, Namespaces) to admit through both
// Gatekeeper's engine and the compiled MutatingAdmissionPolicies.
//
// The same seed always gives the same case. Mutators are kept only if Gatekeeper's own
// constructors accept them (compiler/gatekeeper.Decode), and every field they write exists in the
// typed object with the right JSON type, so that a difference is a translation difference and not
// a decoding one. A case prints as ready-to-run multi-document YAML (Case.YAML) and reads back
// with ParseCase.
//
// What a case may hold (TestCoverage checks that a thousand cases use all of it):
//
//   - 1–5 mutators of the four kinds, in all served versions (AssignImage only v1alpha1), often
//     on the same places: a later mutator mostly derives its location from an earlier one (the
//     same, a prefix, a longer one, glob for key or key for glob, the list itself), and a quarter
//     of the cases start from a scenario (sidecar + glob, AssignMetadata adding the label another
//     mutator's selector waits for, ModifySet + Assign on one list, AssignImage + Assign on one
//     image, a default set only if missing, nested lists, writers of one place whose matches
//     split the requests by namespace, namespace label, name, scope or kind);
//   - locations over the Pod, Deployment (spec.template) and Namespace schemas in schema.go:
//     dotted fields, keyed lists and globs, nested lists, locations ending in a keyed element,
//     quoted keys and key values (dots, slashes, spaces, leading digits; single or double quotes,
//     sometimes quoted when they need not be; spaces around separators);
//   - pathTests MustExist / MustNotExist on prefixes; Assign values of every JSON type that fits
//     the field (strings, ints, bools, floats in quantities, lists, objects, keyed elements, nulls
//     inside objects), fromMetadata name and namespace; ModifySet merge, prune and the default,
//     with duplicates; AssignImage domain / path / tag combinations Gatekeeper accepts;
//   - match: kinds, scope, namespaces and excludedNamespaces with prefix and suffix globs, label
//     and namespace selectors with every operator, name globs, source; applyTo with operations;
//   - objects: Pods (and Deployments, Namespaces) with random subsets of those fields, several
//     containers, images of every shape, labels selectors look for or not, namespaces with and
//     without labels, generateName; CREATE or UPDATE; the fused or per-mutator layout; failure
//     policy Ignore or Fail; Kubernetes 1.32 to 1.37.
//
// Values are given in the form the API server stores them (canonical), except in one case in ten
// (Case.NonCanonical), because the compiler refuses what Gatekeeper would see differently.
package gen

import (
	"bytes"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
)

// Case is one generated test case.
type Case struct {
	Name string // "seed-N", or the file name for a case read back
	Seed uint64
	// Mutators are Gatekeeper mutators, all accepted by Gatekeeper's constructors.
	Mutators []*unstructured.Unstructured
	// Namespaces are the cluster's namespaces (labels for namespaceSelector); they are admitted
	// too.
	Namespaces []*unstructured.Unstructured
	// Objects are admitted after the namespaces.
	Objects []*unstructured.Unstructured
	// Operation is CREATE or UPDATE (the old object is then the object itself).
	Operation string
	// Layout is the compiler's policy layout: "" (the default, fused) or "per-mutator".
	Layout string
	// KubernetesVersion is the version compiled for: "" (the compiler's default) or "1.32".."1.36"
	// (the expressions then avoid newer CEL; the admission code that runs them is the newest).
	KubernetesVersion string
	// FailurePolicy is the policies' failure policy: "" (the compiler's default, Ignore) or "Fail",
	// which turns an expression that fails at run time into a denial instead of a skipped mutation.
	FailurePolicy string
	// NonCanonical cases keep mutator values as generated; the others give every value in the
	// form the API server stores it (see canonical). The choice does not change anything else:
	// Generate(seed) and GenerateCanonical(seed) differ only in the values.
	NonCanonical bool
	// Discarded counts generated mutators that Gatekeeper rejected (not in the case).
	Discarded int
	// Rejections are Gatekeeper's reasons for the discarded ones.
	Rejections []string
}

// Admitted lists what the case admits: the namespaces, then the objects.
func (c *Case) Admitted() []*unstructured.Unstructured {
	return append(append([]*unstructured.Unstructured(nil), c.Namespaces...), c.Objects...)
}

// YAML is the case as one multi-document stream: the mutators, then the namespaces, then the
// objects, each document preceded by a comment saying what it is.
func (c *Case) YAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# mapc differential case %s\n", c.Name)
	fmt.Fprintf(&b, "# operation: %s\n", c.op())
	if c.Layout != "" {
		fmt.Fprintf(&b, "# layout: %s (mapc compile --layout %s)\n", c.Layout, c.Layout)
	}
	if c.KubernetesVersion != "" {
		fmt.Fprintf(&b, "# kubernetes-version: %s (mapc compile --kubernetes-version %s)\n", c.KubernetesVersion, c.KubernetesVersion)
	}
	if c.FailurePolicy != "" {
		fmt.Fprintf(&b, "# failure-policy: %s (mapc compile --failure-policy %s)\n", c.FailurePolicy, c.FailurePolicy)
	}
	if c.NonCanonical {
		b.WriteString("# values: as generated, not in the API server's canonical form\n")
	}
	doc := func(comment string, o *unstructured.Unstructured) {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			data = []byte(fmt.Sprintf("# cannot marshal: %v\n", err))
		}
		b.WriteString("---\n# " + comment + "\n")
		b.Write(data)
	}
	for _, m := range c.Mutators {
		doc("mutator", m)
	}
	for _, n := range c.Namespaces {
		doc("namespace (environment and admitted)", n)
	}
	for _, o := range c.Objects {
		doc("object (admitted with "+c.op()+")", o)
	}
	return b.String()
}

func (c *Case) op() string {
	if c.Operation == "" {
		return "CREATE"
	}
	return c.Operation
}

// ParseCase reads a case written by YAML (or by hand in the same layout): Gatekeeper mutators,
// Namespaces (the environment, also admitted) and other objects, in any order. A line
// "# operation: UPDATE" admits the objects as updates; "# layout: per-mutator",
// "# failure-policy: Fail" and "# kubernetes-version: 1.33" compile with that layout, failure
// policy and version.
func ParseCase(name string, data []byte) (*Case, error) {
	docs, err := source.Parse(name, data)
	if err != nil {
		return nil, err
	}
	c := &Case{Name: name, Operation: "CREATE"}
	for _, line := range bytes.Split(data, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if s, ok := strings.CutPrefix(l, "# operation:"); ok {
			c.Operation = strings.TrimSpace(s)
		}
		if s, ok := strings.CutPrefix(l, "# layout:"); ok {
			c.Layout, _, _ = strings.Cut(strings.TrimSpace(s), " ")
		}
		if s, ok := strings.CutPrefix(l, "# failure-policy:"); ok {
			c.FailurePolicy, _, _ = strings.Cut(strings.TrimSpace(s), " ")
		}
		if s, ok := strings.CutPrefix(l, "# kubernetes-version:"); ok {
			c.KubernetesVersion, _, _ = strings.Cut(strings.TrimSpace(s), " ")
		}
	}
	for _, d := range docs {
		switch {
		case gatekeeper.IsMutator(d.Object):
			c.Mutators = append(c.Mutators, d.Object)
		case d.Object.GetAPIVersion() == "v1" && d.Object.GetKind() == "Namespace":
			c.Namespaces = append(c.Namespaces, d.Object)
		default:
			c.Objects = append(c.Objects, d.Object)
		}
	}
	return c, nil
}

// Generate makes the case for seed. One case in ten keeps its values as generated
// (Case.NonCanonical).
func Generate(seed uint64) *Case {
	return generate(seed, newRng(seed^0x9e3779b97f4a7c15).IntN(10) == 0)
}

// GenerateCanonical makes the case for seed with every value in canonical form.
func GenerateCanonical(seed uint64) *Case { return generate(seed, false) }

func generate(seed uint64, nonCanonical bool) *Case {
	g := &generator{r: newRng(seed), c: &Case{Name: fmt.Sprintf("seed-%d", seed), Seed: seed, Operation: "CREATE", NonCanonical: nonCanonical}}
	g.run()
	if g.r.chance(0.25) {
		g.c.Layout = "per-mutator"
	}
	if g.r.chance(0.25) {
		g.c.FailurePolicy = "Fail"
	}
	if g.r.chance(0.2) {
		g.c.KubernetesVersion = pick(g.r, []string{"1.32", "1.33", "1.34", "1.35", "1.36"})
	}
	return g.c
}

// generator holds what one case has made so far, so that later mutators can interact with
// earlier ones.
type generator struct {
	r *rng
	c *Case

	targets    []target
	namespaces []nsInfo
	// paths are the locations written so far, per kind.
	paths map[string][]path
	// waiting are labels that label selectors look for; written are labels AssignMetadata sets.
	waiting map[string][]string
	written map[string]string
	names   map[string]bool
}

type nsInfo struct {
	name   string
	labels map[string]string
}

var (
	namespacePool = []string{"default", "team-a", "kube-system", "prod-system", "team-b"}
	nsLabelKeys   = []string{"env", "team", "example.com/tier"}
	nsLabelValues = []string{"prod", "dev", "a", "b"}
	nsWildcards   = []string{"default", "team-*", "*-system", "kube-*", "prod-system", "*", "*eam*", "team-a", "other"}
	nameWildcards = []string{"web-*", "*-1", "nginx", "*eb*", "web", "api", "*"}
	podNames      = []string{"web-1", "nginx", "api", "web-abc", "db"}
	mutatorNames  = []string{"a", "m", "z", "sidecar", "default", "set"}
)

func (g *generator) run() {
	r := g.r
	g.paths = map[string][]path{}
	g.waiting = map[string][]string{}
	g.written = map[string]string{}
	g.names = map[string]bool{}

	// The cluster.
	for _, name := range subset(r, namespacePool, 3) {
		labels := map[string]string{}
		for _, k := range subset(r, nsLabelKeys, 2) {
			labels[k] = pick(r, nsLabelValues)
		}
		g.namespaces = append(g.namespaces, nsInfo{name, labels})
	}
	if len(g.namespaces) == 0 {
		g.namespaces = append(g.namespaces, nsInfo{name: "default"})
	}

	// What the mutators target.
	g.targets = []target{podTarget}
	if r.chance(0.15) {
		g.targets = append(g.targets, deploymentTarget)
	}
	if r.chance(0.08) {
		g.targets = append(g.targets, namespaceTarget)
	}

	n := pick(r, []int{1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 5})
	if r.chance(0.25) {
		g.scenario()
	}
	for len(g.c.Mutators) < n {
		g.addMutator()
	}
	g.objects()
}

// addMutator generates mutators until Gatekeeper accepts one (or gives up after a few tries).
func (g *generator) addMutator() {
	for try := 0; try < 20; try++ {
		m, loc := g.mutator()
		if m == nil {
			continue
		}
		if g.accept(m) {
			g.record(m, loc)
			return
		}
	}
}

// accept keeps m if Gatekeeper accepts it, counting it as discarded otherwise.
func (g *generator) accept(m map[string]any) bool {
	u := &unstructured.Unstructured{Object: m}
	if _, err := gatekeeper.Decode(u); err != nil {
		g.c.Discarded++
		g.c.Rejections = append(g.c.Rejections, err.Error())
		return false
	}
	g.c.Mutators = append(g.c.Mutators, u)
	return true
}

// located is where a mutator writes, for later mutators to interact with.
type located struct {
	target target
	p      path
}

func (g *generator) record(m map[string]any, loc *located) {
	u := unstructured.Unstructured{Object: m}
	g.names[u.GetKind()+"/"+u.GetName()] = true
	if loc != nil {
		g.paths[loc.target.kind] = append(g.paths[loc.target.kind], loc.p)
	}
}

// name is a new mutator name for kind; the prefixes decide Gatekeeper's order among mutators of
// one kind.
func (g *generator) name(kind string) string {
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s-%d", pick(g.r, mutatorNames), len(g.c.Mutators)+i)
		if !g.names[kind+"/"+n] {
			return n
		}
	}
}
