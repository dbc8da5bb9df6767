package cache_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/debcache"
	"github.com/gpuaas/imagectl/cache"
)

// packageEntries fetches n archives of size bytes each into the cache
// directory's package cache, as a build does, and returns them.
func packageEntries(t *testing.T, dir string, n, size int) []debcache.Deb {
	t.Helper()
	bodies := map[string][]byte{}
	var debs []debcache.Deb
	for i := range n {
		b := bytes.Repeat([]byte{byte(i + 1)}, size)
		sum := sha256.Sum256(b)
		name := fmt.Sprintf("p%d_1_all.deb", i)
		bodies["/"+name] = b
		debs = append(debs, debcache.Deb{Name: fmt.Sprintf("p%d", i), Version: "1", Filename: name, Size: int64(size), SHA256: hex.EncodeToString(sum[:])})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	for i := range debs {
		debs[i].URL = srv.URL + "/" + debs[i].Filename
	}
	f := &debcache.Fetcher{Cache: cache.Packages(dir), Client: srv.Client()}
	res, err := f.Fetch(context.Background(), debs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return debs
}

// The package cache is listed and pruned with the layer cache, under one
// bound, least recently used first across both; interrupted downloads are
// swept.
func TestPrunePackagesWithLayers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	layerEntries(t, dir)
	debs := packageEntries(t, dir, 3, 64<<10)
	pc := cache.Packages(dir)
	now := time.Now()
	used := func(d debcache.Deb, at time.Time) {
		if err := os.Chtimes(pc.Path(d.SHA256), at, at); err != nil {
			t.Fatal(err)
		}
	}
	used(debs[0], now.Add(-6*time.Hour))
	usedLayer(t, dir, "sha256:l1", now.Add(-5*time.Hour))
	used(debs[1], now.Add(-4*time.Hour))
	usedLayer(t, dir, "sha256:l2", now.Add(-3*time.Hour))
	used(debs[2], now.Add(-2*time.Hour))
	half := filepath.Join(pc.Dir, "partial", debs[0].SHA256+".partial")
	if err := os.WriteFile(half, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}

	c, err := cache.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Packages) != 3 || c.Packages[0].SHA256 != debs[0].SHA256 || c.PackageBytes != 3*(64<<10)+4 || c.PackagesDir != pc.Dir {
		t.Fatalf("listed packages %+v, %d bytes in %s", c.Packages, c.PackageBytes, c.PackagesDir)
	}
	// Room for everything but the oldest archive and the oldest layer.
	bound := c.LayerBytes + c.RegistryBytes + c.PackageBytes - 4 - (64 << 10) - c.Layers[0].Bytes
	p, err := cache.Prune(ctx, dir, cache.PruneOptions{MaxBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Packages) != 1 || p.Packages[0].SHA256 != debs[0].SHA256 || len(p.Layers) != 1 || p.Layers[0].Key != "sha256:l1" {
		t.Fatalf("pruned packages %+v, layers %+v", p.Packages, p.Layers)
	}
	if _, err := os.Stat(half); !os.IsNotExist(err) {
		t.Errorf("the interrupted download is still there: %v", err)
	}
	after, err := cache.List(dir)
	if err != nil || len(after.Packages) != 2 || after.LayerBytes+after.PackageBytes > bound {
		t.Fatalf("left %+v, %v", after, err)
	}
	// A removed archive is fetched again by the next build.
	f := &debcache.Fetcher{Cache: pc, Client: http.DefaultClient}
	if res, err := f.Fetch(ctx, debs[:1]); err != nil || res[0].Err != nil || res[0].Cached {
		t.Fatalf("fetching a pruned archive: %+v %v", res, err)
	}
	if p, err = cache.Prune(ctx, dir, cache.PruneOptions{MaxBytes: -1}); err != nil {
		t.Fatal(err)
	}
	if c, err := cache.List(dir); err != nil || len(c.Packages) != 0 || len(c.Layers) != 0 || len(p.Packages) != 3 {
		t.Fatalf("after emptying: %+v, removed %+v, %v", c, p, err)
	}
}
