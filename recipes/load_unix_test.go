//go:build unix

package recipes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestLoadStopsWithItsContext: a recipe that is a FIFO nobody writes kept
// LoadFile blocked for good, past any Ctrl-C. Load returns ctx.Err() as
// soon as the context ends.
func TestLoadStopsWithItsContext(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "r.hcl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := NewParser()
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Load(ctx, fifo, Options{})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Load returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load did not return when its context ended")
	}
	if len(p.Files()) != 0 {
		t.Errorf("the parser of a cancelled load holds files: %v", p.Files())
	}
	// Release the background read.
	// Read-write never blocks on Linux, even when Load never opened it.
	if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
		f.Close()
	}

	// Uncancelled, Load is LoadFile.
	r, diags, err := p.Load(context.Background(), "../testdata/recipes/valid/minimal.hcl", Options{})
	if err != nil || diags.HasErrors() || r == nil || r.Image.Name != "minimal" || p.Files()["../testdata/recipes/valid/minimal.hcl"] == nil {
		t.Errorf("Load: %v %v %v", r, diags, err)
	}
}
