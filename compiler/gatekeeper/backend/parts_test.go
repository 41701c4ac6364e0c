package backend

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
)

// TestJSONPatchOfPartsPieces: parts are checked in pieces, and a part whose piece does not
// compile alone is checked whole: accepted where the API server accepts it whole, refused
// where it refuses it.
func TestJSONPatchOfPartsPieces(t *testing.T) {
	env := cel.NewEnv(version.MajorMinor(1, 36))
	checker, err := env.WithVariables([]cel.Variable{{Name: "b", Expression: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	op := func(path string) cel.Expr {
		return cel.List(cel.Object("JSONPatch", []string{"op", "path", "value"}, []cel.Expr{cel.Str("add"), cel.Str(path), cel.Int(1)}))
	}
	pr := printer{env}
	good := cel.Bin("+", cel.Cond(cel.VarRef("b"), op("/a"), cel.List()), cel.Bin("+", op("/b"), op("/c")))
	checked := map[string]bool{}
	if _, err := pr.jsonPatchOfParts(good, []cel.Expr{good}, checked, checker.ListPieces, checker.CheckJSONPatchExpr); err != nil {
		t.Fatalf("%s: %v", cel.String(good), err)
	}
	if len(checked) != 1 || !checked[cel.Shape(op("/a"))] {
		t.Errorf("checked = %v, want one operation's shape", checked)
	}
	bad := cel.Bin("+", op("/a"), cel.List(cel.Str("x")))
	if _, err := pr.jsonPatchOfParts(bad, []cel.Expr{good, bad}, checked, checker.ListPieces, checker.CheckJSONPatchExpr); err == nil || !strings.Contains(err.Error(), "rejects") {
		t.Errorf("%s: got %v, want the API server's refusal", cel.String(bad), err)
	}
	// A piece that does not compile alone: the part is checked whole, and its outcome decides.
	odd := cel.List(cel.Ident("odd"))
	for _, wholeOK := range []bool{true, false} {
		part := cel.Bin("+", op("/a"), odd)
		var calls []string
		var mu sync.Mutex
		check := func(x cel.Expr) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, cel.String(x))
			if cel.String(x) == cel.String(odd) || (!wholeOK && cel.String(x) == cel.String(part)) {
				return fmt.Errorf("refused")
			}
			return nil
		}
		checked := map[string]bool{}
		_, err := pr.jsonPatchOfParts(part, []cel.Expr{part}, checked, checker.ListPieces, check)
		if (err == nil) != wholeOK || len(calls) != 3 || calls[2] != cel.String(part) || checked[cel.Shape(odd)] {
			t.Errorf("whole compiles %v: got %v after checking %q (checked %v)", wholeOK, err, calls, checked)
		}
	}
}
