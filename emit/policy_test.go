package emit_test

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

func TestCheckNamePrefix(t *testing.T) {
	const least = "example-x" // the shortest name the caller generates
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{
		{"", true},
		{"team-a-", true},
		{"team-a.", true},
		{"a", true},
		{"0-", true},
		{"teams.example.com.", true},
		{strings.Repeat("a", 253-len(least)), true},
		{strings.Repeat("a", 254-len(least)), false},
		{"Team-a-", false},
		{"-a", false},
		{".a", false},
		{"-", false},
		{"team_a-", false},
		{"team-a-.", false},
		{"team..a", false},
		{"team a", false},
		{"team/a-", false},
	} {
		err := emit.CheckNamePrefix(tc.prefix, least)
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok %v", tc.prefix, err, tc.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "--name-prefix ") {
			t.Errorf("%q: the error does not name the option: %v", tc.prefix, err)
		}
	}
}

func TestNewPolicyNamePrefix(t *testing.T) {
	src := []emit.Source{{APIVersion: "mutations.gatekeeper.sh/v1", Kind: "Assign", Name: "dns"}}
	muts := []emit.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: "[]"}}
	for _, tc := range []struct {
		prefix, name, want, err string
	}{
		{"", "gatekeeper-pods", "gatekeeper-pods", ""},
		{"team-a-", "gatekeeper-pods", "team-a-gatekeeper-pods", ""},
		{"team-a.", "gatekeeper-assign-dns", "team-a.gatekeeper-assign-dns", ""},
		// The prefix is valid, but with this (long) generated name the whole is too long.
		{strings.Repeat("a", 200), "gatekeeper-" + strings.Repeat("b", 50), "", "--name-prefix"},
		{"", "gatekeeper-" + strings.Repeat("b", 250), "", "is not valid"},
	} {
		p, err := emit.NewPolicy(emit.Spec{Name: tc.name, Sources: src, Mutations: muts}, emit.Options{NamePrefix: tc.prefix})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q + %q: error %v, want one with %q", tc.prefix, tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q + %q: %v", tc.prefix, tc.name, err)
			continue
		}
		if p.Policy.Name != tc.want || p.Binding.Name != tc.want || p.Binding.Spec.PolicyName != tc.want {
			t.Errorf("%q + %q: policy %q, binding %q naming %q; want all %q", tc.prefix, tc.name, p.Policy.Name, p.Binding.Name, p.Binding.Spec.PolicyName, tc.want)
		}
	}
}

// TestCompileNamePrefix: the prefix reaches every policy and binding through the compiler, in
// both layouts, and the file names; a bad one is the only problem reported.
func TestCompileNamePrefix(t *testing.T) {
	for _, layout := range []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator} {
		plain := compile(t, compiler.Options{Layout: layout})
		prefixed := compile(t, compiler.Options{Layout: layout, NamePrefix: "team-a-"})
		if len(plain) == 0 || len(prefixed) != len(plain) {
			t.Fatalf("%s: %d policies with the prefix, %d without", layout, len(prefixed), len(plain))
		}
		for i, p := range prefixed {
			want := "team-a-" + plain[i].Policy.Name
			if p.Policy.Name != want || p.Binding.Name != want || p.Binding.Spec.PolicyName != want {
				t.Errorf("%s: policy %q, binding %q naming %q; want all %q", layout, p.Policy.Name, p.Binding.Name, p.Binding.Spec.PolicyName, want)
			}
		}
		files, err := emit.Files(prefixed, "admissionregistration.k8s.io/v1", emit.YAML)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.Name != "kustomization.yaml" && f.Name != emit.KustomizeConfig && !strings.HasPrefix(f.Name, "team-a-gatekeeper-") {
				t.Errorf("%s: file %s is not named after its prefixed policy", layout, f.Name)
			}
		}
	}
	docs, err := source.Parse("mutators.yaml", []byte(mutators))
	if err != nil {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, compiler.Options{NamePrefix: "Team-A-"})
	if len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Error(), `--name-prefix "Team-A-"`) || len(out.Policies) != 0 {
		t.Errorf("a bad prefix: problems %v, %d policies", out.Problems, len(out.Policies))
	}
}

// TestRename: a policy renamed keeps its binding naming it; an invalid name is refused.
func TestRename(t *testing.T) {
	p, err := emit.NewPolicy(emit.Spec{Name: "gatekeeper-pods"}, emit.Options{NamePrefix: "team-a-"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Rename("team-a-gatekeeper-pods-part-2"); err != nil {
		t.Fatal(err)
	}
	if p.Policy.Name != "team-a-gatekeeper-pods-part-2" || p.Binding.Name != p.Policy.Name || p.Binding.Spec.PolicyName != p.Policy.Name {
		t.Errorf("renamed: policy %s, binding %s for %s", p.Policy.Name, p.Binding.Name, p.Binding.Spec.PolicyName)
	}
	if err := p.Rename("Not_Valid"); err == nil || p.Policy.Name != "team-a-gatekeeper-pods-part-2" {
		t.Errorf("an invalid name: error %v, name now %s", err, p.Policy.Name)
	}
}
