package signing_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

// TestCosignInterop proves the format against the real cosign CLI, both
// ways: what imagectl signs, cosign verify-blob accepts offline (the .sig
// and the bundle), and what cosign generate-key-pair and sign-blob make,
// imagectl loads and verifies. Tampering is caught by both.
func TestCosignInterop(t *testing.T) {
	cosign, dir, pw, env := interopSetup(t)
	ctx := context.Background()
	root := signingtest.TrustedRoot(t, dir)
	verifyBlob := func(pub, blob string) (sigOut, bundleOut string, sigErr, bundleErr error) {
		t.Helper()
		sigOut, sigErr = signingtest.RunCosign(t, cosign, dir, nil, "verify-blob", "--key", pub, "--insecure-ignore-tlog",
			"--signature", blob+".sig", blob)
		bundleOut, bundleErr = signingtest.RunCosign(t, cosign, dir, nil, "verify-blob", "--key", pub, "--insecure-ignore-tlog",
			"--new-bundle-format", "--trusted-root", root, "--bundle", blob+".sigstore.json", blob)
		return
	}

	t.Run("imagectl keys and signatures, cosign verifies", func(t *testing.T) {
		s, keyFile, pubFile := keyFiles(t, dir, pw)
		tgz, man := signingtest.Artifact(t, dir, "one-1.0.0")
		if _, err := signing.SignArtifact(ctx, s, tgz, man, nil); err != nil {
			t.Fatal(err)
		}
		for _, blob := range []string{tgz, man} {
			sigOut, bundleOut, sigErr, bundleErr := verifyBlob(pubFile, blob)
			if sigErr != nil || !strings.Contains(sigOut, "Verified OK") {
				t.Errorf("cosign verify-blob --signature %s: %v\n%s", filepath.Base(blob), sigErr, sigOut)
			}
			if bundleErr != nil || !strings.Contains(bundleOut, "Verified OK") {
				t.Errorf("cosign verify-blob --bundle %s: %v\n%s", filepath.Base(blob), bundleErr, bundleOut)
			}
		}
		// cosign signs with imagectl's key too: the private key format is cosign's.
		out, err := signingtest.RunCosign(t, cosign, dir, env, "sign-blob", "--yes", "--key", keyFile, "--tlog-upload=false",
			"--output-signature", filepath.Join(dir, "by-cosign.sig"), tgz)
		if err != nil {
			t.Fatalf("cosign sign-blob with an imagectl key: %v\n%s", err, out)
		}

		// Tampering: cosign rejects too.
		appendTo(t, tgz, "tampered")
		if sigOut, bundleOut, sigErr, bundleErr := verifyBlob(pubFile, tgz); sigErr == nil || bundleErr == nil {
			t.Errorf("cosign verified a tampered tgz:\n%s\n%s", sigOut, bundleOut)
		}
		// And a different key.
		_, otherPub, _ := signing.GenerateKeyPair(nil)
		otherFile := write(t, dir, "other.pub", otherPub)
		if sigOut, bundleOut, sigErr, bundleErr := verifyBlob(otherFile, man); sigErr == nil || bundleErr == nil {
			t.Errorf("cosign verified with another key:\n%s\n%s", sigOut, bundleOut)
		}
	})

	for _, legacy := range []bool{false, true} {
		name := "cosign keys and signatures, imagectl verifies"
		if legacy {
			name += " (ENCRYPTED COSIGN PRIVATE KEY)"
		}
		t.Run(name, func(t *testing.T) {
			sub := t.TempDir()
			out, err := signingtest.RunCosign(t, cosign, sub, env, "generate-key-pair", "--output-key-prefix", "c")
			if err != nil {
				t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
			}
			keyFile, pubFile := filepath.Join(sub, "c.key"), filepath.Join(sub, "c.pub")
			if legacy {
				b, _ := os.ReadFile(keyFile)
				b = bytes.ReplaceAll(b, []byte(signing.SigstorePrivateKeyType), []byte(signing.CosignPrivateKeyType))
				write(t, sub, "c.key", b)
			}
			s, err := signing.LoadPrivateKeyFile(keyFile, pw)
			if err != nil {
				t.Fatalf("loading cosign's key: %v", err)
			}
			if _, err := signing.LoadPrivateKeyFile(keyFile, []byte("wrong")); err == nil {
				t.Error("cosign's key loaded with a wrong password")
			}
			v, err := signing.LoadPublicKeyFile(pubFile)
			if err != nil {
				t.Fatal(err)
			}
			if mine, _ := s.PublicKeyPEM(); !bytes.Equal(mine, read(t, pubFile)) {
				t.Error("imagectl derives another public key from cosign's private key")
			}

			// imagectl signs with cosign's key; cosign verifies.
			tgz, man := signingtest.Artifact(t, sub, "two-2.0.0")
			if _, err := signing.SignArtifact(ctx, s, tgz, man, nil); err != nil {
				t.Fatal(err)
			}
			if sigOut, bundleOut, sigErr, bundleErr := verifyBlob(pubFile, tgz); sigErr != nil || bundleErr != nil {
				t.Fatalf("cosign rejects imagectl's signature by its own key: %v %v\n%s\n%s", sigErr, bundleErr, sigOut, bundleOut)
			}

			// cosign signs both files (both forms); imagectl verifies the artifact.
			for _, blob := range []string{tgz, man} {
				os.Remove(blob + ".sig")
				os.Remove(blob + ".sigstore.json")
				out, err := signingtest.RunCosign(t, cosign, sub, env, "sign-blob", "--yes", "--key", keyFile, "--tlog-upload=false",
					"--new-bundle-format", "--bundle", blob+".sigstore.json", "--output-signature", blob+".sig", blob)
				if err != nil {
					t.Fatalf("cosign sign-blob: %v\n%s", err, out)
				}
			}
			r, err := signing.VerifyArtifact(ctx, v, tgz, man)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Verified || len(r.Checks) != 5 {
				t.Fatalf("imagectl rejects cosign's signatures (%d checks): %v", len(r.Checks), r.Err())
			}
			// Tampering: imagectl rejects.
			appendTo(t, man, " ")
			if r, err := signing.VerifyArtifact(ctx, v, tgz, man); err != nil || r.Verified {
				t.Fatalf("a tampered manifest verified (%v)", err)
			}
		})
	}
}

// interopSetup is what the tests against cosign share: the cosign binary,
// a folder, a key password and the environment that gives cosign that
// password.
func interopSetup(t *testing.T) (cosign, dir string, pw []byte, env []string) {
	t.Helper()
	pw = []byte("interop pw")
	return signingtest.Cosign(t), t.TempDir(), pw, []string{signing.PasswordEnv + "=" + string(pw)}
}

// keyFiles makes a key pair, writes it to dir/imagectl.key (encrypted with
// pw) and dir/imagectl.pub, and loads the signer from the key file.
func keyFiles(t *testing.T, dir string, pw []byte) (s *signing.Signer, keyFile, pubFile string) {
	t.Helper()
	_, _, priv, pub := signingtest.KeyPair(t, pw)
	keyFile, pubFile = write(t, dir, "imagectl.key", priv), write(t, dir, "imagectl.pub", pub)
	s, err := signing.LoadPrivateKeyFile(keyFile, pw)
	if err != nil {
		t.Fatal(err)
	}
	return s, keyFile, pubFile
}

func write(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
