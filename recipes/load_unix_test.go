//go:build unix

package recipes

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestLoadStopsWithItsContext: a recipe that is a FIFO nobody writes kept
// LoadFile blocked for good, past any Ctrl-C. Load returns ctx.Err() as
// soon as the context ends.
func TestLoadStopsWithItsContext(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "r.hcl")
	testenv.Mkfifo(t, fifo)
	ctx, cancel := context.WithCancel(context.Background())
	p := NewParser()
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Load(ctx, fifo, Options{})
		done <- err
	}()
	// Cancel only once Load is blocked reading the FIFO.
	w := testenv.WaitForReader(t, fifo)
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
	w.Close()

	// Uncancelled, Load is LoadFile.
	r, diags, err := p.Load(context.Background(), "../testdata/recipes/valid/minimal.hcl", Options{})
	if err != nil || diags.HasErrors() || r == nil || r.Image.Name != "minimal" || p.Files()["../testdata/recipes/valid/minimal.hcl"] == nil {
		t.Errorf("Load: %v %v %v", r, diags, err)
	}
}
