package gatekeeper

import (
	"fmt"
	"strings"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"

	"github.com/mapc-dev/mapc/compiler/diag"
	"github.com/mapc-dev/mapc/compiler/source"
)

// assignDoc is a valid Pod Assign named name; edit replaces one line of it (old → new) to break
// it. Line numbers in the tests count from its first line.
func assignDoc(name string, edits ...string) string {
	doc := fmt.Sprintf(`apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: %s
spec:
  applyTo:
  - groups: [""]
    kinds: [Pod]
    versions: [v1]
    operations: [CREATE]
  match:
    scope: Namespaced
    excludedNamespaces: [kube-system]
    source: All
    kinds: [{apiGroups: [""], kinds: [Pod]}]
  location: spec.dnsPolicy
  parameters:
    pathTests:
    - subPath: spec.dnsPolicy
      condition: MustNotExist
    assign:
      value: None
`, name)
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(doc, edits[i]) {
			panic("assignDoc: no " + edits[i])
		}
		doc = strings.Replace(doc, edits[i], edits[i+1], 1)
	}
	return doc
}

// want is one expected problem: its line, field and words its message must contain.
type want struct {
	line  int
	field string
	words []string
}

func TestCompileRefusesWhatTheAPIServerRefuses(t *testing.T) {
	const dropped = "Gatekeeper's CRD has no such field"
	cases := []struct {
		name string
		doc  string
		want []want
	}{{
		name: "unknown field in match, with the field meant",
		doc:  assignDoc("a", "excludedNamespaces:", "excludeNamespaces:"),
		want: []want{{13, "spec.match.excludeNamespaces", []string{"unknown field", "did you mean excludedNamespaces?", dropped}}},
	}, {
		name: "unknown field at the top",
		doc:  assignDoc("a", "spec:", "specs:"),
		want: []want{{5, "specs", []string{"unknown field", "did you mean spec?"}}},
	}, {
		name: "unknown field under spec",
		doc:  assignDoc("a", "applyTo:", "aplyTo:"),
		want: []want{{6, "spec.aplyTo", []string{"did you mean applyTo?"}}},
	}, {
		name: "unknown field in a list element",
		doc:  assignDoc("a", "    kinds: [Pod]", "    kind: [Pod]"),
		want: []want{{6, "spec.applyTo[0].kind", []string{"did you mean kinds?"}}},
	}, {
		name: "unknown field four levels down",
		doc:  assignDoc("a", "      value: None", "      valeu: None"),
		want: []want{{22, "spec.parameters.assign.valeu", []string{"did you mean value?"}}},
	}, {
		name: "unknown metadata field",
		doc:  assignDoc("a", "  name: a", "  name: a\n  lables: {team: x}"),
		want: []want{{5, "metadata.lables", []string{"did you mean labels?"}}},
	}, {
		name: "unknown field like no other lists the fields allowed",
		doc:  assignDoc("a", "  parameters:", "  parameters:\n    frobnicate: 1"),
		want: []want{{18, "spec.parameters.frobnicate", []string{"unknown field", "remove it", "(assign, pathTests)"}}},
	}, {
		name: "assignIf keeps its own explanation",
		doc:  assignDoc("a", "  parameters:", "  parameters:\n    assignIf: {in: [x]}"),
		want: []want{{18, "spec.parameters.assignIf", []string{"Policy Controller extension"}}},
	}, {
		name: "pathTests condition outside the enum",
		doc:  assignDoc("a", "condition: MustNotExist", "condition: MustExists"),
		want: []want{{18, "spec.parameters.pathTests[0].condition", []string{`"MustExists" is not allowed`, `did you mean "MustExist"?`, `"MustExist", "MustNotExist"`}}},
	}, {
		name: "match source outside the enum",
		doc:  assignDoc("a", "source: All", "source: Alll"),
		want: []want{{14, "spec.match.source", []string{`did you mean "All"?`}}},
	}, {
		name: "applyTo operation outside the enum",
		doc:  assignDoc("a", "operations: [CREATE]", "operations: [CREATE, update]"),
		want: []want{{6, "spec.applyTo[0].operations[1]", []string{`"update" is not allowed`, `did you mean "UPDATE"?`}}},
	}, {
		name: "value far from every allowed one",
		doc:  assignDoc("a", "operations: [CREATE]", "operations: [DELETE]"),
		want: []want{{6, "spec.applyTo[0].operations[0]", []string{`"DELETE" is not allowed`, `allows only "CREATE", "UPDATE", "*"; use one of them`}}},
	}, {
		name: "match scope Gatekeeper reads as every scope",
		doc:  assignDoc("a", "scope: Namespaced", "scope: Namespacd"),
		want: []want{{12, "spec.match.scope", []string{`"Namespacd" is not Namespaced, Cluster or *`, "did you mean Namespaced?"}}},
	}, {
		name: "number where a string belongs",
		doc:  assignDoc("a", "location: spec.dnsPolicy", "location: 5"),
		want: []want{{16, "spec.location", []string{"is an integer, but Gatekeeper's CRD wants a string here"}}},
	}, {
		name: "string where a list belongs",
		doc:  assignDoc("a", `{apiGroups: [""], kinds: [Pod]}`, `{apiGroups: "", kinds: [Pod]}`),
		want: []want{{15, "spec.match.kinds[0].apiGroups", []string{"is a string, but Gatekeeper's CRD wants a list here"}}},
	}, {
		name: "required field",
		doc:  assignDoc("a", "    source: All", "    source: All\n    labelSelector: {matchExpressions: [{key: team}]}"),
		want: []want{{15, "spec.match.labelSelector.matchExpressions[0].operator", []string{"is required by Gatekeeper's CRD; add it"}}},
	}, {
		name: "name longer than the CRD allows",
		doc:  assignDoc(strings.Repeat("n", 64)),
		want: []want{{4, "metadata.name", []string{"too long", "63", "shorten it"}}},
	}, {
		name: "name that is no DNS subdomain",
		doc:  assignDoc("Set_DNS"),
		want: []want{{4, "metadata.name", []string{`"Set_DNS" is not a valid name`, "rename the mutator"}}},
	}, {
		name: "every problem of a document, in line order",
		doc: assignDoc("a", "excludedNamespaces:", "excludeNamespaces:", "location: spec.dnsPolicy", "location: 5",
			"condition: MustNotExist", "condition: MustExists"),
		want: []want{
			{13, "spec.match.excludeNamespaces", []string{"did you mean excludedNamespaces?"}},
			{16, "spec.location", []string{"wants a string"}},
			{18, "spec.parameters.pathTests[0].condition", []string{`did you mean "MustExist"?`}},
		},
	}, {
		name: "ModifySet operation outside the enum",
		doc: `apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: ms}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.containers[name:*].args
  parameters: {operation: merg, values: {fromList: [a]}}
`,
		want: []want{{7, "spec.parameters.operation", []string{`did you mean "merge"?`}}},
	}, {
		name: "near-miss group",
		doc:  assignDoc("a", "mutations.gatekeeper.sh/v1", "mutation.gatekeeper.sh/v1"),
		want: []want{{1, "apiVersion", []string{`"mutation.gatekeeper.sh/v1" is not Gatekeeper's mutator API`, "did you mean apiVersion: mutations.gatekeeper.sh/v1?"}}},
	}, {
		name: "near-miss top-level domain keeps the version",
		doc:  assignDoc("a", "mutations.gatekeeper.sh/v1", "mutations.gatekeeper.io/v1beta1"),
		want: []want{{1, "apiVersion", []string{"did you mean apiVersion: mutations.gatekeeper.sh/v1beta1?"}}},
	}, {
		name: "group in the wrong case and misspelt kind",
		doc:  assignDoc("a", "mutations.gatekeeper.sh/v1", "Mutations.Gatekeeper.sh/v1", "kind: Assign", "kind: Asign"),
		want: []want{{1, "apiVersion", []string{"did you mean apiVersion: mutations.gatekeeper.sh/v1 and kind: Assign?"}}},
	}, {
		name: "near-miss group suggests a version the kind is served in",
		doc:  "apiVersion: mutation.gatekeeper.sh/v1\nkind: AssignImage\nmetadata: {name: i}\n",
		want: []want{{1, "apiVersion", []string{"did you mean apiVersion: mutations.gatekeeper.sh/v1alpha1?"}}},
	}, {
		name: "group without a version",
		doc:  assignDoc("a", "mutations.gatekeeper.sh/v1", "mutations.gatekeeper.sh"),
		want: []want{{1, "apiVersion", []string{`"mutations.gatekeeper.sh" has no version`, "did you mean apiVersion: mutations.gatekeeper.sh/v1?"}}},
	}, {
		name: "misspelt kind",
		doc:  assignDoc("a", "kind: Assign", "kind: Assing"),
		want: []want{{2, "kind", []string{`mutations.gatekeeper.sh has no kind "Assing"; did you mean Assign?`}}},
	}, {
		name: "kind in the wrong case",
		doc:  assignDoc("a", "kind: Assign", "kind: modifyset"),
		want: []want{{2, "kind", []string{"did you mean ModifySet?"}}},
	}, {
		name: "kind the group does not have",
		doc:  assignDoc("a", "kind: Assign", "kind: Frobnicator"),
		want: []want{{2, "kind", []string{`has no kind "Frobnicator"`, "Assign, AssignImage, AssignMetadata, ModifySet"}}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs, err := source.Parse("m.yaml", []byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			res := Compile(docs)
			if len(res.Mutations) != 0 || len(res.Notes) != 0 {
				t.Errorf("got %d mutations and notes %q, want only problems", len(res.Mutations), res.Notes)
			}
			if len(res.Problems) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(res.Problems), len(c.want), problems(res))
			}
			for i, w := range c.want {
				p := res.Problems[i]
				if p.File != "m.yaml" || p.Line != w.line || p.Field != w.field {
					t.Errorf("problem %d at %s:%d field %q, want m.yaml:%d field %q: %s", i, p.File, p.Line, p.Field, w.line, w.field, p)
				}
				for _, word := range w.words {
					if !strings.Contains(p.Msg, word) {
						t.Errorf("problem %d does not say %q: %s", i, word, p)
					}
				}
			}
		})
	}
}

func problems(res *Result) string {
	var b strings.Builder
	for _, p := range res.Problems {
		b.WriteString(p.Error() + "\n")
	}
	return b.String()
}

// TestCompileAcceptsValidMutators checks that the strict checks let through what the API server
// admits, and that the object decoded is the one it stores (defaults filled in).
func TestCompileAcceptsValidMutators(t *testing.T) {
	docs := strings.Join([]string{
		assignDoc("dns"),
		`apiVersion: mutations.gatekeeper.sh/v1beta1
kind: AssignMetadata
metadata:
  name: owner
  namespace: ignored-on-a-cluster-scoped-kind
  labels: {team: x}
spec:
  match:
    scope: "*"
    namespaceSelector: {matchExpressions: [{key: team, operator: Exists}]}
  location: metadata.labels.owner
  parameters: {assign: {value: platform}}
`,
		`apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: ModifySet
metadata: {name: args}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1], operations: ["*"]}]
  location: spec.containers[name:*].args
  parameters: {values: {fromList: [--verbose]}}
`,
		`apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: registry}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.containers[name:*].image
  parameters: {assignDomain: registry.example.com}
`,
		// Other Gatekeeper documents and unrelated ones stay notes.
		"apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nmetadata: {name: t}\n",
		"apiVersion: mutation.gatekeeper.sh/v1\nkind: Pod\nmetadata: {name: p}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
	}, "---\n")
	ds, err := source.Parse("m.yaml", []byte(docs))
	if err != nil {
		t.Fatal(err)
	}
	res := Compile(ds)
	if len(res.Problems) > 0 {
		t.Fatalf("valid mutators refused:\n%s", problems(res))
	}
	if len(res.Mutations) != 4 || len(res.Notes) != 3 {
		t.Errorf("got %d mutations and notes %q, want 4 mutations and 3 notes", len(res.Mutations), res.Notes)
	}
	for _, n := range res.Notes {
		if n.Kind != diag.Ignored || !strings.Contains(n.String(), "is not a Gatekeeper mutator; ignored") {
			t.Errorf("note %q", n)
		}
	}
	d, err := Decode(ds[2].Object)
	if err != nil {
		t.Fatal(err)
	}
	if op := d.Object.(*unversioned.ModifySet).Spec.Parameters.Operation; op != unversioned.MergeOp {
		t.Errorf("ModifySet without an operation decoded as %q, want the CRD's default %q", op, unversioned.MergeOp)
	}
}

func TestClosest(t *testing.T) {
	candidates := []string{"excludedNamespaces", "namespaces", "kinds", "scope", "source", "name"}
	cases := []struct {
		in, want string
	}{
		{"excludeNamespaces", "excludedNamespaces"},
		{"ExcludedNamespaces", "excludedNamespaces"},
		{"excluded_namespaces", "excludedNamespaces"},
		{"namespace", "namespaces"},
		{"kind", "kinds"},
		{"scpoe", "scope"},
		{"excluded", "excludedNamespaces"},
		{"labelSelector", ""},
		{"sauce", "source"},
		{"salsa", ""},
		{"id", ""},
	}
	for _, c := range cases {
		got, ok := closest(c.in, candidates)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("closest(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
}

func TestDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"Assign", "Assign", 0},
		{"Assing", "Assign", 1},
		{"mutation.gatekeeper.sh", "mutations.gatekeeper.sh", 1},
		{"mutations.gatekeeper.io", "mutations.gatekeeper.sh", 2},
		{"kitten", "sitting", 3},
	}
	for _, c := range cases {
		if got := distance(c.a, c.b); got != c.want {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := distance(c.b, c.a); got != c.want {
			t.Errorf("distance(%q, %q) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
}
