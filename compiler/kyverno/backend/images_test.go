package backend

import (
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
)

// imagesPolicy is a ClusterPolicy with one rule for kinds: mutate.
func imagesPolicy(name, kinds, mutate string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: ` + name + `
  annotations:
    pod-policies.kyverno.io/autogen-controllers: none
spec:
  rules:
  - name: r
    match:
      any:
      - resources:
          kinds: [` + kinds + `]
    mutate:
` + mutate + `
---
`
}

const (
	readsTag = `      patchStrategicMerge:
        metadata:
          labels:
            tag: "{{ images.containers.app.tag }}"`
	setsImage = `      patchStrategicMerge:
        spec:
          containers:
          - (name): app
            image: nginx:1.27`
	setsLabel = `      patchStrategicMerge:
        metadata:
          labels:
            team: a`
	patchesImage = `      patchesJson6902: |-
        - op: replace
          path: /spec/containers/0/image
          value: nginx:1.27`
)

// TestImagesAcrossPolicies: a policy reading images is refused beside another compiled policy
// that can change a container list of the same kinds (the API server can run it first), and
// compiled beside one that cannot, or one for other kinds.
func TestImagesAcrossPolicies(t *testing.T) {
	for _, tc := range []struct {
		name, other string
		refused     bool
	}{
		{"a strategic merge of containers", imagesPolicy("writer", "Pod", setsImage), true},
		{"a JSON patch of a container", imagesPolicy("writer", "Pod", patchesImage), true},
		{"labels only", imagesPolicy("writer", "Pod", setsLabel), false},
		{"a sidecar with an image", imagesPolicy("writer", "Pod", `      patchStrategicMerge:
        spec:
          containers:
          - name: log-shipper
            image: registry.example/log-shipper:2.4`), true},
		{"a pull policy under a condition on the image", imagesPolicy("writer", "Pod", `      patchStrategicMerge:
        spec:
          containers:
          - (image): "*:latest"
            imagePullPolicy: Always`), false},
		{"a JSON patch of each container's resources", imagesPolicy("writer", "Pod", `      foreach:
      - list: request.object.spec.containers
        patchesJson6902: |-
          - op: add
            path: /spec/containers/{{elementIndex}}/resources
            value: {}`), false},
		{"a JSON patch of the whole spec", imagesPolicy("writer", "Pod", `      patchesJson6902: |-
        - op: add
          path: /spec/priorityClassName
          value: high
        - op: replace
          path: /spec
          value: {}`), true},
		{"a foreach setting each image", imagesPolicy("writer", "Pod", `      foreach:
      - list: request.object.spec.containers
        patchesJson6902: |-
          - op: replace
            path: /spec/containers/{{elementIndex}}/image
            value: nginx`), true},
		{"containers of other kinds", imagesPolicy("writer", "Deployment", `      patchStrategicMerge:
        spec:
          template:
            spec:
              containers:
              - (name): app
                image: nginx:1.27`), false},
	} {
		docs, err := source.Parse("p.yaml", []byte(imagesPolicy("reader", "Pod", readsTag)+tc.other))
		if err != nil {
			t.Fatal(err)
		}
		out := Route{}.Compile(docs, route.Options{})
		var reasons []string
		for _, m := range out.Mutators {
			reasons = append(reasons, m.Reasons...)
		}
		got := len(out.Problems) > 0
		if got != tc.refused {
			t.Errorf("%s: refused %v, want %v (%v)", tc.name, got, tc.refused, reasons)
			continue
		}
		if got && (len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Error(), "ClusterPolicy/reader") || !strings.Contains(out.Problems[0].Error(), "ClusterPolicy/writer")) {
			t.Errorf("%s: %v, want the reader refused, naming the writer", tc.name, out.Problems)
		}
	}
}

// TestImagesWithinPolicy: a rule reading images after a rule of its policy that can change a
// container list is refused; before it, compiled, unless the policies are reinvoked.
func TestImagesWithinPolicy(t *testing.T) {
	two := func(first, second string) string {
		return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
spec:
  rules:
  - name: first
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
` + first + `
  - name: second
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
` + second + "\n"
	}
	for _, tc := range []struct {
		name, policy string
		reinvoked    bool
		refused      bool
	}{
		{"reads after a change", two(setsImage, readsTag), false, true},
		{"reads before a change", two(readsTag, setsImage), false, false},
		{"reads before a change, reinvoked", two(readsTag, setsImage), true, true},
		{"reads after labels", two(setsLabel, readsTag), false, false},
	} {
		docs, err := source.Parse("p.yaml", []byte(tc.policy))
		if err != nil {
			t.Fatal(err)
		}
		opts := route.Options{}
		if tc.reinvoked {
			opts.Reinvocation = "IfNeeded"
		}
		out := Route{}.Compile(docs, opts)
		if got := len(out.Problems) > 0; got != tc.refused {
			t.Errorf("%s: refused %v, want %v (%v)", tc.name, got, tc.refused, out.Problems)
		}
	}
}
