package steps

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestKeyring: an armored key becomes its binary packets, a binary key
// stays as it is, and what is neither is refused.
func TestKeyring(t *testing.T) {
	arm, err := os.ReadFile("../../testdata/recipes/valid/keys/test-repo.asc")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := Keyring(arm)
	if err != nil || len(bin) == 0 || bin[0]&0x80 == 0 {
		t.Fatalf("armored key: %v (% x)", err, bin[:min(len(bin), 4)])
	}
	again, err := Keyring(bin)
	if err != nil || !bytes.Equal(again, bin) {
		t.Errorf("binary key not kept as it is: %v", err)
	}
	for name, tc := range map[string]struct{ key, want string }{
		"text":      {"hello", "not an OpenPGP key"},
		"empty":     {"  \n", "not an OpenPGP key"},
		"bad armor": {"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!\n", "reading the armored key"},
	} {
		if _, err := Keyring([]byte(tc.key)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
