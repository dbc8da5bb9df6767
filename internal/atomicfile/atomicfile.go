// Package atomicfile writes files that appear under their final name only
// when complete: content goes to a temporary file beside the target, is
// fsynced, and is renamed into place (then the directory is fsynced). An
// aborted or crashed write leaves no file under the final name. A Set
// publishes several files all or none (a build's outputs, a signature
// pair, a key pair).
//
// It writes only regular files: the final name may be absent, a regular
// file, or a symbolic link that resolves to a regular file (the link is
// kept and its target replaced). Anything else there (a device such as
// /dev/null, a FIFO, a socket, a directory, a dangling link) is refused,
// so that imagectl, which runs as root, never replaces what is not a file.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpuaas/imagectl/internal/fsmode"
)

// File is a file being written; Commit publishes it, Abort discards it.
// Abort after Commit does nothing, so `defer f.Abort()` is always safe.
type File struct {
	*os.File
	final   string // where it is published: a link's target when the name was a link
	done    bool
	renamed bool // under its final name (even if the directory sync then failed)
}

// Create starts writing the file that will be published at path with the
// given permissions. path must be absent, a regular file or a link to one
// (see the package doc); a regular file replaced keeps its owner.
func Create(path string, perm os.FileMode) (*File, error) {
	final, old, err := target(path)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if old != nil {
		if st, ok := old.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			// The file stays its owner's; only root can give it back.
			if err := tmp.Chown(int(st.Uid), int(st.Gid)); err != nil {
				tmp.Close()
				os.Remove(tmp.Name())
				return nil, err
			}
		}
	}
	return &File{File: tmp, final: final}, nil
}

// protectedLink refuses to follow the link at path where the kernel's
// fs.protected_symlinks would refuse to open through it: in a sticky,
// world-writable directory (/tmp), a link that neither this process's user
// nor the directory's owner owns. Resolving a link by hand and renaming
// onto its target passes by that protection, and another user's link
// /tmp/v.sh -> /etc/shadow would have root replace /etc/shadow.
func protectedLink(path string, link fs.FileInfo) error {
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return err
	}
	if dir.Mode()&fs.ModeSticky == 0 || dir.Mode().Perm()&0o002 == 0 {
		return nil
	}
	l, lok := link.Sys().(*syscall.Stat_t)
	d, dok := dir.Sys().(*syscall.Stat_t)
	if !lok || !dok || l.Uid == uint32(os.Geteuid()) || l.Uid == d.Uid {
		return nil
	}
	return fmt.Errorf("refusing to write %s: it is a symbolic link of user %d in the sticky, world-writable directory %s, which the kernel would not follow either (fs.protected_symlinks)", path, l.Uid, filepath.Dir(path))
}

// NotRegularError is Create's refusal of a name that holds something other
// than a regular file.
type NotRegularError struct {
	Path string
	What string // "a character device", "a FIFO", ...
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("refusing to write %s: it is %s, not a regular file", e.Path, e.What)
}

// target resolves the name a file is to be published under: the name
// itself, or the regular file a link there leads to. It returns the
// existing regular file's information, nil when there is none.
func target(path string) (string, fs.FileInfo, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	final := path
	if st.Mode()&fs.ModeSymlink != 0 {
		if err := protectedLink(path, st); err != nil {
			return "", nil, err
		}
		resolved, err := filepath.EvalSymlinks(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, &NotRegularError{Path: path, What: "a symbolic link to nothing"}
		}
		if err != nil {
			return "", nil, fmt.Errorf("resolving %s: %w", path, err)
		}
		if st, err = os.Lstat(resolved); err != nil {
			return "", nil, err
		}
		final = resolved
	}
	if !st.Mode().IsRegular() {
		what := fsmode.Kind(st.Mode())
		if final != path {
			what = "a link to " + final + ", " + what
		}
		return "", nil, &NotRegularError{Path: path, What: what}
	}
	return final, st, nil
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
	// Something may have taken the name since Create: the rename would
	// replace it, so look again.
	if st, err := os.Lstat(f.final); err == nil && !st.Mode().IsRegular() {
		os.Remove(f.Name())
		return &NotRegularError{Path: f.final, What: fsmode.Kind(st.Mode())}
	}
	if err := os.Rename(f.Name(), f.final); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("publishing %s: %w", f.final, err)
	}
	f.renamed = true
	if err := Sync(filepath.Dir(f.final)); err != nil {
		return fmt.Errorf("publishing %s: %w", f.final, err)
	}
	return nil
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

// Copy writes a copy of the file src to path atomically.
func Copy(path, src string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := io.Copy(f, in); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, path, err)
	}
	return f.Commit()
}

// Replace writes data to an existing file atomically, keeping its
// permissions and owner (through a link, the link's target).
func Replace(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return WriteFile(path, data, st.Mode().Perm())
}

// Set is files published together: Commit publishes them in the order
// they were added, and a failure takes back those already published, so
// either all appear under their final names or none does. Abort after
// Commit does nothing, so `defer s.Abort()` is always safe.
type Set struct {
	files []*File
}

// Create starts writing a file of the set.
func (s *Set) Create(path string, perm os.FileMode) (*File, error) {
	f, err := Create(path, perm)
	if err != nil {
		return nil, err
	}
	s.files = append(s.files, f)
	return f, nil
}

// Add makes a file started elsewhere part of the set.
func (s *Set) Add(f *File) { s.files = append(s.files, f) }

// WriteFile adds a file with the given content to the set.
func (s *Set) WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := s.Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Commit publishes every file of the set, or none: when one fails, those
// already renamed into place (the failing one too, if only its directory
// sync failed) are removed.
func (s *Set) Commit() error {
	for i, f := range s.files {
		if err := f.Commit(); err != nil {
			for _, done := range s.files[:i+1] {
				if done.renamed {
					os.Remove(done.final)
				}
			}
			s.Abort()
			return err
		}
	}
	s.files = nil
	return nil
}

// Abort discards the files not yet published.
func (s *Set) Abort() {
	for _, f := range s.files {
		f.Abort()
	}
	s.files = nil
}

// Sync fsyncs a file or a directory by name: a directory so that the
// renames and creations in it survive a crash.
func Sync(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
