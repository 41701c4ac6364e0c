package lower

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/filters/patchstrategicmerge"
	"sigs.k8s.io/kustomize/kyaml/filtersutil"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/mapc-dev/mapc/cel"
)

// TestCollapsePlan: the keyed lists of a Pod, a Deployment and a custom resource (none: kyaml
// has no schema for it).
func TestCollapsePlan(t *testing.T) {
	pod := strings.Join(CollapseSummary("v1", "Pod"), " ")
	for _, want := range []string{"metadata.finalizers()", "spec.containers(name)", "spec.containers[].env(name)", "spec.containers[].ports(containerPort,protocol)", "spec.initContainers[].volumeMounts(mountPath)", "spec.volumes(name)", "spec.imagePullSecrets(name)", "spec.hostAliases(ip)"} {
		if !strings.Contains(pod, want) {
			t.Errorf("Pod: %s not in %s", want, pod)
		}
	}
	for _, not := range []string{"tolerations", "args", "spec.containers[].envFrom"} {
		if strings.Contains(pod, not) {
			t.Errorf("Pod: %s (no merge key) in %s", not, pod)
		}
	}
	if d := strings.Join(CollapseSummary("apps/v1", "Deployment"), " "); !strings.Contains(d, "spec.template.spec.containers[].env(name)") {
		t.Errorf("Deployment: %s", d)
	}
	if l := CollapseSummary("example.com/v1", "Widget"); len(l) != 0 {
		t.Errorf("custom resource: %v", l)
	}
	if CollapseView("example.com/v1", "Widget") != nil || !cel.IsEmpty(CollapseOps("example.com/v1", "Widget")) {
		t.Error("custom resource: a collapse")
	}
}

// TestCollapseViewKyaml: the collapsed object, evaluated by cel-go in the API server's CEL
// environment, is what kustomize's strategic merge filter (Kyverno's merge) makes of the object
// with a patch that only adds a label, but for that label.
func TestCollapseViewKyaml(t *testing.T) {
	env := apiServerCEL(t, "object")
	text, err := cel.NewEnv(version.MajorMinor(1, 37)).Print(CollapseView("v1", "Pod"))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(text)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	objs := []string{
		// nothing repeats
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}]}]}}`,
		// env, ports (two keys), host aliases, pull secrets, finalizers
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "finalizers": ["f", "g", "f"]}, "spec": {
		  "containers": [{"name": "a", "image": "x", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}],
		    "ports": [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 53, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP", "name": "dns"}]}],
		  "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}, {"ip": "10.0.0.2", "hostnames": ["b"]}, {"ip": "10.0.0.1", "hostnames": ["c"]}],
		  "imagePullSecrets": [{"name": "r"}, {"name": "r"}]}}`,
		// repeated containers: the last one kept as it is, its own repeats included; the
		// others collapsed inside
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [
		  {"name": "a", "image": "1", "env": [{"name": "A"}, {"name": "A", "value": "x"}]},
		  {"name": "b", "image": "2", "env": [{"name": "B", "value": "1"}, {"name": "B", "value": "2"}], "volumeMounts": [{"name": "v", "mountPath": "/p"}, {"name": "w", "mountPath": "/p"}]},
		  {"name": "a", "image": "3", "env": [{"name": "C", "value": "1"}, {"name": "C", "value": "2"}]}],
		  "initContainers": [{"name": "i", "image": "4", "env": [{"name": "X"}, {"name": "Y"}, {"name": "X", "value": "z"}]}],
		  "volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "ephemeral": {"volumeClaimTemplate": {"metadata": {"finalizers": ["x", "x"]}, "spec": {}}}}, {"name": "w", "ephemeral": {"volumeClaimTemplate": {"metadata": {"finalizers": ["y", "y"]}, "spec": {}}}}]}}`,
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		objs = append(objs, randomPod(rnd))
	}
	for _, obj := range objs {
		var in map[string]any
		dec := json.NewDecoder(strings.NewReader(obj))
		dec.UseNumber()
		if err := dec.Decode(&in); err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{"object": celValue(in)})
		if err != nil {
			t.Fatalf("%s: %v", obj, err)
		}
		got := jsonOf(t, nativeOf(out))

		patch, err := kyaml.Parse(`{"metadata": {"labels": {"collapse-test": "x"}}}`)
		if err != nil {
			t.Fatal(err)
		}
		merged := &buffer{b: []byte(obj)}
		if err := filtersutil.ApplyToJSON(patchstrategicmerge.Filter{Patch: patch}, merged); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(merged.b, &m); err != nil {
			t.Fatal(err)
		}
		md := m["metadata"].(map[string]any)
		delete(md, "labels")
		if want := jsonOf(t, m); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\ngot  %v\nwant %v", obj, got, want)
		}
	}
}

func jsonOf(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// buffer is what filtersutil.ApplyToJSON reads from and writes to.
type buffer struct{ b []byte }

func (b *buffer) UnmarshalJSON(p []byte) error { b.b = append([]byte(nil), p...); return nil }
func (b *buffer) MarshalJSON() ([]byte, error) { return b.b, nil }

// randomPod is a Pod whose keyed lists repeat keys at random, at every depth.
func randomPod(r *rand.Rand) string {
	pick := func(names ...string) string { return names[r.IntN(len(names))] }
	items := func(n int, item func(i int) any) []any {
		out := []any{}
		for i := range r.IntN(n + 1) {
			out = append(out, item(i))
		}
		return out
	}
	env := func(int) any { return map[string]any{"name": pick("A", "B", "C"), "value": pick("1", "2", "3")} }
	container := func(int) any {
		c := map[string]any{"name": pick("a", "b", "c"), "image": pick("x", "y", "z")}
		if r.IntN(4) > 0 {
			c["env"] = items(4, env)
		}
		if r.IntN(2) == 0 {
			c["ports"] = items(3, func(int) any {
				return map[string]any{"containerPort": int64(50 + r.IntN(3)), "protocol": pick("TCP", "UDP"), "name": pick("p", "q")}
			})
		}
		if r.IntN(2) == 0 {
			c["volumeMounts"] = items(3, func(int) any { return map[string]any{"name": pick("v", "w"), "mountPath": pick("/a", "/b")} })
		}
		return c
	}
	spec := map[string]any{"containers": items(4, container)}
	if r.IntN(2) == 0 {
		spec["initContainers"] = items(3, container)
	}
	if r.IntN(2) == 0 {
		spec["imagePullSecrets"] = items(3, func(int) any { return map[string]any{"name": pick("r", "s")} })
	}
	if r.IntN(2) == 0 {
		spec["volumes"] = items(3, func(int) any {
			return map[string]any{"name": pick("v", "w"), "emptyDir": map[string]any{"medium": pick("", "Memory")}}
		})
	}
	if r.IntN(2) == 0 {
		spec["topologySpreadConstraints"] = items(3, func(int) any {
			return map[string]any{"topologyKey": pick("zone", "host"), "whenUnsatisfiable": pick("DoNotSchedule", "ScheduleAnyway"), "maxSkew": int64(1 + r.IntN(2))}
		})
	}
	md := map[string]any{"name": "p"}
	if r.IntN(2) == 0 {
		md["finalizers"] = items(3, func(int) any { return pick("f", "g") })
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec})
	return string(b)
}

// TestCollapsePlanMaps: the plans leave out the values of maps (additionalProperties), which
// kyaml's walk goes through too; no built-in kind has a keyed list there.
func TestCollapsePlanMaps(t *testing.T) {
	var holdsKeyed func(s *openapi.ResourceSchema, depth int) bool
	holdsKeyed = func(s *openapi.ResourceSchema, depth int) bool {
		if s == nil || s.Schema == nil || depth > 12 {
			return false
		}
		if slices.Contains(s.Schema.Type, "array") {
			return len(mergeKeys(s)) > 0 || holdsKeyed(s.Elements(), depth+1)
		}
		for name := range s.Schema.Properties {
			if holdsKeyed(s.Field(name), depth+1) {
				return true
			}
		}
		return false
	}
	var walk func(s *openapi.ResourceSchema, path string, depth int)
	maps := 0
	walk = func(s *openapi.ResourceSchema, path string, depth int) {
		if s == nil || s.Schema == nil || depth > 12 {
			return
		}
		if ap := s.Schema.AdditionalProperties; ap != nil && ap.Schema != nil && len(s.Schema.Properties) == 0 {
			maps++
			if holdsKeyed(s.Field("any"), 0) {
				t.Errorf("%s: a map whose values hold a keyed list", path)
			}
			return
		}
		if slices.Contains(s.Schema.Type, "array") {
			walk(s.Elements(), path+"[]", depth+1)
			return
		}
		for name := range s.Schema.Properties {
			walk(s.Field(name), path+"."+name, depth+1)
		}
	}
	n := 0
	for gvk := range clientgoscheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		apiVersion := gvk.GroupVersion().String()
		s := openapi.SchemaForResourceType(kyaml.TypeMeta{APIVersion: apiVersion, Kind: gvk.Kind})
		if s == nil {
			continue
		}
		n++
		walk(s, apiVersion+"/"+gvk.Kind, 0)
	}
	if n < 50 || maps < 100 {
		t.Errorf("only %d kinds with a schema, %d maps", n, maps)
	}
}
