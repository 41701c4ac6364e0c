package compiler_test

import (
	"fmt"

	"github.com/mapc-dev/mapc/compiler"
	"github.com/mapc-dev/mapc/compiler/source"
	"github.com/mapc-dev/mapc/emit"
)

func ExampleCompile() {
	docs, _ := source.Parse("mutators.yaml", []byte(`apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: dns
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.dnsPolicy
  parameters:
    assign:
      value: Default
`))
	out := compiler.Compile(docs, compiler.Options{Layout: compiler.LayoutPerMutator})
	for _, p := range out.Policies {
		fmt.Println(p.Policy.Name, "→", p.Policy.Spec.Mutations[0].JSONPatch.Expression)
	}
	stream, _ := emit.Stream(out.Policies, "admissionregistration.k8s.io/v1", emit.YAML)
	fmt.Println(len(stream) > 0, len(out.Problems))
	// Output:
	// gatekeeper-assign-dns → (object[?"spec"].orValue(null) != null) ? [JSONPatch{op: "add", path: "/spec/dnsPolicy", value: "Default"}] : [JSONPatch{op: "add", path: "/spec", value: {"dnsPolicy": "Default"}}]
	// true 0
}
