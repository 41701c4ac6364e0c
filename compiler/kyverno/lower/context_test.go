package lower

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/kyverno"
)

// TestLoads checks which query texts load an entry, as Kyverno's deferred loader matches them.
func TestLoads(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"tier", true},
		{"tier.name", true},
		{" tier || 'x'", true},
		{"'tier'", true},
		{"to_upper(tier)", true},
		{"request.object.metadata.labels.tier", false},
		{"tiers", false},
		{"mytier", false},
		{"x2tier", false},
	} {
		if got := Loads("tier", tc.text); got != tc.want {
			t.Errorf("Loads(tier, %q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

// TestContext lowers a rule's variable entries and a variable reading the last: it compiles, or
// the entry is refused with a message naming why.
func TestContext(t *testing.T) {
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	env := cel.NewEnv(version.MajorMinor(1, 37))
	v := func(name string, at int, value any, jp string, def any) kyverno.Variable {
		return kyverno.Variable{Entry: name, At: at, Value: value, HasValue: value != nil, JMESPath: jp, Default: def, HasDefault: def != nil,
			Field: "spec.rules[0] (r).context[" + string(rune('0'+at)) + "].variable"}
	}
	for _, tc := range []struct {
		name string
		vars []kyverno.Variable
		read string
		has  string // the printed expression contains this
		err  string // a refusal's message contains this
	}{
		{name: "path with default", vars: []kyverno.Variable{v("tier", 0, nil, "request.object.metadata.labels.tier", "standard")}, read: "tier", has: `"standard"`},
		{name: "path without default", vars: []kyverno.Variable{v("tier", 0, nil, "request.object.metadata.labels.tier", nil)}, read: "tier"},
		{name: "value with a variable", vars: []kyverno.Variable{v("n", 0, "x-{{ request.object.metadata.name }}", "", nil)}, read: "n"},
		{name: "chained", vars: []kyverno.Variable{v("a", 0, nil, "request.object.metadata.name", "x"), v("b", 1, map[string]any{"k": "{{ a }}"}, "k", nil)}, read: "b"},
		{name: "literal value with path", vars: []kyverno.Variable{v("p", 0, map[string]any{"k": int64(3)}, "k", nil)}, read: "p"},
		{name: "default only", vars: []kyverno.Variable{v("d", 0, nil, "", "x")}, read: "d"},
		{name: "names a failing entry in a literal", vars: []kyverno.Variable{v("o", 0, nil, "request.object.metadata.labels.owner", nil)}, read: "'o'", has: `["owner"]`},
		{name: "function with default", vars: []kyverno.Variable{v("u", 0, nil, "to_upper(request.object.metadata.name)", "X")}, err: "with a default"},
		{name: "default with a variable", vars: []kyverno.Variable{v("u", 0, nil, "request.object.metadata.name", "{{ request.namespace }}")}, err: "default"},
		{name: "empty", vars: []kyverno.Variable{v("e", 0, nil, "", nil)}, err: "no value, jmesPath or default"},
		{name: "default over a failing entry", vars: []kyverno.Variable{v("o", 0, nil, "request.object.metadata.labels.owner", nil), v("p", 1, nil, "o", "x")}, err: "can fail"},
		{name: "a later entry", vars: []kyverno.Variable{v("a", 0, "{{ b }}", "", nil), v("b", 1, "x", "", nil)}, err: "b is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Context(&kyverno.Rule{Field: "spec.rules[0] (r)", Variables: tc.vars}, Scope{Object: pod})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want a refusal with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e, err := Variable(tc.read, sc)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(cel.String(e), tc.has) {
				t.Errorf("%s does not contain %s", cel.String(e), tc.has)
			}
			if err := env.CheckConditionExpr(cel.Bin("!=", cel.Call("dyn", e), cel.Null())); err != nil {
				t.Errorf("%s: %v", cel.String(e), err)
			}
		})
	}
}

// TestNamespaceEntry checks what of an apiCall entry reading the request's namespace is read, and
// what is refused, and the version its maps need.
func TestNamespaceEntry(t *testing.T) {
	entry := func(jp string) kyverno.Variable {
		return kyverno.Variable{Entry: "ns", Namespace: true, JMESPath: jp, Field: "spec.rules[0].context[0].apiCall"}
	}
	rule := func(vs ...kyverno.Variable) *kyverno.Rule {
		return &kyverno.Rule{Field: "spec.rules[0]", Variables: vs}
	}
	recent := Scope{Features: cel.Features{TwoVar: true}}
	for _, tc := range []struct {
		jmesPath string
		sc       Scope
		want     string // a part of the lowered entry, or of the refusal
		refused  bool
	}{
		{"metadata.name", Scope{}, "namespaceObject.metadata.name", false},
		{"metadata.labels.team", recent, `namespaceObject.metadata.labels.transformMap(k, v, v)`, false},
		{"metadata.labels.team", Scope{}, "Kubernetes 1.33", true},
		{"metadata.annotations", recent, "namespaceObject.metadata.annotations", false},
		{"kind", recent, "the namespace's kind is not supported", true},
		{"metadata.managedFields", recent, "metadata.managedFields is not supported", true},
		{"metadata", recent, "whole metadata", true},
		{"@", recent, "the namespace's whole object", true},
	} {
		sc, err := Context(rule(entry(tc.jmesPath)), tc.sc)
		switch {
		case tc.refused && err == nil:
			t.Errorf("%q: lowered, want a refusal with %q", tc.jmesPath, tc.want)
		case tc.refused && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%q: %v, want %q in it", tc.jmesPath, err, tc.want)
		case !tc.refused && err != nil:
			t.Errorf("%q: %v", tc.jmesPath, err)
		case !tc.refused && !strings.Contains(cel.String(sc.Vars[0].v.e), tc.want):
			t.Errorf("%q: %s, want %q in it", tc.jmesPath, cel.String(sc.Vars[0].v.e), tc.want)
		}
	}
	// Without a jmesPath, the entry is the namespace: its variables read the parts supported.
	sc, err := Context(rule(entry("")), recent)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := variable("ns.metadata.labels.team", sc); err != nil || !strings.Contains(cel.String(v.e), "namespaceObject.metadata.labels") {
		t.Errorf("ns.metadata.labels.team: %v %v", err, v.e)
	}
	if _, err := variable("ns", sc); err == nil {
		t.Errorf("the whole namespace as a value: lowered, want a refusal")
	}
	if names, _ := ObjectReads(sc); len(names) > 0 {
		t.Errorf("ObjectReads of a namespace entry = %q, want none", names)
	}
}
