package recipes

import (
	"context"
	"errors"
	"testing"
)

// TestLoadStopsBetweenFiles: the load that a Load leaves running in the
// background after its context ended stops at its next file, with an
// error saying why.
func TestLoadStopsBetweenFiles(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("the user pressed Ctrl-C"))
	r, diags := NewParser().loadFile(ctx, "../testdata/recipes/valid/minimal.hcl", Options{})
	if r != nil || !diags.HasErrors() || diags[len(diags)-1].Summary != "Interrupted" ||
		diags[len(diags)-1].Detail != "Loading stopped: the user pressed Ctrl-C." {
		t.Errorf("recipe %v, diagnostics %v", r, diags)
	}
}
