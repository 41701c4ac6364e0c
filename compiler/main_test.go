package compiler_test

import (
	"flag"
	"os"
	"testing"

	"github.com/mapc-dev/mapc/internal/quiet"
)

// TestMain silences the API server code's logging (klog), which the in-process evaluator would
// otherwise print for every policy set it loads.
func TestMain(m *testing.M) {
	quiet.Klog()
	flag.Parse()
	os.Exit(m.Run())
}
