package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/tgztest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
)

// TestCheckWaivers: imagectl check applies the waivers recorded in the
// manifest beside the tgz; only errors left unwaived fail it.
func TestCheckWaivers(t *testing.T) {
	tgz := tgztest.Write(t, filepath.Join(t.TempDir(), "lab-1.tgz"), tgztest.Dir("./"), tgztest.File("./etc/os-release", "ID=debian\n"))

	out, _, code := imagectl(t, nil, "check", tgz, "-o", "json")
	var res struct {
		Findings []struct{ Check, Severity string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 {
		t.Fatalf("check without waivers: exit %d, %v\n%s", code, err, out)
	}
	var errs []string
	for _, f := range res.Findings {
		if f.Severity == "error" {
			errs = append(errs, f.Check)
		}
	}
	if len(errs) < 2 {
		t.Fatalf("want several errors on a bare Debian tree, got %v", errs)
	}
	waive := func(checks []string) {
		m := manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Image: manifest.Image{Name: "lab", Version: "1"}}
		for _, c := range checks {
			m.DeployWaivers = append(m.DeployWaivers, manifest.Waiver{Check: c, Reason: "lab image: " + c})
		}
		manifesttest.Write(t, manifest.FilesBeside(tgz).Manifest, &m)
	}

	waive(errs[1:])
	out, _, code = imagectl(t, nil, "check", tgz)
	if code != 1 || !strings.Contains(out, "error: "+errs[0]+":") || !strings.Contains(out, "(waived: lab image: "+errs[1]+")") {
		t.Errorf("one error left unwaived: exit %d\n%s", code, out)
	}
	waive(errs)
	out, _, code = imagectl(t, nil, "check", tgz)
	if code != 0 || strings.Count(out, "(waived: ") != len(errs) {
		t.Errorf("every error waived: exit %d\n%s", code, out)
	}
}

// TestCacheLsPrune lists and prunes a real layer cache made with the
// layercache package on a small disk image.
func TestCacheLsPrune(t *testing.T) {
	cacheDir := t.TempDir()
	c := layercache.Cache{Dir: filepath.Join(cacheDir, cachedir.Layers)}
	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(disk, make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	table, err := c.BaseTable(ctx, "sha256:root", disk)
	if err != nil {
		t.Fatal(err)
	}
	for i, layer := range []string{"tools", "netdata"} {
		f, _ := os.OpenFile(disk, os.O_WRONLY, 0)
		f.WriteAt([]byte(layer), int64(i)<<20)
		f.Close()
		if table, err = c.Save(ctx, layercache.Entry{Key: "sha256:" + strings.Repeat(string(rune('a'+i)), 64), Layer: layer, Image: "demo", Created: time.Now()}, disk, table); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code := imagectl(t, nil, "cache", "ls", "--cache-dir", cacheDir)
	if code != 0 || !strings.Contains(out, "tools") || !strings.Contains(out, "netdata") || !strings.Contains(out, "2 snapshots") {
		t.Fatalf("cache ls: exit %d\n%s", code, out)
	}
	out, _, code = imagectl(t, nil, "cache", "prune", "--cache-dir", cacheDir, "--max-size", "1x")
	if code == 0 {
		t.Errorf("a bad --max-size was accepted:\n%s", out)
	}
	out, _, code = imagectl(t, nil, "cache", "prune", "--cache-dir", cacheDir, "-o", "json")
	var res struct {
		Removed         []layercache.Entry `json:"removed"`
		RegistryRemoved []json.RawMessage  `json:"registry_removed"`
		Freed           int64              `json:"freed_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || len(res.Removed) != 2 || res.RegistryRemoved == nil || res.Freed <= 0 {
		t.Fatalf("cache prune: exit %d, %v\n%s", code, err, out)
	}
	out, _, _ = imagectl(t, nil, "cache", "ls", "--cache-dir", cacheDir)
	if !strings.Contains(out, "0 snapshots") || !strings.Contains(out, "0 registry versions, 0 B in "+filepath.Join(cacheDir, cachedir.Registry)) ||
		!strings.Contains(out, "0 packages, 0 B in "+filepath.Join(cacheDir, cachedir.Packages)) {
		t.Errorf("after prune:\n%s", out)
	}
	out, _, _ = imagectl(t, nil, "cache", "ls", "--cache-dir", cacheDir, "-o", "json")
	var ls struct {
		Directory string            `json:"directory"`
		Entries   []json.RawMessage `json:"entries"`
		Registry  []json.RawMessage `json:"registry_versions"`
		Packages  []json.RawMessage `json:"packages"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || ls.Directory != filepath.Join(cacheDir, cachedir.Layers) || ls.Entries == nil || ls.Registry == nil || ls.Packages == nil {
		t.Errorf("cache ls -o json: %v\n%s", err, out)
	}
}
