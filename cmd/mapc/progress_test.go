package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the progress goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgress: on a terminal a long run gets a progress line, rewritten in place and cleared at
// the end; a short run, or one not on a terminal, gets nothing.
func TestProgress(t *testing.T) {
	saved, savedEvery := isTerminal, progressEvery
	defer func() { isTerminal, progressEvery = saved, savedEvery }()
	progressEvery = 20 * time.Millisecond
	for _, c := range []struct {
		name     string
		terminal bool
		run      time.Duration
		want     bool
	}{
		{"a long run on a terminal", true, 100 * time.Millisecond, true},
		{"a short run on a terminal", true, 0, false},
		{"a long run in a pipe", false, 100 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			isTerminal = func(io.Writer) bool { return c.terminal }
			var buf lockedBuffer
			done := progress(&buf, func() string { return "compiling 3 documents" })
			time.Sleep(c.run)
			done()
			out := buf.String()
			if shown := strings.Contains(out, "mapc: compiling 3 documents ("); shown != c.want {
				t.Fatalf("progress line shown: %v, want %v (%q)", shown, c.want, out)
			}
			if c.want && !strings.HasSuffix(out, "\r\033[K") {
				t.Errorf("the line is not cleared at the end: %q", out)
			}
		})
	}
}
