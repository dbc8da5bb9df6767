package racks

import (
	"testing"
	"time"
)

// A paused watch does not fire however long the pause, nor does progress
// during the pause (the read-ahead filling its buffers) re-arm it; it
// fires once resumed and idle, and never once stopped.
func TestStallWatchHoldsItsPause(t *testing.T) {
	const after = 20 * time.Millisecond
	fired := make(chan struct{}, 1)
	w := watchStall(after, func() { fired <- struct{}{} })
	resume := w.pause()
	for range 10 {
		w.progress()
		time.Sleep(after)
	}
	select {
	case <-fired:
		t.Fatal("the watch fired while paused")
	default:
	}
	resume()
	mustFire(t, fired, "once resumed and idle")

	// A resume called twice counts once: the watch still fires.
	w = watchStall(after, func() { fired <- struct{}{} })
	resume = w.pause()
	resume()
	resume()
	mustFire(t, fired, "after a resume called twice")

	w = watchStall(after, func() { fired <- struct{}{} })
	resume = w.pause()
	w.stop()
	resume()
	time.Sleep(5 * after)
	select {
	case <-fired:
		t.Fatal("a stopped watch fired")
	default:
	}
}

func mustFire(t *testing.T, fired <-chan struct{}, when string) {
	t.Helper()
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not fire " + when)
	}
}
