package verify

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler/source"
)

// TestKyvernoWildcardSelectorInvalidValue: a label whose value matches a selector's wildcard
// (web- for web-*) but is no valid label value fails Kyverno's selector, which it parses with
// the label's value in it; the compiled policy agrees. An object can hold such a label at
// admission (the API server refuses it after), so make e2e cannot create one: checked here.
func TestKyvernoWildcardSelectorInvalidValue(t *testing.T) {
	docs, err := source.ReadPaths([]string{"../testdata/golden/kyverno/selector-wildcards/mutators.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	alpha := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Labels: map[string]string{"kubernetes.io/metadata.name": "alpha", "team": "alpha"}}}
	v := kyvernoVerifier(t, docs, 1, Options{Namespaces: []*corev1.Namespace{alpha}})
	defer v.Close()
	for _, app := range []string{"web-", "web-x"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "namespace": "alpha", "labels": map[string]any{"app": app, "tier": "1", "owner": "me"}}}}
		r := v.Check(context.Background(), Case{Object: obj})
		if !r.Pass || r.Got == nil {
			t.Errorf("app=%s:\n%s", app, Report([]Result{r}))
			continue
		}
		labels, _, _ := unstructured.NestedStringMap(r.Got.Object, "metadata", "labels")
		if want := app == "web-x"; (labels["matched"] == "yes") != want {
			t.Errorf("app=%s: matched label %q, want it set: %v", app, labels["matched"], want)
		}
	}
}

// TestKyvernoSplicedTextInvalidValue: Kyverno splices a quoted variable's text into the YAML of
// patchesJson6902 before it parses it. A label's value is tame in every stored object, so the
// compiled policy splices it in, but checks it: a label with a quote (which the API server
// refuses after admission) makes Kyverno's YAML fail, and the compiled policy fails there too.
func TestKyvernoSplicedTextInvalidValue(t *testing.T) {
	v := mutateVerifier(t, "spliced", "ConfigMap", `  patchesJson6902: |-
    - op: add
      path: /data
      value: {"café": "é", "tier": "tier-{{ request.object.metadata.labels.tier || 'none' }}"}
`)
	defer v.Close()
	for _, tc := range []struct{ tier, want string }{{"gold", "tier-gold"}, {"", "tier-none"}, {`a"b`, ""}, {`x" #`, ""}} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "namespace": "default", "labels": map[string]any{"tier": tc.tier}}}}
		r := v.Check(context.Background(), Case{Object: obj})
		if !r.Pass {
			t.Errorf("tier=%q:\n%s", tc.tier, Report([]Result{r}))
			continue
		}
		if tc.want == "" {
			if r.Got != nil {
				t.Errorf("tier=%q: admitted, want both to deny:\n%s", tc.tier, Report([]Result{r}))
			}
			continue
		}
		if got, _, _ := unstructured.NestedString(r.Got.Object, "data", "tier"); got != tc.want {
			t.Errorf("tier=%q: data.tier = %q, want %q", tc.tier, got, tc.want)
		}
	}
}

// TestKyvernoSplicedImage: a container's image is spliced into the YAML of patchesJson6902 with
// the same check: an image no registry serves (with a quote) fails Kyverno's YAML and the
// compiled policy.
func TestKyvernoSplicedImage(t *testing.T) {
	v := mutateVerifier(t, "spliced-image", "Pod", `  patchesJson6902: |-
    - op: add
      path: /metadata/annotations
      value: {"image": "{{ request.object.spec.containers[0].image }}"}
`)
	defer v.Close()
	checkImageAnnotation(t, v, map[string]string{"nginx:1.27": "nginx:1.27", `nginx"x`: ""})
}

// checkImageAnnotation admits a Pod with each image (a key of want) through v, which must give
// Kyverno's result, the annotation image want gives (none: both deny the request).
func checkImageAnnotation(t *testing.T, v *Verifier, want map[string]string) {
	t.Helper()
	for _, image := range slices.Sorted(maps.Keys(want)) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "default"},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": image}}}}}
		r := v.Check(context.Background(), Case{Object: obj})
		if !r.Pass {
			t.Errorf("image=%q:\n%s", image, Report([]Result{r}))
			continue
		}
		got := ""
		if r.Got != nil {
			got, _, _ = unstructured.NestedString(r.Got.Object, "metadata", "annotations", "image")
		}
		if w := want[image]; w == "" && r.Got != nil || w != "" && got != w {
			t.Errorf("image=%q: admitted %v, annotation %q, want %q", image, r.Got != nil, got, w)
		}
	}
}

// TestKyvernoPlainScalar: a container's image spliced into an unquoted JSON patch value after a
// literal: a space inside stays (both engines write it), a colon at the end or before a space
// fails Kyverno's YAML and the compiled policy.
func TestKyvernoPlainScalar(t *testing.T) {
	v := mutateVerifier(t, "plain-image", "Pod", `  patchesJson6902: |-
    - op: add
      path: /metadata/annotations
      value:
        image: img/{{ request.object.spec.containers[0].image }}
`)
	defer v.Close()
	checkImageAnnotation(t, v, map[string]string{
		"nginx:1.27": "img/nginx:1.27", "bad image!": "img/bad image!", "a'b\\c": "img/a'b\\c",
		"nginx:": "", "a: b": "",
	})
}

// TestKyvernoOptionalPrefixReplace: regex_replace_all with ^(G)?(.*)$ on texts a label cannot
// hold (line breaks, the empty text, letters outside ASCII), which make e2e cannot create:
// ConfigMap data, compared with Kyverno's engine.
func TestKyvernoOptionalPrefixReplace(t *testing.T) {
	v := mutateVerifier(t, "prefix", "ConfigMap", `  patchStrategicMerge:
    data:
      out: "{{ regex_replace_all('^(localhost/|(?:[a-z0-9]+\\.)+[a-z0-9]+/)?(.*)$', request.object.data.in, 'r.example/$2|$1|$0') }}"
`)
	defer v.Close()
	for _, in := range []string{"", "nginx", "a.b/c/d", "localhost/x", "localhost/", "a.b/\nc", "x\n", "a.b.c/é/d", "A.b/c", "a.b/c/d.e/f"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "namespace": "default"}, "data": map[string]any{"in": in}}}
		r := v.Check(context.Background(), Case{Object: obj})
		if !r.Pass || r.Got == nil {
			t.Errorf("in=%q:\n%s", in, Report([]Result{r}))
		}
	}
}

// mutateVerifier compiles a ClusterPolicy of one rule, copy, for kind, whose mutate block is
// mutate (indented by two spaces), and verifies against Kyverno's engine.
func mutateVerifier(t *testing.T, name, kind, mutate string) *Verifier {
	t.Helper()
	text := "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: " + name +
		"\nspec:\n  rules:\n  - name: copy\n    match:\n      any:\n      - resources:\n          kinds: [" + kind + "]\n    mutate:\n"
	for _, l := range strings.Split(strings.TrimSuffix(mutate, "\n"), "\n") {
		text += "    " + l + "\n"
	}
	docs, err := source.Parse(name+".yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return kyvernoVerifier(t, docs, 1, Options{})
}
