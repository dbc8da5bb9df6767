package signing

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
)

// SignedArtifact is a signed tgz and manifest, and the attestations
// signed for the tgz.
type SignedArtifact struct {
	Tarball  *Signature `json:"tarball"`
	Manifest *Signature `json:"manifest"`
	// Attestations are the DSSE envelopes' paths.
	Attestations []string `json:"attestations,omitempty"`
	envelopes    map[string][]byte
}

// Files are the signature files and attestations, in the order they were
// written.
func (a *SignedArtifact) Files() []string {
	return append([]string{a.Tarball.SignaturePath, a.Tarball.BundlePath, a.Manifest.SignaturePath, a.Manifest.BundlePath}, a.Attestations...)
}

// SignArtifact signs a tgz and the manifest that describes it, writing a
// .sig and a .sigstore.json beside each, and the in-toto statements
// about the tgz (by the path of the envelope to write, see
// provenance.Statements) as DSSE attestations: all of them or none. It
// refuses to sign a manifest whose artifact sha256 or size is not the
// tgz's: the two are signed to verify together.
func SignArtifact(ctx context.Context, s *Signer, tarball, manifestPath string, statements map[string][]byte) (*SignedArtifact, error) {
	m, err := manifest.Read(manifestPath)
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", tarball, err)
	}
	// A tgz of another size is refused before it is hashed (gigabytes).
	if st, err := os.Stat(tarball); err == nil && m.Artifact != nil && st.Mode().IsRegular() && st.Size() != m.Artifact.Size {
		return nil, fmt.Errorf("refusing to sign: %s records %d bytes for the artifact, but %s has %d", manifestPath, m.Artifact.Size, tarball, st.Size())
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
	if a.envelopes, err = s.Attest(ctx, td.Hex(), statements); err != nil {
		return nil, err
	}
	a.Attestations = slices.Sorted(maps.Keys(a.envelopes))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := writeSigned(a); err != nil {
		return nil, err
	}
	// Attestations of an earlier build of the same name would not match.
	for _, p := range manifest.FilesBeside(tarball).Attestations() {
		if _, ok := a.envelopes[p]; !ok {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("removing the attestation of an earlier build: %w", err)
			}
		}
	}
	return a, nil
}

// writeSigned writes an artifact's signature files and attestations, all
// or none.
func writeSigned(a *SignedArtifact) error {
	var set atomicfile.Set
	defer set.Abort()
	for path, data := range a.files() {
		if err := set.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("writing signature: %w", err)
		}
	}
	return set.Commit()
}

// files are the contents of the signature files and attestations by path.
func (a *SignedArtifact) files() map[string][]byte {
	files := maps.Clone(a.envelopes)
	if files == nil {
		files = map[string][]byte{}
	}
	for _, sig := range []*Signature{a.Tarball, a.Manifest} {
		files[sig.SignaturePath], files[sig.BundlePath] = sig.sig, sig.bundle
	}
	return files
}

// SignBuilt signs a build's outputs before they are published: the tgz by
// the digest the packer computed while writing it, the manifest by its
// bytes, and the in-toto statements about the tgz as DSSE attestations
// (by the path of the envelope to write). It returns the signature
// files' and attestations' contents by path, for the builder to publish
// with the rest, so that no artifact is ever under its final name
// unsigned. The manifest must describe that tgz.
func (s *Signer) SignBuilt(ctx context.Context, tarball string, tgzSHA256 []byte, tgzSize int64, manifestPath string, manifestBytes []byte,
	statements map[string][]byte) (*SignedArtifact, map[string][]byte, error) {
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
	if a.envelopes, err = s.Attest(ctx, td.Hex(), statements); err != nil {
		return nil, nil, err
	}
	a.Attestations = slices.Sorted(maps.Keys(a.envelopes))
	return a, a.files(), nil
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
	if r := sizeMismatch(v, tarball, manifestPath); r != nil {
		return r, nil
	}
	td, err := digest.File(ctx, tarball)
	if err != nil {
		return nil, fmt.Errorf("verifying: %w", err)
	}
	return verifyArtifact(ctx, v, tarball, td, manifestPath)
}

// hashAnyway is the size under which a tgz is hashed even when its size
// is not its manifest's: hashing it costs nothing, and the report then
// says which of its signatures fail.
const hashAnyway = 64 << 20

// sizeMismatch is the report on a tgz of hashAnyway bytes or more whose
// size is not the one its (readable) manifest records, made without
// hashing the tgz: it cannot be the tgz that was signed, and hashing it
// would take long. nil when the sizes agree, the tgz is small, or either
// cannot be read (VerifyArtifact then says why in full).
func sizeMismatch(v *Verifier, tarball, manifestPath string) *Report {
	fi, err := os.Stat(tarball)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < hashAnyway {
		return nil
	}
	mb, err := readlimit.File(manifestPath, manifest.MaxSize)
	if err != nil {
		return nil
	}
	m, err := manifest.Parse(mb)
	if err != nil || m.Artifact == nil || m.Artifact.Size == fi.Size() {
		return nil
	}
	why := fmt.Sprintf("%s is %d bytes, which does not match the %d bytes its manifest %s records: it is not the tgz that was signed (not hashed)",
		tarball, fi.Size(), m.Artifact.Size, manifestPath)
	sig, _ := manifest.Signatures(tarball)
	r := &Report{Tarball: tarball, Manifest: manifestPath, Size: fi.Size()}
	r.Checks = append(r.Checks, Check{Name: "tarball signature", File: sig, Error: why})
	r.Checks = append(r.Checks, v.verifyFile("manifest", manifestPath, digest.Bytes(mb))...)
	r.Checks = append(r.Checks, Check{Name: "manifest matches tarball", File: manifestPath, Error: why})
	return r
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

	// Read once, within its bound: the bytes whose signature is checked
	// are the bytes parsed.
	mb, err := readlimit.File(manifestPath, manifest.MaxSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Checks = append(r.Checks, Check{Name: "manifest", File: manifestPath, Error: fmt.Sprintf("%s: missing: the tgz cannot be checked against its manifest", manifestPath)})
	case err != nil:
		return nil, fmt.Errorf("verifying: reading manifest: %w", err)
	default:
		r.Checks = append(r.Checks, v.verifyFile("manifest", manifestPath, digest.Bytes(mb))...)
		c := Check{Name: "manifest matches tarball", File: manifestPath}
		m, err := manifest.Parse(mb)
		if err != nil {
			err = fmt.Errorf("reading manifest %s: %w", manifestPath, err)
		}
		if err == nil {
			err = matches(m, manifestPath, tarball, td)
		}
		if err != nil {
			c.Error = err.Error()
		} else {
			c.OK = true
		}
		r.Checks = append(r.Checks, c)
		if err == nil {
			r.Checks = append(r.Checks, v.verifyDocuments(ctx, m, tarball, td)...)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.Verified = r.Err() == nil
	return r, nil
}

// verifyDocuments checks the documents the (verified) manifest records
// beside the tgz: each is the file the manifest vouches for by digest,
// and its DSSE attestation verifies under the key for this tgz and
// carries that document. A manifest of a build before imagectl made them
// records none.
func (v *Verifier) verifyDocuments(ctx context.Context, m *manifest.Manifest, tarball string, td digest.Digest) []Check {
	beside := manifest.FilesBeside(tarball)
	var out []Check
	add := func(name, file string, err error) {
		c := Check{Name: name, File: file, OK: err == nil}
		if err != nil {
			c.Error = err.Error()
		}
		out = append(out, c)
	}
	for _, s := range m.SBOMs(beside) {
		doc, err := manifest.ReadDocument(s.Path, s.Document, maxAttestation)
		add(s.Name, s.Path, err)
		stmt, err := v.VerifyAttestation(ctx, s.Attestation, td.Hex(), s.PredicateType)
		if err == nil && doc != nil {
			if same, perr := samePredicate(stmt, doc); perr != nil || !same {
				err = fmt.Errorf("%s attests an SBOM other than %s", s.Attestation, s.Path)
			}
		}
		add(s.Name+" attestation", s.Attestation, err)
	}
	if d := m.Provenance; d != nil {
		_, err := manifest.ReadDocument(beside.Provenance, d, maxAttestation)
		add("provenance", beside.Provenance, err)
		stmt, err := v.VerifyAttestation(ctx, beside.ProvenanceAttestation, td.Hex(), d.Format)
		if err == nil && !digest.Bytes(stmt).Matches(d.SHA256) {
			err = fmt.Errorf("%s attests a provenance statement other than the one the manifest records (sha256 %s)", beside.ProvenanceAttestation, d.SHA256)
		}
		add("provenance attestation", beside.ProvenanceAttestation, err)
	}
	return out
}
