package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
)

func TestDirRecords(t *testing.T) {
	t.Parallel()
	storetest.TestRecords(t, storetest.Records{
		Open: func(t *testing.T) store.Promotions { return store.NewDir(t.TempDir()) },
		Rewrite: func(t *testing.T, p store.Promotions, f storetest.RecordFile, edit func([]byte) []byte) {
			path := filepath.Join(p.(*store.Dir).Root, ".revocations", f.Image+".json")
			if f.Site != "" {
				path = filepath.Join(p.(*store.Dir).Root, ".evidence", f.Site, f.Image, f.Version+".json")
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	})
}
