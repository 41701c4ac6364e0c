package cel

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/util/version"
)

// evalVal parses and evaluates a printed expression with no variables.
func evalVal(t testing.TB, env *Env, e Expr) ref.Val {
	t.Helper()
	ce, err := env.celEnv()
	if err != nil {
		t.Fatal(err)
	}
	s, err := env.Print(e)
	if err != nil {
		t.Fatalf("print: %v", err)
	}
	ast, iss := ce.Compile(s)
	if iss != nil && iss.Err() != nil {
		t.Fatalf("compile %s: %v", s, iss.Err())
	}
	prg, err := ce.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(celgo.NoVars())
	if err != nil {
		t.Fatalf("eval %s: %v", s, err)
	}
	return out
}

func evalString(t testing.TB, env *Env, e Expr) any {
	t.Helper()
	return evalVal(t, env, e).Value()
}

var literalCases = []string{"", "a", `"}) || true`, "'", `\`, "\x00", "\n\r\t", "é", "💥", "\u2028", "${x}", "a\"b'c", "\x7f", "\ufeff"}

func TestStrRoundTrips(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 32))
	for _, s := range literalCases {
		if got := evalString(t, env, Str(s)); got != s {
			t.Errorf("Str(%q) evaluates to %q", s, got)
		}
		// A user string used as a key cannot change the expression around it.
		e := Bin("+", Index(Map([]Expr{Str(s)}, []Expr{Str("v")}), Str(s)), Str("!"))
		if got := evalString(t, env, e); got != "v!" {
			t.Errorf("key %q: got %v", s, got)
		}
	}
}

func FuzzStr(f *testing.F) {
	for _, s := range literalCases {
		f.Add(s)
	}
	env := NewEnv(version.MajorMinor(1, 37))
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip()
		}
		if got := evalString(t, env, Str(s)); got != s {
			t.Fatalf("Str(%q) evaluates to %q", s, got)
		}
	})
}

func TestValueLiterals(t *testing.T) {
	env := NewEnv(version.MajorMinor(1, 37))
	for _, v := range []any{nil, true, int64(-3), 1.5, "x", []any{"a", int64(1), nil}, map[string]any{"a": int64(1), "b": []any{"x"}}} {
		e, err := Value(v)
		if err != nil {
			t.Fatal(err)
		}
		got := evalVal(t, env, e)
		pv, err := got.ConvertToNative(reflect.TypeOf(&structpb.Value{}))
		if err != nil {
			t.Fatal(err)
		}
		gj, _ := protojson.Marshal(pv.(*structpb.Value))
		var g, w any
		_ = json.Unmarshal(gj, &g)
		wj, _ := json.Marshal(v)
		_ = json.Unmarshal(wj, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("Value(%v) evaluates to %s", v, gj)
		}
	}
}
