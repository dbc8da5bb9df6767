package sites

import (
	"errors"
	"fmt"

	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/signing"
)

// ErrNoVerifyKey is returned when an artifact would reach a site with no
// key to verify its signatures with, and skipping the check was not asked
// for.
var ErrNoVerifyKey = errors.New("no key to verify the artifact's signatures with")

// VerifyEnv is the environment variable that names the cosign public key
// artifacts are verified with when --key does not.
const VerifyEnv = "IMAGECTL_VERIFY_KEY"

// VerifyPolicy is how an artifact is verified before it reaches a site:
// the --key and --insecure-skip-verify flags of upload and promote.
type VerifyPolicy struct {
	// Key is the cosign public key given (--key), if any.
	Key string
	// Insecure skips verification when no key is configured
	// (--insecure-skip-verify).
	Insecure bool
}

// KeyPath says which cosign public key verifies what is sent to site s,
// and where that choice came from (for messages): Key, else
// $IMAGECTL_VERIFY_KEY in env (KEY=value pairs, as os.Environ), else the
// site's verify_key. With Insecure and no Key it returns "": nothing is
// verified. Without a key or Insecure it refuses with ErrNoVerifyKey; Key
// and Insecure together contradict each other. Errors name the flags,
// which are what a user changes.
func (p VerifyPolicy) KeyPath(s *Site, env []string) (path, from string, err error) {
	if p.Key != "" && p.Insecure {
		return "", "", errors.New("--key and --insecure-skip-verify contradict each other")
	}
	path, from = p.Key, "--key"
	if path == "" && !p.Insecure {
		if v := environ.Get(env, VerifyEnv); v != "" {
			path, from = v, "$"+VerifyEnv
		} else if s.VerifyKey != "" {
			path, from = s.VerifyKey, fmt.Sprintf("site %s's verify_key", s.Name)
		}
	}
	switch {
	case path == "" && p.Insecure:
		return "", "", nil
	case path == "":
		return "", "", fmt.Errorf("%w: give --key cosign.pub, set $%s, or set verify_key in site %s's block of the sites file (--insecure-skip-verify sends it unverified)",
			ErrNoVerifyKey, VerifyEnv, s.Name)
	}
	return path, from, nil
}

// Verifier loads the key KeyPath chooses for site s; it is nil, with no
// error, when Insecure and no key leave nothing to verify with.
func (p VerifyPolicy) Verifier(s *Site, env []string) (*signing.Verifier, error) {
	path, from, err := p.KeyPath(s, env)
	if err != nil || path == "" {
		return nil, err
	}
	v, err := signing.LoadPublicKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("the verification key (%s): %w", from, err)
	}
	return v, nil
}
