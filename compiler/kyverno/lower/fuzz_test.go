package lower

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/mapc-dev/mapc/cel"
)

// FuzzVariable: Kyverno's {{ }} variables, read as JMESPath, either lower to an expression the
// API server's CEL compiles (with a missing value read as null too, as Kyverno's operators read
// it) or are refused; nothing panics. Each is lowered for objects of unknown schema and for Pods.
func FuzzVariable(f *testing.F) {
	for _, s := range []string{
		"request.object.metadata.name", `request.object.metadata.labels."app.kubernetes.io/name"`,
		"request.object.spec.containers[0].image", "element.name", "elementIndex", "element0.x",
		"request.operation", "to_upper(request.object.metadata.name)", "request.object.x || ''",
		`request."object"`, "@", "request.", "[0]", `"a\"b"`,
		"request.object.metadata.labels.app || 'none'", "`{\"a\": [1, \"b\"]}` || `null`",
		"request.object.metadata.labels.a && !(request.object.metadata.labels.b)",
		"request.object.metadata.labels.a == 'x' || request.object.metadata.labels.b != `true`",
		"request.object.spec.containers[-1].ports[0].containerPort", "request.object.metadata | labels.app",
		"request.oldObject.metadata.name || request.namespace || request.name", "request.userInfo.groups[0] || 'x'",
		"element.image && elementIndex", "request.object.spec.containers.name", "'it\\'s' || `\"json\"`",
		"request.object.metadata.labels.app | @", "to_string(request.object.metadata.labels)",
	} {
		f.Add(s)
	}
	env := cel.NewEnv(version.MajorMinor(1, 37))
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	scopes := []Scope{
		{Elements: []cel.Expr{cel.Ident("object")}, Indexes: []cel.Expr{cel.Int(0)}},
		{Elements: []cel.Expr{cel.Ident("object")}, Indexes: []cel.Expr{cel.Int(0)}, Object: pod, ElementShapes: []Shape{pod}},
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, sc := range scopes {
			v, err := variable(strings.TrimSpace(s), sc)
			if err != nil {
				continue
			}
			for _, e := range []cel.Expr{v.e, v.soft} {
				if e == nil {
					continue
				}
				c := cel.Bin("==", cel.Call("dyn", e), cel.Null())
				if _, err := env.Print(c); err != nil {
					t.Fatalf("{{%s}}: %v", s, err)
				}
				if err := env.CheckConditionExpr(c); err != nil {
					t.Fatalf("{{%s}} lowers to an expression the API server rejects: %v", s, err)
				}
			}
		}
	})
}

// FuzzStrategicMerge: a patchStrategicMerge (YAML) for Pods either lowers to JSONPatch
// operations the API server's CEL compiles or is refused with a field; nothing panics.
func FuzzStrategicMerge(f *testing.F) {
	for _, s := range []string{
		"metadata: {labels: {a: b, c: null}, annotations: {+(x): y}}",
		"spec: {containers: [{name: a, image: b}, {name: c, env: [{name: X, value: '1'}]}]}",
		"spec: {containers: [{(image): '*:latest', imagePullPolicy: Always}]}",
		"metadata: {labels: {(app): 'web*', tier: t}}",
		"spec: {volumes: [{name: v, emptyDir: {}}], tolerations: []}",
		"spec: {containers: [{name: a, args: [x]}], $patch: replace}",
		"spec: {<(hostNetwork): true}",
		"spec: {containers: [{(name): '*', securityContext: {runAsNonRoot: true}}]}",
		"metadata: {labels: {a: '{{request.object.metadata.name}}'}}",
	} {
		f.Add(s)
	}
	env := cel.NewEnv(version.MajorMinor(1, 37))
	f.Fuzz(func(t *testing.T, s string) {
		var patch map[string]any
		if err := yaml.Unmarshal([]byte(s), &patch); err != nil || patch == nil {
			return
		}
		sub, _, err := Substitute(patch, Scope{}, "")
		if err != nil {
			return
		}
		cond, ops, err := StrategicMerge("v1", "Pod", sub.(map[string]any))
		if err != nil {
			if _, ok := err.(*FieldError); !ok {
				t.Fatalf("%q: a refusal without a field: %v", s, err)
			}
			return
		}
		e := cel.Guarded(cond, ops)
		if cel.IsEmpty(e) {
			return
		}
		if _, err := env.Print(e); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if err := env.CheckJSONPatchExpr(e); err != nil {
			t.Fatalf("%q lowers to operations the API server rejects: %v", s, err)
		}
	})
}
