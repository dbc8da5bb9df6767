// Package filelock owns the advisory file locks (flock) imagectl's caches
// take: shared by their users (builds, registry reads), exclusive by
// pruning, waiting or not. A cache directory's lock is a Dir.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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
	return func() { f.Close() }, true, nil
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
