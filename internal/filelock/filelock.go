// Package filelock owns the advisory file locks (flock) imagectl takes:
// a cache directory's (Dir), shared by its users (builds, registry reads),
// exclusive by pruning, waiting or not; and the exclusive locks a
// directory store and a git catalog's clone take for each update, waited
// for until a context ends (WaitContext). An flock holds between processes
// and between open files of one process, and goes with the process, so a
// killed imagectl leaves nothing locked.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Lock takes the flock of the file at path (created, with its directory,
// when missing), shared or exclusive. With wait it blocks until it has
// it; without, ok is false, with no error, when someone holds it against
// this use. unlock releases it.
func Lock(path string, exclusive, wait bool) (unlock func(), ok bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if !wait && errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	// Unlock before closing: a child process forked by another goroutine
	// holds a copy of f until it execs (close-on-exec), and the lock, which
	// belongs to the open file, would outlive the Close until then.
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, true, nil
}

// Dir is the lock of a cache directory: the file "lock" in it. What names
// the directory in errors ("the layer cache").
type Dir struct {
	Path, What string
}

// File is the lock file.
func (d Dir) File() string { return filepath.Join(d.Path, "lock") }

// Wait takes the lock, shared or exclusive, waiting for it, and returns
// its release.
func (d Dir) Wait(exclusive bool) (unlock func(), err error) {
	unlock, _, err = d.lock(exclusive, true)
	return unlock, err
}

// Try takes the lock, shared or exclusive, when no one holds it against
// this use; ok is false, with no error, when someone does.
func (d Dir) Try(exclusive bool) (unlock func(), ok bool, err error) {
	return d.lock(exclusive, false)
}

func (d Dir) lock(exclusive, wait bool) (func(), bool, error) {
	unlock, ok, err := Lock(d.File(), exclusive, wait)
	if err != nil {
		return nil, false, fmt.Errorf("locking %s %s: %w", d.What, d.Path, err)
	}
	return unlock, ok, nil
}

// WaitContext takes the exclusive lock of the file at path as Lock does,
// trying again (after 1 ms, doubling up to 50 ms) until it is free or ctx
// ends. what names what the lock guards in errors ("the store /srv/s").
func WaitContext(ctx context.Context, path, what string) (unlock func(), err error) {
	wait := time.Millisecond
	for {
		unlock, ok, err := Lock(path, true, false)
		if err != nil {
			return nil, fmt.Errorf("locking %s: %w", what, err)
		}
		if ok {
			return unlock, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the lock of %s: %w", what, ctx.Err())
		case <-time.After(wait):
		}
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
}
