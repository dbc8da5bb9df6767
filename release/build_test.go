package release_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
)

// The store side of build: version generation, parent version, staging
// inside the store and publishing by rename, with a synthetic build's
// outputs (no appliance runs).
func TestBuildPublishesIntoStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st := store.NewDir(dir)
	signer, _ := storetest.Keys(t, t.TempDir())
	tgz0, man0 := storetest.Artifact(t, t.TempDir(), "demo", "20260101.1", storetest.Options{Signer: signer})
	if _, err := st.Publish(ctx, manifest.Files{Tarball: tgz0, Manifest: man0}, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	sb, err := release.StartBuild(ctx, st, release.BuildOptions{Image: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	today := time.Now().UTC().Format("20060102")
	version := sb.Version("")
	if version != today+".1" || sb.Parent() != "20260101.1" || sb.VersionFrom() != "generated" {
		t.Fatalf("version %q from %q, parent %q", version, sb.VersionFrom(), sb.Parent())
	}
	out := sb.OutputDir("")
	if !strings.HasPrefix(out, filepath.Join(dir, ".staging")) {
		t.Fatalf("the build writes to %s, not inside the store", out)
	}
	tgz, man := storetest.Artifact(t, out, "demo", version, storetest.Options{Signer: signer})
	files := manifest.Files{Tarball: tgz, Manifest: man, ValidationScript: manifest.FilesBeside(tgz).ValidationScript}
	p, err := sb.Publish(ctx, files, []string{tgz + ".sig"})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "demo", version)
	if p.Files.Tarball != filepath.Join(want, "demo-"+version+".tgz") || p.Signatures[0] != p.Files.Tarball+".sig" ||
		p.Version.Image != "demo" || p.Version.Version != version || sb.Location() != dir {
		t.Errorf("published %+v, %v in %s", p.Files, p.Signatures, sb.Location())
	}
	for _, f := range []string{p.Files.Tarball, p.Files.Manifest, p.Files.ValidationScript, p.Signatures[0]} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	if e, _ := os.ReadDir(out); len(e) != 0 {
		t.Errorf("staging keeps %d files", len(e))
	}
	next, err := release.StartBuild(ctx, st, release.BuildOptions{Image: "demo", DryRun: true})
	if err != nil || next.Version("") != today+".2" {
		t.Errorf("next version %q %v", next.Version(""), err)
	}
	// A version already in the store is refused before anything is built.
	if _, err := release.StartBuild(ctx, st, release.BuildOptions{Image: "demo", Version: version}); err == nil || !strings.Contains(err.Error(), "already in the store") {
		t.Errorf("building a stored version again: %v", err)
	}
	// Without a store, nothing changes.
	none, err := release.StartBuild(ctx, nil, release.BuildOptions{Image: "demo"})
	if none != nil || err != nil || none.Version("") != "" || none.OutputDir("x") != "x" || none.Parent() != "" || none.VersionFrom() != "" {
		t.Errorf("no store: %+v %v", none, err)
	}
	if p, err := none.Publish(ctx, files, []string{"s"}); err != nil || p.Files != files || p.Version != nil || p.Signatures[0] != "s" {
		t.Errorf("publishing without a store: %+v %v", p, err)
	}
}

// A build given its version and --output-dir writes there and is not staged.
func TestBuildIntoStoreWithOutputDir(t *testing.T) {
	st := store.NewDir(filepath.Join(t.TempDir(), "store"))
	sb, err := release.StartBuild(ctx, st, release.BuildOptions{Image: "demo", Version: "1.0.0", OutputDir: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.Version("") != "" || sb.Version("1.0.0") != "1.0.0" || sb.VersionFrom() != "" || sb.OutputDir("out") != "out" || sb.Parent() != "" {
		t.Errorf("version %q from %q, output %q, parent %q", sb.Version("1.0.0"), sb.VersionFrom(), sb.OutputDir("out"), sb.Parent())
	}
}
