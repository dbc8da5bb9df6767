//go:build guestfs

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/sbom"
	"github.com/gpuaas/imagectl/signing/signingtest"
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
	t.Run("sbom and provenance", func(t *testing.T) { checkSupplyChain(t, env, a, pub) })
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

	// The SBOMs say the same.
	stdout, stderr, code = imagectl(t, env, "diff", a+".spdx.json", b+".spdx.json", "-o", "json")
	if code != 1 {
		t.Fatalf("diff of the SBOMs: exit %d, want 1\n%s", code, stderr)
	}
	var sd manifest.Diff
	if err := json.Unmarshal([]byte(stdout), &sd); err != nil {
		t.Fatal(err)
	}
	if p := sd.Packages; len(p.Added) != 1 || p.Added[0].Name != "tree" || len(p.Removed)+len(p.Upgraded)+len(p.Downgraded) != 0 {
		t.Errorf("SBOM package changes %+v, want exactly tree added", p)
	}
	// So do the CycloneDX ones, and either kind against the other.
	for _, pair := range [][2]string{{a + ".cdx.json", b + ".cdx.json"}, {a + ".spdx.json", b + ".cdx.json"}} {
		stdout, stderr, code = imagectl(t, env, "diff", pair[0], pair[1], "-o", "json")
		var cd manifest.Diff
		if err := json.Unmarshal([]byte(stdout), &cd); code != 1 || err != nil {
			t.Fatalf("diff %s %s: exit %d, want 1, %v\n%s", pair[0], pair[1], code, err, stderr)
		}
		if p := cd.Packages; len(p.Added) != 1 || p.Added[0].Name != "tree" || len(p.Removed)+len(p.Upgraded)+len(p.Downgraded) != 0 {
			t.Errorf("diff %s %s: package changes %+v, want exactly tree added", pair[0], pair[1], p)
		}
	}
}

// checkSupplyChain checks a signed build's SBOM and provenance: the SBOM
// is valid SPDX 2.3 by spdx/tools-golang and lists the manifest's
// packages, syft finds the same packages in the tgz's extracted tree, the
// real cosign verifies the three attestations for the tgz and refuses them for
// a changed one, and imagectl verify refuses a changed SBOM.
func checkSupplyChain(t *testing.T, env []string, stem, pub string) {
	m, err := manifest.Read(stem + ".manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.SBOM == nil || m.Provenance == nil {
		t.Fatalf("the manifest records no SBOM or provenance: %+v %+v", m.SBOM, m.Provenance)
	}
	f, err := os.Open(stem + ".spdx.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := spdxjson.Read(f)
	f.Close()
	if err != nil {
		t.Fatalf("tools-golang cannot read the SBOM: %v", err)
	}
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Errorf("the SBOM does not validate: %v", err)
	}
	if ids, err := spdxlib.GetDescribedPackageIDs(doc); err != nil || len(ids) != 1 {
		t.Errorf("the SBOM describes %v (%v), want the image alone", ids, err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" {
		t.Errorf("SPDX version %q, data license %q", doc.SPDXVersion, doc.DataLicense)
	}
	ours, err := sbom.ReadFile(stem + ".spdx.json")
	if err != nil {
		t.Fatal(err)
	}
	if d := manifest.ComparePackages(m.Packages, ours.Packages); !d.Empty() || len(ours.Packages) == 0 {
		t.Errorf("the SBOM's %d packages are not the manifest's %d: %+v", len(ours.Packages), len(m.Packages), d)
	}
	licensed := 0
	for _, p := range doc.Packages {
		if p.PackageLicenseDeclared != "" && p.PackageLicenseDeclared != "NOASSERTION" {
			licensed++
		}
	}
	t.Logf("SBOM: %d packages, %d with a declared license", len(doc.Packages), licensed)
	if licensed < len(ours.Packages)/2 {
		t.Errorf("only %d of %d packages have a license from their copyright file", licensed, len(ours.Packages))
	}

	// syft, on the same tree extracted from the tgz.
	syft := os.Getenv("IMAGECTL_SYFT")
	if syft == "" {
		testenv.Missing(t, "IMAGECTL_SYFT is not set: the test compares the SBOM with syft's (make test builds it and sets it)")
	}
	tree := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", stem+".tgz", "-C", tree).CombinedOutput(); err != nil {
		t.Fatalf("extracting the tgz: %v\n%s", err, out)
	}
	syftOut := filepath.Join(t.TempDir(), "syft.spdx.json")
	cmd := exec.Command(syft, "scan", "dir:"+tree, "-q", "--override-default-catalogers", "dpkg-db-cataloger", "-o", "spdx-json="+syftOut)
	cmd.Env = append(os.Environ(), "SYFT_CHECK_FOR_APP_UPDATE=false", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("syft: %v\n%s", err, out)
	}
	theirs, err := sbom.ReadFile(syftOut)
	if err != nil {
		t.Fatal(err)
	}
	if d := manifest.ComparePackages(ours.Packages, theirs.Packages); !d.Empty() {
		t.Errorf("syft finds other packages than imagectl's SBOM (imagectl %d, syft %d): %+v", len(ours.Packages), len(theirs.Packages), d)
	}
	if _, stderr, code := imagectl(t, env, "diff", stem+".spdx.json", syftOut); code != 0 {
		t.Errorf("imagectl diff of its SBOM and syft's: exit %d, want 0\n%s", code, stderr)
	}
	if m.CycloneDX == nil || m.CycloneDX.Format != sbom.CycloneDXFormat {
		t.Errorf("the manifest records no CycloneDX SBOM: %+v", m.CycloneDX)
	} else if _, err := manifest.ReadDocument(stem+".cdx.json", m.CycloneDX, 64<<20); err != nil {
		t.Error(err)
	}
	if _, stderr, code := imagectl(t, env, "diff", stem+".cdx.json", syftOut); code != 0 {
		t.Errorf("imagectl diff of its CycloneDX SBOM and syft's: exit %d, want 0\n%s", code, stderr)
	}

	// The real cosign verifies the three attestations for the tgz, and for
	// no other.
	cosign := signingtest.Cosign(t)
	dir := t.TempDir() // cosign runs there
	pub, err = filepath.Abs(pub)
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(dir, "changed.tgz")
	data, err := os.ReadFile(stem + ".tgz")
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(changed, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ typ, envelope string }{{"slsaprovenance1", stem + ".provenance.dsse.json"},
		{"spdxjson", stem + ".spdx.dsse.json"}, {"cyclonedx", stem + ".cdx.dsse.json"}} {
		args := []string{"verify-blob-attestation", "--key", pub, "--insecure-ignore-tlog=true", "--type", tc.typ, "--signature", tc.envelope}
		// cosign reads at most 128 MiB of a blob unless told more.
		big := []string{"COSIGN_MAX_ATTACHMENT_SIZE=4GiB"}
		if out, err := signingtest.RunCosign(t, cosign, dir, big, append(args, stem+".tgz")...); err != nil {
			t.Errorf("cosign verify-blob-attestation --type %s: %v\n%s", tc.typ, err, out)
		}
		out, err := signingtest.RunCosign(t, cosign, dir, big, append(args, changed)...)
		if err == nil || !strings.Contains(out, "subject") {
			t.Errorf("cosign verify-blob-attestation --type %s of a changed tgz: %v, want a subject mismatch:\n%s", tc.typ, err, out)
		}
	}

	// imagectl verify refuses a changed SBOM (the manifest vouches for it).
	orig, err := os.ReadFile(stem + ".spdx.json")
	if err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(stem+".spdx.json", orig, 0o644)
	if err := os.WriteFile(stem+".spdx.json", bytes.Replace(orig, []byte(`"SPDX-2.3"`), []byte(`"SPDX-2.3" `), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := imagectl(t, env, "verify", stem+".tgz", "--key", pub); code == 0 || !strings.Contains(stderr, "sbom") {
		t.Errorf("verify accepted a changed SBOM: exit %d\n%s", code, stderr)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
