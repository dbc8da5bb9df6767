package signing

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/gpuaas/imagectl/internal/atomicfile"
)

// Suffixes of the files written beside a signed file.
const (
	SignatureSuffix = ".sig"
	BundleSuffix    = ".sigstore.json"
)

// Digest is a file's SHA-256 and size.
type Digest struct {
	SHA256 []byte
	Size   int64
}

// Hex is the digest in lowercase hex, as the manifest writes it.
func (d Digest) Hex() string { return hex.EncodeToString(d.SHA256) }

// DigestFile hashes a file as a stream; memory does not grow with its size.
func DigestFile(ctx context.Context, path string) (Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return Digest{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, ctxReader{ctx, f}, make([]byte, 1<<20))
	if err != nil {
		return Digest{}, fmt.Errorf("hashing %s: %w", path, err)
	}
	return Digest{SHA256: h.Sum(nil), Size: n}, nil
}

// ctxReader stops a long read when its context is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

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
func (s *Signer) SignDigest(path string, d Digest) (*Signature, error) {
	if len(d.SHA256) != sha256.Size {
		return nil, fmt.Errorf("signing %s: digest is %d bytes, not a SHA-256", path, len(d.SHA256))
	}
	raw, err := s.sv.SignMessage(nil, options.WithDigest(d.SHA256))
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", path, err)
	}
	hint, err := keyHint(s.pub)
	if err != nil {
		return nil, err
	}
	b, err := marshalBundle(hint, d.SHA256, raw)
	if err != nil {
		return nil, fmt.Errorf("signing %s: encoding the bundle: %w", path, err)
	}
	return &Signature{File: path, SHA256: d.Hex(), Size: d.Size,
		SignaturePath: path + SignatureSuffix, BundlePath: path + BundleSuffix,
		// cosign sign-blob writes the base64 with no newline.
		sig: []byte(base64.StdEncoding.EncodeToString(raw)), bundle: b}, nil
}

// SignFile hashes and signs a file.
func (s *Signer) SignFile(ctx context.Context, path string) (*Signature, error) {
	d, err := DigestFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return s.SignDigest(path, d)
}

// WriteSignatures writes each signature's .sig and .sigstore.json beside
// its file, all or none: every file is complete before the first appears
// under its final name, and a failure removes those already published.
func WriteSignatures(sigs ...*Signature) error {
	type output struct {
		f    *atomicfile.File
		path string
	}
	var pending []output
	defer func() {
		for _, o := range pending {
			o.f.Abort()
		}
	}()
	for _, s := range sigs {
		for _, out := range []struct {
			path string
			data []byte
		}{{s.SignaturePath, s.sig}, {s.BundlePath, s.bundle}} {
			f, err := atomicfile.Create(out.path, 0o644)
			if err != nil {
				return fmt.Errorf("writing signature: %w", err)
			}
			pending = append(pending, output{f, out.path})
			if _, err := f.Write(out.data); err != nil {
				return fmt.Errorf("writing signature %s: %w", out.path, err)
			}
		}
	}
	for i, o := range pending {
		if err := o.f.Commit(); err != nil {
			for _, done := range pending[:i] {
				os.Remove(done.path)
			}
			return err
		}
	}
	return nil
}

// RemoveSignatures removes the .sig and .sigstore.json beside path, if
// any: a signature left from an earlier file of the same name would not
// match the new one.
func RemoveSignatures(path string) error {
	var errs []error
	for _, p := range []string{path + SignatureSuffix, path + BundleSuffix} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
