// Command mapc compiles Gatekeeper mutators and Kyverno mutate rules into Kubernetes
// MutatingAdmissionPolicies and bindings, and checks that they mutate objects exactly as
// Gatekeeper's or Kyverno's engine does.
//
// It is the command line (cobra): flags, reading inputs, calling the compiler, verify and suite,
// and printing. It must hold no translation logic, and nothing may import it.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
)

func main() {
	// A short-lived batch program that allocates much and keeps little: collecting half as often
	// as Go's default saves a tenth of a large compilation. GOGC still decides when set.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	// A soft limit on the heap: a large compilation builds several policies at once, and the
	// collector then runs more often near the limit rather than let the heap double (at 10,000
	// mutators: the same time, 825 MiB peak instead of 1.07 GiB). GOMEMLIMIT still decides when set.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(softMemoryLimit)
	}
	os.Exit(run(os.Args[1:]))
}

// softMemoryLimit is the heap size above which the collector works harder (see main).
const softMemoryLimit = 800 << 20

// exitError carries an exit code: 1 for refused or invalid input or a failed check, 2 for usage.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func usageErr(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

func run(args []string) int {
	root := newRootCmd(os.Stdin, os.Stdout, os.Stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(os.Stderr, "mapc: "+ee.err.Error())
		}
		return ee.code
	}
	// cobra's own errors are usage errors (unknown flag, bad argument).
	fmt.Fprintln(os.Stderr, "mapc: "+err.Error())
	return 2
}
