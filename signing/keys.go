package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// PEM block types of an encrypted cosign private key: cosign writes
// SigstorePrivateKeyType since v2.0 and reads both.
const (
	SigstorePrivateKeyType = "ENCRYPTED SIGSTORE PRIVATE KEY"
	CosignPrivateKeyType   = "ENCRYPTED COSIGN PRIVATE KEY"
	publicKeyType          = "PUBLIC KEY"
)

// PasswordEnv is the environment variable cosign, and imagectl, read the
// private key's password from.
const PasswordEnv = "COSIGN_PASSWORD"

// GenerateKeyPair makes an ECDSA P-256 key pair as `cosign generate-key-pair`
// does: the private key encrypted with password (which may be empty) in
// PEM, and the public key in PEM.
func GenerateKeyPair(password []byte) (privatePEM, publicPEM []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating an ECDSA P-256 key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the private key: %w", err)
	}
	sealed, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, nil, fmt.Errorf("encrypting the private key: %w", err)
	}
	privatePEM = pem.EncodeToMemory(&pem.Block{Type: SigstorePrivateKeyType, Bytes: sealed})
	publicPEM, err = cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the public key: %w", err)
	}
	return privatePEM, publicPEM, nil
}

// WriteKeyPair makes a key pair as GenerateKeyPair does and writes the
// private key to keyPath (mode 0600) and the public key to pubPath, both
// or neither. Existing files are replaced.
func WriteKeyPair(keyPath, pubPath string, password []byte) error {
	priv, pub, err := GenerateKeyPair(password)
	if err != nil {
		return err
	}
	var set atomicfile.Set
	defer set.Abort()
	if err := set.WriteFile(keyPath, priv, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", keyPath, err)
	}
	if err := set.WriteFile(pubPath, pub, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", pubPath, err)
	}
	return set.Commit()
}

// KeyGen makes a key pair as cosign generate-key-pair does: <prefix>.key,
// the private key encrypted with env's $COSIGN_PASSWORD (which must be set;
// empty for none), and <prefix>.pub. An existing pair is kept, and an
// error says so, unless overwrite.
func KeyGen(prefix string, env []string, overwrite bool) (keyPath, pubPath string, err error) {
	password, ok := environ.Lookup(env, PasswordEnv)
	if !ok {
		return "", "", fmt.Errorf("set %s to the password for the new private key (%s= for none)", PasswordEnv, PasswordEnv)
	}
	keyPath, pubPath = prefix+".key", prefix+".pub"
	if !overwrite {
		for _, p := range []string{keyPath, pubPath} {
			if _, err := os.Stat(p); err == nil {
				return "", "", fmt.Errorf("%s exists: keygen does not overwrite keys (--force does)", p)
			}
		}
	}
	return keyPath, pubPath, WriteKeyPair(keyPath, pubPath, []byte(password))
}

// Signer signs with a private key.
type Signer struct {
	sv  signature.SignerVerifier
	pub *ecdsa.PublicKey
}

// LoadPrivateKey decrypts a cosign private key (either PEM block type).
func LoadPrivateKey(pemBytes, password []byte) (*Signer, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("not a PEM file")
	}
	switch block.Type {
	case SigstorePrivateKeyType, CosignPrivateKeyType:
	case publicKeyType:
		return nil, errors.New("this is a public key; signing needs the private key (cosign.key)")
	default:
		return nil, fmt.Errorf("PEM block %q is not a cosign private key (%q or %q)", block.Type, SigstorePrivateKeyType, CosignPrivateKeyType)
	}
	der, err := encrypted.Decrypt(block.Bytes, password)
	if err != nil {
		return nil, fmt.Errorf("decrypting the private key (wrong %s?): %w", PasswordEnv, err)
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the decrypted private key: %w", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("unsupported key type %s: imagectl signs with ECDSA P-256 keys, cosign's default", keyName(key))
	}
	sv, err := signature.LoadECDSASignerVerifier(ec, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv, pub: &ec.PublicKey}, nil
}

// maxKeyFile is the largest key file read: cosign's keys are a few hundred
// bytes, and a larger file is no key.
const maxKeyFile = 64 << 10

// LoadPrivateKeyFile reads and decrypts a cosign private key file.
func LoadPrivateKeyFile(path string, password []byte) (*Signer, error) {
	b, err := readPrivateKey(path)
	if err != nil {
		return nil, err
	}
	return loadPrivateKeyFile(path, b, password)
}

func readPrivateKey(path string) ([]byte, error) {
	b, err := readlimit.File(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("reading signing key: %w", err)
	}
	return b, nil
}

func loadPrivateKeyFile(path string, b, password []byte) (*Signer, error) {
	s, err := LoadPrivateKey(b, password)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	return s, nil
}

// LoadPrivateKeyFileEnv reads and decrypts a cosign private key file with
// the password in $COSIGN_PASSWORD, as cosign does, looked up in env
// (KEY=value pairs, as os.Environ). Unset, the password is empty, and a
// failure to decrypt says that it is unset.
func LoadPrivateKeyFileEnv(path string, env []string) (*Signer, error) {
	password, set := environ.Lookup(env, PasswordEnv)
	b, err := readPrivateKey(path)
	if err != nil {
		return nil, err
	}
	s, err := loadPrivateKeyFile(path, b, []byte(password))
	if err != nil && !set {
		return nil, fmt.Errorf("%w (%s is not set)", err, PasswordEnv)
	}
	return s, err
}

// BuildKeyPath is the private key a build signs with: flagKey (given for
// this build) as it is, else the recipe's sign_key, which is relative to
// the directory of the recipe file at recipePath; "" for none.
func BuildKeyPath(flagKey, recipeKey, recipePath string) string {
	switch {
	case flagKey != "":
		return flagKey
	case recipeKey == "" || filepath.IsAbs(recipeKey):
		return recipeKey
	default:
		return filepath.Join(filepath.Dir(recipePath), recipeKey)
	}
}

// PublicKeyPEM is the signer's public key as cosign writes it (cosign.pub).
func (s *Signer) PublicKeyPEM() ([]byte, error) {
	return cryptoutils.MarshalPublicKeyToPEM(s.pub)
}

// Verifier checks signatures with a public key.
type Verifier struct {
	v    signature.Verifier
	hint string
}

// LoadPublicKey reads a PEM public key (cosign.pub).
func LoadPublicKey(pemBytes []byte) (*Verifier, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("not a PEM file")
	}
	switch block.Type {
	case publicKeyType:
	case SigstorePrivateKeyType, CosignPrivateKeyType:
		return nil, errors.New("this is an encrypted private key; verifying needs the public key (cosign.pub)")
	default:
		return nil, fmt.Errorf("PEM block %q is not a public key", block.Type)
	}
	key, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the public key: %w", err)
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("unsupported key type %s: imagectl verifies ECDSA P-256 keys, cosign's default", keyName(key))
	}
	return newVerifier(ec)
}

// LoadPublicKeyFile reads a PEM public key file.
func LoadPublicKeyFile(path string) (*Verifier, error) {
	b, err := readlimit.File(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("reading public key: %w", err)
	}
	v, err := LoadPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	return v, nil
}

// Verifier returns a verifier for the signer's own public key.
func (s *Signer) Verifier() (*Verifier, error) { return newVerifier(s.pub) }

func newVerifier(pub *ecdsa.PublicKey) (*Verifier, error) {
	v, err := signature.LoadECDSAVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	h, err := keyHint(pub)
	if err != nil {
		return nil, err
	}
	return &Verifier{v: v, hint: h}, nil
}

// keyHint is what cosign puts in a bundle's publicKey.hint: the base64
// SHA-256 of the key's PKIX DER.
func keyHint(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encoding the public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

func keyName(k any) string {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return "ECDSA " + k.Curve.Params().Name
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	default:
		return fmt.Sprintf("%T", k)
	}
}
