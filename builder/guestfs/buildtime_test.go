//go:build guestfs

package guestfs

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/manifest"
)

// timeBound are the image's files whose content says when, or how fast,
// it was built, so two cold builds differ there whatever their settings:
// the build marker (the manifest's times: marker is its path) and
// ldconfig's aux-cache (the libraries' ctimes and inode numbers).
func timeBound(marker string) []string {
	return []string{"." + marker, "./var/cache/ldconfig/aux-cache"}
}

var mtimeField = regexp.MustCompile(` mtime=-?\d+`)

// TestDpkgSyncsSameOutputs builds the demo twice from cold, with dpkg
// syncing every file (KeepDpkgSyncs, as before) and without (the default),
// and compares the tgz's entries: type, mode, owner, size, content, link,
// device and xattrs of every one (two cold builds already differ in the
// modification times of what the build wrote and in timeBound's content,
// so their tgz bytes differ whatever the setting), and the full entry, time
// included, of dpkg.cfg.d, where the setting lived. It also checks that the
// build recorded where its time went (manifest and events) and logs both
// builds' breakdowns, the figures docs/speed.md gives.
func TestDpkgSyncsSameOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("two cold builds of the demo")
	}
	type built struct {
		tgz     string
		m       *manifest.Manifest
		entries map[string]string
		events  []event.Event
	}
	build := func(keepSyncs bool) built {
		t.Helper()
		var events []event.Event
		opts := buildOptions(t, t.TempDir(), &events)
		opts.KeepDpkgSyncs = keepSyncs
		res, err := builder.Build(context.Background(), planFor(t, "../../examples/demo.hcl"), opts)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(res.Files.Tarball)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		entries := map[string]string{}
		if err := tarDigests(zr, entries); err != nil {
			t.Fatal(err)
		}
		t.Logf("KeepDpkgSyncs=%v: %.1fs, timings %+v", keepSyncs, res.Manifest.Build.Seconds, *res.Manifest.Build.Timings)
		for _, l := range res.Manifest.Layers {
			if l.Timings != nil {
				t.Logf("  layer %s: %+v", l.Name, *l.Timings)
			}
		}
		return built{res.Files.Tarball, res.Manifest, entries, events}
	}
	syncs, unsafe := build(true), build(false)

	for _, b := range []built{syncs, unsafe} {
		bt := b.m.Build.Timings
		if bt == nil || bt.Base <= 0 || bt.Launch <= 0 || bt.Install <= 0 || bt.Commands <= 0 || bt.Pack <= 0 || bt.SBOM <= 0 {
			t.Errorf("the build's timings miss a part: %+v", bt)
		}
		layerEvents := map[string]bool{}
		total := false
		for _, e := range b.events {
			if e.Type == event.TypeTimings {
				layerEvents[e.Layer] = true
				total = total || (e.Layer == "" && e.Timings["install"] > 0)
			}
		}
		if !total {
			t.Error("no timings event for the whole build with its install time")
		}
		for _, l := range b.m.Layers {
			if l.Timings == nil || !layerEvents[l.Name] {
				t.Errorf("layer %s: timings %v, event %v", l.Name, l.Timings, layerEvents[l.Name])
			}
		}
		for _, l := range b.m.Layers {
			if l.Name == "tools" && l.Timings != nil && l.Timings.Install <= 0 {
				t.Errorf("layer %s installs packages in no time: %+v", l.Name, *l.Timings)
			}
		}
	}

	if !slices.Equal(syncs.m.Packages, unsafe.m.Packages) {
		t.Errorf("the packages differ:\n%v\n%v", syncs.m.Packages, unsafe.m.Packages)
	}
	names := func(m map[string]string) []string {
		var n []string
		for k := range m {
			n = append(n, k)
		}
		slices.Sort(n)
		return n
	}
	if a, b := names(syncs.entries), names(unsafe.entries); !slices.Equal(a, b) {
		t.Errorf("the tgz's entries differ: %d and %d", len(a), len(b))
	}
	bad := 0
	for name, a := range syncs.entries {
		b, ok := unsafe.entries[name]
		if !ok || slices.Contains(timeBound(syncs.m.Validation.Marker), name) {
			continue
		}
		if mtimeField.ReplaceAllString(a, "") != mtimeField.ReplaceAllString(b, "") {
			if bad++; bad <= 30 {
				t.Errorf("%s:\n  with syncs    %s\n  without them  %s%s", name, a, b, lineDiff(t, syncs.tgz, unsafe.tgz, name))
			}
		}
		if strings.HasPrefix(name, "./etc/dpkg/dpkg.cfg.d") && a != b {
			t.Errorf("%s differs (its time included):\n  with syncs    %s\n  without them  %s", name, a, b)
		}
	}
	if len(syncs.entries) < 1000 {
		t.Errorf("only %d entries", len(syncs.entries))
	}
}

// lineDiff is the lines that differ between the entry name of two tgz
// files, when it is a small text file: what a failure needs to be read.
func lineDiff(t *testing.T, tgzA, tgzB, name string) string {
	read := func(p string) []string {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err != nil {
				return nil
			}
			if "./"+strings.TrimPrefix(h.Name, "./") == name && h.Size < 1<<16 {
				b, _ := io.ReadAll(tr)
				return strings.Split(string(b), "\n")
			}
		}
	}
	a, b := read(tgzA), read(tgzB)
	var out strings.Builder
	for i := 0; i < max(len(a), len(b)) && out.Len() < 4000; i++ {
		var la, lb string
		if i < len(a) {
			la = a[i]
		}
		if i < len(b) {
			lb = b[i]
		}
		if la != lb {
			fmt.Fprintf(&out, "\n  line %d:\n    %q\n    %q", i+1, la, lb)
		}
	}
	return out.String()
}
