// Package quiet silences klog, through which the API server's admission code (run in process)
// logs every policy set and failed match: noise for a command-line user and in test output.
// It must not hide mapc's own messages.
package quiet

import (
	"flag"
	"io"
	"sync"

	"k8s.io/klog/v2"
)

var once sync.Once

// Klog sends klog's output nowhere (fatal messages still reach stderr).
func Klog() {
	once.Do(func() {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	})
}
