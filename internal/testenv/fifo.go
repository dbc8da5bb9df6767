//go:build unix

package testenv

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// Mkfifo makes a FIFO at path, or stops the test through Missing when the
// filesystem cannot hold one.
func Mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		Missing(t, "mkfifo: "+err.Error()+" (set TMPDIR to a local filesystem)")
	}
}

// WaitForReader returns the write end of the FIFO at path once a reader
// has it open: the reader then blocks until it is written or closed, so a
// test that cancels the reader next knows it cancels a blocked call. The
// write end closes when the test ends.
func WaitForReader(t testing.TB, path string) *os.File {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			t.Cleanup(func() { f.Close() })
			return f
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("no reader opened %s: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
