package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSmokeRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	tgz := filepath.Join(dir, "x-1.tgz")
	_, errs, code := imagectl(t, nil, "smoke", tgz)
	if code != 1 || !strings.Contains(errs, "x-1.tgz: no such file") {
		t.Errorf("missing tgz: exit %d, %q", code, errs)
	}
	os.WriteFile(tgz, []byte("x"), 0o644)
	_, errs, code = imagectl(t, nil, "smoke", tgz)
	if code != 1 || !strings.Contains(errs, "x-1.manifest.json") {
		t.Errorf("missing manifest: exit %d, %q", code, errs)
	}
	_, errs, code = imagectl(t, nil, "smoke", tgz, "--output", "yaml")
	if code != 1 || !strings.Contains(errs, "--output must be text or json") {
		t.Errorf("bad output: exit %d, %q", code, errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}
