package bench

import (
	"os"
	"testing"

	"github.com/mapc-dev/mapc/internal/kyvernobin"
	"github.com/mapc-dev/mapc/internal/quiet"
)

func TestMain(m *testing.M) {
	quiet.Klog() // the API server code logs through klog; keep the report readable
	code := m.Run()
	kyvernobin.Cleanup()
	os.Exit(code)
}
