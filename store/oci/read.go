package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	godigest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store"
)

// Manifests and small files are read whole; larger ones are not what they
// claim.
const (
	maxManifest  = 4 << 20
	maxSmallFile = 64 << 20
)

func roleOf(mediaType string) string {
	switch mediaType {
	case MediaTypeTarball:
		return store.RoleTarball
	case MediaTypeManifest:
		return store.RoleManifest
	case MediaTypeValidationScript:
		return store.RoleValidationScript
	case MediaTypeSignature, MediaTypeSigstoreBundle:
		return store.RoleSignature
	case MediaTypeSPDX:
		return store.RoleSBOM
	case MediaTypeInToto:
		return store.RoleProvenance
	case MediaTypeCycloneDX:
		return store.RoleCycloneDX
	case MediaTypeDSSE:
		return store.RoleAttestation
	}
	return ""
}

func fetchManifest(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) (*ocispec.Manifest, error) {
	if desc.Size > maxManifest {
		return nil, fmt.Errorf("manifest %s is %d bytes, more than %d", desc.Digest, desc.Size, maxManifest)
	}
	b, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	return &m, nil
}

// remoteVersion is a version as its manifest describes it.
type remoteVersion struct {
	desc  ocispec.Descriptor
	m     *ocispec.Manifest
	v     *store.Version
	files []ocispec.Descriptor // layers in the order of v.Files
}

// errNotVersion is a tag whose manifest is not imagectl's: another tool's
// image or artifact pushed into the repository.
var errNotVersion = errors.New("not an imagectl version")

// describe reads the manifest tagged tag in image's repository.
func (s *Store) describe(ctx context.Context, repo *remote.Repository, image, tag string) (*remoteVersion, error) {
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		return nil, err
	}
	m, err := fetchManifest(ctx, repo, desc)
	if err != nil {
		return nil, err
	}
	version := m.Annotations[ocispec.AnnotationVersion]
	if m.ArtifactType != ArtifactType || m.Annotations[AnnotationImage] != image || store.CheckKey("version", version) != nil {
		return nil, fmt.Errorf("%s is %w of %s (artifact type %q)", desc.Digest, errNotVersion, image, m.ArtifactType)
	}
	rv := &remoteVersion{desc: desc, m: m}
	v := &store.Version{Image: image, Version: version, Ref: s.ref(image, version)}
	v.Published, _ = time.Parse(time.RFC3339, m.Annotations[ocispec.AnnotationCreated])
	known := store.VersionFiles(image, version)
	allowed := maps.Clone(known)
	var tgz ocispec.Descriptor
	for _, l := range m.Layers {
		name, role := l.Annotations[ocispec.AnnotationTitle], roleOf(l.MediaType)
		if role == "" {
			// A file of a kind a later imagectl publishes: not read, so
			// that this one still reads the version.
			continue
		}
		if _, ok := known[name]; !ok && (role == store.RoleSignature || role == store.RoleAttestation) {
			// A signature or attestation a later imagectl adds (as this
			// one added the CycloneDX SBOM's): not read either.
			continue
		}
		if allowed[name] != role || l.Digest.Algorithm() != godigest.SHA256 || l.Digest.Validate() != nil {
			return nil, fmt.Errorf("version manifest %s: unexpected layer %q (%s, %s)", desc.Digest, name, l.MediaType, l.Digest)
		}
		delete(allowed, name)
		v.Files = append(v.Files, store.File{Name: name, Role: role, SHA256: l.Digest.Encoded(), Size: l.Size})
		rv.files = append(rv.files, l)
		if role == store.RoleTarball {
			v.SHA256, v.Size, tgz = l.Digest.Encoded(), l.Size, l
		}
	}
	if v.SHA256 == "" {
		return nil, fmt.Errorf("version manifest %s has no tgz", desc.Digest)
	}
	v.Remote = &remoteTarball{s: s, repo: repo, v: v, desc: tgz, dir: s.versionDir(image, version)}
	rv.v = v
	return rv, nil
}

// versionDir is where a version's files are materialized.
func (s *Store) versionDir(image, version string) string {
	return filepath.Join(s.cacheDir, "versions", s.registry, filepath.FromSlash(s.repoName(image)), version)
}

// Version implements store.Versions: the version's small files are in the
// cache and linked into Version.Dir; its tgz is fetched when asked for.
func (s *Store) Version(ctx context.Context, image, version string) (*store.Version, error) {
	if err := errors.Join(store.CheckKey("image", image), store.CheckKey("version", version), checkVersionTag(version)); err != nil {
		return nil, err
	}
	what := "reading " + s.ref(image, version)
	repo := s.repo(image)
	rv, err := s.describe(ctx, repo, image, version)
	if isNotFound(err) {
		return nil, fmt.Errorf("image %s version %s is not in the store %s: %w", image, version, s.Location(), store.ErrNotFound)
	}
	if err != nil {
		return nil, s.explain(what, err)
	}
	return s.fetchSmall(ctx, repo, rv, what)
}

// fetchSmall fetches a version's small files (build manifest, validation
// script, signatures) into the cache, each checked against its digest, and
// links them into the version's directory.
func (s *Store) fetchSmall(ctx context.Context, repo *remote.Repository, rv *remoteVersion, what string) (*store.Version, error) {
	v := rv.v
	v.Dir = s.versionDir(v.Image, v.Version)
	unlock, err := s.cache().Lock().Wait(false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	if err := os.MkdirAll(v.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer touch(v.Dir)
	for i, f := range v.Files {
		if f.Role == store.RoleTarball {
			continue
		}
		if rv.files[i].Size > maxSmallFile {
			return nil, fmt.Errorf("%s: %s is %d bytes, more than %d", what, f.Name, f.Size, maxSmallFile)
		}
		blob, err := s.cacheBlob(ctx, repo, rv.files[i])
		if err != nil {
			return nil, s.explain(what+": fetching "+f.Name, err)
		}
		p := filepath.Join(v.Dir, f.Name)
		if err := linkInto(blob, p); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		switch f.Role {
		case store.RoleManifest:
			v.Manifest = p
		case store.RoleValidationScript:
			v.ValidationScript = p
		}
	}
	if v.Manifest == "" {
		return nil, fmt.Errorf("%s: the version has no build manifest", what)
	}
	return v, nil
}

// cache is the store's cache directory.
func (s *Store) cache() Cache { return Cache{Dir: s.cacheDir} }

// blobPath is where the cache keeps a blob.
func (s *Store) blobPath(d godigest.Digest) string {
	return filepath.Join(s.cacheDir, "blobs", "sha256", d.Encoded())
}

// cacheBlob makes a blob a file in the cache, downloading it unless it is
// there: written to a temporary file, hashed as it is written, and renamed
// to its digest only when it matches. A cached copy is hashed again before
// it is used; one that no longer matches (a disk error, a hand edit) is
// dropped and downloaded again.
func (s *Store) cacheBlob(ctx context.Context, repo *remote.Repository, desc ocispec.Descriptor) (string, error) {
	p := s.blobPath(desc.Digest)
	if st, err := os.Stat(p); err == nil {
		d, err := digest.File(ctx, p)
		if err != nil {
			return "", fmt.Errorf("checking the cached copy %s: %w", p, err)
		}
		if d.Size == desc.Size && d.String() == desc.Digest.String() {
			return p, nil
		}
		// Dropped, unless another process has put a new copy there since.
		if now, err := os.Stat(p); err == nil && os.SameFile(st, now) {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return "", fmt.Errorf("dropping the cached copy %s, which does not match %s: %w", p, desc.Digest, err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	rc, err := repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(p), ".fetch-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // gone by rename on success
	defer tmp.Close()
	d, err := digest.Copy(ctx, tmp, io.LimitReader(rc, desc.Size+1), nil)
	if err != nil {
		return "", fmt.Errorf("downloading %s: %w", desc.Digest, err)
	}
	if d.String() != desc.Digest.String() || d.Size != desc.Size {
		return "", fmt.Errorf("downloading %s: the registry sent %d bytes with sha256 %s, expected %d bytes with %s", desc.Digest, d.Size, d.Hex(), desc.Size, desc.Digest)
	}
	if err := tmp.Sync(); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", err
	}
	return p, nil
}

// linkInto puts a cached blob at dst, a hard link (a copy where linking
// fails), replacing what was there.
//
// Readers of one version in many goroutines (a rollout) and processes place
// the same files at once: each stages under its own unique name and renames,
// so a reader sees the old or the new link, never none.
func linkInto(blob, dst string) error {
	if b, err := os.Stat(blob); err == nil {
		if d, err := os.Stat(dst); err == nil && os.SameFile(b, d) {
			return nil
		}
	}
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("placing %s: %w", dst, err)
	}
	tmp := f.Name()
	f.Close()
	os.Remove(tmp) // the name is ours; the link takes it
	if err := os.Link(blob, tmp); err != nil {
		// Another file system: a copy, staged and renamed alike.
		if err := atomicfile.Copy(dst, blob, 0o644); err != nil {
			return fmt.Errorf("placing %s: %w", dst, err)
		}
		return nil
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("placing %s: %w", dst, err)
	}
	return nil
}

// remoteTarball is a version's tgz in the registry.
type remoteTarball struct {
	s    *Store
	repo *remote.Repository
	v    *store.Version
	desc ocispec.Descriptor
	dir  string
}

// OpenTarball implements store.Remote: the cached blob when the cache has
// it, else range requests to the registry; either way checked against the
// descriptor's sha256. A cached blob found not to match is dropped from
// the cache as the read fails, so that the next open downloads it again.
func (r *remoteTarball) OpenTarball(ctx context.Context) (store.Blob, error) {
	what := "opening " + r.v.Ref + "'s tgz"
	var ra io.ReaderAt
	var c io.Closer
	cached := r.s.blobPath(r.desc.Digest)
	fromCache := true
	if f, err := os.Open(cached); err == nil {
		ra, c = f, f
	} else {
		rc, err := r.repo.Blobs().Fetch(ctx, r.desc)
		if err != nil {
			return nil, r.s.explain(what, err)
		}
		rs, ok := rc.(io.ReadSeeker)
		if !ok {
			// No range requests: fetch it whole into the cache.
			rc.Close()
			p, err := r.FetchTarball(ctx)
			if err != nil {
				return nil, err
			}
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			ra, c = f, f
		} else {
			ra, c, fromCache = &seekReaderAt{rs: rs, size: r.desc.Size}, rc, false
		}
	}
	cr, err := digest.NewCheckedReaderAt(ra, r.desc.Size, r.desc.Digest.String())
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var checked io.ReaderAt = cr
	if fromCache {
		checked = evictOnMismatch{cr, cached}
	}
	return struct {
		io.ReaderAt
		io.Closer
	}{checked, c}, nil
}

// evictOnMismatch reads a cached blob, checked: the cached copy found not
// to match its digest is removed, so that the next open downloads it again
// rather than failing the same way.
type evictOnMismatch struct {
	r    *digest.CheckedReaderAt
	path string
}

func (e evictOnMismatch) ReadAt(p []byte, off int64) (int, error) {
	n, err := e.r.ReadAt(p, off)
	if errors.Is(err, digest.ErrMismatch) {
		if rmErr := os.Remove(e.path); rmErr == nil || os.IsNotExist(rmErr) {
			err = fmt.Errorf("the cached copy %s: %w (removed: the next read downloads it again)", e.path, err)
		} else {
			err = fmt.Errorf("the cached copy %s: %w (and removing it: %v)", e.path, err, rmErr)
		}
	}
	return n, err
}

// FetchTarball implements store.Remote: the tgz in the cache, linked into
// the version's directory.
func (r *remoteTarball) FetchTarball(ctx context.Context) (string, error) {
	what := "fetching " + r.v.Ref + "'s tgz"
	unlock, err := r.s.cache().Lock().Wait(false)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	blob, err := r.s.cacheBlob(ctx, r.repo, r.desc)
	if err != nil {
		return "", r.s.explain(what, err)
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	p := filepath.Join(r.dir, manifest.FilesFor(r.v.Image, r.v.Version).Tarball)
	if err := linkInto(blob, p); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	touch(r.dir)
	return p, nil
}

// seekReaderAt reads at offsets from a seekable HTTP body: reads in order
// continue one response, a jump is a new range request. A response cut
// short (a dropped connection, a proxy's timeout) is resumed with a new
// range request from where it stopped, up to readAttempts times per read,
// so that a long upload streaming from the registry survives a blip.
type seekReaderAt struct {
	mu   sync.Mutex
	rs   io.ReadSeeker
	size int64
	pos  int64
}

const (
	// readAttempts is how many times a read of a registry blob is tried.
	readAttempts = 4
	// readRetryWait is the pause before the first retry, doubled after.
	readRetryWait = 250 * time.Millisecond
)

func (s *seekReaderAt) ReadAt(p []byte, off int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if off >= s.size {
		return 0, io.EOF
	}
	if rest := s.size - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	done, wait := 0, readRetryWait
	for attempt := 1; ; attempt++ {
		err := s.readFull(p[done:], off+int64(done), &done)
		if err == nil {
			if off+int64(done) == s.size {
				return done, io.EOF
			}
			return done, nil
		}
		if attempt == readAttempts || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return done, fmt.Errorf("reading bytes %d-%d of the blob (%d tries): %w", off+int64(done), off+int64(len(p))-1, attempt, err)
		}
		time.Sleep(wait)
		wait *= 2
		// The next read starts a new range request: the seek to the end
		// drops the response, the seek back asks for the rest.
		if _, err := s.rs.Seek(s.size, io.SeekStart); err == nil {
			s.pos = s.size
		}
	}
}

// readFull reads p at off from the current response (seeking first when
// off is not where it stands), adding what it read to *done; a response
// that ends before p is full is an error.
func (s *seekReaderAt) readFull(p []byte, off int64, done *int) error {
	if off != s.pos {
		if _, err := s.rs.Seek(off, io.SeekStart); err != nil {
			return err
		}
		s.pos = off
	}
	n, err := io.ReadFull(s.rs, p)
	s.pos += int64(n)
	*done += n
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // the size says more is to come
	}
	return err
}

// versionTag reports whether a tag names a version (not a channel or a
// signature).
func versionTag(tag string) bool {
	return store.CheckKey("version", tag) == nil && checkVersionTag(tag) == nil
}

// tags lists a repository's version tags; none when it does not exist.
func (s *Store) tags(ctx context.Context, image string) ([]string, error) {
	var out []string
	err := s.repo(image).Tags(ctx, "", func(tags []string) error {
		for _, t := range tags {
			if versionTag(t) {
				out = append(out, t)
			}
		}
		return nil
	})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, s.explain("listing the tags of "+s.registry+"/"+s.repoName(image), err)
	}
	return out, nil
}

// versions lists an image's versions, oldest first, as their manifests
// describe them, with their small files fetched when fetch is set.
func (s *Store) versions(ctx context.Context, image string, fetch bool) ([]*store.Version, error) {
	tags, err := s.tags(ctx, image)
	if err != nil {
		return nil, err
	}
	repo := s.repo(image)
	var out []*store.Version
	for _, t := range tags {
		what := "reading " + s.ref(image, t)
		rv, err := s.describe(ctx, repo, image, t)
		if errors.Is(err, errNotVersion) {
			continue // another tool's tag: not a version to list
		}
		if err != nil {
			return nil, s.explain(what, err)
		}
		v := rv.v
		if fetch {
			if v, err = s.fetchSmall(ctx, repo, rv, what); err != nil {
				return nil, err
			}
		}
		out = append(out, v)
	}
	store.SortVersions(out)
	return out, nil
}

// Images implements store.Versions: the images the store's index names and
// the registry's catalog lists under the prefix (imageNames), and their
// version tags, each version as Version
// returns it: its small files fetched (once: they stay in the cache), its
// tgz left remote.
func (s *Store) Images(ctx context.Context) ([]store.Image, error) {
	names, err := s.imageNames(ctx)
	if err != nil {
		return nil, err
	}
	out := []store.Image{}
	for _, name := range names {
		vs, err := s.versions(ctx, name, true)
		if err != nil {
			return nil, err
		}
		if len(vs) > 0 {
			out = append(out, store.Image{Name: name, Versions: vs})
		}
	}
	return out, nil
}

// Latest implements store.Versions (store.LatestOf).
func (s *Store) Latest(ctx context.Context, image string) (*store.Version, error) {
	return store.LatestOf(ctx, s, image)
}

// NextVersion implements store.Versions (store.NextVersionOf).
func (s *Store) NextVersion(ctx context.Context, image string, now time.Time) (string, error) {
	return store.NextVersionOf(ctx, s, image, now)
}

// ListVersions implements store.Lister: the image's version tags, each
// described without fetching its files.
func (s *Store) ListVersions(ctx context.Context, image string) ([]*store.Version, error) {
	return s.versions(ctx, image, false)
}

// ListNames implements store.Lister: the image's tags.
func (s *Store) ListNames(ctx context.Context, image string) ([]string, error) {
	return s.tags(ctx, image)
}

// SetChannel implements store.Channels: the tag site-SITE names the
// version's manifest.
func (s *Store) SetChannel(ctx context.Context, site, image, version string) error {
	if err := errors.Join(store.CheckKey("site", site), store.CheckKey("image", image), store.CheckKey("version", version)); err != nil {
		return err
	}
	what := fmt.Sprintf("pointing %s at %s", s.ref(image, channelPrefix+site), version)
	repo := s.repo(image)
	desc, err := repo.Resolve(ctx, version)
	if isNotFound(err) {
		return fmt.Errorf("%s: image %s version %s is not in the store %s: %w", what, image, version, s.Location(), store.ErrNotFound)
	}
	if err != nil {
		return s.explain(what, err)
	}
	if err := repo.Tag(ctx, desc, channelPrefix+site); err != nil {
		return s.explain(what, err)
	}
	return nil
}

// Channel implements store.Channels.
func (s *Store) Channel(ctx context.Context, site, image string) (string, error) {
	if err := errors.Join(store.CheckKey("site", site), store.CheckKey("image", image)); err != nil {
		return "", err
	}
	rv, err := s.describe(ctx, s.repo(image), image, channelPrefix+site)
	if isNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", s.explain("reading "+s.ref(image, channelPrefix+site), err)
	}
	return rv.v.Version, nil
}

// VerifySignature checks the version's cosign signature (its
// sha256-HEX.sig tag) with v: at least one signature must name the
// version's manifest digest and verify.
func (s *Store) VerifySignature(ctx context.Context, image, version string, v *signing.Verifier) error {
	if err := errors.Join(store.CheckKey("image", image), store.CheckKey("version", version)); err != nil {
		return err
	}
	what := "verifying the signature of " + s.ref(image, version)
	repo := s.repo(image)
	desc, err := repo.Resolve(ctx, version)
	if isNotFound(err) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		return s.explain(what, err)
	}
	tag := signatureTag(desc.Digest)
	sd, err := repo.Resolve(ctx, tag)
	if isNotFound(err) {
		return fmt.Errorf("%s: it is not signed (no %s)", what, s.ref(image, tag))
	}
	if err != nil {
		return s.explain(what, err)
	}
	sm, err := fetchManifest(ctx, repo, sd)
	if err != nil {
		return s.explain(what, err)
	}
	var errs []error
	for _, l := range sm.Layers {
		if l.MediaType != mediaTypeSimpleSigning || l.Size > maxManifest {
			continue
		}
		body, err := content.FetchAll(ctx, repo, l)
		if err != nil {
			return s.explain(what, err)
		}
		var p payload
		if err := json.Unmarshal(body, &p); err != nil {
			errs = append(errs, fmt.Errorf("payload %s: %w", l.Digest, err))
			continue
		}
		if p.Critical.Image.DockerManifestDigest != desc.Digest.String() || p.Critical.Type != simpleSigningType {
			errs = append(errs, fmt.Errorf("payload %s signs %s, not %s", l.Digest, p.Critical.Image.DockerManifestDigest, desc.Digest))
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[annotationSignature])
		if err != nil {
			errs = append(errs, fmt.Errorf("payload %s: signature annotation: %w", l.Digest, err))
			continue
		}
		if err := v.VerifyPayload(body, sig); err != nil {
			errs = append(errs, fmt.Errorf("payload %s: %w", l.Digest, err))
			continue
		}
		return nil
	}
	if len(errs) == 0 {
		return fmt.Errorf("%s: %s holds no signature", what, s.ref(image, tag))
	}
	return fmt.Errorf("%s: no signature verifies: %w", what, errors.Join(errs...))
}
