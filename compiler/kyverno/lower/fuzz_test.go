package lower

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	celgo "github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	gojmespath "github.com/kyverno/go-jmespath"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
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
		"to_lower(request.kind.kind)", "to_upper('é')", "length(element.name || '')", "split(element.image, ':')[-1]",
		"join('/', split(request.object.metadata.name, '-'))", "replace_all(element.name, '-', '_')",
		"replace(element.name, '-', '', `1`)", "trim(request.object.metadata.annotations.x || '', ' /')",
		"trim_prefix(element.image, 'docker.io/')", "truncate(request.object.metadata.name, `63`)",
		"starts_with(element.image, 'a') && ends_with(element.image, 'b')", "contains(element.args, '--x')",
		"compare(element.name, 'x')", "to_boolean(request.object.metadata.labels.on || 'false')",
		"regex_match('^a+$', element.name)", "pattern_match('a*', element.name)", "not_null(element.x, elementIndex)",
		"to_array(element.name)[0]", "lookup(request.object.metadata.labels, 'app')", "lookup(request.object.spec.containers, `0`).name",
		"regex_replace_all('a', element.name, 'b')", "add(`1`, `2`)", "to_string(length(request.object.spec.containers))",
		"serviceAccountName", "serviceAccountNamespace || serviceAccountName", "serviceAccountNamespace == 'ci'",
		"length(serviceAccountNamespace)", "to_upper(serviceAccountName)", "images.containers.a.tag",
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
		"metadata: {annotations: {+(safe): 'true'}}, spec: {volumes: [{<(emptyDir): {}}]}",
		"spec: {volumes: [{name: x, emptyDir: {}}, {(name): c, <(configMap): {}}]}",
		"spec: {containers: [{name: '*', <(image): 'corp/*'}], imagePullSecrets: [{name: r}]}",
		"metadata: {labels: {$patch: replace, a: b}}, spec: {securityContext: {$patch: delete}}",
		"spec: {containers: [{name: a, $patch: delete}, {name: b, $patch: replace}, {name: c, resources: {$patch: delete}}]}",
		"spec: {initContainers: [{name: a, $patch: delete}], containers: [{$patch: replace}]}",
		"metadata: {annotations: {a: null}}, spec: {affinity: {nodeAffinity: {}}}",
		"metadata: {annotations: {+(a): b}}, spec: {volumes: [{hostPath: {<(path): '*'}}]}",
		"spec: {volumes: [{(name): 'data*', csi: {volumeAttributes: {<(tier): fast}}, emptyDir: {medium: Memory}}]}",
		"spec: {containers: [{(name): '*', resources: {}}]}", // an anchored item that patches nothing
	} {
		f.Add(s)
	}
	env := cel.NewEnv(version.MajorMinor(1, 37))
	f.Fuzz(func(t *testing.T, s string) {
		var patch map[string]any
		if err := yaml.Unmarshal([]byte(s), &patch); err != nil || patch == nil {
			return
		}
		cases, _, err := SubstituteCases(patch, Scope{}, "")
		if err != nil {
			return
		}
		for _, c := range cases {
			cond, ops, err := StrategicMerge("v1", "Pod", c.Patch.(map[string]any))
			if err != nil {
				if _, ok := err.(*FieldError); !ok {
					t.Fatalf("%q: a refusal without a field: %v", s, err)
				}
				return
			}
			e := cel.Guarded(cond, ops)
			if cel.IsEmpty(e) {
				continue
			}
			if _, err := env.Print(e); err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			if err := env.CheckJSONPatchExpr(e); err != nil {
				t.Fatalf("%q lowers to operations the API server rejects: %v", s, err)
			}
		}
	})
}

// FuzzVariableSemantics: a variable below request.object that lowers, evaluated by cel-go in the
// API server's CEL environment, gives what Kyverno's JMESPath (github.com/kyverno/go-jmespath,
// with its standard functions) gives on the same objects, errors included: where JMESPath fails
// (a missing field at the top, a function given the wrong type), the CEL fails. The objects hold
// missing fields, empty strings, nulls, lists and numbers; their schema is unknown to the
// lowering, so every step is tested at run time. Kyverno's own functions (to_upper, split, ...)
// are not in the library: variables calling them are skipped (the golden cases check them).
func FuzzVariableSemantics(f *testing.F) {
	for _, s := range []string{
		"request.object.metadata.labels.app", "request.object.metadata.labels.app || 'none'",
		"request.object.spec.containers[0].name", "request.object.spec.containers[-1].image || `null`",
		"request.object.spec.containers.name", "request.object.metadata.labels.a && request.object.metadata.labels.b",
		"!(request.object.metadata.labels.a)", "request.object.metadata.labels.a == ''",
		"request.object.metadata | labels.app", "request.object.spec.n || 'x'", "request.object.spec.empty || `[1]`",
		"length(request.object.metadata.labels)", "length(request.object.spec.n)", "to_string(request.object.spec.flag)",
		"not_null(request.object.spec.nothing, request.object.metadata.name)", "to_array(request.object.metadata.name)",
		"join('-', request.object.spec.words)", "contains(request.object.spec.words, 'b')", "starts_with(request.object.metadata.name, 'we')",
		"request.object.spec.nothing.deeper", "request.object.spec.nothing || request.object.spec.missing", "`{\"a\": 1}` || 'x'",
		"request.object.spec.containers[*].name", "request.object.spec.containers[].image", "request.object.spec.nested[]",
		"request.object.spec.nested[*]", "request.object.spec.nested[][0]", "request.object.spec.containers[*].ports[0].port",
		"length(request.object.spec.containers[*].name)", "request.object.spec.missing[*].name", "request.object.missing.containers[].name",
		"join(',', request.object.spec.words[*])", "request.object.spec[*]", "request.object.spec.n[]",
		"request.object.spec.containers[?name=='a'].image", "request.object.spec.containers[?image]", "request.object.spec.words[?@ != 'a']",
		"request.object.spec.containers[?!(ports)].name", "request.object.spec.nested[?@]", "request.object.spec.containers[?ports[0].port].name",
		"request.object.spec.containers[*].ports[*].port", "request.object.spec.containers[].ports[*]", "request.object.spec.nested[*][*]",
		"request.object.spec.containers[*].ports[?port].port", "request.object.spec.containers[?ports].ports[].port", "request.object.spec.nested[*][0][*]",
		"type(request.object.metadata.labels)", "type(request.object.spec.words || `null`)", "type(length(request.object.spec.words))",
		"type(request.object.spec.flag)", "type(request.object.spec.nothing)", "type(request.object.spec.containers[*].name)",
		"type(request.object.metadata.labels.a == 'x')", "type(request.object.spec.nested[?@])",
		"sort(split(request.object.metadata.name, '-'))", "reverse(request.object.spec.words)", "reverse(request.object.metadata.name)",
		"reverse(split(request.object.metadata.name, ''))[0]", "sort(request.object.spec.words)", "reverse(request.object.spec.n)",
		"reverse(request.object.spec.containers)[0].name", "join('', sort(split(request.object.metadata.name, '')))",
		"merge(request.object.metadata.labels || `{}`, `{\"a\": \"y\", \"z\": 1}`)", "merge(`{\"a\": 1}`, request.object.metadata.labels || `{}`).a",
		"merge(`{\"b\": 2}`)", "object_from_lists(split(request.object.metadata.name, '-'), request.object.spec.words)",
		"object_from_lists(split(request.object.metadata.name, ''), request.object.spec.containers)", "object_from_lists(split('a-b-a', '-'), split('1-2-3', '-'))", "merge(`{\"a\": 1, \"b\": 2}`, `{\"b\": 3}`, `{\"c\": 4}`)",
	} {
		f.Add(s)
	}
	docs := []string{
		`{"metadata": {"name": "web-1", "labels": {"app": "shop", "a": "x", "b": ""}}, "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b"}], "n": 3, "flag": true, "words": ["a", "b"], "empty": [], "nothing": null}}`,
		`{"metadata": {"name": "", "labels": {}}, "spec": {"containers": [], "n": 1.5, "flag": false, "words": [], "empty": {}}}`,
		`{"metadata": {"name": "x"}, "spec": {"containers": "not a list", "words": ["a", 1]}}`,
		`{"metadata": {"name": "y"}, "spec": {"containers": [null, {"name": "a", "ports": [{"port": 80}]}, {"ports": []}, "s", [1]], "nested": [[1, 2], 3, [4, [5]], null, [], {"a": [6]}], "words": ["a", null, "b"]}}`,
	}
	env := apiServerCEL(f, "object")
	printer := cel.NewEnv(version.MajorMinor(1, 37))
	f.Fuzz(func(t *testing.T, s string) {
		s = strings.TrimSpace(s)
		if !utf8.ValidString(s) {
			return // policies are YAML or JSON: valid UTF-8
		}
		v, err := variable(s, Scope{Features: cel.Features{Lists: true, TwoVar: true}}) // the environment is 1.36's
		if err != nil {
			return
		}
		text, err := printer.Print(v.e)
		if err != nil {
			t.Fatalf("{{%s}}: %v", s, err)
		}
		ast, iss := env.Compile(text)
		if iss.Err() != nil {
			if strings.Contains(iss.Err().Error(), "undeclared reference") {
				return // request.operation and the like: not in this environment
			}
			t.Fatalf("{{%s}} lowers to %s, which does not compile: %v", s, text, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatalf("{{%s}}: %v", s, err)
		}
		for _, d := range docs {
			var jp, obj any
			_ = json.Unmarshal([]byte(`{"request": {"object": `+d+`}}`), &jp) // numbers as float64, as Kyverno decodes the request
			want, jerr := gojmespath.Search(s, jp)
			if jerr != nil && strings.Contains(jerr.Error(), "unknown function") {
				return // one of Kyverno's own functions
			}
			dec := json.NewDecoder(strings.NewReader(d))
			dec.UseNumber()
			_ = dec.Decode(&obj)
			out, _, cerr := prg.Eval(map[string]any{"object": celValue(obj)})
			if (jerr != nil) != (cerr != nil) {
				t.Fatalf("{{%s}} on %s: Kyverno's JMESPath gives %v (error %v), the CEL %s gives %v (error %v)", s, d, want, jerr, text, out, cerr)
			}
			if jerr != nil {
				continue
			}
			got, err := json.Marshal(nativeOf(out))
			if err != nil {
				t.Fatal(err)
			}
			w, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(w) {
				t.Fatalf("{{%s}} on %s: Kyverno's JMESPath gives %s, the CEL %s gives %s", s, d, w, text, got)
			}
		}
	})
}

// apiServerCEL is the API server's CEL environment (1.36's, which the lowerings target by
// default) with the variable name of any type.
func apiServerCEL(tb testing.TB, name string) *celgo.Env {
	tb.Helper()
	base, err := environment.MustBaseEnvSet(version.MajorMinor(1, 36)).Env(environment.NewExpressions)
	if err != nil {
		tb.Fatal(err)
	}
	env, err := base.Extend(celgo.Variable(name, celgo.DynType))
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

// celValue is a decoded JSON value as the API server gives it to CEL: integers as int64.
func celValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = celValue(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = celValue(e)
		}
		return out
	}
	return v
}

// nativeOf is a CEL value as a Go JSON value.
func nativeOf(v ref.Val) any {
	switch x := v.(type) {
	case celtypes.Null:
		return nil
	case traits.Mapper:
		out := map[string]any{}
		it := x.Iterator()
		for it.HasNext() == celtypes.True {
			k := it.Next()
			out[fmt.Sprint(k.Value())] = nativeOf(x.Get(k))
		}
		return out
	case traits.Lister:
		var out []any
		it := x.Iterator()
		for it.HasNext() == celtypes.True {
			out = append(out, nativeOf(it.Next()))
		}
		if out == nil {
			out = []any{}
		}
		return out
	}
	return v.Value()
}
