package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

var pwEnv = []string{"COSIGN_PASSWORD=pw"}

// keyPair makes dir/k.key and dir/k.pub with imagectl keygen.
func keyPair(t *testing.T, dir string) (key, pub string) {
	t.Helper()
	prefix := filepath.Join(dir, "k")
	out, errs, code := imagectl(t, pwEnv, "keygen", "--output-key-prefix", prefix)
	if code != 0 {
		t.Fatalf("keygen: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, prefix+".key") || !strings.Contains(out, prefix+".pub") {
		t.Errorf("keygen says %q", out)
	}
	if st, err := os.Stat(prefix + ".key"); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key: %v, %v", st, err)
	}
	return prefix + ".key", prefix + ".pub"
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	key, pub := keyPair(t, dir)
	before, _ := os.ReadFile(key)
	_, errs, code := imagectl(t, pwEnv, "keygen", "--output-key-prefix", filepath.Join(dir, "k"))
	if code == 0 || !strings.Contains(errs, key+" exists") {
		t.Errorf("overwrote a key pair: exit %d, %s", code, errs)
	}
	if after, _ := os.ReadFile(key); string(after) != string(before) {
		t.Error("the refused keygen changed the key")
	}
	if _, errs, code := imagectl(t, pwEnv, "keygen", "--output-key-prefix", filepath.Join(dir, "k"), "--force"); code != 0 {
		t.Errorf("--force: %s", errs)
	}
	if _, err := signing.LoadPublicKeyFile(pub); err != nil {
		t.Error(err)
	}
	_, errs, code = imagectl(t, nil, "keygen", "--output-key-prefix", filepath.Join(dir, "nopw"))
	if code == 0 || !strings.Contains(errs, "set COSIGN_PASSWORD") {
		t.Errorf("keygen without COSIGN_PASSWORD: exit %d, %s", code, errs)
	}
	if _, errs, code := imagectl(t, []string{"COSIGN_PASSWORD="}, "keygen", "--output-key-prefix", filepath.Join(dir, "empty")); code != 0 {
		t.Errorf("keygen with an empty password: %s", errs)
	}
}

func TestSignVerify(t *testing.T) {
	dir := t.TempDir()
	key, pub := keyPair(t, dir)
	tgz, man := signingtest.Artifact(t, dir, "demo-0.1.0")
	out, errs, code := imagectl(t, pwEnv, "sign", tgz, "--key", key)
	if code != 0 {
		t.Fatalf("sign: exit %d: %s", code, errs)
	}
	for _, f := range []string{tgz + ".sig", tgz + ".sigstore.json", man + ".sig", man + ".sigstore.json"} {
		if !strings.Contains(out, f+"\n") {
			t.Errorf("sign does not list %s:\n%s", f, out)
		}
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	out, errs, code = imagectl(t, nil, "verify", tgz, "--key", pub)
	if code != 0 || !strings.Contains(out, "verified "+tgz) {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = imagectl(t, nil, "verify", tgz, "--key", pub, "--output", "json")
	var r signing.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || !r.Verified || len(r.Checks) != 5 {
		t.Fatalf("verify --output json: exit %d, %v: %s", code, err, out)
	}
	// sign -o json names the files too.
	out, _, code = imagectl(t, pwEnv, "sign", tgz, "--key", key, "-o", "json", "--manifest", man)
	var a signing.SignedArtifact
	if err := json.Unmarshal([]byte(out), &a); err != nil || code != 0 || a.Manifest.BundlePath != man+".sigstore.json" {
		t.Fatalf("sign --output json: exit %d, %v: %s", code, err, out)
	}
}

// verify fails loudly: exit 1, and a message naming the failed check and
// the file, on stderr (text) or in the report (JSON).
func TestVerifyFailsLoudly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, dir, tgz, man string) (pub string)
		want    string
	}{
		{"wrong key", func(t *testing.T, dir, tgz, man string) string {
			_, pub := keyPair(t, t.TempDir())
			return pub
		}, "tarball signature: %TGZ%.sig: the signature does not match"},
		{"tampered tgz", func(t *testing.T, dir, tgz, man string) string {
			os.WriteFile(tgz, []byte("not the tgz"), 0o644)
			return ""
		}, "tarball bundle: %TGZ%.sigstore.json: the bundle signs sha256"},
		{"tampered manifest", func(t *testing.T, dir, tgz, man string) string {
			b, _ := os.ReadFile(man)
			os.WriteFile(man, append(b, ' '), 0o644)
			return ""
		}, "manifest signature: %MAN%.sig: the signature does not match %MAN%"},
		{"manifest of another tgz", func(t *testing.T, dir, tgz, man string) string {
			manifesttest.Edit(t, man, func(m *manifest.Manifest) { m.Artifact.SHA256 = strings.Repeat("0", 64) })
			if _, errs, code := imagectl(t, pwEnv, "sign", tgz, "--key", filepath.Join(dir, "k.key")); code == 0 || !strings.Contains(errs, "refusing to sign") {
				t.Fatalf("signed a mismatched pair: %s", errs)
			}
			// Signed on its own, the manifest's signatures are valid; the pair is not.
			s, err := signing.LoadPrivateKeyFile(filepath.Join(dir, "k.key"), []byte("pw"))
			if err != nil {
				t.Fatal(err)
			}
			sig, err := s.SignFile(context.Background(), man)
			if err != nil {
				t.Fatal(err)
			}
			if err := signing.WriteSignatures(sig); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "manifest matches tarball: %MAN% records sha256 0000"},
		{"missing signature", func(t *testing.T, dir, tgz, man string) string {
			os.Remove(tgz + ".sig")
			os.Remove(tgz + ".sigstore.json")
			return ""
		}, "tarball signature: %TGZ% is not signed: neither %TGZ%.sig nor %TGZ%.sigstore.json exists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key, pub := keyPair(t, dir)
			tgz, man := signingtest.Artifact(t, dir, "demo-0.1.0")
			if _, errs, code := imagectl(t, pwEnv, "sign", tgz, "--key", key); code != 0 {
				t.Fatal(errs)
			}
			if other := tc.breakIt(t, dir, tgz, man); other != "" {
				pub = other
			}
			want := strings.ReplaceAll(strings.ReplaceAll(tc.want, "%TGZ%", tgz), "%MAN%", man)
			out, errs, code := imagectl(t, nil, "verify", tgz, "--key", pub)
			if code != 1 || !strings.Contains(errs, "did not verify") || !strings.Contains(errs, want) || !strings.Contains(out, "FAIL") {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant %q", code, out, errs, want)
			}
			out, _, code = imagectl(t, nil, "verify", tgz, "--key", pub, "-o", "json")
			var r signing.Report
			if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.Verified {
				t.Fatalf("json: exit %d, %v\n%s", code, err, out)
			}
			check, msg, _ := strings.Cut(want, ": ")
			found, failed := false, 0
			for _, c := range r.Checks {
				found = found || (c.Name == check && !c.OK && strings.Contains(c.Error, msg))
				if !c.OK {
					failed++
				}
			}
			if tc.name == "manifest of another tgz" && failed != 1 {
				t.Errorf("the re-signed manifest's signatures failed too:\n%s", out)
			}
			if !found {
				t.Errorf("json: no failed %q check with %q:\n%s", check, msg, out)
			}
		})
	}
}

func TestSignVerifyBadInput(t *testing.T) {
	dir := t.TempDir()
	key, pub := keyPair(t, dir)
	tgz, _ := signingtest.Artifact(t, dir, "demo-0.1.0")
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"COSIGN_PASSWORD=wrong"}, []string{"sign", tgz, "--key", key}, "signing key " + key + ": decrypting the private key (wrong COSIGN_PASSWORD?)"},
		{nil, []string{"sign", tgz, "--key", key}, "(COSIGN_PASSWORD is not set)"},
		{pwEnv, []string{"sign", tgz, "--key", pub}, "this is a public key"},
		{pwEnv, []string{"sign", tgz}, `required flag(s) "key" not set`},
		{nil, []string{"verify", tgz, "--key", key}, "this is an encrypted private key"},
		{nil, []string{"verify", filepath.Join(dir, "none.tgz"), "--key", pub}, "none.tgz"},
		{pwEnv, []string{"sign", filepath.Join(dir, "none.tgz"), "--key", key}, "none.manifest.json"},
	} {
		_, errs, code := imagectl(t, tc.env, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errs, tc.want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("failed commands left files: %v", entries)
	}
}

// A build with a key decrypts it before anything starts: a wrong password
// fails at once, whichever executor this binary has.
func TestBuildSignKeyFailsFast(t *testing.T) {
	recipe := "testdata/recipes/valid/signed.hcl"
	_, errs, code := imagectl(t, []string{"COSIGN_PASSWORD=wrong"}, "build", recipe, "--output-dir", t.TempDir())
	if code == 0 || !strings.Contains(errs, "signing key testdata/recipes/valid/keys/cosign-test.key: decrypting") {
		t.Errorf("recipe's sign_key, wrong password: exit %d, %s", code, errs)
	}
	_, errs, code = imagectl(t, pwEnv, "build", recipe, "--sign-key", "/nonexistent/cosign.key", "--output-dir", t.TempDir())
	if code == 0 || !strings.Contains(errs, "/nonexistent/cosign.key") {
		t.Errorf("--sign-key missing: exit %d, %s", code, errs)
	}
	out, errs, code := imagectl(t, nil, "build", recipe, "--dry-run", "--version", "1.0.0", "--sign-key", "other.key")
	if code != 0 || !strings.Contains(out, "signing: key other.key\n") || !strings.Contains(out, "signed-1.0.0.manifest.json.sigstore.json") {
		t.Errorf("--sign-key in the plan: exit %d\n%s%s", code, out, errs)
	}
}

// The CLI's keys and signatures against the real cosign, both ways.
func TestCLICosignInterop(t *testing.T) {
	cosign := signingtest.Cosign(t)
	dir := t.TempDir()
	key, pub := keyPair(t, dir)
	tgz, _ := signingtest.Artifact(t, dir, "demo-0.1.0")
	if _, errs, code := imagectl(t, pwEnv, "sign", tgz, "--key", key); code != 0 {
		t.Fatal(errs)
	}
	root := signingtest.TrustedRoot(t, dir)
	for _, args := range [][]string{
		{"--signature", tgz + ".sig"},
		{"--bundle", tgz + ".sigstore.json", "--new-bundle-format", "--trusted-root", root},
	} {
		args = append(append([]string{"verify-blob", "--key", pub, "--insecure-ignore-tlog"}, args...), tgz)
		if out, err := signingtest.RunCosign(t, cosign, dir, nil, args...); err != nil {
			t.Errorf("cosign %v: %v\n%s", args, err, out)
		}
	}

	// A cosign-made key signs with imagectl sign; imagectl verify checks it.
	sub := t.TempDir()
	if out, err := signingtest.RunCosign(t, cosign, sub, pwEnv, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	tgz2, _ := signingtest.Artifact(t, sub, "demo-0.2.0")
	if _, errs, code := imagectl(t, pwEnv, "sign", tgz2, "--key", filepath.Join(sub, "cosign.key")); code != 0 {
		t.Fatal(errs)
	}
	if out, errs, code := imagectl(t, nil, "verify", tgz2, "--key", filepath.Join(sub, "cosign.pub")); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}
