package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lock takes the store's exclusive lock (an flock on .lock, which holds
// between processes and between open files of one process), waiting until
// it is free or ctx ends. The returned function releases it.
func (d *Dir) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		return nil, fmt.Errorf("creating the store %s: %w", d.Root, err)
	}
	path := filepath.Join(d.Root, ".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the store's lock file: %w", err)
	}
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking the store %s: %w", d.Root, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock of store %s: %w", d.Root, ctx.Err())
		case <-time.After(wait):
		}
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
}
