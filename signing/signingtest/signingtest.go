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
	"slices"
	"strings"
	"sync"
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
//
// A test binary makes each pair once: the scrypt that encrypts and
// decrypts a cosign key costs seconds a key under -race, and fixtures ask
// for keys by the dozen. The n-th call of one test (its subtests counted
// with it) gets the binary's n-th pair of that password, so the keys a
// test makes differ from each other as fresh ones would; only tests that
// never meet share one.
func KeyPair(t testing.TB, password []byte) (s *signing.Signer, v *signing.Verifier, priv, pub []byte) {
	t.Helper()
	made.mu.Lock()
	defer made.mu.Unlock()
	if made.pairs == nil {
		made.pairs, made.calls = map[string][]keyPair{}, map[string]int{}
	}
	pw := string(password)
	call := strings.SplitN(t.Name(), "/", 2)[0] + "\x00" + pw
	n := made.calls[call]
	made.calls[call]++
	for len(made.pairs[pw]) <= n {
		var k keyPair
		var err error
		if k.priv, k.pub, err = signing.GenerateKeyPair(password); err != nil {
			t.Fatal(err)
		}
		if k.s, err = signing.LoadPrivateKey(k.priv, password); err != nil {
			t.Fatal(err)
		}
		if k.v, err = signing.LoadPublicKey(k.pub); err != nil {
			t.Fatal(err)
		}
		made.pairs[pw] = append(made.pairs[pw], k)
	}
	k := made.pairs[pw][n]
	return k.s, k.v, slices.Clone(k.priv), slices.Clone(k.pub)
}

// keyPair is one pair KeyPair made. Signers and verifiers hold no state
// that use changes: tests may share them.
type keyPair struct {
	s         *signing.Signer
	v         *signing.Verifier
	priv, pub []byte
}

// made are the pairs KeyPair made, by password, and how many each test
// (by its top-level name and the password) has had.
var made struct {
	mu    sync.Mutex
	pairs map[string][]keyPair
	calls map[string]int
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
