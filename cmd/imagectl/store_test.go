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

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
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
		if _, err := s.Publish(context.Background(), store.Artifact{Tarball: tgz, Manifest: man}, store.PublishOptions{Now: func() time.Time { return at }}); err != nil {
			t.Fatal(err)
		}
	}
	return dir, pub
}

func TestImagesAndShow(t *testing.T) {
	dir, _ := stored(t, "1.0.0", "1.1.0")
	env := []string{"IMAGECTL_STORE=" + dir}
	out, errs, code := imagectl(t, env, "images")
	if code != 0 || !regexp.MustCompile(`(?m)^demo +1\.0\.0 +2026-01-01T00:00:00Z .* yes$`).MatchString(out) || !strings.Contains(out, "1.1.0") {
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

// The store side of build: version generation, parent version, staging
// inside the store and publishing by rename, with a synthetic build result
// (no appliance runs).
func TestBuildPublishesIntoStore(t *testing.T) {
	dir, _ := stored(t, "20260101.1")
	vars := []string{"base_image=/var/cache/base.qcow2", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
	r, diags := recipes.NewParser().LoadFile("examples/demo.hcl", recipes.Options{Inputs: recipes.Inputs{Flags: vars}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	r.Image.Name = "demo"
	r.Image.Version = ""
	env := []string{"IMAGECTL_STORE=" + dir}
	version := ""
	sb, err := newStoreBuild(context.Background(), &storeFlags{}, "", false, env, r, &version, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.close()
	today := time.Now().UTC().Format("20060102")
	if version != today+".1" || sb.parentVersion() != "20260101.1" {
		t.Fatalf("version %q, parent %q", version, sb.parentVersion())
	}
	plan, err := plan.New(r, plan.Options{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	sb.adjust(plan)
	if plan.VersionFrom != "generated" || plan.Manifest.Image.Version != version {
		t.Errorf("plan version %q from %q", plan.Manifest.Image.Version, plan.VersionFrom)
	}
	out := sb.outputDir("")
	if !strings.HasPrefix(out, filepath.Join(dir, ".staging")) {
		t.Fatalf("the build writes to %s, not inside the store", out)
	}
	signer, _ := storetest.Keys(t, t.TempDir())
	tgz, man := storetest.Artifact(t, out, "demo", version, storetest.Options{Signer: signer})
	files := manifest.FilesBeside(tgz)
	files.Manifest = man
	res := &builder.Result{Files: files}
	var log strings.Builder
	sigs, err := sb.publish(context.Background(), res, []string{tgz + ".sig"}, &log)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "demo", version)
	if res.Files.Tarball != filepath.Join(want, "demo-"+version+".tgz") || sigs[0] != res.Files.Tarball+".sig" || !strings.Contains(log.String(), "published demo "+version) {
		t.Errorf("result points at %s, %v; log %q", res.Files.Tarball, sigs, log.String())
	}
	for _, p := range []string{res.Files.Tarball, res.Files.Manifest, res.Files.ValidationScript, sigs[0]} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	if e, _ := os.ReadDir(out); len(e) != 0 {
		t.Errorf("staging keeps %d files", len(e))
	}
	next := ""
	if _, err := newStoreBuild(context.Background(), &storeFlags{store: dir}, "", true, nil, r, &next, nil); err != nil || next != today+".2" {
		t.Errorf("next version %q %v", next, err)
	}
	// A version already in the store is refused before anything is built.
	again := version
	if _, err := newStoreBuild(context.Background(), &storeFlags{store: dir}, "", false, nil, r, &again, nil); err == nil || !strings.Contains(err.Error(), "already in the store") {
		t.Errorf("building a stored version again: %v", err)
	}
	// Without a store, nothing changes.
	v := ""
	if sb, err := newStoreBuild(context.Background(), &storeFlags{store: ""}, "", false, nil, r, &v, nil); sb != nil || err != nil || v != "" || sb.outputDir("x") != "x" {
		t.Errorf("no store: %+v %v %q", sb, err, v)
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
