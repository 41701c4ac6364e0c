package compiler

import "github.com/mapc-dev/mapc/compiler/route"

// Status says what became of one input policy (route.Status).
type Status = route.Status

// The statuses (route.Compiled, route.LeftOut, route.Refused, route.Kept).
const (
	Compiled = route.Compiled
	LeftOut  = route.LeftOut
	Refused  = route.Refused
	Kept     = route.Kept
)

// MutatorStatus is one input policy's line of the compile report (route.MutatorStatus).
type MutatorStatus = route.MutatorStatus

// Count returns how many input policies have status s.
func Count(list []MutatorStatus, s Status) int {
	n := 0
	for _, m := range list {
		if m.Status == s {
			n++
		}
	}
	return n
}
