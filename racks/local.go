package racks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime/debug"
	"syscall"
)

// windowSize is how much of a local copy one reader maps at a time: the
// mappings of a check stay a few of these, whatever the version's size.
// Tests make it small.
var windowSize int64 = 64 << 20

// localBytes lends the local copy's bytes a piece at a time to one reader
// (a rack's stream, or the copy's own hash). When the copy is a file of
// the version's size, the pieces are its pages mapped in windowSize
// windows, so comparing a stream with them or hashing them copies nothing
// out of the page cache (docs/speed.md); otherwise they are read into a
// buffer.
type localBytes struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	// fd is the file's descriptor when it can be mapped, else -1; win
	// holds the bytes from base on, mapped.
	fd   int
	base int64
	win  []byte
}

func newLocalBytes(r io.ReaderAt, size int64) *localBytes {
	l := &localBytes{r: r, size: size, fd: -1}
	f, ok := r.(interface {
		Fd() uintptr
		Stat() (os.FileInfo, error)
	})
	if !ok || size <= 0 {
		return l
	}
	// Only a regular file as long as the version is mapped: a shorter
	// one is not the version, and its reads say so (io.EOF) where a
	// mapping would fault.
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		l.fd = int(f.Fd())
	}
	return l
}

// at is the copy's n bytes at off, or as many as it has before its end
// (then with io.EOF). They stay valid until the next call, and reading
// them may fault when the file shrank since it was mapped: read them
// inside guarded.
func (l *localBytes) at(off int64, n int) ([]byte, error) {
	if l.fd >= 0 && off >= 0 && off+int64(n) <= l.size {
		if off < l.base || off+int64(n) > l.base+int64(len(l.win)) {
			if err := l.mapAt(off, n); err != nil {
				return nil, err
			}
		}
		return l.win[off-l.base : off-l.base+int64(n)], nil
	}
	if len(l.buf) < n {
		l.buf = make([]byte, max(n, 256<<10))
	}
	got, err := l.r.ReadAt(l.buf[:n], off)
	if got == n {
		err = nil
	}
	return l.buf[:got], err
}

// mapAt maps the window that holds [off, off+n), from the page off is on.
func (l *localBytes) mapAt(off int64, n int) error {
	l.unmap()
	page := int64(os.Getpagesize())
	base := off - off%page
	length := min(max(windowSize, off+int64(n)-base), l.size-base)
	b, err := syscall.Mmap(l.fd, base, int(length), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mapping bytes %d to %d: %w", base, base+length, err)
	}
	l.base, l.win = base, b
	return nil
}

func (l *localBytes) unmap() {
	if l.win != nil {
		_ = syscall.Munmap(l.win)
		l.base, l.win = 0, nil
	}
}

// close lets go of the mapping: call it when done with the bytes.
func (l *localBytes) close() { l.unmap() }

// hash writes the copy's bytes from off up to end into h, stopping when
// ctx ends; it returns how many it wrote (fewer at the copy's end).
func (l *localBytes) hash(ctx context.Context, h hash.Hash, off, end int64) (int64, error) {
	start := off
	err := guarded(func() error {
		for off < end {
			if err := ctx.Err(); err != nil {
				return err
			}
			b, err := l.at(off, int(min(1<<20, end-off)))
			h.Write(b)
			off += int64(len(b))
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return off - start, err
}

// sameUpTo is the length of what got and want start with alike: the
// comparison of a rack's stream with the bytes it should be.
func sameUpTo(got, want []byte) int {
	n := min(len(got), len(want))
	if bytes.Equal(got[:n], want[:n]) {
		return n
	}
	i := 0
	for got[i] == want[i] {
		i++
	}
	return i
}

// guarded runs f, which reads mapped bytes of a file, and turns the
// fault a read raises (a page past the file's end, the file having shrunk
// after it was mapped, or a page its disk could not read) into an error
// instead of a crash.
func guarded(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = errors.New("reading it through its mapping faulted: it shrank, or its disk failed")
		}
	}()
	return f()
}
