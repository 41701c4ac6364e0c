package verify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mapc-dev/mapc/compiler/source"
)

// imagesPolicy writes every field of the images of the containers app (in containers) and init
// (in initContainers) into annotations: what Kyverno's GetImageInfo makes of an image, or the
// rule's failure where one image does not parse; image_normalize of the annotation image; and
// labels from the sets of all containers' registries and tags (images.<list>.*.<field>).
const imagesPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: image-fields
  annotations:
    pod-policies.kyverno.io/autogen-controllers: none
spec:
  rules:
  - name: fields
    match:
      any:
      - resources:
          kinds: [Pod]
    mutate:
      patchStrategicMerge:
        metadata:
          annotations:
            registry: "{{ images.containers.app.registry || '-' }}"
            name: "{{ images.containers.app.name }}"
            path: "{{ images.containers.app.path }}"
            tag: "{{ images.containers.app.tag || '-' }}"
            digest: "{{ images.containers.app.digest || '-' }}"
            reference: "{{ images.containers.app.reference }}"
            referenceWithTag: "{{ images.containers.app.referenceWithTag }}"
            jsonPointer: "{{ images.containers.app.jsonPointer }}"
            init: "{{ images.initContainers.\"{{ request.object.metadata.labels.init || 'none' }}\".reference || '-' }}"
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: image-normalize
  annotations:
    pod-policies.kyverno.io/autogen-controllers: none
spec:
  rules:
  - name: normalize
    match:
      any:
      - resources:
          kinds: [Pod]
    mutate:
      patchStrategicMerge:
        metadata:
          annotations:
            normalized: "{{ image_normalize(request.object.metadata.annotations.image) }}"
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: image-sets
  annotations:
    pod-policies.kyverno.io/autogen-controllers: none
spec:
  rules:
  - name: docker-hub
    match:
      any:
      - resources:
          kinds: [Pod]
    preconditions:
      any:
      - key: docker.io
        operator: AnyIn
        value: "{{ images.containers.*.registry || ` + "`[]`" + ` }}"
      - key: docker.io
        operator: In
        value: "{{ images.initContainers.*.registry || ` + "`[]`" + ` }}"
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            docker-hub: "true"
  - name: all-pinned
    match:
      any:
      - resources:
          kinds: [Pod]
    preconditions:
      all:
      - key: "{{ images.containers.*.tag }}"
        operator: AllNotIn
        value: [latest]
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            pinned: "true"
`

// TestKyvernoImages admits Pods whose images are made of random parts of distribution/
// reference's grammar, and of what it refuses (upper case, bad separators, digests of unknown
// algorithms or lengths, tags too long, blank images), through Kyverno's engine and the
// compiled policy of imagesPolicy. MAPC_DIFF_N sets the number of Pods (default 150),
// MAPC_DIFF_SEED the seed.
func TestKyvernoImages(t *testing.T) {
	n := 150
	if s := os.Getenv("MAPC_DIFF_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	docs, err := source.Parse("images.yaml", []byte(imagesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	v := kyvernoVerifier(t, docs, 3, Options{Namespaces: []*corev1.Namespace{namespace("default", nil)}})
	defer v.Close()
	seed := uint64(7)
	if s := os.Getenv("MAPC_DIFF_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	hex := func(n int, digits string) string {
		var b strings.Builder
		for range n {
			b.WriteByte(digits[r.IntN(len(digits))])
		}
		return b.String()
	}
	// An image of valid parts, with one odd part (which may or may not parse) one time in four.
	image := func() string {
		if r.IntN(25) == 0 {
			return pick("", " ", "\t", " nginx", "nginx ", "@", ":", "/")
		}
		odd := r.IntN(4) == 0
		part := func(valid []string, other ...string) string {
			if odd && r.IntN(3) == 0 {
				return pick(other...)
			}
			return pick(valid...)
		}
		registry := part([]string{"", "", "docker.io/", "ghcr.io/", "localhost/", "localhost:5000/", "Quay.IO/", "[::1]:5000/", "a-b.example:80/", "127.0.0.1/"},
			"my_org.io/", "UPPER/", "-bad.io/", "x.io:port/", "a..b/")
		var parts []string
		for range 1 + r.IntN(3) {
			parts = append(parts, part([]string{"nginx", "library", "a", "my_org", "x__y", "a--b", "a.b", "app-1", "0"},
				"_x", "x_", "A", "a_-b", strings.Repeat("p", 100+r.IntN(160))))
		}
		tag := part([]string{"", "", ":1", ":latest", ":v1.2-rc_3", ":A_b", ":" + strings.Repeat("t", 128)},
			":-bad", ":.x", ":"+strings.Repeat("t", 129), ":")
		digest := part([]string{"", "", "", "@sha256:" + hex(64, "0123456789abcdef"), "@sha512:" + hex(128, "0123456789abcdef"), "@sha384:" + hex(96, "0123456789abcdef")},
			"@sha256:"+hex(63, "0123456789abcdef"), "@md5:"+hex(32, "0123456789abcdef"), "@sha256:"+hex(64, "0123456789ABCDEF"), "@sha256+x:"+hex(64, "0123456789abcdef"))
		return registry + strings.Join(parts, "/") + tag + digest
	}
	failed, parsed, denied := 0, 0, 0
	for i := 0; i < n && failed < 5; i++ {
		containers := []any{map[string]any{"name": "app", "image": image()}}
		if r.IntN(3) == 0 {
			containers = append(containers, map[string]any{"name": "side", "image": image()})
		}
		spec := map[string]any{"containers": containers}
		labels := map[string]any{}
		if r.IntN(2) == 0 {
			spec["initContainers"] = []any{map[string]any{"name": "init", "image": image()}}
			labels["init"] = pick("init", "other", "in\"it")
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": fmt.Sprintf("p%d", i), "namespace": "default", "labels": labels,
				"annotations": map[string]any{"image": image()}}, "spec": spec}}
		res := v.Check(context.Background(), Case{Object: obj})
		if !res.Pass {
			failed++
			t.Errorf("%s\nobject:\n%s", Report([]Result{res}), yamlOf(obj))
		}
		switch {
		case res.Want != nil && res.Want.GetAnnotations()["path"] != "":
			parsed++
		case res.WantErr != "":
			denied++
		}
	}
	// Both outcomes, or the comparison proves little.
	if failed == 0 && (parsed < n/10 || denied < n/10) {
		t.Errorf("%d Pods' images parsed, %d denied, of %d: want a tenth of each at least", parsed, denied, n)
	}
	t.Logf("%d Pods' images parsed, %d denied, of %d", parsed, denied, n)
}
