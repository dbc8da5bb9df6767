// Package heappeak owns the measure the benchmarks and memory tests put on
// streaming code: the peak of the live heap while it runs, sampled from
// runtime/metrics (a memory profile or MemStats would miss short peaks).
package heappeak

import (
	"runtime/metrics"
	"sync"
	"time"
)

// Start samples the live heap every few milliseconds (runtime/metrics,
// which does not stop the world) until stop is called, and returns the peak.
func Start() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var (
		peak uint64
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	read := func() {
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				read()
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		read()
		return peak
	}
}
