package recipes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/builder/steps"
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

// writeTar writes a tarball of the given headers (a regular file's content
// is its name).
func writeTar(t *testing.T, hdrs ...*tar.Header) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "b.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, h := range hdrs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(h.Name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBundleThroughItsOwnLink: a tarball whose later entry lies under an
// earlier symlink entry (staged in order, it would be written wherever the
// link points, as root) is a recipe error, as is a symlink that replaces
// an earlier entry; a tarball that only links is fine.
func TestBundleThroughItsOwnLink(t *testing.T) {
	link := func(name, target string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}
	}
	reg := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	dir := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755} }
	for name, tc := range map[string]struct {
		hdrs []*tar.Header
		want string
	}{
		"a file under a link": {[]*tar.Header{link("a", "/tmp/x/victim"), reg("a/pwned"), link("a/keep", "x")}, `entry "a/pwned" lies at or under the symlink entry "a"`},
		"a dir at a link":     {[]*tar.Header{link("a", "/etc"), dir("a/")}, `entry "a" lies at or under the symlink entry "a"`},
		"a deeper entry":      {[]*tar.Header{dir("d/"), link("d/l", "/"), reg("d/l/x/y")}, `entry "d/l/x/y" lies at or under the symlink entry "d/l"`},
		"a link over a dir":   {[]*tar.Header{dir("a/"), link("a", "/etc")}, `symlink entry "a" replaces an earlier entry`},
		"links only":          {[]*tar.Header{dir("a/"), reg("a/x"), link("b", "a"), link("c", "/etc")}, ""},
	} {
		b := &Bundle{Name: "b", Path: writeTar(t, tc.hdrs...), Archive: true}
		diags := inspectBundle(b, nil, &hcl.Range{Filename: "r.hcl"})
		if tc.want == "" {
			if diags.HasErrors() {
				t.Errorf("%s: %s", name, diags)
			}
			continue
		}
		if !diags.HasErrors() || !strings.Contains(diags[0].Detail, tc.want) || diags[0].Subject == nil {
			t.Errorf("%s: %v, want %q", name, diags, tc.want)
		}
	}
}

// TestCopyBundle: a planned bundle read again from its source gives each
// planned entry once, in the source's order, with a file's content; a file
// changed, gone, or no longer a regular file fails.
func TestCopyBundle(t *testing.T) {
	reg := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	dir := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755} }
	link := func(name, target string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}
	}
	copyAll := func(s steps.StageBundle, entries []BundleEntry) (order []string, content map[string]string, err error) {
		bufs := map[string]*bytes.Buffer{}
		err = CopyBundle(context.Background(), s, entries, func(e BundleEntry) (io.Writer, error) {
			order = append(order, e.Type+" "+e.Path)
			bufs[e.Path] = new(bytes.Buffer)
			return bufs[e.Path], nil
		})
		content = map[string]string{}
		for p, b := range bufs {
			if b.Len() > 0 {
				content[p] = b.String()
			}
		}
		return order, content, err
	}
	planned := writeTar(t, dir("d/"), reg("d/z"), reg("a"), link("l", "a"))
	entries, _, err := readBundle(&Bundle{Path: planned, Archive: true})
	if err != nil {
		t.Fatal(err)
	}
	copiesAll := func(what string, s steps.StageBundle, entries []BundleEntry, wantOrder string) {
		t.Helper()
		order, content, err := copyAll(s, entries)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := strings.Join(order, ","); got != wantOrder {
			t.Errorf("%s order = %s, want %s", what, got, wantOrder)
		}
		if content["d/z"] != "d/z" || content["a"] != "a" || len(content) != 2 {
			t.Errorf("%s content = %q", what, content)
		}
	}
	copiesAll("tarball", steps.StageBundle{SourcePath: planned, Archive: true}, entries, "dir d,file d/z,file a,symlink l")

	// The same bundle as a directory: by path.
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"d/z", "a"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", filepath.Join(root, "l")); err != nil {
		t.Fatal(err)
	}
	dirEntries, _, err := readBundle(&Bundle{Path: root})
	if err != nil {
		t.Fatal(err)
	}
	copiesAll("directory", steps.StageBundle{SourcePath: root}, dirEntries, "file a,dir d,file d/z,symlink l")

	// Changed since the plan: same size, other bytes; gone; a symlink now.
	if err := os.WriteFile(filepath.Join(root, "a"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := copyAll(steps.StageBundle{SourcePath: root}, dirEntries); err == nil || err.Error() != "a changed since the plan was made" {
		t.Errorf("changed file: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "d/z")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := copyAll(steps.StageBundle{SourcePath: root}, dirEntries[1:]); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file gone from a directory: %v", err)
	}
	gone := writeTar(t, dir("d/"), reg("a"), link("l", "a"))
	if _, _, err := copyAll(steps.StageBundle{SourcePath: gone, Archive: true}, entries); err == nil || err.Error() != "d/z disappeared since the plan was made" {
		t.Errorf("file gone from a tarball: %v", err)
	}
	notReg := writeTar(t, dir("d/"), link("d/z", "a"), reg("a"), link("l", "a"))
	if _, _, err := copyAll(steps.StageBundle{SourcePath: notReg, Archive: true}, entries); err == nil || err.Error() != "d/z disappeared since the plan was made" {
		t.Errorf("file now a symlink: %v", err)
	}
}
