// Package kyvernobin gives tests the kyverno-engine program (Kyverno's engine, module
// reference/kyverno): the one $MAPC_KYVERNO_ENGINE names (the Makefile builds it), else one
// built once per test binary with `go build -C reference/kyverno`. A test that needs the program
// fails when it cannot be had; it never skips. Only tests may import it.
package kyvernobin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

var (
	once sync.Once
	path string
	dir  string
	err  error
)

// Path is the program's path, built on first use when $MAPC_KYVERNO_ENGINE is not set.
func Path() (string, error) {
	once.Do(func() {
		if p := os.Getenv("MAPC_KYVERNO_ENGINE"); p != "" {
			path = p
			return
		}
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			err = fmt.Errorf("kyvernobin: cannot find the source tree")
			return
		}
		module := filepath.Join(filepath.Dir(file), "..", "..", "reference", "kyverno")
		if dir, err = os.MkdirTemp("", "kyverno-engine-"); err != nil {
			return
		}
		path = filepath.Join(dir, "kyverno-engine")
		cmd := exec.Command("go", "build", "-C", module, "-o", path, "./cmd/kyverno-engine")
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("building kyverno-engine: %v\n%s", berr, out)
		}
	})
	return path, err
}

// Cleanup removes a program Path built; TestMain calls it after the tests.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}
