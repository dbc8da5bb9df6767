package apply

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/digest"
)

// TestWriteBundleTar: a directory bundle is staged as a tar stream of the
// planned entries, by path, owned by root with the fixed time and the
// planned modes; a file changed since the plan stops it.
func TestWriteBundleTar(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := steps.StageBundle{Name: "b", SourcePath: root, Destination: "/opt/b", Entries: []steps.BundleEntry{
		{Path: "run", Type: "symlink", Target: "bin/run.sh", Mode: 0o777},
		{Path: "bin", Type: "dir", Mode: 0o755},
		{Path: "bin/run.sh", Type: "file", Mode: 0o750, Size: 10, SHA256: digest.Bytes([]byte("#!/bin/sh\n")).Hex()},
	}}
	var buf bytes.Buffer
	if err := writeBundleTar(context.Background(), s, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(bundleMTime) {
			t.Errorf("%s: uid %d gid %d time %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		got = append(got, strings.Join([]string{h.Name, string(h.Typeflag), h.Linkname, string(body)}, "|")+"|"+os.FileMode(h.Mode).String())
	}
	want := []string{
		"./bin/|5|||-rwxr-xr-x",
		"./bin/run.sh|0||#!/bin/sh\n|-rwxr-x---",
		"./run|2|bin/run.sh||-rwxrwxrwx",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tar stream:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := os.WriteFile(filepath.Join(root, "bin/run.sh"), []byte("#!/bin/bash"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeBundleTar(context.Background(), s, io.Discard); err == nil || !strings.Contains(err.Error(), "bin/run.sh") {
		t.Errorf("changed file: %v", err)
	}
}
