package appliance

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// fakeAppliance starts a process standing in for the appliance's QEMU and
// returns a guard on it and a call body that blocks, as a libguestfs call
// does, until that process dies.
func fakeAppliance(t *testing.T) (*guard, func() error) {
	t.Helper()
	cmd := exec.Command(testenv.Tool(t, "sleep", "it stands in for QEMU; coreutils has it"), "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var werr error
	wait := func() error {
		once.Do(func() { werr = cmd.Wait() })
		return werr
	}
	t.Cleanup(func() { cmd.Process.Kill(); wait() })
	return &guard{pid: cmd.Process.Pid}, wait
}

// A cancelled context kills the appliance during a call, which returns the
// context's error at once; run with -race, it also checks that the
// cancellation's goroutine and the call share the killed flag safely.
func TestCallCancelled(t *testing.T) {
	g, blocked := fakeAppliance(t)
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	// Cancelled inside the call, so that it is surely during one.
	err := g.call(ctx, func() error { cancel(); return blocked() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the call took %s to return after cancellation", took)
	}
	if err := g.call(context.Background(), func() error { t.Error("called after the kill"); return nil }); !errors.Is(err, ErrStopped) {
		t.Errorf("a call after the kill: %v, want ErrStopped", err)
	}
	released := 0
	if err := g.close(func(killed bool) error {
		released++
		if !killed {
			t.Error("release was told the appliance is alive")
		}
		return nil
	}); err != nil || released != 1 {
		t.Errorf("close: %v, released %d times", err, released)
	}
}

// Close from another goroutine during a call kills the appliance instead
// of waiting for the call; the owner's Close then releases, once.
func TestCloseDuringCall(t *testing.T) {
	g, blocked := fakeAppliance(t)
	var released atomic.Int32
	release := func(killed bool) error {
		released.Add(1)
		if !killed {
			t.Error("release was told the appliance is alive")
		}
		return nil
	}
	inCall := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- g.call(context.Background(), func() error { close(inCall); return blocked() })
	}()
	<-inCall
	if err := g.close(release); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopped) {
			t.Errorf("the call returned %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close from another goroutine did not end the call")
	}
	if released.Load() != 0 {
		t.Error("released while the call ran")
	}
	g.close(release)
	g.close(release)
	if n := released.Load(); n != 1 {
		t.Errorf("released %d times, want 1", n)
	}
}

// Calls never overlap, and an idle Close releases a live appliance.
func TestCallsAreSerialized(t *testing.T) {
	var g guard
	var in, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.call(context.Background(), func() error {
				n := in.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				time.Sleep(time.Millisecond)
				in.Add(-1)
				return nil
			})
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d calls ran at once", most.Load())
	}
	wasKilled := true
	if err := g.close(func(killed bool) error { wasKilled = killed; return errors.New("shutdown failed") }); err == nil || wasKilled {
		t.Errorf("close: %v, killed %v", err, wasKilled)
	}
	if err := g.call(context.Background(), func() error { return nil }); !errors.Is(err, ErrStopped) {
		t.Errorf("a call after Close: %v, want ErrStopped", err)
	}
}
