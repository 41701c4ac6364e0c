package lower

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
)

// TestVariable lowers variables for Pods, in a foreach over their containers: each either
// lowers to an expression the API server's CEL compiles, with the types Kyverno's value can have,
// or is refused with a message naming what is not supported. (What the expressions compute is
// checked against Kyverno's engine by the golden cases variables-*.)
func TestVariable(t *testing.T) {
	pod := ObjectShape(Kind{Version: "v1", Kind: "Pod"})
	sc := Scope{Elements: []cel.Expr{cel.Ident("e")}, Indexes: []cel.Expr{cel.Ident("i")}, Object: pod,
		ElementShapes: []Shape{pod.field("spec").field("containers").item()}}
	env := cel.NewEnv(version.MajorMinor(1, 37))
	// Read where the order of a list's items changes nothing (a set operator's key or value),
	// with the images policy variable declared.
	free := sc
	free.orderFree, free.Features = true, env.Features()
	images, err := env.Print(Images())
	if err != nil {
		t.Fatal(err)
	}
	ck, err := env.WithVariables([]cel.Variable{{Name: ImagesVariable, Expression: images}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v       string
		want    string // the printed expression, or "" to only check it compiles
		types   types
		missing bool
		err     string // a refusal's message contains this
		free    bool   // read where order changes nothing (Scope.orderFree)
	}{
		// Paths through objects the schema knows stay plain indexing.
		{v: "request.object.metadata.labels.app", want: `object["metadata"]["labels"]["app"]`, types: tStr, missing: true},
		{v: `request.object.metadata.labels."app.kubernetes.io/name"`, want: `object["metadata"]["labels"]["app.kubernetes.io/name"]`, types: tStr, missing: true},
		{v: "element.name", want: `e["name"]`, types: tStr, missing: true},
		{v: "elementIndex", want: "i", types: tInt},
		{v: "request.operation", want: "request.operation", types: tStr},
		{v: "request.namespace", want: "request.namespace", types: tStr, missing: true},
		// An index is null past the end; the fields of null are null.
		{v: "request.object.spec.containers[0].image", types: tStr | tNull, missing: true},
		{v: "request.object.spec.containers[-1]", types: tMap | tNull, missing: true},
		// A field of a list is null.
		{v: "request.object.spec.containers.name", types: tNull, missing: true},
		{v: "request.oldObject.metadata.name", types: tStr | tNull, missing: true},
		{v: "request.userInfo.username", want: "request.userInfo.username", types: tStr, missing: true},
		{v: "request.kind.kind", want: "request.kind.kind", types: tStr},
		// Kyverno's cut of the user name: always a string.
		{v: "serviceAccountName", types: tStr},
		{v: "serviceAccountNamespace || 'none'", types: tStr},
		{v: "serviceAccountNamespace == 'kube-system'", types: tBool},
		{v: "serviceAccountNamespace != `null`", types: tBool},
		{v: "length(serviceAccountName)", types: tInt},
		{v: "length(serviceAccountNamespace)", err: "not in functions"},
		{v: "serviceAccountNamespace == request.namespace", err: "compared with a literal without U+FFFD"},
		{v: "serviceAccountNamespace == '\ufffd'", err: "compared with a literal without U+FFFD"},
		// Literals and operators.
		{v: "'raw'", want: `"raw"`, types: tStr},
		{v: "`{\"a\": [1, \"b\"]}`", want: `{"a": dyn([dyn(1), dyn("b")])}`, types: tMap},
		{v: "`1.5`", want: "1.5", types: tDouble},
		{v: "request.object.metadata.labels.app || 'none'", types: tStr},
		{v: "request.object.metadata.labels.app || `null`", types: tStr | tNull},
		{v: "request.object.spec.containers[3] || `[]`", types: tMap | tList},
		{v: "request.object.metadata.labels.a && request.object.metadata.labels.b", types: tStr | tNull, missing: true},
		{v: "!(request.object.metadata.labels.a)", types: tBool},
		{v: "request.object.metadata.labels.a == 'x'", types: tBool},
		{v: "request.object.metadata.labels.a != `null`", types: tBool},
		{v: "request.object.metadata | labels.app", types: tStr | tNull},
		{v: "request.namespace || request.name || 'none'", types: tStr},
		// Projections: null items left out; what is not a list gives null.
		{v: "request.object.spec.containers[*].name", types: tList | tNull, missing: true},
		{v: "request.object.spec.containers[].image", types: tList | tNull},
		{v: "request.object.spec.containers[*]", types: tList | tNull, missing: true},
		{v: "request.object.spec.containers[*].ports[0].containerPort", types: tList | tNull, missing: true},
		{v: "length(request.object.spec.containers[*].name)", types: tInt},
		// Refusals.
		{v: "request.object.spec.containers[*].ports[*].name", types: tList | tNull, missing: true},
		{v: "request.object.spec.nested[*][*]", types: tList | tNull, missing: true},
		{v: "request.object.spec.containers[*].ports[]", err: "projections ([*], *) are not supported yet in what a projection"},
		{v: "request.object.spec.nested[*][0][*]", err: "Identity is not supported yet in what a projection"},
		{v: "to_array(request.object.spec.containers)[*].name", err: "a function call is not supported yet in what a projection"},
		{v: "request.object.metadata.labels.*", err: "a projection of an object's values (*) follows Go's random map order"},
		{v: "request.object.spec.containers[?name=='a']", types: tList | tNull},
		{v: "request.object.spec.containers[?name=='a' && !(image)].name", types: tList | tNull},
		{v: "request.object.spec.containers[?starts_with(image, 'nginx')].ports[0]", types: tList | tNull},
		{v: "request.object.spec.containers[?ports[*].name].name", types: tList | tNull},
		{v: "request.object.spec.containers[?name=='a'].ports[*]", types: tList | tNull},
		{v: "request.object.spec.containers[0:1]", err: "are not supported yet"},
		{v: "request.object.spec.replicas > `1`", err: "the comparisons <, <=, > and >= are not supported"},
		{v: "request.object.spec.replicas == `1`", err: "== and != are supported when one side is a string"},
		{v: "request.uid", err: "request.uid is not supported yet"},
		{v: "images.containers", err: "a list of images as a whole is not supported as a value"},
		{v: "element1.name", err: "outside a foreach loop of that depth"},
		{v: "@", err: "{{@}}"},
		{v: "- request.object.metadata.name", err: "shallow substitution"},
		{v: "request.object.metadata.name ||", err: "not JMESPath Kyverno can read"},
		{v: "!request.object.metadata.name", err: "request is not a value"},
		{v: "request.userInfo", err: "request.userInfo is not supported as a value"},
		{v: "request.userInfo.extra", err: "request.userInfo.extra is not supported yet"},
		{v: "no_such_function(request.object.metadata.name)", err: "no_such_function is not a function of Kyverno's JMESPath"},
		// Functions.
		{v: "to_string(request.object.spec.priority || `false`)", types: tStr},
		{v: "to_string(request.object.metadata.labels)", err: "to_string of a value that can be null, an object"},
		{v: "length(request.object.metadata.name)", want: `size(dyn(object[?"metadata"][?"name"].orValue(null)))`, types: tInt},
		{v: "to_upper('straße')", want: `"STRAßE"`, types: tStr}, // Go's simple case mapping
		{v: "to_lower(request.kind.kind)", want: `dyn(request.kind.kind).lowerAscii()`, types: tStr},
		{v: "to_lower(request.object.metadata.labels.a || request.operation)", err: "to_lower of a value that can hold letters outside ASCII"},
		{v: "to_lower('A' || request.operation)", types: tStr},
		{v: "to_upper(request.object.metadata.name)", err: "to_upper of a value that can hold letters outside ASCII is not supported"},
		{v: "split(request.object.metadata.name, '-')[0]", types: tStr | tNull},
		{v: "join(',', split(element.image, '/'))", types: tStr},
		{v: "replace_all(element.name, '-', '_')", types: tStr},
		{v: "replace(element.name, '-', '_', `2`)", types: tStr},
		{v: "replace(element.name, '-', '_', elementIndex)", err: "replace's count must be a number literal"},
		{v: "trim(element.name, ' -')", types: tStr},
		{v: "trim(element.name, element.image)", err: "trim's cutset must be a string literal"},
		{v: "trim_prefix(element.image, 'docker.io/')", types: tStr},
		{v: "truncate(request.object.metadata.name, `63`)", types: tStr},
		{v: "truncate(request.object.metadata.name, length('abc'))", err: "truncate's length must be a number literal"},
		{v: "starts_with(element.image, 'nginx') && ends_with(element.image, ':latest')", types: tBool},
		{v: "contains(element.args, '--debug')", types: tBool},
		{v: "contains(element.ports, `80`)", err: "contains is supported when what it looks for is a string"},
		{v: "compare(element.name, 'b')", types: tInt},
		{v: "to_boolean(request.object.metadata.labels.debug || 'false')", types: tBool},
		{v: "regex_match('^nginx', element.image)", types: tBool},
		{v: "regex_match('(', element.image)", err: "does not compile"},
		{v: "regex_match('^1', request.object.spec.priority)", err: "regex_match of a value that can be null, an integer is not supported"},
		{v: "pattern_match('nginx:*', element.image)", types: tBool},
		{v: "not_null(request.object.metadata.labels.a, element.name)", types: tStr | tNull},
		{v: "not_null(request.object.metadata.labels.a, 'none')", types: tStr},
		{v: "to_array(element.name)", types: tList},
		{v: "lookup(request.object.metadata.labels, 'app')", types: tStr | tNull},
		{v: "lookup(request.object.spec.containers, `0`).name", types: tStr | tNull, missing: true},
		{v: "lookup(request.object.spec.containers, `0.5`)", err: "is not an integer"},
		{v: "equal_fold(element.name, 'A')", err: "the JMESPath function equal_fold is not supported: Go's Unicode case folding"},
		{v: "add(elementIndex, `1`)", err: "the JMESPath function add is not supported: the object's numbers"},
		{v: "time_now_utc()", err: "the JMESPath function time_now_utc is not supported: its result depends on when the rule runs"},
		{v: "to_string()", err: "to_string takes 1 argument, not 0"},
		// Projections of an object's values (Kyverno's order is Go's random map order).
		{v: "images.containers.*.registry", types: tList | tNull, free: true},
		{v: "images.initContainers.*.tag || `[]`", types: tList, free: true},
		{v: "images.containers.*", err: "Identity is not supported yet after images.<list>.*", free: true},
		{v: "images.containers.*.size", err: "it finds no size", free: true},
		{v: "request.object.metadata.labels.*", err: "supported only over images.<list> yet", free: true},
		{v: "length(images.containers.*.tag)", err: "follows Go's random map order", free: true},
	} {
		t.Run(tc.v, func(t *testing.T) {
			vsc := sc
			if tc.free {
				vsc = free
			}
			v, err := variable(tc.v, vsc)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.t != tc.types || v.missing != tc.missing {
				t.Errorf("types %s (missing %v), want %s (missing %v)", typeNames(v.t), v.missing, typeNames(tc.types), tc.missing)
			}
			if tc.want != "" {
				if got, err := env.Print(v.e); err != nil || got != tc.want {
					t.Errorf("got %s (%v), want %s", got, err, tc.want)
				}
			}
			for _, e := range []cel.Expr{v.e, v.soft} {
				if e == nil {
					continue
				}
				c := cel.Bin("==", cel.Call("dyn", e), cel.Null())
				c = cel.Let("e", cel.Index(cel.Index(object, cel.Str("spec")), cel.Str("containers")), cel.Let("i", cel.Int(0), c))
				// As a mutation's guard: the checker declares the policy's variables.
				if err := ck.CheckExpr(cel.Guarded(c, cel.List(cel.PatchOp("add", cel.Pointer{}.Child("metadata").Child("labels").Child("x"), cel.Str("y")))), false, false); err != nil {
					t.Errorf("the API server rejects %s: %v", cel.String(e), err)
				}
			}
		})
	}
}
