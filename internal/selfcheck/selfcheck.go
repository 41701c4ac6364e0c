// Package selfcheck is the TestMain of the packages whose tests compile policies: it silences
// the API server code's logging (klog), which the in-process evaluator would otherwise print for
// every policy set it loads, and turns on cel.SelfCheck, so that every expression those tests
// compile is also printed by way of cel-go's parser and every fused expression type-checked whole;
// after the tests it removes the kyverno-engine program they built (internal/kyvernobin).
// Only tests may import it.
package selfcheck

import (
	"flag"
	"os"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/internal/kyvernobin"
	"github.com/mapc-dev/mapc/internal/quiet"
)

// Main runs the tests of m with those checks on.
func Main(m *testing.M) {
	quiet.Klog()
	cel.SelfCheck(true)
	flag.Parse()
	code := m.Run()
	kyvernobin.Cleanup()
	os.Exit(code)
}
