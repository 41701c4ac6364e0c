package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progressEvery is how often a long run's progress line is written (and how long a run takes
// before it is).
var progressEvery = time.Second

// isTerminal says whether w is a terminal, where a progress line can be rewritten in place.
var isTerminal = func(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress writes, when w is a terminal and the run takes longer than progressEvery, one line
// saying what is being done and for how long, rewritten in place; the function it returns stops
// it and clears the line. Elsewhere (a pipe, a CI log) it writes nothing.
func progress(w io.Writer, what func() string) (done func()) {
	if !isTerminal(w) {
		return func() {}
	}
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		shown := false
		for {
			select {
			case <-stop:
				if shown {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
				fmt.Fprintf(w, "\r\033[Kmapc: %s (%ds)", what(), int(time.Since(start).Seconds()))
				shown = true
			}
		}
	}()
	return func() {
		close(stop)
		wg.Wait()
	}
}
