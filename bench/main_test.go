package bench

import (
	"os"
	"testing"

	"github.com/mapc-dev/mapc/internal/quiet"
)

func TestMain(m *testing.M) {
	quiet.Klog() // the API server code logs through klog; keep the report readable
	os.Exit(m.Run())
}
