package gitcatalog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/gitcatalog/gittest"
	"github.com/gpuaas/imagectl/store/storetest"
)

func TestRecords(t *testing.T) {
	t.Parallel()
	env := gittest.Env(t)
	storetest.TestRecords(t, storetest.Records{
		Open: func(t *testing.T) store.Promotions { return open(t, gittest.Bare(t), env) },
		// Rewrite commits the edit in another clone and pushes it: a
		// hand edit of the catalog's repository.
		Rewrite: func(t *testing.T, p store.Promotions, f storetest.RecordFile, edit func([]byte) []byte) {
			work := filepath.Join(t.TempDir(), "work")
			gittest.Run(t, "", env, "clone", "-q", p.(*Catalog).remote, work)
			rel := revocationPath(f.Image)
			if f.Site != "" {
				rel = evidencePath(f.Site, f.Image, f.Version)
			}
			abs := filepath.Join(work, filepath.FromSlash(rel))
			b, err := os.ReadFile(abs)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(abs, edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
			gittest.Run(t, work, env, "commit", "-q", "-am", "a hand edit")
			gittest.Run(t, work, env, "push", "-q", "origin", "HEAD:main")
		},
	})
}
