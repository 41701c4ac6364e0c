package compiler_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
	"github.com/mapc-dev/mapc/verify"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// caseConfig is testdata/golden/<language>/<case>/config.yaml (optional).
type caseConfig struct {
	KubernetesVersion string `json:"kubernetesVersion"`
	// Users names more users who send each request of objects.yaml, after the default user
	// "mapc" (in group system:authenticated, as they are).
	Users []string `json:"users"`
}

// TestGolden compiles testdata/golden/<language>/<case>/mutators.yaml and compares the output
// with policies.yaml (or, for refused input, the messages with problems.txt). When the case has
// objects.yaml, every object is admitted both through the language's engine (Gatekeeper's, or
// Kyverno's) and through the emitted policies (in every order up to 24, else seeded shuffles)
// and must come out the same; params.yaml holds the param objects (ConfigMaps) both sides read.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("../testdata/golden/*/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, dir := range dirs {
		dir := dir
		lang := filepath.Base(filepath.Dir(dir))
		t.Run(lang+"/"+filepath.Base(dir), func(t *testing.T) {
			var cfg caseConfig
			if data, err := os.ReadFile(filepath.Join(dir, "config.yaml")); err == nil {
				if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
					t.Fatal(err)
				}
			}
			if cfg.KubernetesVersion == "" {
				cfg.KubernetesVersion = compiler.DefaultKubernetesVersion
			}
			kv, err := compiler.ParseVersion(cfg.KubernetesVersion)
			if err != nil {
				t.Fatal(err)
			}
			layouts := []compiler.Layout{compiler.LayoutFused, compiler.LayoutPerMutator}
			if lang == "kyverno" {
				layouts = layouts[:1] // one policy per Kyverno policy, whatever the layout
			}
			for _, layout := range layouts {
				t.Run(string(layout), func(t *testing.T) { goldenCase(t, dir, cfg, kv, layout) })
			}
		})
	}
}

// goldenCase checks one case in one layout (Kyverno's cases: the fused one only). The fused
// layout's files are policies.yaml, problems.txt and notes.txt; the per-mutator layout's
// policies are policies-per-mutator.yaml. The objects of a Kyverno case are compared with
// Kyverno's engine (the kyverno-engine program), those of a Gatekeeper case with Gatekeeper's.
func goldenCase(t *testing.T, dir string, cfg caseConfig, kv *version.Version, layout compiler.Layout) {
	suffix := ""
	if layout == compiler.LayoutPerMutator {
		suffix = "-per-mutator"
	}
	mutFile := filepath.Join(dir, "mutators.yaml")
	data, err := os.ReadFile(mutFile)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := source.Parse("mutators.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	// kyverno-config.yaml: Kyverno's ConfigMap as installed, given to both sides.
	opts := compiler.Options{KubernetesVersion: kv, Layout: layout}
	var kyvernoConfig map[string]string
	if data, err := os.ReadFile(filepath.Join(dir, "kyverno-config.yaml")); err == nil {
		cdocs, err := source.Parse("kyverno-config.yaml", data)
		if err != nil || len(cdocs) != 1 {
			t.Fatalf("kyverno-config.yaml: %v (%d documents)", err, len(cdocs))
		}
		opts.KyvernoConfig = cdocs[0]
		kyvernoConfig, _, _ = unstructured.NestedStringMap(cdocs[0].Object.Object, "data")
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := compiler.Compile(docs, opts)
	var problems []string
	for _, p := range out.Problems {
		problems = append(problems, p.Error())
	}
	got := strings.Join(problems, "\n")
	if got != "" {
		got += "\n"
	}
	if layout == compiler.LayoutFused {
		checkGolden(t, filepath.Join(dir, "problems.txt"), got)
	}
	var lines []string
	for _, n := range out.Notes {
		lines = append(lines, n.String())
	}
	notes := strings.Join(lines, "\n")
	if notes != "" {
		notes += "\n"
	}
	if layout == compiler.LayoutFused {
		checkGolden(t, filepath.Join(dir, "notes.txt"), notes)
	}
	stream, err := emit.Stream(out.Policies, emit.APIVersion(kv), emit.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Policies) == 0 {
		stream = nil
	}
	checkGolden(t, filepath.Join(dir, "policies"+suffix+".yaml"), string(stream))

	objData, err := os.ReadFile(filepath.Join(dir, "objects.yaml"))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	objDocs, err := source.Parse("objects.yaml", objData)
	if err != nil {
		t.Fatal(err)
	}
	// params.yaml: the param objects in the cluster (the ConfigMaps Kyverno's configMap context
	// entries read), given to both sides.
	var params []*unstructured.Unstructured
	if data, err := os.ReadFile(filepath.Join(dir, "params.yaml")); err == nil {
		pdocs, err := source.Parse("params.yaml", data)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range pdocs {
			params = append(params, d.Object)
		}
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var muts []*unstructured.Unstructured
	var ref verify.Reference
	switch lang := filepath.Base(filepath.Dir(dir)); lang {
	case "gatekeeper":
		for _, d := range docs {
			if gatekeeper.IsMutator(d.Object) {
				muts = append(muts, d.Object)
			}
		}
	case "kyverno":
		var pols []*unstructured.Unstructured
		for _, d := range docs {
			if kyverno.IsPolicy(d.Object) {
				pols = append(pols, d.Object)
			}
		}
		engine, err := kyvernobin.Path()
		if err != nil {
			t.Fatal(err)
		}
		kref, err := verify.NewKyvernoReferenceWithConfig(engine, pols, params, kyvernoConfig)
		if err != nil {
			t.Fatal(err)
		}
		ref = kref
	default:
		t.Fatalf("objects.yaml: there is no reference engine for %s to compare with", lang)
	}
	var nss []*corev1.Namespace
	var objCases []verify.Case
	for _, d := range objDocs {
		if d.Object.GetKind() == "Namespace" {
			ns := &corev1.Namespace{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, ns); err != nil {
				t.Fatal(err)
			}
			nss = append(nss, ns)
		}
		if ref != nil {
			// Kyverno's rules run again on every update, and on kubectl debug's (and a status's
			// where a rule is for it).
			objCases = append(objCases, verify.KyvernoCases(d.Object)...)
			if c, ok := ref.(*verify.KyvernoReference).StatusCase(d.Object); ok {
				objCases = append(objCases, c)
			}
		} else {
			objCases = append(objCases, verify.Case{Object: d.Object})
			if c, ok := verify.DebugCase(d.Object); ok {
				// Gatekeeper's webhook, as its Helm chart installs it, mutates kubectl debug's
				// request too.
				c.Name = "UPDATE pods/ephemeralcontainers " + d.Object.GetKind() + "/" + d.Object.GetName()
				objCases = append(objCases, c)
			}
			if c, ok := verify.ServiceStatusCase(d.Object); ok {
				// And a Service's status update, and a Pod's binding.
				objCases = append(objCases, c)
			}
			if c, ok := verify.BindingCase(d.Object); ok {
				objCases = append(objCases, c)
			}
		}
	}
	var cases []verify.Case
	for _, u := range append([]string{""}, cfg.Users...) {
		for _, c := range objCases {
			if u != "" {
				if c.Name == "" {
					c.Name = c.Object.GetKind() + "/" + c.Object.GetName()
				}
				c.Name += fmt.Sprintf(" as %q", u)
				c.User = u
			}
			cases = append(cases, c)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("a case with objects.yaml must compile: %s", got)
	}
	v, err := verify.New(muts, out.Policies, verify.Options{Namespaces: nss, Idempotence: true, Reference: ref, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var rs []verify.Result
	for i := 0; i < len(cases); i++ {
		r := v.Check(context.Background(), cases[i])
		rs = append(rs, r)
		if !r.Pass {
			t.Errorf("%s", verify.Report([]verify.Result{r}))
		}
		if u, ok := verify.UpdateOfResult(cases[i], r); ok && ref != nil {
			// Kyverno's rules run again on the object they created, at its next update.
			cases = append(cases, u)
		}
	}
	t.Log(verify.Summary(rs))
}

func checkGolden(t *testing.T, file, got string) {
	t.Helper()
	want, err := os.ReadFile(file)
	if *update {
		if got == "" {
			_ = os.Remove(file)
			return
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if os.IsNotExist(err) {
		want = nil
	} else if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run go test ./compiler -run TestGolden -update to accept):\n--- want\n%s\n--- got\n%s", file, want, got)
	}
}
