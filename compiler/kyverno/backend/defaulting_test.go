package backend

import (
	"slices"
	"strings"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/apidefaults"
	"github.com/mapc-dev/mapc/compiler/kyverno"
	"github.com/mapc-dev/mapc/compiler/route"
	"github.com/mapc-dev/mapc/compiler/source"
)

// TestWriteFills: a new env item fills a fieldRef's apiVersion only where it has a fieldRef
// (or a variable that can be one) and no apiVersion.
func TestWriteFills(t *testing.T) {
	d := []string{"spec", "containers", apidefaults.AnyField, "env", apidefaults.AnyField, "valueFrom", "fieldRef", "apiVersion"}
	at := []string{"spec", "containers", apidefaults.AnyField, "env"}
	for _, tc := range []struct {
		item any
		want bool
	}{
		{map[string]any{"name": "A", "value": "{{ element.name }}"}, false},
		{map[string]any{"name": "A", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}}, true},
		{map[string]any{"name": "A", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "x", "apiVersion": "v1"}}}, false},
		{map[string]any{"name": "A", "valueFrom": "{{ request.object.metadata.labels }}"}, true},
	} {
		if got := (write{at: at, value: []any{tc.item}}).fills(d); got != tc.want {
			t.Errorf("%v: fills = %v, want %v", tc.item, got, tc.want)
		}
	}
	if !(write{at: at}).fills(d) {
		t.Error("an unknown value must fill")
	}
}

// TestAnyStep: the reads' computed steps are the defaults' list items.
func TestAnyStep(t *testing.T) {
	if cel.AnyStep != apidefaults.AnyField {
		t.Fatal("cel.AnyStep and apidefaults.AnyField differ")
	}
}

// TestOpsWrites: an operation below a foreach's element writes below it; an add at a list's
// end writes the new item, and the maps it can create below it.
func TestOpsWrites(t *testing.T) {
	str := func(ws []write) []string {
		var out []string
		for _, w := range ws {
			out = append(out, strings.ReplaceAll(strings.Join(w.at, "."), apidefaults.AnyField, "*"))
		}
		slices.Sort(out)
		return out
	}
	el := [][]string{{"spec", "containers"}}
	for _, tc := range []struct {
		op      kyverno.Op
		element [][]string
		want    []string
	}{
		{kyverno.Op{Op: "add", Path: "/spec/containers/{{elementIndex}}/image"}, el, []string{"spec.containers.*.image"}},
		{kyverno.Op{Op: "add", Path: "/spec/containers/-"}, nil, []string{"spec.containers.*"}},
		{kyverno.Op{Op: "add", Path: "/spec/containers/0/securityContext/runAsUser"}, nil, []string{"spec.containers.*.securityContext.runAsUser"}},
		{kyverno.Op{Op: "add", Path: "/spec/containers/0/env/-/valueFrom/fieldRef"}, nil, []string{"spec.containers.*.env.*", "spec.containers.*.env.*.valueFrom", "spec.containers.*.env.*.valueFrom.fieldRef"}},
		{kyverno.Op{Op: "replace", Path: "/spec/containers/0"}, nil, []string{"spec.containers.*"}},
		{kyverno.Op{Op: "add", Path: "/metadata/labels/a~1b"}, nil, []string{"metadata.labels.a/b"}},
	} {
		if got := str(opsWrites([]kyverno.Op{tc.op}, tc.element)); !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.op.Op, tc.op.Path, got, tc.want)
		}
	}
}

// TestDefaultingAcrossPolicies: a policy reading a field the API server can default after
// another compiled policy's mutation for the same objects is refused, naming the writer; one
// for other kinds, or writing nothing defaulting fills the field from (a sidecar without
// limits: the reader reads the requests), is not.
func TestDefaultingAcrossPolicies(t *testing.T) {
	setsRequest := `      patchStrategicMerge:
        spec:
          containers:
          - (name): "*"
            resources:
              requests:
                +(memory): 256Mi`
	for _, tc := range []struct {
		name, other string
		refused     bool
	}{
		{"a memory limit", imagesPolicy("writer", "Pod", `      patchStrategicMerge:
        spec:
          containers:
          - (name): "*"
            resources:
              limits:
                +(memory): 1Gi`), true},
		{"a sidecar", imagesPolicy("writer", "Pod", `      patchStrategicMerge:
        spec:
          containers:
          - name: proxy
            image: proxy:1`), false},
		{"a sidecar with a memory limit", imagesPolicy("writer", "Pod", `      patchStrategicMerge:
        spec:
          containers:
          - name: proxy
            image: proxy:1
            resources:
              limits:
                memory: 1Gi`), true},
		{"labels", imagesPolicy("writer", "Pod", setsLabel), false},
		{"a memory limit of Deployments", imagesPolicy("writer", "Deployment", `      patchStrategicMerge:
        spec:
          template:
            spec:
              containers:
              - (name): "*"
                resources:
                  limits:
                    +(memory): 1Gi`), false},
	} {
		docs, err := source.Parse("p.yaml", []byte(imagesPolicy("reader", "Pod", setsRequest)+tc.other))
		if err != nil {
			t.Fatal(err)
		}
		out := Route{}.Compile(docs, route.Options{})
		got := len(out.Problems) > 0
		if got != tc.refused {
			t.Errorf("%s: refused %v, want %v (%v)", tc.name, got, tc.refused, out.Problems)
			continue
		}
		if got && (len(out.Problems) != 1 || !strings.Contains(out.Problems[0].Error(), "ClusterPolicy/reader") || !strings.Contains(out.Problems[0].Error(), "ClusterPolicy/writer")) {
			t.Errorf("%s: %v, want the reader refused, naming the writer", tc.name, out.Problems)
		}
	}
}

// TestEntryWrites: a nested entry's operations below its own element and the enclosing one's
// write below the items, adding none.
func TestEntryWrites(t *testing.T) {
	fe := kyverno.ForEach{List: "request.object.spec.containers", ForEach: []kyverno.ForEach{{
		List:     "element.env",
		JSON6902: []kyverno.Op{{Op: "add", Path: "/spec/containers/{{elementIndex0}}/env/{{elementIndex1}}/value"}},
	}}}
	var got []string
	for _, w := range entryWrites(fe, nil) {
		got = append(got, strings.ReplaceAll(strings.Join(w.at, "."), apidefaults.AnyField, "*"))
	}
	if want := []string{"spec.containers.*.env.*.value"}; !slices.Equal(got, want) {
		t.Errorf("entryWrites = %q, want %q", got, want)
	}
}

// TestDefaultingJSONPatchValues: a JSON patch's value says what the API server can fill in what
// it adds (an emptyDir volume: nothing), and testing a place's type reads none of its fields: a
// sidecar beside a volume and its mount added by JSON patch compiles; a default of what the
// API server fills in the added volume (a secret's defaultMode) is refused.
func TestDefaultingJSONPatchValues(t *testing.T) {
	mounts := func(source string) string {
		return imagesPolicy("mounts", "Deployment", `      patchesJson6902: |-
        - op: add
          path: /spec/template/spec/volumes/-
          value:
            name: shared
            `+source+`
        - op: add
          path: /spec/template/spec/containers/0/volumeMounts/-
          value:
            name: shared
            mountPath: /shared`)
	}
	sidecar := func(volume string) string {
		return imagesPolicy("sidecar", "Deployment", `      patchStrategicMerge:
        spec:
          template:
            spec:
              containers:
              - name: agent
                image: agent:1
              volumes:
              - name: shared
                `+volume)
	}
	for _, tc := range []struct {
		name, policies string
		refused        bool
	}{
		{"emptyDir volumes", mounts("emptyDir: {medium: Memory}") + sidecar("emptyDir: {medium: Memory}"), false},
		{"a secret's default mode", mounts("secret: {secretName: s}") + sidecar("secret: {+(defaultMode): 256}"), true},
		{"a secret's name", mounts("secret: {secretName: s}") + sidecar("secret: {secretName: t}"), false},
		{"a variable's value", mounts(`emptyDir: "{{ request.object.metadata.labels.dir }}"`) + sidecar("emptyDir: {+(medium): Memory}"), true},
	} {
		docs, err := source.Parse("p.yaml", []byte(tc.policies))
		if err != nil {
			t.Fatal(err)
		}
		out := Route{}.Compile(docs, route.Options{})
		if got := len(out.Problems) > 0; got != tc.refused {
			t.Errorf("%s: refused %v, want %v (%v)", tc.name, got, tc.refused, out.Problems)
		}
	}
}
