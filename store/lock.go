package store

import (
	"context"
	"path/filepath"

	"github.com/gpuaas/imagectl/internal/filelock"
)

// lock takes the store's exclusive lock (an flock on .lock), waiting until
// it is free or ctx ends. The returned function releases it.
func (d *Dir) lock(ctx context.Context) (func(), error) {
	return filelock.WaitContext(ctx, filepath.Join(d.Root, ".lock"), "the store "+d.Root)
}
