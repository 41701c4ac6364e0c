package compiler_test

import (
	"flag"
	"os"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/internal/quiet"
)

// TestMain silences the API server code's logging (klog), which the in-process evaluator would
// otherwise print for every policy set it loads, and checks every printed expression against
// cel-go's parser and checks fused expressions whole (cel.SelfCheck).
func TestMain(m *testing.M) {
	quiet.Klog()
	cel.SelfCheck(true)
	flag.Parse()
	os.Exit(m.Run())
}
