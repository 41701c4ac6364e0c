package lower

import (
	"testing"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/compiler/gatekeeper/ir"
)

// TestRewriteImageMatchesString: the CEL expression of every combination of parts an
// AssignImage may set computes what RewriteImageString computes (which the differential tests
// compare with Gatekeeper's engine), on references with and without domain, port, tag and digest.
func TestRewriteImageMatchesString(t *testing.T) {
	env, err := celgo.NewEnv(celgo.Variable("img", celgo.StringType), ext.Strings())
	if err != nil {
		t.Fatal(err)
	}
	images := []string{"", "nginx", "nginx:1.25", "nginx@sha256:abc", "library/nginx", "docker.io/library/nginx:1",
		"localhost/app", "localhost:5000/app:v1", "my.reg:443/a/b@sha256:x", "a:b/c", "a.b/c:d@e", "x/y:z:w", "/lead", "dom.ain/"}
	for mask := 1; mask < 8; mask++ {
		op := ir.RewriteImage{}
		if mask&1 != 0 {
			op.Domain = "reg.example.com"
		}
		if mask&2 != 0 {
			op.Path = "team/app"
		}
		if mask&4 != 0 {
			op.Tag = ":v2"
		}
		src := cel.String(RewriteImage(cel.Ident("img"), op))
		ast, iss := env.Compile(src)
		if iss.Err() != nil {
			t.Fatalf("%+v: %s: %v", op, src, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range images {
			out, _, err := prg.Eval(map[string]any{"img": img})
			if err != nil {
				t.Fatalf("%+v on %q: %v", op, img, err)
			}
			if got, want := out.Value(), RewriteImageString(img, op); got != want {
				t.Errorf("%+v on %q: CEL gives %q, want %q", op, img, got, want)
			}
		}
	}
}
