package signing

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
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
