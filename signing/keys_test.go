package signing

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

func TestKeyPairRoundTrip(t *testing.T) {
	for _, password := range []string{"correct horse", ""} {
		priv, pub, err := GenerateKeyPair([]byte(password))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(priv), "-----BEGIN "+SigstorePrivateKeyType+"-----\n") {
			t.Errorf("private key PEM starts %q", strings.SplitN(string(priv), "\n", 2)[0])
		}
		if !strings.HasPrefix(string(pub), "-----BEGIN PUBLIC KEY-----\n") {
			t.Errorf("public key PEM starts %q", strings.SplitN(string(pub), "\n", 2)[0])
		}
		s, err := LoadPrivateKey(priv, []byte(password))
		if err != nil {
			t.Fatalf("password %q: %v", password, err)
		}
		got, err := s.PublicKeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(pub) {
			t.Errorf("the decrypted key's public half differs from the public key written")
		}
		if _, err := LoadPublicKey(pub); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadKeyErrors(t *testing.T) {
	priv, pub, err := GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	p384 := encryptedKey(t, elliptic.P384(), "pw", SigstorePrivateKeyType)
	for _, tc := range []struct {
		name, want string
		load       func() error
	}{
		{"wrong password", "wrong COSIGN_PASSWORD", func() error { _, err := LoadPrivateKey(priv, []byte("nope")); return err }},
		{"public as private", "this is a public key", func() error { _, err := LoadPrivateKey(pub, []byte("pw")); return err }},
		{"private as public", "encrypted private key", func() error { _, err := LoadPublicKey(priv); return err }},
		{"not PEM", "not a PEM file", func() error { _, err := LoadPrivateKey([]byte("hello"), nil); return err }},
		{"other PEM", `"CERTIFICATE" is not a cosign private key`, func() error {
			_, err := LoadPrivateKey(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}), nil)
			return err
		}},
		{"unsupported curve", "unsupported key type ECDSA P-384", func() error { _, err := LoadPrivateKey(p384, []byte("pw")); return err }},
		{"corrupt ciphertext", "decrypting the private key", func() error {
			_, err := LoadPrivateKey(pem.EncodeToMemory(&pem.Block{Type: SigstorePrivateKeyType, Bytes: []byte(`{"kdf":{}}`)}), nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Keys from cosign before v2.0 have the COSIGN block type; the content is
// the same.
func TestLoadLegacyCosignKeyType(t *testing.T) {
	key := encryptedKey(t, elliptic.P256(), "pw", CosignPrivateKeyType)
	if _, err := LoadPrivateKey(key, []byte("pw")); err != nil {
		t.Fatal(err)
	}
}

func TestLoadKeyFileNamesTheFile(t *testing.T) {
	_, err := LoadPrivateKeyFile("/nonexistent/cosign.key", nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/cosign.key") {
		t.Fatalf("got %v", err)
	}
	_, err = LoadPublicKeyFile("/nonexistent/cosign.pub")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/cosign.pub") {
		t.Fatalf("got %v", err)
	}
}

// WriteKeyPair writes a pair that loads, the private key readable by its
// owner only.
func TestWriteKeyPair(t *testing.T) {
	dir := t.TempDir()
	key, pub := filepath.Join(dir, "k.key"), filepath.Join(dir, "k.pub")
	if err := WriteKeyPair(key, pub, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key: %v %v", st, err)
	}
	if _, err := LoadPrivateKeyFile(key, []byte("pw")); err != nil {
		t.Error(err)
	}
	if _, err := LoadPublicKeyFile(pub); err != nil {
		t.Error(err)
	}
	// Neither file appears when one cannot be written.
	if err := WriteKeyPair(filepath.Join(dir, "n.key"), filepath.Join(dir, "none", "n.pub"), nil); err == nil {
		t.Fatal("wrote a pair into a missing directory")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("a failed WriteKeyPair left %v", entries)
	}
}

// The password comes from $COSIGN_PASSWORD; unset, it is empty, and the
// error says so.
func TestLoadPrivateKeyFileEnv(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.key")
	if err := WriteKeyPair(key, filepath.Join(dir, "k.pub"), []byte("pw")); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) []string {
		if len(kv) == 2 {
			return []string{"OTHER=x", kv[0] + "=" + kv[1]}
		}
		return []string{"OTHER=x"}
	}
	if _, err := LoadPrivateKeyFileEnv(key, env(PasswordEnv, "pw")); err != nil {
		t.Error(err)
	}
	if _, err := LoadPrivateKeyFileEnv(key, env(PasswordEnv, "wrong")); err == nil || strings.Contains(err.Error(), "is not set") {
		t.Errorf("wrong password: %v", err)
	}
	if _, err := LoadPrivateKeyFileEnv(key, env()); err == nil || !strings.HasSuffix(err.Error(), "(COSIGN_PASSWORD is not set)") {
		t.Errorf("no password: %v", err)
	}
	empty := filepath.Join(dir, "e.key")
	if err := WriteKeyPair(empty, filepath.Join(dir, "e.pub"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrivateKeyFileEnv(empty, env()); err != nil {
		t.Errorf("a key without a password, COSIGN_PASSWORD unset: %v", err)
	}
}

func TestBuildKeyPath(t *testing.T) {
	for _, tc := range []struct{ flag, recipeKey, recipe, want string }{
		{"", "", "recipes/h200.hcl", ""},
		{"other.key", "keys/cosign.key", "recipes/h200.hcl", "other.key"},
		{"", "keys/cosign.key", "recipes/h200.hcl", "recipes/keys/cosign.key"},
		{"", "/etc/imagectl/cosign.key", "recipes/h200.hcl", "/etc/imagectl/cosign.key"},
		{"", "cosign.key", "h200.hcl", "cosign.key"},
	} {
		if got := BuildKeyPath(tc.flag, tc.recipeKey, tc.recipe); got != tc.want {
			t.Errorf("BuildKeyPath(%q, %q, %q) = %q, want %q", tc.flag, tc.recipeKey, tc.recipe, got, tc.want)
		}
	}
}

func encryptedKey(t *testing.T, curve elliptic.Curve, password, pemType string) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := encrypted.Encrypt(der, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: sealed})
}

// TestKeyGen: the password must be set (empty is none); an existing pair
// is kept unless overwrite.
func TestKeyGen(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "k")
	if _, _, err := KeyGen(prefix, nil, false); err == nil || !strings.Contains(err.Error(), "set COSIGN_PASSWORD") {
		t.Fatalf("no password: %v", err)
	}
	env := []string{PasswordEnv + "=pw"}
	key, pub, err := KeyGen(prefix, env, false)
	if err != nil || key != prefix+".key" || pub != prefix+".pub" {
		t.Fatalf("KeyGen = %s, %s, %v", key, pub, err)
	}
	if _, err := LoadPrivateKeyFileEnv(key, env); err != nil {
		t.Fatal(err)
	}
	if _, _, err := KeyGen(prefix, env, false); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("over an existing pair: %v", err)
	}
	if _, _, err := KeyGen(prefix, []string{PasswordEnv + "="}, true); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
}
