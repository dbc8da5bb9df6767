package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
)

// stored publishes signed demo versions into a new store and returns its
// directory and the public key.
func stored(t *testing.T, versions ...string) (dir, pub string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "store")
	signer, pub := storetest.Keys(t, t.TempDir())
	s := store.NewDir(dir)
	for i, v := range versions {
		tgz, man := storetest.Artifact(t, t.TempDir(), "demo", v, storetest.Options{Signer: signer})
		at := time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC)
		if _, err := s.Publish(context.Background(), manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{Now: func() time.Time { return at }}); err != nil {
			t.Fatal(err)
		}
	}
	return dir, pub
}

func TestImagesAndShow(t *testing.T) {
	dir, _ := stored(t, "1.0.0", "1.1.0")
	env := []string{"IMAGECTL_STORE=" + dir}
	out, errs, code := imagectl(t, env, "images")
	if code != 0 || !regexp.MustCompile(`(?m)^demo +1\.0\.0 +2026-01-01T00:00:00Z .* yes +-$`).MatchString(out) || !strings.Contains(out, "1.1.0") {
		t.Fatalf("images: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = imagectl(t, nil, "images", "--store", dir, "-o", "json")
	var imgs []store.Image
	if err := json.Unmarshal([]byte(out), &imgs); err != nil || code != 0 || len(imgs) != 1 || len(imgs[0].Versions) != 2 {
		t.Fatalf("images json: %v %+v", err, imgs)
	}
	out, errs, code = imagectl(t, env, "show", "demo", "1.1.0")
	for _, want := range []string{"demo 1.1.0", "signed         yes\n", "custom/demo as demo-1-1-0 (distro_series custom/demo-1-1-0, base ubuntu/noble)",
		"demo-1.1.0.tgz.sigstore.json", "0 findings, 0 blocking"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q (exit %d)\n%s%s", want, code, out, errs)
		}
	}
	out, _, _ = imagectl(t, env, "show", "demo", "1.1.0", "-o", "json")
	var shown struct {
		Version store.Version
		MAAS    manifest.MAAS
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.Version.SHA256 == "" || shown.MAAS.VersionedName != "demo-1-1-0" {
		t.Errorf("show json: %v %+v", err, shown)
	}
	_, errs, code = imagectl(t, env, "show", "demo", "7")
	if code != 1 || !strings.Contains(errs, "demo version 7 is not in the store") {
		t.Errorf("show missing: exit %d %s", code, errs)
	}
	// An empty store lists nothing, and says so as JSON.
	out, _, code = imagectl(t, nil, "images", "--store", filepath.Join(t.TempDir(), "none"), "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("empty store: %q", out)
	}
}

func TestBuildDryRunWithStore(t *testing.T) {
	dir, _ := stored(t)
	out, errs, code := imagectl(t, []string{"IMAGECTL_STORE=" + dir}, h200("build", "--dry-run")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	today := time.Now().UTC().Format("20060102")
	if !strings.Contains(out, "gpuaas-h200-host-ubuntu2404 "+today+".1") || !strings.Contains(out, "version from: generated") {
		t.Errorf("plan:\n%s", out)
	}
}

// publish --sign-key into a directory store is refused, not ignored: the
// key signs a registry's OCI manifest, and nothing is published.
func TestPublishSignKeyIntoDirectoryStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	tgz, _ := storetest.Artifact(t, t.TempDir(), "demo", "1.0.0", storetest.Options{})
	_, errs, code := imagectl(t, nil, "publish", tgz, "--store", dir, "--sign-key", filepath.Join(t.TempDir(), "cosign.key"))
	if code == 0 || !strings.Contains(errs, "--sign-key signs a registry's OCI manifest") || !strings.Contains(errs, dir) {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the store %s was created: %v", dir, err)
	}
}
