package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
)

// lister is the least a store supplies: its versions, and the names they
// take (a name not a version among them).
type lister struct {
	versions []*store.Version
	names    []string
	full     int // how often Version was asked
	err      error
}

func (l *lister) ListVersions(context.Context, string) ([]*store.Version, error) {
	return append([]*store.Version{}, l.versions...), l.err
}

func (l *lister) ListNames(context.Context, string) ([]string, error) { return l.names, l.err }

func (l *lister) Version(_ context.Context, image, version string) (*store.Version, error) {
	l.full++
	for _, v := range l.versions {
		if v.Version == version {
			full := *v
			full.Manifest = "full"
			return &full, nil
		}
	}
	return nil, fmt.Errorf("%s %s: %w", image, version, store.ErrNotFound)
}

func TestLatestAndNextVersionOf(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 11, 23, 10, m, 0, 0, time.UTC) }
	l := &lister{
		versions: []*store.Version{{Version: "b", Published: at(2)}, {Version: "c", Published: at(1)}, {Version: "a", Published: at(2)}},
		names:    []string{"20261123.2", "20261123.x", "20261122.7", "site-lab", "20261123.11"},
	}
	v, err := store.LatestOf(ctx, l, "demo")
	if err != nil || v.Version != "b" || v.Manifest != "full" || l.full != 1 {
		t.Errorf("latest %+v %v (%d full reads)", v, err, l.full)
	}
	if n, err := store.NextVersionOf(ctx, l, "demo", at(0).Add(13*time.Hour).In(time.FixedZone("x", 3600))); err != nil || n != "20261123.12" {
		t.Errorf("next %q %v", n, err)
	}
	if n, err := store.NextVersionOf(ctx, l, "demo", at(0).Add(24*time.Hour)); err != nil || n != "20261124.1" {
		t.Errorf("next day %q %v", n, err)
	}
	empty := &lister{}
	if v, err := store.LatestOf(ctx, empty, "demo"); v != nil || err != nil {
		t.Errorf("latest of none: %+v %v", v, err)
	}
	broken := &lister{err: errors.New("unreachable")}
	if _, err := store.LatestOf(ctx, broken, "demo"); err == nil {
		t.Error("latest: no error")
	}
	if _, err := store.NextVersionOf(ctx, broken, "demo", at(0)); err == nil {
		t.Error("next: no error")
	}
	for _, bad := range []string{"", "../x", "A"} {
		if _, err := store.LatestOf(ctx, l, bad); err == nil {
			t.Errorf("latest of %q: no error", bad)
		}
		if _, err := store.NextVersionOf(ctx, l, bad, at(0)); err == nil {
			t.Errorf("next of %q: no error", bad)
		}
	}
	vs := []*store.Version{{Version: "2", Published: at(1)}, {Version: "1", Published: at(1)}, {Version: "0", Published: at(3)}}
	store.SortVersions(vs)
	if vs[0].Version != "1" || vs[1].Version != "2" || vs[2].Version != "0" {
		t.Errorf("sorted %s %s %s", vs[0].Version, vs[1].Version, vs[2].Version)
	}
}

// Sources takes the files a build's Files name, and looks for the others
// beside the tgz (the signatures beside the manifest, wherever it is).
func TestSources(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	beside := manifest.FilesBeside(filepath.Join(dir, "out.tgz"))
	elsewhere := manifest.FilesBeside(filepath.Join(other, "x.tgz"))
	for _, p := range []string{beside.Tarball, beside.ValidationScript, beside.SBOM, beside.TarballSignature,
		elsewhere.Manifest, elsewhere.ManifestSignature, elsewhere.CycloneDX} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := manifest.Files{Tarball: beside.Tarball, Manifest: elsewhere.Manifest, CycloneDX: elsewhere.CycloneDX}
	var got []string
	for _, s := range store.Sources(a, "demo", "1.0") {
		rel, _ := filepath.Rel(filepath.Dir(filepath.Dir(s.Path)), s.Path)
		got = append(got, fmt.Sprintf("%s=%s(%s)", rel, s.Name, s.Role))
	}
	d, o := filepath.Base(dir), filepath.Base(other)
	want := []string{d + "/out.tgz=demo-1.0.tgz(tarball)", o + "/x.manifest.json=demo-1.0.manifest.json(manifest)",
		d + "/out-validate.sh=demo-1.0-validate.sh(validation-script)", d + "/out.spdx.json=demo-1.0.spdx.json(sbom)",
		o + "/x.cdx.json=demo-1.0.cdx.json(cyclonedx)", d + "/out.tgz.sig=demo-1.0.tgz.sig(signature)",
		o + "/x.manifest.json.sig=demo-1.0.manifest.json.sig(signature)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sources:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
