package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	godigest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store"
)

// Media types of a version's manifest and files.
const (
	ArtifactType              = "application/vnd.gpuaas.imagectl.image.v1+json"
	MediaTypeTarball          = "application/vnd.gpuaas.imagectl.rootfs.tar+gzip"
	MediaTypeManifest         = "application/vnd.gpuaas.imagectl.manifest.v1+json"
	MediaTypeValidationScript = "application/vnd.gpuaas.imagectl.validation-script.v1+sh"
	MediaTypeSignature        = "application/vnd.gpuaas.imagectl.signature.v1+base64"
	MediaTypeSigstoreBundle   = "application/vnd.dev.sigstore.bundle.v0.3+json"
	MediaTypeSPDX             = "application/spdx+json"
	MediaTypeCycloneDX        = "application/vnd.cyclonedx+json"
	MediaTypeInToto           = "application/vnd.in-toto+json"
	MediaTypeDSSE             = "application/vnd.dsse.envelope.v1+json"

	// AnnotationImage is the image name on a version's manifest.
	AnnotationImage = "dev.gpuaas.imagectl.image"

	// cosign's signature image.
	mediaTypeSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
	annotationSignature    = "dev.cosignproject.cosign/signature"
	// annotationPredicateType is on each layer of cosign's attestation image.
	annotationPredicateType = "predicateType"

	channelPrefix = "site-"
)

var errNotFound = errdef.ErrNotFound

// file is one file of a version being published.
type file struct {
	path string
	desc ocispec.Descriptor
	role string
}

// files lists an artifact's files under their store names, as a directory
// store holds them (store.Artifact.Sources), each with its media type.
func files(a store.Artifact, image, version string) []file {
	var out []file
	for _, src := range a.Sources(image, version) {
		out = append(out, file{path: src.Path, role: src.Role, desc: titled(mediaTypeOf(src), src.Name)})
	}
	return out
}

// mediaTypeOf is the media type of an artifact's file in a version.
func mediaTypeOf(src store.Source) string {
	switch src.Role {
	case store.RoleTarball:
		return MediaTypeTarball
	case store.RoleManifest:
		return MediaTypeManifest
	case store.RoleValidationScript:
		return MediaTypeValidationScript
	case store.RoleSBOM:
		return MediaTypeSPDX
	case store.RoleProvenance:
		return MediaTypeInToto
	case store.RoleCycloneDX:
		return MediaTypeCycloneDX
	case store.RoleAttestation:
		return MediaTypeDSSE
	case store.RoleSignature:
		if strings.HasSuffix(src.Name, manifest.SigstoreBundleExt) {
			return MediaTypeSigstoreBundle
		}
		return MediaTypeSignature
	}
	panic("store/oci: no media type for role " + src.Role)
}

func titled(mediaType, name string) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mediaType, Annotations: map[string]string{ocispec.AnnotationTitle: name}}
}

// Publish implements store.Versions: it pushes the files the registry does
// not have yet, the version's manifest, its signature when the store has
// a signer, and then the version's tag.
func (s *Store) Publish(ctx context.Context, a store.Artifact, opts store.PublishOptions) (*store.Version, error) {
	m, err := a.ReadManifest()
	if err != nil {
		return nil, err
	}
	image, version := m.Image.Name, m.Image.Version
	if err := checkVersionTag(version); err != nil {
		return nil, fmt.Errorf("publishing %s: manifest %s: %w", a.Tarball, a.Manifest, err)
	}
	if image == IndexRepository {
		return nil, fmt.Errorf("publishing %s: manifest %s: the image name %q is the registry store's index: rename the image", a.Tarball, a.Manifest, image)
	}
	ref := s.ref(image, version)
	what := fmt.Sprintf("publishing %s %s to %s", image, version, ref)
	want, err := digest.Parse(m.Artifact.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%s: manifest %s: artifact: %w", what, a.Manifest, err)
	}
	if err := store.CheckSources(a.Sources(image, version), m.Artifact.Size); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	fs := files(a, image, version)
	for i := range fs {
		f := &fs[i]
		if f.role == store.RoleTarball {
			// The manifest says what the tgz is; the push checks it as it
			// streams (pushBlob), or hashes it when the registry has it.
			f.desc.Digest = godigest.NewDigestFromBytes(godigest.SHA256, want[:])
			f.desc.Size = m.Artifact.Size
			continue
		}
		d, err := digest.File(ctx, f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		f.desc.Digest, f.desc.Size = godigest.Digest(d.String()), d.Size
	}

	repo := s.repo(image)
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	annotations := map[string]string{
		ocispec.AnnotationVersion: version,
		ocispec.AnnotationCreated: now().UTC().Format(time.RFC3339),
		AnnotationImage:           image,
	}
	if rev := m.Lineage.SourceRevision; rev != "" {
		annotations[ocispec.AnnotationRevision] = rev
	}
	// A registry that took the same blob from two publishers at once may
	// lose track of it for a moment (CNCF distribution does) and refuse a
	// manifest naming it: the blobs it lacks are pushed again, and the
	// manifest, up to three times.
	var desc ocispec.Descriptor
	var layers []ocispec.Descriptor
	pushAll := func() error {
		layers = layers[:0]
		for _, f := range fs {
			if err := s.pushBlob(ctx, repo, f, ref); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			layers = append(layers, f.desc)
		}
		return nil
	}
	// A version already published is compared before anything is pushed,
	// so that other content under it is refused without uploading a byte;
	// the same content is the same version once the tgz is checked against
	// the manifest (pushBlob hashes it: the registry has it), with no new
	// manifest pushed. The comparison after the push below settles a race
	// with another publisher.
	if old, err := repo.Resolve(ctx, version); err == nil {
		if err := s.same(ctx, repo, old, fs, what); err != nil {
			return nil, err
		}
		if err := pushAll(); err != nil {
			return nil, err
		}
		return s.existing(ctx, image, version, what)
	} else if !isNotFound(err) {
		return nil, s.explain(what+": resolving the tag", err)
	}
	for attempt := 1; ; attempt++ {
		if err := pushAll(); err != nil {
			return nil, err
		}
		desc, err = oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ArtifactType,
			oras.PackManifestOptions{Layers: layers, ManifestAnnotations: annotations})
		if err == nil || attempt == 3 || !blobUnknown(err) {
			break
		}
	}
	if err != nil {
		return nil, s.explain(what+": pushing the version's manifest", err)
	}

	// Immutability: an existing tag must name the same content.
	if old, err := repo.Resolve(ctx, version); err == nil {
		if err := s.same(ctx, repo, old, fs, what); err != nil {
			return nil, err
		}
		return s.existing(ctx, image, version, what)
	} else if !isNotFound(err) {
		return nil, s.explain(what+": resolving the tag", err)
	}
	if s.signer != nil {
		if err := s.sign(ctx, repo, image, desc); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := s.attest(ctx, repo, image, desc, m, fs); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	// Indexed before the version appears, so that a version is never
	// missing from the listing of a registry without a catalog.
	if err := s.indexImage(ctx, image); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for attempt := 1; ; attempt++ {
		err = repo.Tag(ctx, desc, version)
		if err == nil || attempt == 3 || !blobUnknown(err) {
			break
		}
		if err := pushAll(); err != nil {
			return nil, err
		}
		// The same manifest again (it pushes the config blob too).
		if desc, err = oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ArtifactType,
			oras.PackManifestOptions{Layers: layers, ManifestAnnotations: annotations}); err != nil {
			return nil, s.explain(what+": pushing the version's manifest", err)
		}
	}
	if err != nil {
		if refusedAsImmutable(err) {
			return nil, fmt.Errorf("%s: %w: the registry refused to tag it (%v): versions are immutable, publish under a new version", what, store.ErrExists, err)
		}
		return nil, s.explain(what+": tagging the version", err)
	}
	return s.Version(ctx, image, version)
}

// existing is the version published already with the same content, as
// Publish returns it (Existed), recorded in the index should it have been
// published before the index was.
func (s *Store) existing(ctx context.Context, image, version, what string) (*store.Version, error) {
	if err := s.indexImage(ctx, image); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	v, err := s.Version(ctx, image, version)
	if err != nil {
		return nil, err
	}
	v.Existed = true
	return v, nil
}

// blobUnknown reports whether the registry refused a manifest because a
// blob it names is unknown to it.
func blobUnknown(err error) bool {
	var resp *errcode.ErrorResponse
	if !errors.As(err, &resp) {
		return false
	}
	for _, e := range resp.Errors {
		if e.Code == "MANIFEST_BLOB_UNKNOWN" || e.Code == "BLOB_UNKNOWN" {
			return true
		}
	}
	return false
}

// checkVersionTag refuses versions that would read as the store's other
// tags.
func checkVersionTag(version string) error {
	if strings.HasPrefix(version, channelPrefix) || strings.HasPrefix(version, "sha256-") {
		return fmt.Errorf("version %q starts like a channel or signature tag (%s..., sha256-...)", version, channelPrefix)
	}
	return nil
}

// same compares the content of an existing version's manifest with what is
// being published: the tgz, the build manifest and the validation script
// (signatures differ each time: ECDSA signs with a random nonce).
func (s *Store) same(ctx context.Context, repo *remote.Repository, old ocispec.Descriptor, fs []file, what string) error {
	om, err := fetchManifest(ctx, repo, old)
	if err != nil {
		return s.explain(what+": reading the published version's manifest", err)
	}
	have := map[string]godigest.Digest{}
	for _, l := range om.Layers {
		if role := roleOf(l.MediaType); role != store.RoleSignature && role != store.RoleAttestation {
			have[role] = l.Digest
		}
	}
	ours := map[string]godigest.Digest{}
	for _, f := range fs {
		if f.role != store.RoleSignature && f.role != store.RoleAttestation {
			ours[f.role] = f.desc.Digest
		}
	}
	for _, role := range store.ContentRoles {
		x, y := have[role], ours[role]
		switch {
		case x == y:
		case x == "":
			return fmt.Errorf("%s: %w: the published version has no %s", what, store.ErrExists, role)
		case y == "":
			return fmt.Errorf("%s: %w: the published version has a %s, this one none", what, store.ErrExists, role)
		default:
			return fmt.Errorf("%s: %w: its %s has %s, this one %s (versions are immutable: publish under a new version)",
				what, store.ErrExists, role, x, y)
		}
	}
	return nil
}

// refusedAsImmutable reports whether a registry refused a tag because it
// is immutable (Harbor, ECR, Artifact Registry, ACR).
func refusedAsImmutable(err error) bool {
	var resp *errcode.ErrorResponse
	if !errors.As(err, &resp) || (resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusConflict) {
		return false
	}
	if strings.Contains(strings.ToLower(err.Error()), "immutable") {
		return true
	}
	for _, e := range resp.Errors {
		if e.Code == "TAG_INVALID" || e.Code == errcode.ErrorCodeManifestInvalid {
			return true
		}
	}
	return resp.StatusCode == http.StatusConflict
}

// pushBlob pushes a file unless the repository has it. The tgz is checked
// against its descriptor as it streams; when the registry already has it,
// it is hashed here instead.
func (s *Store) pushBlob(ctx context.Context, repo *remote.Repository, f file, ref string) error {
	what := fmt.Sprintf("pushing %s to %s", f.path, ref)
	has, err := repo.Exists(ctx, f.desc)
	if err != nil {
		return s.explain(what, err)
	}
	if has {
		if f.role == store.RoleTarball {
			d, err := digest.File(ctx, f.path)
			if err != nil {
				return err
			}
			if d.String() != f.desc.Digest.String() || d.Size != f.desc.Size {
				return mismatch(f, d.Hex(), d.Size)
			}
		}
		return nil
	}
	in, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer in.Close()
	cr := &checkedReader{r: in, f: f, h: sha256.New()}
	if err := repo.Push(ctx, f.desc, cr); err != nil {
		if cr.err != nil {
			return cr.err
		}
		return s.explain(what, err)
	}
	return nil
}

func mismatch(f file, sha string, size int64) error {
	return fmt.Errorf("%s (sha256 %s, %d bytes) is not the tgz its manifest describes (%s, %d bytes)",
		f.path, sha, size, f.desc.Digest, f.desc.Size)
}

// checkedReader reads a file for an upload and fails the read that would
// complete it when it is not the size and sha256 of its descriptor, so
// that the registry never gets all of other bytes.
type checkedReader struct {
	r   io.Reader
	f   file
	h   hash.Hash
	n   int64
	err error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	switch {
	case c.n > c.f.desc.Size:
		c.err = fmt.Errorf("%s is larger than the %d bytes its manifest records", c.f.path, c.f.desc.Size)
	case c.n == c.f.desc.Size:
		if got := godigest.NewDigest(godigest.SHA256, c.h); got != c.f.desc.Digest {
			c.err = mismatch(c.f, got.Encoded(), c.n)
		}
	case err == io.EOF:
		c.err = mismatch(c.f, "(short)", c.n)
	}
	if c.err != nil {
		return 0, c.err
	}
	return n, err
}

// payload is cosign's "simple signing" payload for an image.
type payload struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]any `json:"optional"`
}

const simpleSigningType = "cosign container image signature"

// signatureTag is where cosign looks for a manifest's signatures.
func signatureTag(d godigest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded() + ".sig"
}

// sign pushes a cosign signature of the version's manifest desc: a
// simple-signing payload naming it, signed, in a manifest tagged
// sha256-HEX.sig.
func (s *Store) sign(ctx context.Context, repo *remote.Repository, image string, desc ocispec.Descriptor) error {
	var p payload
	p.Critical.Identity.DockerReference = s.registry + "/" + s.repoName(image)
	p.Critical.Image.DockerManifestDigest = desc.Digest.String()
	p.Critical.Type = simpleSigningType
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	sig, err := s.signer.SignPayload(body)
	if err != nil {
		return fmt.Errorf("signing the version's manifest %s: %w", desc.Digest, err)
	}
	layer := ocispec.Descriptor{
		MediaType:   mediaTypeSimpleSigning,
		Digest:      godigest.FromBytes(body),
		Size:        int64(len(body)),
		Annotations: map[string]string{annotationSignature: base64.StdEncoding.EncodeToString(sig)},
	}
	return s.pushCosignImage(ctx, repo, image, signatureTag(desc.Digest), []blob{{layer, body}})
}

// attestationTag is where cosign looks for a manifest's attestations
// (on registries without the referrers API).
func attestationTag(d godigest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded() + ".att"
}

// attest pushes the version's attestations as cosign does, so that cosign
// verify-attestation finds them for the version's manifest desc: the
// provenance statement and the SBOMs' (SPDX and CycloneDX), each made
// about desc as well as the tgz, signed as a DSSE envelope, one layer
// each, in a manifest tagged sha256-HEX.att. A version without them (an
// artifact built before imagectl made them) gets none.
func (s *Store) attest(ctx context.Context, repo *remote.Repository, image string, desc ocispec.Descriptor, m *manifest.Manifest, fs []file) error {
	subject := provenance.Resource{Name: s.registry + "/" + s.repoName(image), SHA256: desc.Digest.Encoded()}
	// The SBOMs the manifest records, by their path beside the tgz.
	sboms := map[string]manifest.SBOMFile{}
	for _, f := range fs {
		if f.role == store.RoleTarball {
			for _, sb := range m.SBOMs(manifest.FilesBeside(f.path)) {
				sboms[sb.Path] = sb
			}
		}
	}
	var layers []blob
	for _, f := range fs {
		var predicateType string
		var stmt []byte
		sb, isSBOM := sboms[f.path]
		switch {
		case f.role == store.RoleProvenance && m.Provenance != nil:
			b, err := manifest.ReadDocument(f.path, m.Provenance, maxSmallFile)
			if err != nil {
				return err
			}
			predicateType, stmt = m.Provenance.Format, b
		case isSBOM:
			b, err := manifest.ReadDocument(f.path, sb.Document, maxSmallFile)
			if err != nil {
				return err
			}
			predicateType = sb.PredicateType
			if stmt, err = provenance.SBOMStatement(provenance.Resource{Name: m.Artifact.File, SHA256: m.Artifact.SHA256}, sb.PredicateType, b); err != nil {
				return err
			}
		default:
			continue
		}
		stmt, err := provenance.WithSubject(stmt, subject)
		if err != nil {
			return err
		}
		env, err := s.signer.SignDSSE(ctx, signing.InTotoPayloadType, stmt)
		if err != nil {
			return fmt.Errorf("signing the attestation of %s: %w", f.desc.Annotations[ocispec.AnnotationTitle], err)
		}
		layers = append(layers, blob{ocispec.Descriptor{MediaType: MediaTypeDSSE, Digest: godigest.FromBytes(env), Size: int64(len(env)),
			Annotations: map[string]string{annotationSignature: "", annotationPredicateType: predicateType}}, env})
	}
	if len(layers) == 0 {
		return nil
	}
	return s.pushCosignImage(ctx, repo, image, attestationTag(desc.Digest), layers)
}

// blob is a descriptor and its content.
type blob struct {
	desc ocispec.Descriptor
	data []byte
}

// pushCosignImage pushes an image as cosign writes its signature and
// attestation images: the layers, an image config naming them, and a
// manifest under tag.
func (s *Store) pushCosignImage(ctx context.Context, repo *remote.Repository, image, tag string, layers []blob) error {
	cfg := ocispec.Image{Platform: ocispec.Platform{}, RootFS: ocispec.RootFS{Type: "layers"}}
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.desc.Digest)
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: godigest.FromBytes(cb), Size: int64(len(cb))}
	what := "pushing " + s.ref(image, tag)
	sm := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest, Config: cfgDesc}
	for _, b := range append(layers, blob{cfgDesc, cb}) {
		if err := pushBytes(ctx, repo, b.desc, b.data); err != nil {
			return s.explain(what, err)
		}
	}
	for _, l := range layers {
		sm.Layers = append(sm.Layers, l.desc)
	}
	mb, err := json.Marshal(sm)
	if err != nil {
		return err
	}
	md := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: godigest.FromBytes(mb), Size: int64(len(mb))}
	if err := repo.PushReference(ctx, md, bytes.NewReader(mb), tag); err != nil {
		return s.explain(what, err)
	}
	return nil
}

func pushBytes(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor, data []byte) error {
	has, err := repo.Exists(ctx, desc)
	if err != nil || has {
		return err
	}
	return repo.Push(ctx, desc, bytes.NewReader(data))
}
