package appliance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrStopped is what a call returns when the appliance was killed or
// closed under it or before it, and its context was not cancelled (then it
// returns the context's error).
var ErrStopped = errors.New("the appliance was stopped")

// guard is the part of a Handle that decides who may call into the
// appliance and stops a running call: mu is held for the duration of every
// call (libguestfs wants one thread at a time on a handle); kill, from any
// goroutine, SIGKILLs the appliance's QEMU (pid), which ends the call.
// killed is written by kill on another goroutine while a call reads it,
// hence atomic; closed is set under mu but read by kill, which must not
// signal a pid once the appliance is released (its QEMU reaped, the pid
// free for another process).
type guard struct {
	mu     sync.Mutex
	pid    int // set before the handle is shared, read-only after
	killed atomic.Bool
	closed atomic.Bool
}

// call runs f under the lock, refusing when the appliance is gone, with a
// cancellation of ctx killing the appliance while f runs.
func (g *guard) call(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() || g.killed.Load() {
		return stopped(ctx)
	}
	stop := context.AfterFunc(ctx, g.kill)
	err := f()
	stop()
	if err != nil && g.killed.Load() {
		return stopped(ctx)
	}
	return err
}

func stopped(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrStopped
}

// kill stops the appliance from any goroutine: the running call, if any,
// returns, and every later one is refused.
func (g *guard) kill() {
	g.killed.Store(true)
	if g.pid > 0 && !g.closed.Load() {
		syscall.Kill(g.pid, syscall.SIGKILL)
	}
}

// close runs release once, under the lock, telling it whether the
// appliance was killed (nothing left to shut down cleanly). Called while a
// call runs on another goroutine it kills the appliance instead, ending
// that call; the owner's own close then releases.
func (g *guard) close(release func(killed bool) error) error {
	if !g.mu.TryLock() {
		g.kill()
		return nil
	}
	defer g.mu.Unlock()
	if g.closed.Load() {
		return nil
	}
	// Closed only once released: a kill while the shutdown runs still
	// reaches QEMU, and none reaches its pid after.
	defer g.closed.Store(true)
	return release(g.killed.Load())
}
