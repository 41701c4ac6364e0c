package backend

import (
	"encoding/json"
	"fmt"

	"github.com/mapc-dev/mapc/emit"
)

// SetSplitAt makes policies split above f times the size emit allows, and returns the function
// that restores it.
func SetSplitAt(f float64) (restore func()) {
	old := splitAt
	splitAt = f
	return func() { splitAt = old }
}

// SetStoredLimit makes a policy too large to store above n bytes of JSON, and returns the
// function that restores the API server's limits.
func SetStoredLimit(n int) (restore func()) {
	old := storable
	storable = func(p *emit.Policy) (string, error) {
		data, err := json.Marshal(p.Policy)
		if err != nil || len(data) <= n {
			return "", err
		}
		return fmt.Sprintf("its policy is %d bytes, above %d", len(data), n), nil
	}
	return func() { storable = old }
}
