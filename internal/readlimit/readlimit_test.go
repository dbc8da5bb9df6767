package readlimit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
)

func TestFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := File(p, 10); err != nil || len(b) != 10 {
		t.Errorf("at the limit: %d bytes, %v", len(b), err)
	}
	if _, err := File(p, 9); !errors.Is(err, ErrTooLarge) || err.Error() != p+": file larger than its limit (9 bytes)" {
		t.Errorf("past the limit: %v", err)
	}
	if _, err := File(filepath.Join(t.TempDir(), "none"), 9); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

// mkfifo makes a FIFO that nobody writes.
func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	testenv.Mkfifo(t, p)
	return p
}

// written makes a FIFO and, from a goroutine, opens it for writing (which
// waits for a reader) and hands it to write; stop closes when the test ends.
func written(t *testing.T, write func(w *os.File, stop <-chan struct{})) string {
	t.Helper()
	fifo := mkfifo(t)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		write(w, stop)
	}()
	return fifo
}

// quick runs f and fails when it takes longer than limit: what used to
// block forever is checked not to.
func quick(t *testing.T, limit time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("still running after %s", limit)
		return nil
	}
}

// TestRefusesWhatIsNotARegularFile: a FIFO nobody writes used to block
// File and Open forever, and /dev/zero to be read up to the limit; both
// are refused at once, naming the path and what it is, as is a huge
// sparse file, by its size, without reading it.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	fifo := mkfifo(t)
	sparse := filepath.Join(t.TempDir(), "sparse")
	testenv.Sparse(t, sparse, 2<<30)
	for _, tc := range []struct {
		path string
		want error
		msg  string
	}{
		{fifo, ErrNotRegular, fifo + ": not a regular file (a FIFO)"},
		{"/dev/zero", ErrNotRegular, "/dev/zero: not a regular file (a character device)"},
		{t.TempDir(), ErrNotRegular, "not a regular file (a directory)"},
		{sparse, ErrTooLarge, sparse + ": file larger than its limit (64 KiB)"},
	} {
		err := quick(t, 5*time.Second, func() error { _, err := File(tc.path, 64<<10); return err })
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("File(%s): %v, want %q", tc.path, err, tc.msg)
		}
		if tc.want == ErrNotRegular {
			err := quick(t, 5*time.Second, func() error { _, err := Open(tc.path); return err })
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Open(%s): %v, want %q", tc.path, err, tc.msg)
			}
		}
	}
	if f, err := Open(sparse); err != nil {
		t.Errorf("Open of a regular file: %v", err)
	} else {
		f.Close()
	}
}

// TestFileOrPipe: a FIFO is read until its writer closes it, within the
// limit; one nobody writes, or whose writer stalls or trickles, ends after the wait;
// a device is refused.
func TestFileOrPipe(t *testing.T) {
	t.Run("written", func(t *testing.T) {
		fifo := written(t, func(w *os.File, _ <-chan struct{}) {
			for i := 0; i < 3; i++ {
				w.Write([]byte("abc"))
				time.Sleep(20 * time.Millisecond)
			}
		})
		b, err := FileOrPipe(fifo, 100, 5*time.Second)
		if err != nil || string(b) != "abcabcabc" {
			t.Errorf("%q, %v", b, err)
		}
	})
	t.Run("too much", func(t *testing.T) {
		fifo := written(t, func(w *os.File, _ <-chan struct{}) {
			w.Write(bytes.Repeat([]byte("x"), 1000))
		})
		if _, err := FileOrPipe(fifo, 100, 5*time.Second); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v", err)
		}
	})
	t.Run("nobody writes", func(t *testing.T) {
		fifo := mkfifo(t)
		start := time.Now()
		err := quick(t, 5*time.Second, func() error { _, err := FileOrPipe(fifo, 100, 200*time.Millisecond); return err })
		if !errors.Is(err, ErrPipeTimeout) || !strings.Contains(err.Error(), fifo+": a FIFO not written in time (not written to its end within 200ms)") {
			t.Errorf("%v", err)
		}
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("gave up after %s, before the wait", took)
		}
	})
	t.Run("writer stalls", func(t *testing.T) {
		fifo := written(t, func(w *os.File, stop <-chan struct{}) {
			w.Write([]byte("abc"))
			<-stop
		})
		err := quick(t, 5*time.Second, func() error { _, err := FileOrPipe(fifo, 100, 200*time.Millisecond); return err })
		if !errors.Is(err, ErrPipeTimeout) {
			t.Errorf("%v", err)
		}
	})
	// A writer that sends a byte now and then, each within the wait, is
	// still refused once the wait has passed in all: the first Ctrl-C of a
	// command that reads it is not outlasted by more than the wait.
	t.Run("writer trickles", func(t *testing.T) {
		fifo := written(t, func(w *os.File, stop <-chan struct{}) {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
					w.Write([]byte("a"))
				}
			}
		})
		start := time.Now()
		err := quick(t, 5*time.Second, func() error { _, err := FileOrPipe(fifo, 1000, 300*time.Millisecond); return err })
		if !errors.Is(err, ErrPipeTimeout) {
			t.Errorf("%v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("read a trickling writer for %s; the wait is 300ms", took)
		}
	})
	t.Run("device", func(t *testing.T) {
		if _, err := FileOrPipe("/dev/zero", 100, time.Second); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%v", err)
		}
	})
	t.Run("regular", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "f")
		os.WriteFile(p, []byte("abc"), 0o644)
		if b, err := FileOrPipe(p, 3, time.Second); err != nil || string(b) != "abc" {
			t.Errorf("%q, %v", b, err)
		}
		if _, err := FileOrPipe(p, 2, time.Second); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v", err)
		}
	})
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{64 << 10: "64 KiB", 16 << 20: "16 MiB", 1000: "1000 bytes", 1<<20 + 1: "1048577 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := WithContext(ctx, strings.NewReader("abcdef"))
	b := make([]byte, 3)
	if n, err := r.Read(b); n != 3 || err != nil || string(b) != "abc" {
		t.Fatalf("read %d %q, %v", n, b[:n], err)
	}
	cancel()
	if n, err := r.Read(b); n != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: read %d, %v", n, err)
	}
}
