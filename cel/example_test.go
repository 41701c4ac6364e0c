package cel_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/mapc-dev/mapc/cel"
)

// User strings reach CEL only as literals: a label value that looks like code stays a string.
func ExampleStr() {
	env := cel.NewEnv(version.MajorMinor(1, 37))
	e := cel.Bin("==", cel.Index(cel.Field(cel.Field(cel.Ident("object"), "metadata"), "labels"), cel.Str("team")), cel.Str(`"}) || true`))
	s, _ := env.Print(e)
	fmt.Println(s)
	fmt.Println(env.CheckCondition(s))
	// Output:
	// object.metadata.labels["team"] == "\"}) || true"
	// <nil>
}
