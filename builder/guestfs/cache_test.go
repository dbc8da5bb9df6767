//go:build guestfs

package guestfs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/recipes"
)

// TestLayerCache builds a three-layer recipe with the layer cache: cold, then
// warm with no change (every layer restored, no appliance, the same tgz
// bytes), then with only the last layer changed (the first two restored),
// then with a corrupted snapshot (detected, removed and rebuilt).
func TestLayerCache(t *testing.T) {
	base, checksum := baseImage(t)
	dir := t.TempDir()
	cacheDir := filepath.Join(t.TempDir(), "layers")
	recipe := func(third string) *plan.Plan {
		t.Helper()
		p := filepath.Join(dir, "cached.hcl")
		src := fmt.Sprintf(`image "cached" {
  title   = "cached"
  version = "1"
  base {
    source   = %q
    checksum = %q
  }
  layer "one" {
    file "/etc/cache-test/one" {
      content = "one\n"
    }
    run = ["echo ran-one > /var/lib/cache-test-one"]
  }
  layer "two" {
    run = ["mkdir -p /opt/two && seq 1 20000 > /opt/two/numbers"]
  }
  layer "three" {
    file "/etc/cache-test/three" {
      content = %q
    }
  }
  waive "os-release" {
    reason = "the test base image is Debian"
  }
}
`, base, checksum, third)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return loadPlan(t, p, recipes.Options{})
	}
	type result struct {
		res    *builder.Result
		events []event.Event
	}
	build := func(plan *plan.Plan) result {
		t.Helper()
		var events []event.Event
		opts := buildOptions(t, t.TempDir(), &events)
		opts.LayerCache = cacheDir
		res, err := builder.Build(context.Background(), plan, opts)
		if err != nil {
			t.Fatal(err)
		}
		return result{res, events}
	}
	cachedLayers := func(r result) []string {
		var names []string
		for _, l := range r.res.Manifest.Layers {
			if l.CachedAt != nil {
				names = append(names, l.Name)
			}
		}
		return names
	}
	launched := func(r result) bool {
		for _, e := range r.events {
			if e.Type == "phase" && e.Phase == builder.PhaseLaunch {
				return true
			}
		}
		return false
	}
	c := layercache.Cache{Dir: cacheDir}

	cold := build(recipe("three\n"))
	if got := cachedLayers(cold); len(got) != 0 {
		t.Fatalf("cold build restored %v", got)
	}
	entries, _ := c.List()
	if len(entries) != 5 { // one, two, three, @config, @finalize
		t.Fatalf("%d cache entries after the cold build, want 5: %+v", len(entries), entries)
	}

	t.Run("warm, nothing changed", func(t *testing.T) {
		warm := build(recipe("three\n"))
		if got := cachedLayers(warm); len(got) != len(warm.res.Manifest.Layers) {
			t.Errorf("restored %v, want every layer", got)
		}
		if launched(warm) {
			t.Error("an appliance was launched although every layer was cached")
		}
		if warm.res.Manifest.Artifact.SHA256 != cold.res.Manifest.Artifact.SHA256 {
			t.Errorf("warm tgz %s, cold tgz %s: want the same bytes", warm.res.Manifest.Artifact.SHA256, cold.res.Manifest.Artifact.SHA256)
		}
		if len(warm.res.Manifest.Packages) == 0 || len(warm.res.Manifest.Packages) != len(cold.res.Manifest.Packages) {
			t.Errorf("warm manifest has %d packages, cold %d", len(warm.res.Manifest.Packages), len(cold.res.Manifest.Packages))
		}
	})

	t.Run("last layer changed", func(t *testing.T) {
		r := build(recipe("three, changed\n"))
		if got := strings.Join(cachedLayers(r), ","); got != "one,two" {
			t.Errorf("restored %q, want one,two", got)
		}
		out, err := exec.Command("tar", "-xzOf", r.res.Files.Tarball, "./etc/cache-test/three", "./opt/two/numbers").Output()
		if err != nil || !strings.HasPrefix(string(out), "three, changed\n1\n2\n") {
			t.Errorf("the tgz: %.40q, %v", out, err)
		}
	})

	t.Run("corrupted snapshot", func(t *testing.T) {
		var two *layercache.Entry
		entries, _ := c.List()
		for i := range entries {
			if entries[i].Layer == "two" {
				two = &entries[i]
			}
		}
		if two == nil {
			t.Fatal("no entry for layer two")
		}
		deltas, _ := filepath.Glob(filepath.Join(cacheDir, "entries", strings.TrimPrefix(two.Key, "sha256:"), "*", "delta"))
		if len(deltas) != 1 {
			t.Fatalf("layer two has %d stored states, want 1: %v", len(deltas), deltas)
		}
		f, err := os.OpenFile(deltas[0], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Flip bytes in every data region the delta holds.
		st, _ := f.Stat()
		buf := make([]byte, layercache.ClusterSize)
		flipped := 0
		for off := int64(0); off < st.Size(); off += layercache.ClusterSize {
			n, _ := f.ReadAt(buf, off)
			for i := 0; i < n; i++ {
				if buf[i] != 0 {
					buf[i] ^= 0xff
					f.WriteAt(buf[i:i+1], off+int64(i))
					flipped++
					break
				}
			}
		}
		f.Close()
		if flipped == 0 {
			t.Fatal("layer two's delta holds no data")
		}
		r := build(recipe("three, changed\n"))
		said := false
		for _, e := range r.events {
			said = said || (e.Type == "log" && strings.Contains(e.Message, "unusable"))
		}
		if !said {
			t.Error("the build did not report the corrupted snapshot")
		}
		if got := strings.Join(cachedLayers(r), ","); got != "one" {
			t.Errorf("restored %q, want only one", got)
		}
		out, err := exec.Command("tar", "-xzOf", r.res.Files.Tarball, "./opt/two/numbers").Output()
		if err != nil || !strings.HasPrefix(string(out), "1\n2\n3\n") || !strings.HasSuffix(string(out), "20000\n") {
			t.Errorf("layer two in the tgz: %.40q, %v", out, err)
		}
		// The rebuilt snapshot replaced the corrupted one.
		again := build(recipe("three, changed\n"))
		if got := cachedLayers(again); len(got) != len(again.res.Manifest.Layers) {
			t.Errorf("after the rebuild, restored %v, want every layer", got)
		}
	})
}
