package backend_test

import (
	"testing"

	"github.com/mapc-dev/mapc/internal/selfcheck"
)

func TestMain(m *testing.M) { selfcheck.Main(m) }
