package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	gkfront "github.com/mapc-dev/mapc/compiler/gatekeeper"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
	"github.com/mapc-dev/mapc/internal/quiet"
)

const (
	examplesDir = "../examples/gatekeeper"
	objectsDir  = "../examples/objects"
	goldenDir   = "../testdata/golden/gatekeeper"
	benchDir    = "../testdata/bench"
)

func TestMain(m *testing.M) {
	quiet.Klog() // the in-process evaluator runs the API server's admission code, which logs through klog
	code := m.Run()
	kyvernobin.Cleanup() // the kyverno-engine program TestKyverno built, if it built one
	if os.Getenv(EnvKubeconfig) != "" {
		fmt.Printf("e2e: %d checks passed, %d failed; %d results mutated, %d untouched by the input's engine\n",
			checksPassed.Load(), checksFailed.Load(), objectsMutated.Load(), objectsUntouched.Load())
	}
	os.Exit(code)
}

func readObjects(t *testing.T, paths ...string) []*unstructured.Unstructured {
	t.Helper()
	docs, err := source.ReadPaths(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, d := range docs {
		objs = append(objs, d.Object)
	}
	return objs
}

func readMutators(t *testing.T, paths ...string) []*source.Document {
	t.Helper()
	docs, err := source.ReadPaths(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestExamples admits the example objects with all the example mutators together.
func TestExamples(t *testing.T) {
	c := connect(t)
	runCase(t, c, testCase{
		name:     "examples",
		mutators: readMutators(t, examplesDir),
		objects:  readObjects(t, objectsDir),
	})
}

// TestExampleEach admits the example objects with each example mutator alone.
func TestExampleEach(t *testing.T) {
	c := connect(t)
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s: %v", examplesDir, err)
	}
	objects := readObjects(t, objectsDir)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			runCase(t, c, testCase{name: f, mutators: readMutators(t, f), objects: objects})
		})
	}
}

// goldenConfig is testdata/golden/gatekeeper/<case>/config.yaml (and e2e/testdata/<case>/config.yaml).
type goldenConfig struct {
	KubernetesVersion string `json:"kubernetesVersion"`
	// Repeat (e2e cases only) binds the policies this many times, see testCase.repeat.
	Repeat int `json:"repeat"`
}

// TestCases runs the cases of this folder, e2e/testdata/<case>/ with mutators.yaml,
// objects.yaml and an optional config.yaml: differences only a real API server shows.
func TestCases(t *testing.T) {
	c := connect(t)
	dirs, _ := filepath.Glob(filepath.Join("testdata", "*"))
	sort.Strings(dirs)
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "mutators.yaml")); err != nil {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var cfg goldenConfig
			if data, err := os.ReadFile(filepath.Join(dir, "config.yaml")); err == nil {
				if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
					t.Fatal(err)
				}
			}
			runCase(t, c, testCase{
				name:        dir,
				mutators:    readMutators(t, filepath.Join(dir, "mutators.yaml")),
				objects:     readObjects(t, filepath.Join(dir, "objects.yaml")),
				kubeVersion: cfg.KubernetesVersion,
				repeat:      cfg.Repeat,
			})
		})
	}
}

// TestGolden runs every golden case that has objects
// (testdata/golden/gatekeeper/<case>/mutators.yaml and objects.yaml), compiled for the case's
// Kubernetes version when the server is at least that.
func TestGolden(t *testing.T) {
	c := connect(t)
	dirs, _ := filepath.Glob(filepath.Join(goldenDir, "*"))
	sort.Strings(dirs)
	ran := 0
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "objects.yaml")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "mutators.yaml")); err != nil {
			continue
		}
		ran++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var cfg goldenConfig
			if data, err := os.ReadFile(filepath.Join(dir, "config.yaml")); err == nil {
				if err := yaml.Unmarshal(data, &cfg); err != nil {
					t.Fatal(err)
				}
			}
			mutators := readMutators(t, filepath.Join(dir, "mutators.yaml"))
			if !hasMutator(mutators) {
				t.Skip("no mutator")
			}
			runCase(t, c, testCase{
				name:           dir,
				mutators:       mutators,
				objects:        readObjects(t, filepath.Join(dir, "objects.yaml")),
				kubeVersion:    cfg.KubernetesVersion,
				skipOnProblems: true,
			})
		})
	}
	if ran == 0 {
		t.Skipf("no golden case with objects under %s", goldenDir)
	}
}

func hasMutator(docs []*source.Document) bool {
	for _, d := range docs {
		if gkfront.IsMutator(d.Object) {
			return true
		}
	}
	return false
}

// TestWorkloads runs the benchmark workloads (testdata/bench/<name>/mutators.yaml, e.g. a
// realistic set of 20 mutators) on the benchmark objects (testdata/bench/objects), after
// creating the objects of the workload's cluster.yaml (see clusterObjects).
func TestWorkloads(t *testing.T) {
	c := connect(t)
	files, _ := filepath.Glob(filepath.Join(benchDir, "*", "mutators.yaml"))
	objDir := filepath.Join(benchDir, "objects")
	if _, err := os.Stat(objDir); err != nil || len(files) == 0 {
		t.Skipf("no workloads under %s", benchDir)
	}
	sort.Strings(files)
	objects := readObjects(t, objDir)
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			clusterObjects(t, c, f)
			runCase(t, c, testCase{name: f, mutators: readMutators(t, f), objects: objects})
		})
	}
}

// clusterObjects creates the objects a workload's cluster must hold for the results of its
// mutators to be admitted: cluster.yaml beside its mutators.yaml, when there is one (a
// PriorityClass its mutators name, ...). Objects that exist already are left as they are; those
// it creates are deleted when the test ends. It waits until the API server's admission sees
// each PriorityClass, as the Priority plugin reads them from an informer cache.
func clusterObjects(t *testing.T, c *cluster, mutators string) {
	t.Helper()
	if filepath.Base(mutators) != "mutators.yaml" {
		return
	}
	path := filepath.Join(filepath.Dir(mutators), "cluster.yaml")
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range readObjects(t, path) {
		gvr, _, err := c.resourceFor(o)
		if err != nil {
			t.Fatalf("%s: %s %s: the API server does not know this kind: %v", path, o.GetKind(), o.GetName(), err)
		}
		switch _, err := c.create(ctx, gvr, o, false); {
		case err == nil:
			t.Cleanup(func() {
				if err := c.deleteObject(context.Background(), gvr, o.GetNamespace(), o.GetName()); err != nil {
					t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			})
		case !apierrors.IsAlreadyExists(err):
			t.Fatalf("%s: creating %s %s: %v", path, o.GetKind(), o.GetName(), err)
		}
		if o.GroupVersionKind().GroupKind() == (schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}) {
			waitPriorityClass(t, c, o.GetName())
		}
	}
}

// waitPriorityClass waits until the API server admits a Pod that names the PriorityClass (a
// dry-run create in namespace default).
func waitPriorityClass(t *testing.T, c *cluster, name string) {
	t.Helper()
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "mapc-e2e-priority-probe", "namespace": "default"},
		"spec": map[string]any{
			"priorityClassName": name,
			"containers":        []any{map[string]any{"name": "probe", "image": "busybox"}},
		},
	}}
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, activationTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = c.create(ctx, corev1.SchemeGroupVersion.WithResource("pods"), pod, true)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("PriorityClass %s: a Pod that names it is still refused after %v: %v", name, activationTimeout, last)
	}
}
