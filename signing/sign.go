package signing

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
)

// Signature is a file's signature in cosign's two forms, not yet written.
type Signature struct {
	// File is the signed file; SignaturePath and BundlePath are beside it.
	File          string `json:"file"`
	SHA256        string `json:"sha256"`
	Size          int64  `json:"size"`
	SignaturePath string `json:"signature"`
	BundlePath    string `json:"bundle"`
	sig, bundle   []byte
}

// SignDigest signs a file whose digest is already known.
func (s *Signer) SignDigest(path string, d digest.Digest) (*Signature, error) {
	raw, err := s.sv.SignMessage(nil, options.WithDigest(d.Sum[:]))
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", path, err)
	}
	hint, err := keyHint(s.pub)
	if err != nil {
		return nil, err
	}
	b, err := marshalBundle(hint, d.Sum[:], raw)
	if err != nil {
		return nil, fmt.Errorf("signing %s: encoding the bundle: %w", path, err)
	}
	sigPath, bundlePath := manifest.Signatures(path)
	return &Signature{File: path, SHA256: d.Hex(), Size: d.Size, SignaturePath: sigPath, BundlePath: bundlePath,
		// cosign sign-blob writes the base64 with no newline.
		sig: []byte(base64.StdEncoding.EncodeToString(raw)), bundle: b}, nil
}

// SignFile hashes and signs a file.
func (s *Signer) SignFile(ctx context.Context, path string) (*Signature, error) {
	d, err := digest.File(ctx, path)
	if err != nil {
		return nil, err
	}
	return s.SignDigest(path, d)
}

// WriteSignatures writes each signature's .sig and .sigstore.json beside
// its file, all or none: every file is complete before the first appears
// under its final name, and a failure removes those already published.
func WriteSignatures(sigs ...*Signature) error {
	var set atomicfile.Set
	defer set.Abort()
	for _, s := range sigs {
		for _, out := range []struct {
			path string
			data []byte
		}{{s.SignaturePath, s.sig}, {s.BundlePath, s.bundle}} {
			if err := set.WriteFile(out.path, out.data, 0o644); err != nil {
				return fmt.Errorf("writing signature: %w", err)
			}
		}
	}
	return set.Commit()
}
