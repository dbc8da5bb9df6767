package steps

import (
	"bytes"
	"fmt"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// Keyring returns an AptRepository's signing key in binary form, the
// .gpg keyring apt reads from the file Signed-By names: an armored key
// decoded, a binary one as it is. The build and the first-boot script
// both write this, so that the keyring's sha256, which the manifest
// records and the script pins, is the same.
func Keyring(key []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(key)
	if !bytes.HasPrefix(trimmed, []byte("-----BEGIN PGP")) {
		if len(trimmed) == 0 || trimmed[0]&0x80 == 0 {
			return nil, fmt.Errorf("not an OpenPGP key (neither armored nor binary)")
		}
		return key, nil
	}
	block, err := armor.Decode(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("reading the armored key: %w", err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(block.Body); err != nil {
		return nil, fmt.Errorf("reading the armored key: %w", err)
	}
	return out.Bytes(), nil
}
