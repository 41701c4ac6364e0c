package verify

import (
	"flag"
	"os"
	"testing"

	"github.com/mapc-dev/mapc/cel"
	"github.com/mapc-dev/mapc/internal/quiet"
)

// TestMain silences klog and checks every expression the generated cases compile to against
// cel-go's parser and checks fused expressions whole (cel.SelfCheck).
func TestMain(m *testing.M) {
	quiet.Klog()
	cel.SelfCheck(true)
	flag.Parse()
	os.Exit(m.Run())
}
