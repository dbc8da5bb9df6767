//go:build guestfs

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/manifest"
)

// TestDemoRebuildSignedAndDiffed builds examples/demo.hcl through the CLI,
// signed, verifies it, rebuilds it with one more package (its extras layer,
// after the others: the layer cache restores the layers before it) and
// checks that imagectl diff shows exactly that package, and that the
// signatures of one build do not verify the other's tgz.
func TestDemoRebuildSignedAndDiffed(t *testing.T) {
	vars := testbase.Vars(t)
	env := []string{"COSIGN_PASSWORD=test", "HOME=" + t.TempDir()}
	key := "testdata/recipes/valid/keys/cosign-test.key"
	pub := "testdata/recipes/valid/keys/cosign-test.pub"
	cache, work := t.TempDir(), t.TempDir()
	build := func(out, version string, extra ...string) string {
		t.Helper()
		args := append([]string{"build", "examples/demo.hcl", "-var-file", vars, "-var", "version=" + version,
			"--sign-key", key, "--output-dir", out, "--cache-dir", cache, "--work-dir", work, "--output", "json"}, extra...)
		stdout, stderr, code := imagectl(t, env, args...)
		if code != 0 {
			t.Fatalf("imagectl %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stderr, lastLines(stdout, 30))
		}
		return filepath.Join(out, "imagectl-demo-"+version)
	}
	a := build(t.TempDir(), "0.1.0")
	if _, stderr, code := imagectl(t, env, "verify", a+".tgz", "--key", pub); code != 0 {
		t.Fatalf("verify of the signed build: exit %d\n%s", code, stderr)
	}
	b := build(t.TempDir(), "0.1.0", "-var", "extra_packages=tree")
	mb, err := manifest.Read(b + ".manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range mb.Layers {
		if want := l.Name == "tools" || l.Name == "netdata"; (l.CachedAt != nil) != want {
			t.Errorf("layer %s: cached %v, want %v", l.Name, l.CachedAt != nil, want)
		}
	}
	if _, _, code := imagectl(t, env, "verify", b+".tgz", "--key", pub); code != 0 {
		t.Fatal("verify of the second build failed")
	}

	// One build's signatures do not verify the other's tgz.
	for _, ext := range []string{".tgz.sig", ".tgz.sigstore.json"} {
		data, err := os.ReadFile(a + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(b+ext, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, code := imagectl(t, env, "verify", b+".tgz", "--key", pub); code == 0 {
		t.Error("the first build's signature verified the second build's tgz")
	} else {
		t.Logf("swapped signatures refused: %s", strings.TrimSpace(stderr))
	}

	stdout, stderr, code := imagectl(t, env, "diff", a+".manifest.json", b+".manifest.json", "-o", "json")
	if code != 1 {
		t.Fatalf("diff: exit %d, want 1 (they differ)\n%s", code, stderr)
	}
	var d manifest.Diff
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatal(err)
	}
	p := d.Packages
	if len(p.Added) != 1 || p.Added[0].Name != "tree" || len(p.Removed)+len(p.Upgraded)+len(p.Downgraded) != 0 {
		t.Errorf("package changes %+v, want exactly tree added", p)
	}
	text, _, _ := imagectl(t, env, "diff", a+".manifest.json", b+".manifest.json")
	if !strings.Contains(text, "tree") {
		t.Errorf("the text diff does not name tree:\n%s", text)
	}
	t.Logf("diff of the two builds:\n%s", text)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
