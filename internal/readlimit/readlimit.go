// Package readlimit owns how imagectl opens and reads the files a user
// names: whole files within a bound (File: keys, signatures, manifests,
// SBOMs, secrets files, recipes and templates), files opened for streaming
// (Open: a tgz to hash or check), and the one kind of input that may be a
// pipe (FileOrPipe: HCL files, which `-var-file <(...)` feeds); and
// reading a stream no longer than a context (WithContext: a tgz checked or
// scanned entry by entry).
//
// None of them blocks on what is not a regular file: a FIFO or a device is
// refused without waiting for a writer (FileOrPipe waits a bounded time),
// and a file past its bound is refused from its size alone, without
// reading it, so a huge file, /dev/zero or a FIFO nobody writes named
// where a small file belongs costs no more than the bound and no time.
package readlimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/imagectl/internal/fsmode"
)

// ErrTooLarge is wrapped by the error for a file larger than its limit.
var ErrTooLarge = errors.New("file larger than its limit")

// ErrNotRegular is wrapped by the error for a path that is not a regular
// file (a FIFO, a device, a socket, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrPipeTimeout is wrapped by FileOrPipe's error for a FIFO that nothing
// wrote to, or whose writer neither wrote nor closed it, in time.
var ErrPipeTimeout = errors.New("a FIFO not written in time")

// tooLarge is the error for path, larger than limit bytes.
func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s: %w (%s)", path, ErrTooLarge, Size(limit))
}

// Size writes a limit the way errors and help texts state it: "64 KiB",
// "16 MiB", or bytes when it is neither.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// NotRegularError is the error for a path that is not a regular file; it
// wraps ErrNotRegular.
type NotRegularError struct {
	Path string
	// Kind says what it is instead: "a FIFO", "a character device"...
	Kind string
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: %v (%s)", e.Path, ErrNotRegular, e.Kind)
}

func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

func notRegular(path string, m fs.FileMode) error {
	return &NotRegularError{Path: path, Kind: fsmode.Kind(m)}
}

// Open opens path for reading when it is a regular file (or a symlink to
// one) and refuses anything else with an error wrapping ErrNotRegular,
// without blocking: a FIFO is opened non-blocking, and a device is
// refused from its stat before it is opened (or, swapped in between, right
// after a non-blocking open). Its errors name path.
func Open(path string) (*os.File, error) {
	f, st, err := open(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, st.Mode())
	}
	return f, nil
}

// open opens path without blocking and returns what the open file is. A
// path that is neither a regular file nor a FIFO is refused before it is
// opened: opening a device can do something (a tape rewinds).
func open(path string) (*os.File, fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		// Said as os.Open says it ("open x: no such file or
		// directory"), which is what is being done.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open"
		}
		return nil, nil, err
	}
	if m := st.Mode(); !m.IsRegular() && m&fs.ModeNamedPipe == 0 {
		return nil, nil, notRegular(path, m)
	}
	// O_NONBLOCK: opening a FIFO for reading does not wait for a writer.
	// Regular files ignore it, and os clears it on them.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	// What was opened, which may not be what was looked at.
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, err
	}
	if m := st.Mode(); !m.IsRegular() && m&fs.ModeNamedPipe == 0 {
		f.Close()
		return nil, nil, notRegular(path, m)
	}
	return f, st, nil
}

// File reads the regular file at path whole, refusing one larger than
// limit bytes (ErrTooLarge) by its size, without reading it, and anything
// that is not a regular file (ErrNotRegular) without blocking. Its errors
// name path.
func File(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f, path, limit)
}

// readRegular reads the open regular file f within limit.
func readRegular(f *os.File, path string, limit int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	// The size may grow while it is read: the bound holds all the same.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(path, limit)
	}
	return b, nil
}

// FileOrPipe is File that reads a FIFO too, a named one or the pipe of a
// shell's process substitution (`<(command)`, /dev/fd/N), until its writer
// closes it, within limit bytes. It waits at most wait in all, so a FIFO
// that nobody writes, or a writer that stalls or trickles, ends in an error
// wrapping ErrPipeTimeout rather than a hang (or a read that outlasts the
// first Ctrl-C by more than wait).
// Devices, sockets and directories are refused as File refuses them.
func FileOrPipe(path string, limit int64, wait time.Duration) ([]byte, error) {
	f, st, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Mode().IsRegular() {
		return readRegular(f, path, limit)
	}
	return readPipe(f, path, limit, wait)
}

// readPipe reads the FIFO f, opened non-blocking, until its writer closes
// it. A read of a FIFO that no writer has opened returns nothing, as the
// end of one does; poll(2) tells them apart on Linux: it reports the end
// (POLLHUP) only of a writer that came and went since the FIFO was
// opened, and nothing at all while none has come.
func readPipe(f *os.File, path string, limit int64, wait time.Duration) ([]byte, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var out []byte
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(wait)
	for {
		var n int
		var rerr error
		ready := false
		cerr := rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			for {
				left := time.Until(deadline)
				if left <= 0 {
					return
				}
				k, err := unix.Poll(fds, int(left.Milliseconds())+1)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err != nil {
					rerr = err
					return
				}
				if k > 0 {
					break
				}
			}
			ready = true
			for {
				n, rerr = unix.Read(int(fd), buf)
				if !errors.Is(rerr, unix.EINTR) {
					break
				}
			}
		})
		switch {
		case cerr != nil:
			return nil, fmt.Errorf("reading %s: %w", path, cerr)
		case rerr != nil && !errors.Is(rerr, unix.EAGAIN):
			return nil, fmt.Errorf("reading %s: %w", path, rerr)
		case !ready:
			return nil, fmt.Errorf("%s: %w (not written to its end within %s)", path, ErrPipeTimeout, wait)
		case n == 0 && rerr == nil:
			return out, nil // the writer closed it
		}
		if n > 0 {
			if int64(len(out)+n) > limit {
				return nil, tooLarge(path, limit)
			}
			out = append(out, buf[:n]...)
		}
	}
}

// WithContext returns a reader that fails its reads with ctx's error once
// ctx is done, so that a long read (a large entry of a tgz hashed or
// skipped) does not outlive a cancel.
func WithContext(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
