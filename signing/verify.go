package signing

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
)

// Check is one verification and its outcome.
type Check struct {
	// Name says what was checked, e.g. "tarball signature".
	Name string `json:"check"`
	// File is the file the check read (the .sig, the bundle, the manifest).
	File  string `json:"file"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Signature and bundle files are small; a larger one is not what it claims.
const maxSignatureFile = 1 << 20

// verifyFile checks the .sig and .sigstore.json beside path against the
// file's digest. Each one present must verify and at least one must be
// present.
func (v *Verifier) verifyFile(what, path string, d digest.Digest) []Check {
	sigPath, bundlePath := manifest.Signatures(path)
	sigCheck := Check{Name: what + " signature", File: sigPath}
	bundleCheck := Check{Name: what + " bundle", File: bundlePath}
	sigData, sigErr := readSmall(sigCheck.File)
	bundleData, bundleErr := readSmall(bundleCheck.File)
	if errors.Is(sigErr, fs.ErrNotExist) && errors.Is(bundleErr, fs.ErrNotExist) {
		return []Check{{Name: what + " signature", File: sigCheck.File,
			Error: fmt.Sprintf("%s is not signed: neither %s nor %s exists", path, sigCheck.File, bundleCheck.File)}}
	}
	var checks []Check
	if !errors.Is(sigErr, fs.ErrNotExist) {
		err := sigErr
		if err == nil {
			err = v.verifyRaw(path, d, sigData)
		}
		checks = append(checks, done(sigCheck, err))
	}
	if !errors.Is(bundleErr, fs.ErrNotExist) {
		err := bundleErr
		if err == nil {
			err = v.verifyBundle(path, d, bundleData)
		}
		checks = append(checks, done(bundleCheck, err))
	}
	return checks
}

func done(c Check, err error) Check {
	if err != nil {
		c.Error = fmt.Sprintf("%s: %v", c.File, err)
	} else {
		c.OK = true
	}
	return c
}

func (v *Verifier) verifyRaw(path string, d digest.Digest, data []byte) error {
	text := strings.TrimSpace(string(data))
	if text == "" {
		return fmt.Errorf("the signature file is empty: it holds no signature of %s (sign it again)", path)
	}
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return fmt.Errorf("not a base64 signature: %w", err)
	}
	if err := v.v.VerifySignature(bytes.NewReader(raw), nil, options.WithDigest(d.Sum[:])); err != nil {
		return fmt.Errorf("the signature does not match %s under this key (signed with another key, or the file changed since)", path)
	}
	return nil
}

func (v *Verifier) verifyBundle(path string, d digest.Digest, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("the bundle file is empty: it holds no signature of %s (sign it again)", path)
	}
	ms, hint, err := parseBundle(data)
	if err != nil {
		return err
	}
	if signed := ms.GetMessageDigest().GetDigest(); !bytes.Equal(signed, d.Sum[:]) {
		return fmt.Errorf("the bundle signs sha256 %x, but %s has sha256 %s: the file changed since it was signed", signed, path, d.Hex())
	}
	if err := v.v.VerifySignature(bytes.NewReader(ms.GetSignature()), nil, options.WithDigest(d.Sum[:])); err != nil {
		if h := hint; h != "" && h != v.hint {
			return fmt.Errorf("the signature does not verify under this key: the bundle was signed with another key (hint %s, this key's %s)", h, v.hint)
		}
		return fmt.Errorf("the signature does not verify under this key")
	}
	return nil
}

func readSmall(path string) ([]byte, error) {
	b, err := readlimit.File(path, maxSignatureFile)
	switch {
	case errors.Is(err, readlimit.ErrTooLarge):
		return nil, fmt.Errorf("larger than %d bytes: not a signature", maxSignatureFile)
	}
	// The check's error names the file already.
	if nr := (*readlimit.NotRegularError)(nil); errors.As(err, &nr) {
		return nil, fmt.Errorf("%w (%s): not a signature", readlimit.ErrNotRegular, nr.Kind)
	}
	return b, err
}
