//go:build !guestfs

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

func TestSmokeWithoutLibguestfsSaysWhy(t *testing.T) {
	tgz := filepath.Join(t.TempDir(), "x-1.tgz")
	os.WriteFile(tgz, []byte("x"), 0o644)
	os.WriteFile(manifest.FilesBeside(tgz).Manifest, []byte(`{"schema_version": 1, "image": {"name": "x"}, "validation": {"script": "/usr/local/sbin/x-validate.sh"}}`), 0o644)
	_, errs, code := imagectl(t, nil, "smoke", tgz)
	if code != 1 || !strings.Contains(errs, "built without libguestfs") || !strings.Contains(errs, "-tags guestfs") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
