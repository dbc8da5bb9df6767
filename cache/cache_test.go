package cache_test

import (
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/cache"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/hashstamp"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/oci"
	"github.com/gpuaas/imagectl/store/oci/ocitest"
	"github.com/gpuaas/imagectl/store/storetest"
)

// layerEntries saves snapshots of two layers of a small disk into the
// cache directory's layer cache.
func layerEntries(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	disk := filepath.Join(t.TempDir(), "disk.raw")
	b := make([]byte, 8<<20)
	rand.New(rand.NewSource(1)).Read(b)
	if err := os.WriteFile(disk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	lc := cache.Layers(dir)
	parent, err := lc.BaseTable(ctx, "sha256:root", disk)
	if err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"sha256:l1", "sha256:l2"} {
		f, err := os.OpenFile(disk, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(b[:1<<20], int64(i+1)<<21)
		f.Close()
		if parent, err = lc.Save(ctx, layercache.Entry{Key: key, Layer: key[7:], Image: "img"}, disk, parent); err != nil {
			t.Fatal(err)
		}
	}
}

// usedLayer sets when a layer snapshot was last used.
func usedLayer(t *testing.T, dir, key string, at time.Time) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, cachedir.Layers, "entries", "*", "*", "entry.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var e layercache.Entry
		if json.Unmarshal(b, &e) == nil && e.Key == key {
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no layer snapshot %s", key)
}

// usedVersion sets when a registry version was last read.
func usedVersion(t *testing.T, v *store.Version, at time.Time) {
	t.Helper()
	if err := os.Chtimes(v.Dir, at, at); err != nil {
		t.Fatal(err)
	}
}

func blobs(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, cachedir.Registry, "blobs", "sha256", "*"))
	return names
}

// Layer snapshots and the versions a real registry's reads left in the
// cache are pruned together: by age, then least recently used first until
// the whole fits, each registry blob freed with the last version that
// links it; a version pruned is fetched again on the next read.
func TestPruneBothParts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	layerEntries(t, dir)

	reg := ocitest.Start(t)
	env := []string{oci.UsernameEnv + "=" + reg.Username, oci.PasswordEnv + "=" + reg.Password}
	pub, err := oci.Open(reg.Host+"/team", oci.Options{CacheDir: t.TempDir(), CAFile: reg.CAFile, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"1.0", "2.0"} {
		tgz, m := storetest.Artifact(t, t.TempDir(), "img", version, storetest.Options{})
		if _, err := pub.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: m}, store.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := oci.Open(reg.Host+"/team", oci.Options{CacheDir: filepath.Join(dir, cachedir.Registry), CAFile: reg.CAFile, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := r.Version(ctx, "img", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.LocalTarball(ctx); err != nil {
		t.Fatal(err)
	}
	v2, err := r.Version(ctx, "img", "2.0")
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	usedLayer(t, dir, "sha256:l1", now.Add(-5*time.Hour))
	usedVersion(t, v1, now.Add(-4*time.Hour))
	usedLayer(t, dir, "sha256:l2", now.Add(-3*time.Hour))
	usedVersion(t, v2, now.Add(-time.Hour))

	c, err := cache.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Layers) != 2 || len(c.Registry) != 2 || c.LayerBytes <= 0 || c.RegistryBytes <= 0 {
		t.Fatalf("listed %+v", c)
	}
	if got := c.Registry[0]; got.Ref != reg.Host+"/team/img:1.0" || !got.Tarball || got.Dir != v1.Dir || c.Registry[1].Tarball {
		t.Errorf("registry versions %+v", c.Registry)
	}
	var versionBytes int64
	for _, v := range c.Registry {
		versionBytes += v.Bytes
	}
	if c.RegistryBytes > versionBytes {
		t.Errorf("the registry cache takes %d bytes, more than its versions' %d", c.RegistryBytes, versionBytes)
	}
	// A download a crash cut short.
	half := filepath.Join(dir, cachedir.Registry, "blobs", "sha256", ".fetch-123")
	if err := os.WriteFile(half, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}

	p, err := cache.Prune(ctx, dir, cache.PruneOptions{OlderThan: 270 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Layers) != 1 || p.Layers[0].Key != "sha256:l1" || len(p.Registry) != 0 {
		t.Fatalf("prune by age removed %+v", p)
	}
	if _, err := os.Stat(half); !os.IsNotExist(err) {
		t.Errorf("the cut download is still there: %v", err)
	}

	// One byte too many: the least recently used goes, v1 with its tgz.
	c, _ = cache.List(dir)
	before := len(blobs(t, dir))
	p, err = cache.Prune(ctx, dir, cache.PruneOptions{MaxBytes: c.LayerBytes + c.RegistryBytes - 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Layers) != 0 || len(p.Registry) != 1 || p.Registry[0].Ref != reg.Host+"/team/img:1.0" || p.FreedBytes < v1.Size {
		t.Fatalf("prune by size removed %+v", p)
	}
	after, _ := cache.List(dir)
	if len(after.Registry) != 1 || after.Registry[0].Dir != v2.Dir || len(after.Layers) != 1 {
		t.Fatalf("left %+v", after)
	}
	if got := c.LayerBytes + c.RegistryBytes - after.LayerBytes - after.RegistryBytes; got != p.FreedBytes {
		t.Errorf("freed %d bytes, the cache shrank by %d", p.FreedBytes, got)
	}
	if n := len(blobs(t, dir)); n >= before-1 {
		t.Errorf("%d blobs before, %d after: v1's own blobs were not freed", before, n)
	}
	// v2's files, some of them blobs v1 shared, are all there.
	for _, f := range v2.Files {
		if f.Role == store.RoleTarball {
			continue
		}
		if _, err := os.Stat(filepath.Join(v2.Dir, f.Name)); err != nil {
			t.Errorf("v2 lost %s: %v", f.Name, err)
		}
	}
	if again, err := r.Version(ctx, "img", "2.0"); err != nil || again.Manifest == "" {
		t.Errorf("reading v2 after the prune: %v", err)
	}
	// The read marked v2 used.
	if c, err := cache.List(dir); err != nil || len(c.Registry) != 1 || time.Since(c.Registry[0].LastUsed) > time.Minute {
		t.Errorf("after reading v2 again: %+v, %v", c, err)
	}
	// A pruned version is fetched again.
	again, err := r.Version(ctx, "img", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := again.LocalTarball(ctx); err != nil {
		t.Fatal(err)
	} else if st, err := os.Stat(p); err != nil || st.Size() != v1.Size {
		t.Errorf("v1's tgz fetched again: %v", err)
	}

	// Versions just read are in use: even emptying the cache leaves them.
	if p, err = cache.Prune(ctx, dir, cache.PruneOptions{MaxBytes: -1}); err != nil {
		t.Fatal(err)
	}
	if len(p.Layers) != 1 || len(p.Registry) != 0 || len(p.InUse) != 2 {
		t.Fatalf("emptying with both versions just read removed %+v", p)
	}
	if _, err := os.Stat(filepath.Join(again.Dir, filepath.Base(again.Manifest))); err != nil {
		t.Errorf("a version in use lost its manifest: %v", err)
	}
	// No longer in use: everything goes.
	usedVersion(t, v1, now.Add(-time.Hour))
	usedVersion(t, v2, now.Add(-time.Hour))
	if p, err = cache.Prune(ctx, dir, cache.PruneOptions{MaxBytes: -1}); err != nil {
		t.Fatal(err)
	}
	c, err = cache.List(dir)
	if err != nil || len(c.Layers) != 0 || len(c.Registry) != 0 || len(blobs(t, dir)) != 0 {
		t.Errorf("after emptying: %+v, %v, blobs %v", c, err, blobs(t, dir))
	}
	if len(p.Layers) != 0 || len(p.Registry) != 2 || len(p.InUse) != 0 {
		t.Errorf("emptying removed %+v", p)
	}
}

// An empty or absent cache directory lists nothing and prunes nothing.
func TestEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	c, err := cache.List(dir)
	if err != nil || len(c.Layers) != 0 || len(c.Registry) != 0 || c.Layers == nil || c.Registry == nil || c.Hashed == nil {
		t.Fatalf("%+v, %v", c, err)
	}
	p, err := cache.Prune(context.Background(), dir, cache.PruneOptions{MaxBytes: -1})
	if err != nil || len(p.Layers)+len(p.Registry)+len(p.Hashed) != 0 || p.FreedBytes != 0 {
		t.Fatalf("%+v, %v", p, err)
	}
}

// While a registry read, or a build fetching packages, holds its part's
// lock, Prune waits holding neither of the others (a build takes the
// layer cache meanwhile), says so once, and gives up when its context
// ends; once the holder is done, Prune runs.
func TestPruneWaitsHoldingNeither(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold func(dir string) (func(), error)
		want string // in the error of the cancelled Prune ("" any error)
	}{
		{"registry read", func(dir string) (func(), error) { return cache.Registry(dir).Lock().Wait(false) }, "waiting for builds and registry reads"},
		{"package fetch", func(dir string) (func(), error) { return cache.Packages(dir).Lock().Wait(false) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			unlockHeld, err := tc.hold(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer unlockHeld()
			ctx, cancel := context.WithCancel(context.Background())
			waited := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := cache.Prune(ctx, dir, cache.PruneOptions{MaxBytes: -1, Waiting: func() { close(waited) }})
				done <- err
			}()
			<-waited
			unlockBuild, err := cache.Layers(dir).Lock().Wait(false) // would block if Prune held it
			if err != nil {
				t.Fatal(err)
			}
			unlockBuild()
			cancel()
			if err := <-done; err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("prune cancelled while waiting: %v", err)
			}
			unlockHeld()
			if _, err := cache.Prune(context.Background(), dir, cache.PruneOptions{MaxBytes: -1}); err != nil {
				t.Error(err)
			}
		})
	}
}

// hashRecord writes a file and records in the cache directory that it
// had sha; the file's path.
func hashRecord(t *testing.T, dir, sha string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "v.tgz")
	if err := os.WriteFile(p, []byte(sha), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := hashstamp.Of(f)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := cache.Hashed(dir).Record(sha, id, time.Unix(0, id.Ctime).Add(hashstamp.Settle)); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	return p
}

// The hash records are listed; a prune with any bound removes those whose
// tgz is gone, and only those, and emptying the cache removes them all.
func TestHashRecordsListedAndPruned(t *testing.T) {
	dir := t.TempDir()
	kept, gone := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	hashRecord(t, dir, kept)
	if err := os.Remove(hashRecord(t, dir, gone)); err != nil {
		t.Fatal(err)
	}
	c, err := cache.List(dir)
	if err != nil || len(c.Hashed) != 2 || c.HashedBytes == 0 || c.HashedDir != filepath.Join(dir, cachedir.Hashed) ||
		!c.Hashed[0].Current || c.Hashed[1].Current {
		t.Fatalf("listed %+v, %v", c, err)
	}
	p, err := cache.Prune(context.Background(), dir, cache.PruneOptions{MaxBytes: 1 << 30, OlderThan: time.Hour})
	if err != nil || len(p.Hashed) != 1 || p.Hashed[0].SHA256 != gone || p.FreedBytes != c.Hashed[1].Bytes {
		t.Fatalf("pruned %+v, %v", p, err)
	}
	if c, err = cache.List(dir); err != nil || len(c.Hashed) != 1 || c.Hashed[0].SHA256 != kept {
		t.Fatalf("after pruning: %+v, %v", c.Hashed, err)
	}
	p, err = cache.Prune(context.Background(), dir, cache.PruneOptions{MaxBytes: -1})
	if err != nil || len(p.Hashed) != 1 || p.Hashed[0].SHA256 != kept || p.FreedBytes != c.HashedBytes {
		t.Fatalf("emptying pruned %+v, %v", p, err)
	}
	if c, err = cache.List(dir); err != nil || len(c.Hashed) != 0 || c.Hashed == nil {
		t.Fatalf("after emptying: %+v, %v", c.Hashed, err)
	}
}
