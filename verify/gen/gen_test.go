package gen

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/path/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler/gatekeeper"
)

func TestDeterministic(t *testing.T) {
	for s := uint64(1); s <= 50; s++ {
		a, b := Generate(s).YAML(), Generate(s).YAML()
		if a != b {
			t.Fatalf("seed %d: two generations differ", s)
		}
	}
	if Generate(1).YAML() == Generate(2).YAML() {
		t.Fatal("seeds 1 and 2 give the same case")
	}
}

// Canonical and as-generated values are the only difference between Generate and
// GenerateCanonical.
func TestCanonicalChangesOnlyValues(t *testing.T) {
	for s := uint64(1); s <= 200; s++ {
		a, b := Generate(s), GenerateCanonical(s)
		if len(a.Mutators) != len(b.Mutators) || len(a.Objects) != len(b.Objects) || a.Layout != b.Layout || a.Operation != b.Operation {
			t.Fatalf("seed %d: Generate and GenerateCanonical make different cases", s)
		}
		for i := range a.Mutators {
			la, _, _ := unstructured.NestedString(a.Mutators[i].Object, "spec", "location")
			lb, _, _ := unstructured.NestedString(b.Mutators[i].Object, "spec", "location")
			if a.Mutators[i].GetName() != b.Mutators[i].GetName() || la != lb {
				t.Fatalf("seed %d: mutator %d differs beyond its values", s, i)
			}
		}
	}
}

func TestParseCaseRoundTrip(t *testing.T) {
	for s := uint64(1); s <= 100; s++ {
		c := Generate(s)
		back, err := ParseCase(c.Name, []byte(c.YAML()))
		if err != nil {
			t.Fatalf("seed %d: %v", s, err)
		}
		back.Seed, back.NonCanonical = c.Seed, c.NonCanonical
		if got, want := back.YAML(), c.YAML(); got != want {
			t.Fatalf("seed %d: the YAML does not read back:\n%s\n---- read back as\n%s", s, want, got)
		}
	}
}

func TestMutatorsAccepted(t *testing.T) {
	for s := uint64(1); s <= 300; s++ {
		c := Generate(s)
		if len(c.Mutators) == 0 {
			t.Errorf("seed %d: no mutator", s)
		}
		for _, m := range c.Mutators {
			if _, err := gatekeeper.Decode(m); err != nil {
				t.Errorf("seed %d: %s/%s: %v", s, m.GetKind(), m.GetName(), err)
			}
		}
	}
}

// TestCoverage checks that a thousand cases use every feature the generator is meant to cover,
// and logs how often (go test -v).
// containerKey finds the key of a location into one Pod container (spec.containers[name: x]).
var containerKey = regexp.MustCompile(`^spec\.containers\[name: *["']?([^"'\]]+)["']?\]`)

func TestCoverage(t *testing.T) {
	seen := map[string]int{}
	count := func(f string) { seen[f]++ }
	for s := uint64(1); s <= 1000; s++ {
		c := Generate(s)
		count("operation " + c.Operation)
		count("layout " + c.Layout)
		count("failure policy " + c.FailurePolicy)
		count("kubernetes " + c.KubernetesVersion)
		if c.NonCanonical {
			count("values as generated")
		}
		if n := len(c.Mutators); n >= 4 {
			count("4+ mutators")
		}
		keys := map[string]bool{}
		for _, m := range c.Mutators {
			coverMutator(m, count)
			loc, _, _ := unstructured.NestedString(m.Object, "spec", "location")
			if k := containerKey.FindStringSubmatch(loc); k != nil && k[1] != "*" && m.GetKind() != "ModifySet" {
				keys[k[1]] = true
			}
		}
		if len(keys) >= 2 {
			count("appends of two keys to containers")
		}
		splitMatches(c.Mutators, count)
		for _, o := range c.Admitted() {
			count("object " + o.GetKind())
			coverObject(o, count)
		}
	}
	want := []string{
		"operation CREATE", "operation UPDATE", "layout ", "layout per-mutator", "failure policy ", "failure policy Fail",
		"kubernetes ", "kubernetes 1.32", "kubernetes 1.33", "kubernetes 1.34", "kubernetes 1.35", "kubernetes 1.36", "values as generated", "4+ mutators",
		"Assign v1", "Assign v1beta1", "Assign v1alpha1", "AssignMetadata v1", "AssignMetadata v1beta1", "AssignMetadata v1alpha1",
		"ModifySet v1", "ModifySet v1beta1", "ModifySet v1alpha1", "AssignImage v1alpha1",
		"location quoted", "location single-quoted", "location key with dot", "location key with slash", "location key with space",
		"location keyed list", "location glob", "location nested lists", "location ends in element", "location key field image",
		"pathTest MustExist", "pathTest MustNotExist", "two pathTests",
		"value string", "value int", "value float", "value bool", "value null inside", "value list", "value object", "value element",
		"fromMetadata name", "fromMetadata namespace",
		"ModifySet merge", "ModifySet prune", "ModifySet default operation", "ModifySet duplicate values", "ModifySet objects",
		"AssignImage domain", "AssignImage path", "AssignImage tag", "AssignImage digest", "AssignImage domain with port", "AssignImage localhost",
		"match kinds", "match kinds *", "match scope Namespaced", "match scope Cluster", "match namespaces prefix", "match namespaces suffix",
		"match excludedNamespaces", "match labelSelector", "match In", "match NotIn", "match Exists", "match DoesNotExist",
		"match namespaceSelector", "match name", "match source Generated", "match source All",
		"applyTo operations", "applyTo two entries",
		"object Pod", "object Namespace", "object Deployment", "object generateName", "object several containers",
		"image digest", "image localhost:5000", "image my.reg", "image plain", "image docker.io",
		"appends of two keys to containers",
		"one place, split by namespaces", "one place, split by namespaceSelector", "one place, split by name",
		"one place, split by scope", "one place, split by kinds",
	}
	var missing []string
	for _, w := range want {
		if seen[w] == 0 {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		t.Errorf("1000 cases never use: %s", strings.Join(missing, "; "))
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%6d  %s\n", seen[k], k)
	}
	t.Logf("features in 1000 cases:\n%s", b.String())
}

func coverMutator(m *unstructured.Unstructured, count func(string)) {
	kind := m.GetKind()
	count(kind + " " + strings.TrimPrefix(m.GetAPIVersion(), "mutations.gatekeeper.sh/"))
	loc, _, _ := unstructured.NestedString(m.Object, "spec", "location")
	if strings.Contains(loc, `"`) {
		count("location quoted")
	}
	if strings.Contains(loc, `'`) {
		count("location single-quoted")
	}
	if p, err := parser.Parse(loc); err == nil {
		lists := 0
		for i, n := range p.Nodes {
			switch n := n.(type) {
			case *parser.Object:
				switch {
				case strings.Contains(n.Reference, " "):
					count("location key with space")
				case strings.Contains(n.Reference, "/"):
					count("location key with slash")
				case strings.Contains(n.Reference, "."):
					count("location key with dot")
				}
			case *parser.List:
				lists++
				if v, ok := n.KeyValue.(string); ok && strings.Contains(v, ".") {
					count("location key with dot")
				}
				if n.Glob {
					count("location glob")
				} else {
					count("location keyed list")
				}
				if n.KeyField == "image" {
					count("location key field image")
				}
				if i == len(p.Nodes)-1 {
					count("location ends in element")
				}
			}
		}
		if lists > 1 {
			count("location nested lists")
		}
	}
	params, _, _ := unstructured.NestedMap(m.Object, "spec", "parameters")
	tests, _ := params["pathTests"].([]any)
	for _, pt := range tests {
		count("pathTest " + pt.(map[string]any)["condition"].(string))
	}
	if len(tests) > 1 {
		count("two pathTests")
	}
	if a, ok := params["assign"].(map[string]any); ok {
		if fm, ok := a["fromMetadata"].(map[string]any); ok {
			count("fromMetadata " + fm["field"].(string))
		}
		if v, ok := a["value"]; ok {
			coverValue(v, count, strings.HasSuffix(loc, "]"))
		}
	}
	switch kind {
	case "ModifySet":
		op, _ := params["operation"].(string)
		if op == "" {
			op = "default operation"
		}
		count("ModifySet " + op)
		vals, _, _ := unstructured.NestedSlice(m.Object, "spec", "parameters", "values", "fromList")
		for i, v := range vals {
			if _, ok := v.(map[string]any); ok {
				count("ModifySet objects")
			}
			for _, w := range vals[:i] {
				if fmt.Sprint(v) == fmt.Sprint(w) {
					count("ModifySet duplicate values")
				}
			}
		}
	case "AssignImage":
		if d, ok := params["assignDomain"].(string); ok {
			count("AssignImage domain")
			if strings.Contains(d, ":") {
				count("AssignImage domain with port")
			}
			if strings.HasPrefix(d, "localhost") {
				count("AssignImage localhost")
			}
		}
		if _, ok := params["assignPath"]; ok {
			count("AssignImage path")
		}
		if tag, ok := params["assignTag"].(string); ok {
			count("AssignImage tag")
			if strings.HasPrefix(tag, "@") {
				count("AssignImage digest")
			}
		}
	}
	match, _, _ := unstructured.NestedMap(m.Object, "spec", "match")
	if ks, ok := match["kinds"].([]any); ok {
		count("match kinds")
		if strings.Contains(fmt.Sprint(ks), "*") {
			count("match kinds *")
		}
	}
	if s, ok := match["scope"].(string); ok {
		count("match scope " + s)
	}
	for _, field := range []string{"namespaces", "excludedNamespaces"} {
		ns, _ := match[field].([]any)
		for _, n := range ns {
			s := n.(string)
			if field == "excludedNamespaces" {
				count("match excludedNamespaces")
			} else if strings.HasSuffix(s, "*") && len(s) > 1 && !strings.HasPrefix(s, "*") {
				count("match namespaces prefix")
			} else if strings.HasPrefix(s, "*") && len(s) > 1 && !strings.HasSuffix(s, "*") {
				count("match namespaces suffix")
			}
		}
	}
	for _, sel := range []string{"labelSelector", "namespaceSelector"} {
		s, ok := match[sel].(map[string]any)
		if !ok {
			continue
		}
		count("match " + sel)
		exprs, _ := s["matchExpressions"].([]any)
		for _, e := range exprs {
			count("match " + e.(map[string]any)["operator"].(string))
		}
	}
	if _, ok := match["name"]; ok {
		count("match name")
	}
	if s, ok := match["source"].(string); ok {
		count("match source " + s)
	}
	applyTo, _, _ := unstructured.NestedSlice(m.Object, "spec", "applyTo")
	for _, a := range applyTo {
		if _, ok := a.(map[string]any)["operations"]; ok {
			count("applyTo operations")
		}
	}
	if len(applyTo) > 1 {
		count("applyTo two entries")
	}
}

func coverValue(v any, count func(string), element bool) {
	switch x := v.(type) {
	case nil:
		count("value null")
	case string:
		count("value string")
	case int64:
		count("value int")
	case float64:
		count("value float")
	case bool:
		count("value bool")
	case []any:
		count("value list")
		for _, e := range x {
			if _, ok := e.(float64); ok {
				count("value float")
			}
		}
	case map[string]any:
		if element {
			count("value element")
		} else {
			count("value object")
		}
		for _, e := range x {
			switch e := e.(type) {
			case nil:
				count("value null inside")
			case float64:
				count("value float")
			case map[string]any:
				coverValue(e, count, false)
			}
		}
	}
}

func coverObject(o *unstructured.Unstructured, count func(string)) {
	if o.GetGenerateName() != "" {
		count("object generateName")
	}
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "containers")
	if len(cs) > 1 {
		count("object several containers")
	}
	for _, c := range cs {
		img, _ := c.(map[string]any)["image"].(string)
		switch {
		case strings.HasPrefix(img, "localhost:5000"):
			count("image localhost:5000")
		case strings.Contains(img, "@sha256:"):
			count("image digest")
		case strings.HasPrefix(img, "my.reg"):
			count("image my.reg")
		case strings.HasPrefix(img, "docker.io"):
			count("image docker.io")
		case img != "" && !strings.ContainsAny(img, "/:@"):
			count("image plain")
		}
	}
}

// splitMatches counts the pairs of mutators of one location whose matches both set one of the
// criteria admission does not change, to different values (perhaps disjoint).
func splitMatches(ms []*unstructured.Unstructured, count func(string)) {
	for i, a := range ms {
		for _, b := range ms[i+1:] {
			la, _, _ := unstructured.NestedString(a.Object, "spec", "location")
			lb, _, _ := unstructured.NestedString(b.Object, "spec", "location")
			if la != lb {
				continue
			}
			for _, field := range []string{"namespaces", "namespaceSelector", "name", "scope", "kinds"} {
				va, oka, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "match", field)
				vb, okb, _ := unstructured.NestedFieldNoCopy(b.Object, "spec", "match", field)
				if oka && okb && fmt.Sprint(va) != fmt.Sprint(vb) {
					count("one place, split by " + field)
				}
			}
		}
	}
}
