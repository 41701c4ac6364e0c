// Command genmutators writes generated Gatekeeper mutators (package bench's generators) as one
// YAML stream on standard output, for trying mapc or Gatekeeper on large sets without mapc:
//
//	go run ./bench/cmd/genmutators -n 200 -seed 1 > mutators.yaml
//
// -mix realistic (the default) is bench.GenerateRealistic, the families a platform team runs;
// -mix independent is bench.Generate, nearly independent mutators (n, no seed); -mix merges
// is bench.GenerateMerges, merges into the tolerations of Pods.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mapc-dev/mapc/bench"
)

func main() {
	n := flag.Int("n", 100, "number of mutators")
	seed := flag.Int64("seed", 1, "seed of the realistic mix")
	mix := flag.String("mix", "realistic", "realistic, independent or merges")
	flag.Parse()
	if flag.NArg() > 0 || *n < 0 {
		fmt.Fprintln(os.Stderr, "usage: genmutators [-n N] [-seed S] [-mix realistic|independent|merges] > mutators.yaml")
		os.Exit(2)
	}
	var out []byte
	switch *mix {
	case "realistic":
		out = bench.GenerateRealistic(*n, *seed)
	case "independent":
		out = bench.Generate(*n)
	case "merges":
		out = bench.GenerateMerges(*n, true)
	default:
		fmt.Fprintf(os.Stderr, "genmutators: -mix %s: want realistic, independent or merges\n", *mix)
		os.Exit(2)
	}
	if _, err := os.Stdout.Write(out); err != nil {
		fmt.Fprintln(os.Stderr, "genmutators:", err)
		os.Exit(1)
	}
}
