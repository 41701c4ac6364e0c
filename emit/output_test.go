package emit_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

// mutators are three small mutators: two on Pods, one on Deployments.
const mutators = `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: dns
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.dnsPolicy
  parameters:
    assign:
      value: Default
---
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata:
  name: owner
spec:
  location: metadata.labels.owner
  parameters:
    assign:
      value: platform
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: replicas
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.revisionHistoryLimit
  parameters:
    assign:
      value: 3
`

func compile(t *testing.T, opts compiler.Options) []*emit.Policy {
	t.Helper()
	docs, err := source.Parse("mutators.yaml", []byte(mutators))
	if err != nil {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, opts)
	if len(out.Problems) > 0 {
		t.Fatalf("compile: %v", out.Problems)
	}
	return out.Policies
}

// build writes files as a base and an overlay over it with namePrefix and nameSuffix, and returns
// what kustomize builds from the overlay: kind → name → the object.
func build(t *testing.T, files []emit.File) map[string]map[string]map[string]any {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	for _, f := range files {
		if err := fs.WriteFile(filepath.Join("/base", f.Name), f.Content); err != nil {
			t.Fatal(err)
		}
	}
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamePrefix: team-a-\nnameSuffix: -prod\nresources:\n- ../base\n"
	if err := fs.WriteFile("/overlay/kustomization.yaml", []byte(overlay)); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/overlay")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	objs := map[string]map[string]map[string]any{}
	for _, r := range m.Resources() {
		o, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		if objs[r.GetKind()] == nil {
			objs[r.GetKind()] = map[string]map[string]any{}
		}
		objs[r.GetKind()][r.GetName()] = o
	}
	return objs
}

func policyName(b map[string]any) string {
	spec, _ := b["spec"].(map[string]any)
	s, _ := spec["policyName"].(string)
	return s
}

func TestKustomizeOverlayRenamesPolicyNames(t *testing.T) {
	perMutator := compile(t, compiler.Options{Layout: compiler.LayoutPerMutator})
	fused := compile(t, compiler.Options{})
	for _, tc := range []struct {
		name       string
		ps         []*emit.Policy
		apiVersion string
		format     emit.Format
	}{
		{"per-mutator v1 yaml", perMutator, "admissionregistration.k8s.io/v1", emit.YAML},
		{"fused v1 yaml", fused, "admissionregistration.k8s.io/v1", emit.YAML},
		{"per-mutator v1beta1 json", perMutator, "admissionregistration.k8s.io/v1beta1", emit.JSON},
		{"fused v1alpha1 yaml", fused, "admissionregistration.k8s.io/v1alpha1", emit.YAML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.ps) < 2 {
				t.Fatalf("%d policies, want several", len(tc.ps))
			}
			files, err := emit.Files(tc.ps, tc.apiVersion, tc.format)
			if err != nil {
				t.Fatal(err)
			}
			objs := build(t, files)
			policies, bindings := objs["MutatingAdmissionPolicy"], objs["MutatingAdmissionPolicyBinding"]
			if len(policies) != len(tc.ps) || len(bindings) != len(tc.ps) {
				t.Fatalf("built %d policies and %d bindings, want %d of each: %v", len(policies), len(bindings), len(tc.ps), objs)
			}
			for _, p := range tc.ps {
				want := "team-a-" + p.Policy.Name + "-prod"
				if _, ok := policies[want]; !ok {
					t.Errorf("no policy %s among %v", want, keys(policies))
				}
				b, ok := bindings["team-a-"+p.Binding.Name+"-prod"]
				if !ok {
					t.Errorf("no binding team-a-%s-prod among %v", p.Binding.Name, keys(bindings))
					continue
				}
				if got := policyName(b); got != want {
					t.Errorf("binding of %s: policyName %q, want the renamed policy %q", p.Policy.Name, got, want)
				}
			}
		})
	}

	// Without the configuration kustomize leaves policyName alone: the check above is what
	// the configuration provides.
	t.Run("without the configuration", func(t *testing.T) {
		files, err := emit.Files(perMutator, "admissionregistration.k8s.io/v1", emit.YAML)
		if err != nil {
			t.Fatal(err)
		}
		var kept []emit.File
		for _, f := range files {
			switch f.Name {
			case emit.KustomizeConfig:
				continue
			case "kustomization.yaml":
				s := strings.Replace(string(f.Content), "configurations:\n- "+emit.KustomizeConfig+"\n", "", 1)
				if s == string(f.Content) {
					t.Fatalf("kustomization.yaml does not name %s:\n%s", emit.KustomizeConfig, f.Content)
				}
				f.Content = []byte(s)
			}
			kept = append(kept, f)
		}
		for name, b := range build(t, kept)["MutatingAdmissionPolicyBinding"] {
			if got := policyName(b); strings.HasPrefix(got, "team-a-") {
				t.Errorf("binding %s: policyName %q renamed without the configuration; the test cannot tell it is needed", name, got)
			}
		}
	})
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestKustomizeEmptySet(t *testing.T) {
	for _, f := range []emit.Format{emit.YAML, emit.JSON} {
		files, err := emit.Files(nil, "admissionregistration.k8s.io/v1", f)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			names = append(names, f.Name)
			if f.Name == "kustomization.yaml" && !strings.Contains(string(f.Content), "\nresources: []\n") {
				t.Errorf("kustomization.yaml does not list an empty set of resources:\n%s", f.Content)
			}
		}
		if want := "kustomization.yaml " + emit.KustomizeConfig; strings.Join(names, " ") != want {
			t.Errorf("%s: files %v, want %s", f, names, want)
		}
		if objs := build(t, files); len(objs) != 0 {
			t.Errorf("%s: an empty set built %v", f, objs)
		}
	}
}

// TestWriteDirAndDiff: the configuration file is written, compared and replaced like the others,
// and a directory mapc wrote is recognised as its own.
func TestWriteDirAndDiff(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "policies")
	ps := compile(t, compiler.Options{Layout: compiler.LayoutPerMutator})
	files, err := emit.Files(ps, "admissionregistration.k8s.io/v1", emit.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if err := emit.WriteDir(dir, files); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var have, want []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	for _, f := range files {
		want = append(want, f.Name)
	}
	if strings.Join(have, " ") != strings.Join(want, " ") || !strings.Contains(strings.Join(have, " "), emit.KustomizeConfig) {
		t.Errorf("written %v, want %v (with %s)", have, want, emit.KustomizeConfig)
	}
	if d, err := emit.Diff(dir, files); err != nil || d != "" {
		t.Errorf("diff of what was written: %v\n%s", err, d)
	}
	if err := os.Remove(filepath.Join(dir, emit.KustomizeConfig)); err != nil {
		t.Fatal(err)
	}
	if d, err := emit.Diff(dir, files); err != nil || !strings.Contains(d, "+++ "+filepath.Join(dir, emit.KustomizeConfig)) {
		t.Errorf("diff does not show the missing %s: %v\n%s", emit.KustomizeConfig, err, d)
	}
	// Rewriting a directory mapc wrote is allowed; one it did not write is refused.
	if err := emit.WriteDir(dir, files[:1]); err != nil {
		t.Errorf("rewriting mapc's own directory: %v", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "kustomization.yaml"), []byte("resources: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := emit.WriteDir(other, files); err == nil || !strings.Contains(err.Error(), "not written by mapc") {
		t.Errorf("replacing a directory mapc did not write: %v", err)
	}
}

// hugePolicy is a policy whose one mutation expression has n characters.
func hugePolicy(t *testing.T, name string, n int) *emit.Policy {
	t.Helper()
	expr := "[" + strings.Repeat(" ", n-2) + "]"
	p, err := emit.NewPolicy(emit.Spec{Name: name, Sources: []emit.Source{{APIVersion: "mutations.gatekeeper.sh/v1", Kind: "Assign", Name: name}},
		Mutations: []emit.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: expr}}}, emit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestObjectSizes(t *testing.T) {
	const v1 = "admissionregistration.k8s.io/v1"
	for _, tc := range []struct {
		name     string
		n        int
		warnings int
		err      bool
	}{
		{"small", 1000, 0, false},
		{"just below the warning", emit.WarnObjectBytes - 2000, 0, false},
		{"just above the warning", emit.WarnObjectBytes + 1, 1, false},
		{"just below the limit", emit.MaxObjectBytes - 2000, 1, false},
		{"just above the limit", emit.MaxObjectBytes + 1, 0, true},
		{"far above the limit", 2 * emit.MaxObjectBytes, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := hugePolicy(t, "gatekeeper-huge", tc.n)
			small := hugePolicy(t, "gatekeeper-small", 100)
			ps := []*emit.Policy{small, p}
			warnings, err := emit.CheckSizes(ps, v1)
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", warnings, tc.warnings)
			}
			for _, w := range warnings {
				if !strings.HasPrefix(w, "MutatingAdmissionPolicy/gatekeeper-huge: ") || !strings.Contains(w, "--server-side") {
					t.Errorf("warning does not name the policy and what to do: %s", w)
				}
			}
			_, filesErr := emit.Files(ps, v1, emit.YAML)
			_, streamErr := emit.Stream(ps, v1, emit.JSON)
			for what, err := range map[string]error{"CheckSizes": err, "Files": filesErr, "Stream": streamErr} {
				if (err != nil) != tc.err {
					t.Errorf("%s: error %v, want one: %v", what, err, tc.err)
					continue
				}
				if err == nil {
					continue
				}
				for _, want := range []string{"MutatingAdmissionPolicy/gatekeeper-huge: ", fmt.Sprint(emit.MaxObjectBytes, " bytes"), "--layout per-mutator"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error lacks %q: %v", what, want, err)
					}
				}
				if strings.Contains(err.Error(), "gatekeeper-small") {
					t.Errorf("%s: error names the small policy: %v", what, err)
				}
			}
		})
	}
}

// TestObjectSizeIsJSON: the size reported is the length of the object's compact JSON in the
// target API version.
func TestObjectSizeIsJSON(t *testing.T) {
	p := hugePolicy(t, "gatekeeper-huge", emit.MaxObjectBytes)
	for _, v := range []string{"admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1alpha1"} {
		obj, err := emit.Versioned(p.Policy, v)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		_, err = emit.CheckSizes([]*emit.Policy{p}, v)
		if want := fmt.Sprintf("the object is %d bytes", len(data)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", v, err, want)
		}
	}
}

// manySources is a small policy compiled from n mutators, whose source annotation names them all.
func manySources(t *testing.T, n int) *emit.Policy {
	t.Helper()
	var srcs []emit.Source
	for i := range n {
		srcs = append(srcs, emit.Source{APIVersion: "mutations.gatekeeper.sh/v1", Kind: "Assign", Name: fmt.Sprintf("set-something-%05d", i)})
	}
	p, err := emit.NewPolicy(emit.Spec{Name: "gatekeeper-many", Sources: srcs,
		Mutations: []emit.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch, Expression: "[]"}}}, emit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAnnotationSizes: a policy compiled from so many mutators that its source annotation is
// above what the API server accepts in an object's annotations is refused, saying why and what
// to do; Oversize measures it, as it measures the object's size.
func TestAnnotationSizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *emit.Policy
		err  string
		over float64 // Oversize, roughly (at most, for 0.01)
	}{
		{"few sources", manySources(t, 10), "", 0.01},
		{"sources within the limit", manySources(t, 3000), "", 0.8},
		{"sources above the limit", manySources(t, 5000), "its annotations are", 1.3},
		{"half the split size", hugePolicy(t, "gatekeeper-half", emit.SplitObjectBytes/2), "", 0.5},
		{"above the split size", hugePolicy(t, "gatekeeper-large", emit.SplitObjectBytes+1000), "", 1.001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := emit.CheckSizes([]*emit.Policy{tc.p}, "admissionregistration.k8s.io/v1")
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), emit.AnnotationSource) || !strings.Contains(err.Error(), "--layout per-mutator")):
				t.Errorf("error %v, want one saying %q, naming the annotation and what to do", err, tc.err)
			}
			over, err := tc.p.Oversize()
			if err != nil {
				t.Fatal(err)
			}
			if over > tc.over*1.1 || tc.over > 0.01 && over < tc.over*0.95 {
				t.Errorf("Oversize %.3f, want about %.3f", over, tc.over)
			}
		})
	}
}
