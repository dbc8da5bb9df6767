package sites

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/signing"
)

// TestVerifyKeyPath: --key, else $IMAGECTL_VERIFY_KEY, else the site's
// verify_key; none is refused unless insecure, and --key with insecure is
// a contradiction.
func TestVerifyKeyPath(t *testing.T) {
	withKey := &Site{Name: "lab", VerifyKey: "/etc/imagectl/lab.pub"}
	without := &Site{Name: "sim"}
	env := []string{"IMAGECTL_VERIFY_KEY=/env.pub"}
	for _, tc := range []struct {
		name      string
		p         VerifyPolicy
		site      *Site
		env       []string
		path, src string
		err       string
	}{
		{name: "flag first", p: VerifyPolicy{Key: "/flag.pub"}, site: withKey, env: env, path: "/flag.pub", src: "--key"},
		{name: "environment next", site: withKey, env: env, path: "/env.pub", src: "$IMAGECTL_VERIFY_KEY"},
		{name: "last of the environment", site: withKey, env: append([]string{"IMAGECTL_VERIFY_KEY=/old.pub"}, env...), path: "/env.pub", src: "$IMAGECTL_VERIFY_KEY"},
		{name: "empty environment is unset", site: withKey, env: []string{"IMAGECTL_VERIFY_KEY="}, path: "/etc/imagectl/lab.pub", src: "site lab's verify_key"},
		{name: "the site's last", site: withKey, path: "/etc/imagectl/lab.pub", src: "site lab's verify_key"},
		{name: "insecure without a key", p: VerifyPolicy{Insecure: true}, site: withKey, env: env},
		{name: "none", site: without,
			err: "no key to verify the artifact's signatures with: give --key cosign.pub, set $IMAGECTL_VERIFY_KEY, or set verify_key in site sim's block of the sites file (--insecure-skip-verify sends it unverified)"},
		{name: "contradiction", p: VerifyPolicy{Key: "/flag.pub", Insecure: true}, site: without, err: "--key and --insecure-skip-verify contradict each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, src, err := tc.p.KeyPath(tc.site, tc.env)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || path != tc.path || src != tc.src {
				t.Errorf("got %q from %q (%v), want %q from %q", path, src, err, tc.path, tc.src)
			}
		})
	}
	if _, _, err := (VerifyPolicy{}).KeyPath(without, nil); !errors.Is(err, ErrNoVerifyKey) {
		t.Errorf("no key: %v is not ErrNoVerifyKey", err)
	}
}

// TestVerifier loads the chosen key, says where a bad one came from, and
// is nil when insecure leaves nothing to verify with.
func TestVerifier(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "cosign.pub")
	if err := signing.WriteKeyPair(filepath.Join(dir, "cosign.key"), pub, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.pub")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Site{Name: "lab", VerifyKey: bad}
	if v, err := (VerifyPolicy{Key: pub}).Verifier(s, nil); err != nil || v == nil {
		t.Errorf("--key: %v %v", v, err)
	}
	if _, err := (VerifyPolicy{}).Verifier(s, nil); err == nil || !strings.HasPrefix(err.Error(), "the verification key (site lab's verify_key): ") {
		t.Errorf("bad verify_key: %v", err)
	}
	if v, err := (VerifyPolicy{Insecure: true}).Verifier(s, nil); err != nil || v != nil {
		t.Errorf("insecure: %v %v", v, err)
	}
}
