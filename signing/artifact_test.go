package signing_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

type keys struct {
	signer   *signing.Signer
	verifier *signing.Verifier
}

func newKeys(t testing.TB) keys {
	t.Helper()
	s, v, _, _ := signingtest.KeyPair(t, []byte("pw"))
	return keys{s, v}
}

func signedArtifact(t *testing.T, k keys) (dir, tgz, man string) {
	t.Helper()
	dir = t.TempDir()
	tgz, man = signingtest.Artifact(t, dir, "demo-0.1.0")
	if got := manifest.FilesBeside(tgz).Manifest; man != got {
		t.Fatalf("the manifest beside %s is %s, want %s", tgz, got, man)
	}
	a, err := signing.SignArtifact(context.Background(), k.signer, tgz, man, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{tgz + ".sig", tgz + ".sigstore.json", man + ".sig", man + ".sigstore.json"}
	if strings.Join(a.Files(), " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", a.Files(), want)
	}
	for _, f := range want {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	return dir, tgz, man
}

func TestSignAndVerifyArtifact(t *testing.T) {
	k := newKeys(t)
	_, tgz, man := signedArtifact(t, k)
	r, err := signing.VerifyArtifact(context.Background(), k.verifier, tgz, man)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verified || r.Err() != nil {
		t.Fatalf("not verified: %v", r.Err())
	}
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	want := "tarball signature,tarball bundle,manifest signature,manifest bundle,manifest matches tarball"
	if strings.Join(names, ",") != want {
		t.Errorf("checks %v, want %s", names, want)
	}
	m, err := manifest.Read(man)
	if err != nil {
		t.Fatal(err)
	}
	if r.SHA256 != m.Artifact.SHA256 || r.Size != m.Artifact.Size {
		t.Errorf("report says %s/%d, manifest %s/%d", r.SHA256, r.Size, m.Artifact.SHA256, m.Artifact.Size)
	}
	// The bundle is cosign's: v0.3, a key hint, the digest, the signature.
	var b struct {
		MediaType            string
		VerificationMaterial struct{ PublicKey struct{ Hint string } }
		MessageSignature     struct {
			MessageDigest struct{ Algorithm, Digest string }
			Signature     string
		}
	}
	data, err := os.ReadFile(tgz + ".sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	sig, _ := os.ReadFile(tgz + ".sig")
	if b.MediaType != "application/vnd.dev.sigstore.bundle.v0.3+json" || b.VerificationMaterial.PublicKey.Hint == "" ||
		b.MessageSignature.MessageDigest.Algorithm != "SHA2_256" || b.MessageSignature.Signature != string(sig) ||
		b.MessageSignature.MessageDigest.Digest != base64.StdEncoding.EncodeToString(mustHex(t, r.SHA256)) {
		t.Errorf("unexpected bundle %s", data)
	}
}

// Each way an artifact can fail to verify fails, and the error names the
// check and the file.
func TestVerifyArtifactFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		// break changes the signed artifact; it may return another verifier.
		breakIt func(t *testing.T, k keys, tgz, man string) *signing.Verifier
		want    []string
	}{
		{"wrong key", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			return newKeys(t).verifier
		}, []string{"tarball signature: " + "%TGZ%.sig: the signature does not match", "tarball bundle: %TGZ%.sigstore.json: the signature does not verify under this key: the bundle was signed with another key",
			"manifest signature: %MAN%.sig"}},
		{"tampered tgz", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			appendTo(t, tgz, "x")
			return nil
		}, []string{"tarball signature: %TGZ%.sig: the signature does not match %TGZ%", "tarball bundle: %TGZ%.sigstore.json: the bundle signs sha256",
			"manifest matches tarball: %MAN% records sha256"}},
		{"tampered manifest", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			b, _ := os.ReadFile(man)
			os.WriteFile(man, []byte(strings.Replace(string(b), `"demo"`, `"dem0"`, 1)), 0o644)
			return nil
		}, []string{"manifest signature: %MAN%.sig: the signature does not match %MAN%", "manifest bundle: %MAN%.sigstore.json: the bundle signs sha256"}},
		{"manifest does not describe the tgz", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			// A validly signed manifest of another tgz of the same name.
			manifesttest.Edit(t, man, func(m *manifest.Manifest) { m.Artifact.Size++ })
			s, err := k.signer.SignFile(context.Background(), man)
			if err != nil {
				t.Fatal(err)
			}
			if err := signing.WriteSignatures(s); err != nil {
				t.Fatal(err)
			}
			return nil
		}, []string{"manifest matches tarball: %MAN% records"}},
		{"tgz signature missing", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			os.Remove(tgz + ".sig")
			os.Remove(tgz + ".sigstore.json")
			return nil
		}, []string{"tarball signature: %TGZ% is not signed: neither %TGZ%.sig nor %TGZ%.sigstore.json exists"}},
		{"manifest signature missing", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			os.Remove(man + ".sig")
			os.Remove(man + ".sigstore.json")
			return nil
		}, []string{"manifest signature: %MAN% is not signed"}},
		{"manifest missing", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			os.Remove(man)
			return nil
		}, []string{"manifest: %MAN%: missing"}},
		{"garbage signature", func(t *testing.T, k keys, tgz, man string) *signing.Verifier {
			os.WriteFile(tgz+".sig", []byte("not base64!"), 0o644)
			os.WriteFile(tgz+".sigstore.json", []byte(`{"mediaType":"x"}`), 0o644)
			return nil
		}, []string{"tarball signature: %TGZ%.sig: not a base64 signature", `tarball bundle: %TGZ%.sigstore.json: not a Sigstore bundle: media type "x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeys(t)
			_, tgz, man := signedArtifact(t, k)
			v := k.verifier
			if other := tc.breakIt(t, k, tgz, man); other != nil {
				v = other
			}
			r, err := signing.VerifyArtifact(context.Background(), v, tgz, man)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verified {
				t.Fatal("verified")
			}
			msg := r.Err().Error()
			for _, w := range tc.want {
				w = strings.ReplaceAll(strings.ReplaceAll(w, "%TGZ%", tgz), "%MAN%", man)
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
}

// One of the two forms is enough: cosign sign-blob may write only one.
func TestVerifyWithOneFormOnly(t *testing.T) {
	for _, drop := range []string{".sig", ".sigstore.json"} {
		k := newKeys(t)
		_, tgz, man := signedArtifact(t, k)
		os.Remove(tgz + drop)
		os.Remove(man + drop)
		r, err := signing.VerifyArtifact(context.Background(), k.verifier, tgz, man)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Verified || len(r.Checks) != 3 {
			t.Errorf("without %s: verified %v, %d checks: %v", drop, r.Verified, len(r.Checks), r.Err())
		}
	}
}

func TestSignRefusesMismatchedManifest(t *testing.T) {
	k := newKeys(t)
	dir := t.TempDir()
	tgz, man := signingtest.Artifact(t, dir, "demo-0.1.0")
	appendTo(t, tgz, "x")
	_, err := signing.SignArtifact(context.Background(), k.signer, tgz, man, nil)
	if err == nil || !strings.Contains(err.Error(), "refusing to sign") || !strings.Contains(err.Error(), man) {
		t.Fatalf("got %v", err)
	}
	onlyArtifact(t, dir)

	manifesttest.Edit(t, man, func(m *manifest.Manifest) { m.Artifact = nil })
	if _, err := signing.SignArtifact(context.Background(), k.signer, tgz, man, nil); err == nil || !strings.Contains(err.Error(), "no artifact section") {
		t.Fatalf("got %v", err)
	}
	if _, err := signing.SignArtifact(context.Background(), k.signer, tgz, filepath.Join(dir, "none.manifest.json"), nil); err == nil {
		t.Fatal("signed without a manifest")
	}
	onlyArtifact(t, dir)
}

func TestSignCancelled(t *testing.T) {
	k := newKeys(t)
	dir := t.TempDir()
	tgz, man := signingtest.Artifact(t, dir, "demo-0.1.0")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := signing.SignArtifact(ctx, k.signer, tgz, man, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	onlyArtifact(t, dir)
}

func BenchmarkSignFile(b *testing.B) {
	const size = 64 << 20
	p := filepath.Join(b.TempDir(), "blob")
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	k := newKeys(b)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.signer.SignFile(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// onlyArtifact fails when dir holds anything but the tgz and manifest.
func onlyArtifact(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "demo-0.1.0.manifest.json demo-0.1.0.tgz" {
		t.Errorf("directory holds %v", names)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A large tgz whose size is not its manifest's is refused without being
// hashed (the report has no sha256), its manifest still checked; a small
// one is hashed, so the report says which signatures fail (see
// TestVerifyArtifactFailures).
func TestVerifyRefusesLargeWrongSizeUnhashed(t *testing.T) {
	k := newKeys(t)
	_, tgz, man := signedArtifact(t, k)
	if err := os.Truncate(tgz, 1<<30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	r, err := signing.VerifyArtifact(context.Background(), k.verifier, tgz, man)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || r.SHA256 != "" || r.Size != 1<<30 {
		t.Fatalf("verified %v, sha256 %q, size %d: want refused, not hashed", r.Verified, r.SHA256, r.Size)
	}
	status := map[string]string{}
	for _, c := range r.Checks {
		status[c.Name] = c.Error
	}
	if status["manifest signature"] != "" || !strings.Contains(status["manifest matches tarball"], "not hashed") ||
		!strings.Contains(status["tarball signature"], "does not match the") {
		t.Errorf("checks %+v", r.Checks)
	}
}
