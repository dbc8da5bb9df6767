// Package atomicfile writes files that appear under their final name only
// when complete: content goes to a temporary file beside the target, is
// fsynced, and is renamed into place (then the directory is fsynced). An
// aborted or crashed write leaves no file under the final name.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// File is a file being written; Commit publishes it, Abort discards it.
// Abort after Commit does nothing, so `defer f.Abort()` is always safe.
type File struct {
	*os.File
	final string
	done  bool
}

// Create starts writing the file that will be published at path with the
// given permissions.
func Create(path string, perm os.FileMode) (*File, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return &File{File: tmp, final: path}, nil
}

// Commit flushes the file to disk and renames it to its final name.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("%s: already committed or aborted", f.final)
	}
	f.done = true
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", f.final, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", f.final, err)
	}
	if err := os.Rename(f.Name(), f.final); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("publishing %s: %w", f.final, err)
	}
	return syncDir(filepath.Dir(f.final))
}

// Abort discards the temporary file.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Commit()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
