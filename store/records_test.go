package store_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
)

func TestDirRecords(t *testing.T) {
	t.Parallel()
	storetest.TestRecords(t, storetest.Records{
		Open: func(t *testing.T) store.Promotions { return store.NewDir(t.TempDir()) },
		Rewrite: func(t *testing.T, p store.Promotions, f storetest.RecordFile, edit func([]byte) []byte) {
			path := filepath.Join(p.(*store.Dir).Root, ".revocations", f.Image+".json")
			switch {
			case f.Site != "":
				path = filepath.Join(p.(*store.Dir).Root, ".evidence", f.Site, f.Image, f.Version+".json")
			case f.Version != "":
				path = filepath.Join(p.(*store.Dir).Root, ".comparisons", f.Image, f.Version+".json")
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

// TestDirAddEvidenceAllOrNone: results for several files are written all
// or none: when one file cannot be written (its directory is a link to
// nowhere), the others, already read and encoded, are not published.
func TestDirAddEvidenceAllOrNone(t *testing.T) {
	t.Parallel()
	d := store.NewDir(t.TempDir())
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	ev := func(site, host string) store.Evidence {
		return store.Evidence{Site: site, RecordedAt: t0, RecordedBy: "alice", Via: "hostcheck", Result: storetest.Result("img", "1", host, true, t0)}
	}
	if err := d.AddEvidence(ctx, []store.Evidence{ev("a", "h1")}); err != nil {
		t.Fatal(err)
	}
	// Site b's directory: reading finds no file there, writing fails.
	if err := os.MkdirAll(filepath.Join(d.Root, ".evidence", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(d.Root, "nowhere"), filepath.Join(d.Root, ".evidence", "b", "img")); err != nil {
		t.Fatal(err)
	}
	if err := d.AddEvidence(ctx, []store.Evidence{ev("a", "h2"), ev("b", "h3")}); err == nil {
		t.Fatal("no error")
	}
	if evs, err := d.Evidence(ctx, "a", "img", "1"); err != nil || len(evs) != 1 || evs[0].Result.Host != "h1" {
		t.Errorf("site a after a failed write: %+v %v", evs, err)
	}
	if left, _ := filepath.Glob(filepath.Join(d.Root, ".evidence", "a", "img", ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
