package signing

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
)

// SignedArtifact is a signed tgz and manifest.
type SignedArtifact struct {
	Tarball  *Signature `json:"tarball"`
	Manifest *Signature `json:"manifest"`
}

// Files are the four signature files, in the order they were written.
func (a *SignedArtifact) Files() []string {
	return []string{a.Tarball.SignaturePath, a.Tarball.BundlePath, a.Manifest.SignaturePath, a.Manifest.BundlePath}
}

// SignArtifact signs a tgz and the manifest that describes it, writing a
// .sig and a .sigstore.json beside each (all four or none). It refuses to
// sign a manifest whose artifact sha256 or size is not the tgz's: the two
// are signed to verify together.
func SignArtifact(ctx context.Context, s *Signer, tarball, manifestPath string) (*SignedArtifact, error) {
	m, err := manifest.Read(manifestPath)
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", tarball, err)
	}
	td, err := digest.File(ctx, tarball)
	if err != nil {
		return nil, err
	}
	if err := matches(m, manifestPath, tarball, td); err != nil {
		return nil, fmt.Errorf("refusing to sign: %w", err)
	}
	md, err := digest.File(ctx, manifestPath)
	if err != nil {
		return nil, err
	}
	a := &SignedArtifact{}
	if a.Tarball, err = s.SignDigest(tarball, td); err != nil {
		return nil, err
	}
	if a.Manifest, err = s.SignDigest(manifestPath, md); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := WriteSignatures(a.Tarball, a.Manifest); err != nil {
		return nil, err
	}
	return a, nil
}

// SignBuilt signs a build's outputs before they are published: the tgz by
// the digest the packer computed while writing it, the manifest by its
// bytes. It returns the four signature files' contents by path, for the
// builder to publish with the rest, so that no artifact is ever under its
// final name unsigned. The manifest must describe that tgz.
func (s *Signer) SignBuilt(tarball string, tgzSHA256 []byte, tgzSize int64, manifestPath string, manifestBytes []byte) (*SignedArtifact, map[string][]byte, error) {
	m, err := manifest.Parse(manifestBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("signing %s: %w", manifestPath, err)
	}
	td := digest.Digest{Size: tgzSize}
	if len(tgzSHA256) != len(td.Sum) {
		return nil, nil, fmt.Errorf("signing %s: digest is %d bytes, not a SHA-256", tarball, len(tgzSHA256))
	}
	copy(td.Sum[:], tgzSHA256)
	if err := matches(m, manifestPath, tarball, td); err != nil {
		return nil, nil, fmt.Errorf("refusing to sign: %w", err)
	}
	a := &SignedArtifact{}
	if a.Tarball, err = s.SignDigest(tarball, td); err != nil {
		return nil, nil, err
	}
	if a.Manifest, err = s.SignDigest(manifestPath, digest.Bytes(manifestBytes)); err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{}
	for _, sig := range []*Signature{a.Tarball, a.Manifest} {
		files[sig.SignaturePath], files[sig.BundlePath] = sig.sig, sig.bundle
	}
	return a, files, nil
}

// matches says whether the manifest's artifact section describes the tgz.
func matches(m *manifest.Manifest, manifestPath, tarball string, d digest.Digest) error {
	switch a := m.Artifact; {
	case a == nil:
		return fmt.Errorf("%s has no artifact section: it is a build marker, not the manifest of a tgz", manifestPath)
	case !d.Matches(a.SHA256):
		return fmt.Errorf("%s records sha256 %s for the artifact, but %s has sha256 %s", manifestPath, a.SHA256, tarball, d.Hex())
	case a.Size != d.Size:
		return fmt.Errorf("%s records %d bytes for the artifact, but %s has %d", manifestPath, a.Size, tarball, d.Size)
	}
	return nil
}

// Report is the outcome of verifying an artifact.
type Report struct {
	Tarball  string `json:"tarball"`
	Manifest string `json:"manifest"`
	// SHA256 and Size are the tgz's, as read (or as given to
	// VerifyArtifactDigest).
	SHA256   string  `json:"sha256"`
	Size     int64   `json:"size"`
	Verified bool    `json:"verified"`
	Checks   []Check `json:"checks"`
}

// Err is nil when the artifact verified, else an error naming each failed
// check.
func (r *Report) Err() error {
	var msgs []string
	for _, c := range r.Checks {
		if !c.OK {
			msgs = append(msgs, c.Name+": "+c.Error)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s did not verify:\n  %s", r.Tarball, strings.Join(msgs, "\n  "))
}

// VerifyArtifact verifies a tgz's signature, its manifest's signature, and
// that the manifest describes the tgz (sha256 and size). Failed checks are
// in the report (see Report.Err); the error is for what stopped it from
// checking at all, such as an unreadable tgz.
func VerifyArtifact(ctx context.Context, v *Verifier, tarball, manifestPath string) (*Report, error) {
	td, err := digest.File(ctx, tarball)
	if err != nil {
		return nil, fmt.Errorf("verifying: %w", err)
	}
	return verifyArtifact(ctx, v, tarball, td, manifestPath)
}

// VerifyArtifactDigest is VerifyArtifact for a tgz whose sha256 and size
// are known (a store version's, its reads checked against them as they
// stream): nothing is hashed, and tarballPath only locates the tgz's
// signatures (its .sig and .sigstore.json beside it); the tgz itself need
// not exist there.
func VerifyArtifactDigest(ctx context.Context, v *Verifier, tarballPath, tgzSHA256 string, tgzSize int64, manifestPath string) (*Report, error) {
	sum, err := digest.Parse(tgzSHA256)
	if err != nil {
		return nil, fmt.Errorf("verifying %s: its sha256 %q: %w", tarballPath, tgzSHA256, err)
	}
	return verifyArtifact(ctx, v, tarballPath, digest.Digest{Sum: sum, Size: tgzSize}, manifestPath)
}

// verifyArtifact verifies the tgz of digest td and its manifest.
func verifyArtifact(ctx context.Context, v *Verifier, tarball string, td digest.Digest, manifestPath string) (*Report, error) {
	r := &Report{Tarball: tarball, Manifest: manifestPath, SHA256: td.Hex(), Size: td.Size}
	r.Checks = append(r.Checks, v.verifyFile("tarball", tarball, td)...)

	md, err := digest.File(ctx, manifestPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Checks = append(r.Checks, Check{Name: "manifest", File: manifestPath, Error: fmt.Sprintf("%s: missing: the tgz cannot be checked against its manifest", manifestPath)})
	case err != nil:
		return nil, fmt.Errorf("verifying: %w", err)
	default:
		r.Checks = append(r.Checks, v.verifyFile("manifest", manifestPath, md)...)
		c := Check{Name: "manifest matches tarball", File: manifestPath}
		m, err := manifest.Read(manifestPath)
		if err == nil {
			err = matches(m, manifestPath, tarball, td)
		}
		if err != nil {
			c.Error = err.Error()
		} else {
			c.OK = true
		}
		r.Checks = append(r.Checks, c)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.Verified = r.Err() == nil
	return r, nil
}

// RemoveArtifactSignatures removes the signatures beside a tgz and its
// manifest, if any.
func RemoveArtifactSignatures(tarball, manifestPath string) error {
	return errors.Join(RemoveSignatures(tarball), RemoveSignatures(manifestPath))
}
