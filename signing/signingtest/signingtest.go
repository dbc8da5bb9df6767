// Package signingtest holds what tests of signing and its CLI share: a
// small real artifact (a gzip tar and a manifest that describes it), a
// loaded key pair, tampered copies of signed JSON documents, and the real
// cosign CLI the Makefile builds.
package signingtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/internal/tgztest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/signing"
)

// KeyPair makes a cosign-format key pair whose private key is encrypted
// with password and loads it: the signer, the verifier of its public key,
// and both keys' PEM.
func KeyPair(t testing.TB, password []byte) (s *signing.Signer, v *signing.Verifier, priv, pub []byte) {
	t.Helper()
	priv, pub, err := signing.GenerateKeyPair(password)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = signing.LoadPrivateKey(priv, password); err != nil {
		t.Fatal(err)
	}
	if v, err = signing.LoadPublicKey(pub); err != nil {
		t.Fatal(err)
	}
	return s, v, priv, pub
}

// EditJSON returns doc, a JSON object, with f's changes: the tampered
// envelopes and statements that refusal tests feed a verifier or parser.
func EditJSON(t testing.TB, doc []byte, f func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Artifact writes <dir>/<stem>.tgz, a small gzip tar, and
// <dir>/<stem>.manifest.json, the repository's demo manifest with its
// artifact section describing that tgz. It returns both paths.
func Artifact(t testing.TB, dir, stem string) (tarball, manifestPath string) {
	t.Helper()
	tgz := tgztest.Bytes(t,
		tgztest.File("./etc/hostname", "demo\n"),
		tgztest.File("./etc/imagectl/build.json", `{"image":"`+stem+`"}`+"\n"))
	files := manifest.FilesBeside(filepath.Join(dir, stem+manifest.TarballExt))
	tarball = files.Tarball
	if err := os.WriteFile(tarball, tgz, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(filepath.Join(repoRoot(t), "testdata/manifests/demo-0.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Bytes(tgz)
	m.Artifact.File = filepath.Base(tarball)
	m.Artifact.SHA256, m.Artifact.Size = d.Hex(), d.Size
	m.Artifact.Entries = 2
	return tarball, manifesttest.Write(t, files.Manifest, m)
}

// Cosign returns the real cosign CLI the Makefile builds ($IMAGECTL_COSIGN).
// Without it the test skips, or fails under CI (testenv.Missing): CI must
// run the interoperability tests.
func Cosign(t testing.TB) string {
	t.Helper()
	p := os.Getenv("IMAGECTL_COSIGN")
	if p == "" {
		testenv.Missing(t, "IMAGECTL_COSIGN is not set: the test runs the real cosign CLI (make test builds it and sets it)")
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("IMAGECTL_COSIGN=%s: %v", p, err)
	}
	return p
}

// RunCosign runs cosign with a private TUF cache and the given extra
// environment, offline-safe, and returns its combined output and error.
func RunCosign(t testing.TB, cosign, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(cosign, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TUF_ROOT="+filepath.Join(dir, ".sigstore")), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TrustedRoot writes an empty Sigstore trusted root: what cosign
// verify-blob needs, offline, to verify a bundle with --key alone.
func TrustedRoot(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "trusted_root.json")
	if err := os.WriteFile(p, []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "../..")
}
