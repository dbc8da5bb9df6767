package recipes

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirectoryBundleDigestIgnoresLocationAndMtime(t *testing.T) {
	mk := func() string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "lib"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lib/x"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("run.sh", filepath.Join(dir, "go")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b := mk(), mk()
	_, da, err := readBundle(&Bundle{Path: a})
	if err != nil {
		t.Fatal(err)
	}
	entries, db, err := readBundle(&Bundle{Path: b})
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("same content, different digests: %s %s", da, db)
	}
	if len(entries) != 4 {
		t.Errorf("entries = %+v", entries)
	}
	if err := os.Chmod(filepath.Join(b, "run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, dc, _ := readBundle(&Bundle{Path: b}); dc == db {
		t.Error("a mode change did not change the digest")
	}
}

func TestTarballBundle(t *testing.T) {
	p := filepath.Join(testdata, "bundles/fabric.tar.gz")
	entries, digest, err := readBundle(&Bundle{Path: p, Archive: true})
	if err != nil {
		t.Fatal(err)
	}
	if digest != "sha256:0e256907190b2f3931dab3a63a95a00c43fb67790cf51f286494bd027e9c60c8" {
		t.Errorf("digest %s is not the file's sha256", digest)
	}
	byPath := map[string]BundleEntry{}
	for _, e := range entries {
		byPath[e.Path] = e
	}
	if e := byPath["bin/run.sh"]; e.Type != "file" || e.Mode.Perm() != 0o755 || e.Size == 0 {
		t.Errorf("bin/run.sh = %+v", e)
	}
	if e := byPath["run"]; e.Type != "symlink" || e.Target != "bin/run.sh" {
		t.Errorf("run = %+v", e)
	}
}
