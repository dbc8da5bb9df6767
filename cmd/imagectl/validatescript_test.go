package main

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden validation scripts under testdata/golden")

// TestGoldenValidateScripts pins, byte for byte, the validation script that
// validate-script writes for the shipped recipes, the Debian stand-in and a
// build manifest. Run with -update to rewrite them after an intended change.
// The goldens are .txt, as the plans' are: data to compare, not shell to
// lint or count (the script's shell is validate/sh/*.sh).
func TestGoldenValidateScripts(t *testing.T) {
	normalizeModes(t, "examples/site-bootstrap", "testdata/bundles")
	base := []string{"-var", "base_image=/var/cache/base.qcow2", "-var", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
	for _, tc := range []struct {
		name string
		args []string
	}{
		// A fixed version (the default is the time), and the bundles by a
		// relative path: the layer keys in the marker check hash the
		// bundle's source path, which must not depend on the checkout's.
		{"h200", []string{"validate-script", "recipes/h200.hcl", "--root", "testdata/bundles", "-var", "site_bootstrap_dir=testdata/bundles", "-var", "version=1.0.0"}},
		{"h200-debian", append([]string{"validate-script", "testdata/h200-debian.hcl"}, base...)},
		{"demo", append([]string{"validate-script", "examples/demo.hcl"}, base...)},
		{"demo-0.1.0.manifest", []string{"validate-script", "testdata/manifests/demo-0.1.0.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := imagectl(t, nil, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			golden(t, "testdata/golden/"+tc.name+".validate.txt", []byte(out))
		})
	}
}

// normalizeModes makes the file modes under dirs what a git checkout with
// umask 022 gives: the script checks bundle files' modes.
func normalizeModes(t *testing.T, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			return os.Chmod(p, mode)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/imagectl -run TestGoldenValidateScripts -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run go test ./cmd/imagectl -run TestGoldenValidateScripts -update if the change is intended)", path, i+1, g, w)
		}
	}
}
