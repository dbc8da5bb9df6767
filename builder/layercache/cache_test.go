package layercache

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// disk makes a sparse 64 MiB disk image with data in a few places.
func disk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewSource(1))
	for _, off := range []int64{0, 5 << 20, 40<<20 + 123} {
		b := make([]byte, 3<<20)
		rnd.Read(b)
		f.WriteAt(b, off)
	}
	return p
}

func scribble(t *testing.T, p string, off int64, data string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(data), off); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func same(t *testing.T, a, b string) bool {
	t.Helper()
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	return bytes.Equal(x, y)
}

// fixture is a cache in a temporary folder, the disk the layers are written
// on (work), a copy of that disk before any layer (base) and its base table.
type fixture struct {
	ctx  context.Context
	dir  string
	c    Cache
	work string
	base string
	bt   *Table
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{ctx: context.Background(), dir: dir, c: Cache{Dir: filepath.Join(dir, "cache")}}
	f.work = disk(t, dir)
	f.base = filepath.Join(dir, "base.raw")
	copyFile(t, f.work, f.base)
	bt, err := f.c.BaseTable(f.ctx, "sha256:root", f.work)
	if err != nil {
		t.Fatal(err)
	}
	f.bt = bt
	return f
}

// save writes data at off on the work disk and saves the disk as e, over
// the state parent: the saved state's table.
func (f *fixture) save(t *testing.T, e Entry, parent *Table, off int64, data string) *Table {
	t.Helper()
	scribble(t, f.work, off, data)
	tb, err := f.c.Save(f.ctx, e, f.work, parent)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// restore restores chain onto a fresh copy of the base and returns the
// copy's path.
func (f *fixture) restore(t *testing.T, chain ...*Entry) (string, error) {
	t.Helper()
	r := filepath.Join(f.dir, "restored.raw")
	copyFile(t, f.base, r)
	_, err := f.c.Restore(f.ctx, chain, f.bt, r)
	return r, err
}

// TestSaveRestoreChain snapshots two layers as deltas and restores them onto
// a fresh copy of the base: the bytes come back, and the deltas hold only
// what changed.
func TestSaveRestoreChain(t *testing.T) {
	f := newFixture(t)
	dir, c, work, bt := f.dir, f.c, f.work, f.bt
	scribble(t, work, 1<<20, "layer one")
	t1 := f.save(t, Entry{Key: "sha256:k1", Root: "sha256:root", Layer: "one", Created: time.Now()}, bt, 60<<20, "into a hole")
	after1 := filepath.Join(dir, "after1.raw")
	copyFile(t, work, after1)
	scribble(t, work, 1<<20, "layer two")
	f.save(t, Entry{Key: "sha256:k2", Parent: "sha256:k1", Root: "sha256:root", Layer: "two", Created: time.Now()}, t1, 10<<20, "more")
	e1, _ := c.Get("sha256:k1", bt.Digest())
	e2, _ := c.Get("sha256:k2", t1.Digest())
	if e1 == nil || e2 == nil || e1.Changed != 2 || e2.Changed != 2 {
		t.Fatalf("entries %+v %+v: want 2 changed clusters each", e1, e2)
	}

	for _, tc := range []struct {
		chain []*Entry
		want  string
	}{{[]*Entry{e1}, after1}, {[]*Entry{e1, e2}, work}} {
		restored, err := f.restore(t, tc.chain...)
		if err != nil {
			t.Fatal(err)
		}
		if !same(t, restored, tc.want) {
			t.Errorf("restoring %d layers did not give the snapshotted bytes", len(tc.chain))
		}
	}
	// The deltas are sparse: a handful of clusters, not the disk.
	for _, e := range []*Entry{e1, e2} {
		if du := diskUsage(c.dir(e)); du > 4*ClusterSize+64<<10 {
			t.Errorf("entry %s takes %d bytes", e.Layer, du)
		}
	}
	if got, _ := c.Get("sha256:nope", bt.Digest()); got != nil {
		t.Error("Get of a missing key returned an entry")
	}
	if got, _ := c.Get("sha256:k2", bt.Digest()); got != nil {
		t.Error("Get returned a snapshot made on another parent state")
	}
}

// TestCorruptSnapshotDetected: a flipped byte in a delta, a truncated
// table and an unreadable entry are each reported, never restored.
func TestCorruptSnapshotDetected(t *testing.T) {
	f := newFixture(t)
	c, bt := f.c, f.bt
	f.save(t, Entry{Key: "sha256:k1", Layer: "one"}, bt, 2<<20, "changed")
	e, _ := c.Get("sha256:k1", bt.Digest())
	restore := func() error {
		_, err := f.restore(t, e)
		return err
	}
	scribble(t, filepath.Join(c.dir(e), "delta"), 2<<20, "CHANGED")
	var ce *CorruptError
	if err := restore(); !errors.As(err, &ce) || ce.Entry.Key != "sha256:k1" {
		t.Errorf("flipped delta: %v", err)
	}
	os.WriteFile(filepath.Join(c.dir(e), "table"), []byte("imagectl-cluster-table v1 1 2\n"), 0o644)
	if err := restore(); !errors.As(err, &ce) {
		t.Errorf("truncated table: %v", err)
	}
	os.WriteFile(filepath.Join(c.dir(e), "entry.json"), []byte("{"), 0o644)
	if got, err := c.Get("sha256:k1", bt.Digest()); got != nil || err != nil {
		t.Errorf("unreadable entry: %v, %v; want none", got, err)
	}
	if _, err := os.Stat(c.dir(e)); err == nil {
		t.Error("the unreadable entry was left in place")
	}
}

// TestConcurrentSaves: builds racing to store the same layer leave one
// good entry.
func TestConcurrentSaves(t *testing.T) {
	f := newFixture(t)
	ctx, c, work, bt := f.ctx, f.c, f.work, f.bt
	scribble(t, work, 3<<20, "same state")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Save(ctx, Entry{Key: "sha256:k", Layer: "x"}, work, bt); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	e, err := c.Get("sha256:k", bt.Digest())
	if err != nil || e == nil {
		t.Fatalf("after concurrent saves: %v %v", e, err)
	}
	if r, err := f.restore(t, e); err != nil || !same(t, r, work) {
		t.Errorf("restore after concurrent saves: %v", err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(c.Dir, "entries", ".tmp-*")); len(tmps) != 0 {
		t.Errorf("left behind: %v", tmps)
	}
}

// TestSweep: a half-written snapshot of a build that died goes; the
// entries stay (which entries go is the cache package's LRU).
func TestSweep(t *testing.T) {
	f := newFixture(t)
	c, bt := f.c, f.bt
	f.save(t, Entry{Key: "sha256:a", Layer: "a"}, bt, 1<<20, "layer a")
	tmp := filepath.Join(c.Dir, "entries", ".tmp-123")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "delta"), []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the half-written snapshot is still there: %v", err)
	}
	if left, err := c.List(); err != nil || len(left) != 1 || left[0].Key != "sha256:a" {
		t.Errorf("left %+v, %v", left, err)
	}
}

// TestStatesCoexist: the same key saved from different bytes (a rebuild of
// a layer is not bit-identical) keeps both states, so that the layers saved
// after each apply onto the state they were made from; Get picks by parent
// state, the newest first.
func TestStatesCoexist(t *testing.T) {
	f := newFixture(t)
	c, bt := f.c, f.bt
	a := f.save(t, Entry{Key: "sha256:k", Layer: "x", Created: time.Now().Add(-time.Minute)}, bt, 1<<20, "first run")
	b := f.save(t, Entry{Key: "sha256:k", Layer: "x", Created: time.Now()}, bt, 1<<20, "second run")
	if a.Digest() == b.Digest() {
		t.Fatal("the two runs gave the same state")
	}
	e, _ := c.Get("sha256:k", bt.Digest())
	if e == nil || e.State != b.Digest() {
		t.Fatalf("Get gave %+v, want the newer state %s", e, b.Digest())
	}
	if all, _ := c.List(); len(all) != 2 {
		t.Fatalf("%d entries, want both states", len(all))
	}
	if err := c.Remove(e); err != nil {
		t.Fatal(err)
	}
	if e, _ := c.Get("sha256:k", bt.Digest()); e == nil || e.State != a.Digest() {
		t.Fatalf("after removing the newer state, Get gave %+v", e)
	}
	if left, _ := filepath.Glob(filepath.Join(c.Dir, "entries", ".tmp-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
