// Package filelock owns the advisory file locks (flock) imagectl's caches
// take: shared by their users (builds, registry reads), exclusive by
// pruning, waiting or not.
package filelock

import (
	"errors"
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
