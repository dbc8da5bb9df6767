package storeopen

import (
	"context"
	"path"
	"sync"
	"testing"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/gitcatalog/gittest"
	"github.com/gpuaas/imagectl/store/storetest"
)

// TestRecordsThroughCatalog: a store opened with a git catalog keeps its
// evidence and revocations there (the lazy catalog passes every call
// through), as the conformance tests want them.
func TestRecordsThroughCatalog(t *testing.T) {
	t.Parallel()
	env := gittest.Env(t)
	var mu sync.Mutex
	bares := map[store.Promotions]string{}
	storetest.TestRecords(t, storetest.Records{
		Open: func(t *testing.T) store.Promotions {
			bare := gittest.Bare(t)
			s, err := Open(context.Background(), Options{Store: t.TempDir(), Catalog: bare, Env: env, CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			bares[s] = bare
			mu.Unlock()
			return s
		},
		Rewrite: func(t *testing.T, p store.Promotions, f storetest.RecordFile, edit func([]byte) []byte) {
			mu.Lock()
			bare := bares[p]
			mu.Unlock()
			rel := path.Join("revocations", f.Image+".json")
			switch {
			case f.Site != "":
				rel = path.Join("sites", f.Site, "evidence", f.Image, f.Version+".json")
			case f.Version != "":
				rel = path.Join("comparisons", f.Image, f.Version+".json")
			}
			gittest.Edit(t, bare, env, rel, edit)
		},
	})
}
