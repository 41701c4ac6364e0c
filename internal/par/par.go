// Package par runs independent pieces of work on every core. It must not change results: each
// piece's result is used in input order, so output never depends on scheduling.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Do calls fn(i) for every i in [0, n), on up to GOMAXPROCS goroutines, and returns when all
// calls have returned. The calls must be independent; each writes only its own results.
func Do(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
