package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
)

// DefaultDir is where the store is when neither --store nor
// $IMAGECTL_STORE says.
const DefaultDir = "imagectl-store"

// Dir is a store in a local directory:
//
//	<root>/.lock                        the lock file
//	<root>/.staging/                    versions being published
//	<root>/.sites/<site>.json           each site's promotion catalog
//	<root>/<image>/<version>/version.json   the version's index (files, sha256s)
//	<root>/<image>/<version>/<image>-<version>.tgz, .manifest.json, -validate.sh,
//	                                    .spdx.json, .cdx.json, .provenance.json,
//	                                    *.sig, *.sigstore.json, *.dsse.json
type Dir struct {
	Root string
}

var (
	_ Store  = (*Dir)(nil)
	_ Lister = (*Dir)(nil)
)

// NewDir opens the store at root; nothing is created until something is
// published or recorded.
func NewDir(root string) *Dir { return &Dir{Root: root} }

// Location implements Versions: the store's directory.
func (d *Dir) Location() string { return d.Root }

const (
	indexFile    = "version.json"
	stagingDir   = ".staging"
	indexVersion = 1
	// maxIndex is the largest version.json read: one version's index
	// is a few kilobytes.
	maxIndex = 1 << 20
	// staleStaging is how old a staging directory must be before Publish
	// removes it as the leftover of a crashed process.
	staleStaging = 48 * time.Hour
)

type index struct {
	SchemaVersion int       `json:"schema_version"`
	Image         string    `json:"image"`
	Version       string    `json:"version"`
	Published     time.Time `json:"published"`
	Files         []File    `json:"files"`
}

// ReadManifest reads the build manifest of a build's files a, which says the image
// and version it publishes as, and says why it cannot be published: no
// artifact section (a build marker), or a name or version that is not a
// valid store key.
func ReadManifest(a manifest.Files) (*manifest.Manifest, error) {
	m, err := manifest.Read(a.Manifest)
	if err != nil {
		return nil, fmt.Errorf("publishing %s: %w", a.Tarball, err)
	}
	if m.Artifact == nil {
		return nil, fmt.Errorf("publishing %s: manifest %s has no artifact section (it is a build marker)", a.Tarball, a.Manifest)
	}
	if err := errors.Join(CheckKey("image", m.Image.Name), CheckKey("version", m.Image.Version)); err != nil {
		return nil, fmt.Errorf("publishing %s: manifest %s: %w", a.Tarball, a.Manifest, err)
	}
	return m, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Staging makes a directory inside the store for a build to write its
// outputs into, so that publishing them (with PublishOptions.Move) renames
// rather than copies them. remove deletes it and whatever is left in it.
func (d *Dir) Staging() (dir string, remove func(), err error) {
	parent := filepath.Join(d.Root, stagingDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", nil, fmt.Errorf("creating the store's staging directory: %w", err)
	}
	dir, err = os.MkdirTemp(parent, "build-")
	if err != nil {
		return "", nil, fmt.Errorf("creating a staging directory in the store: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// Publish implements Store.
func (d *Dir) Publish(ctx context.Context, a manifest.Files, opts PublishOptions) (*Version, error) {
	m, err := ReadManifest(a)
	if err != nil {
		return nil, err
	}
	image, version := m.Image.Name, m.Image.Version
	what := fmt.Sprintf("publishing %s %s", image, version)
	srcs := Sources(a, image, version)
	if err := CheckSources(srcs, m.Artifact.Size); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	final := filepath.Join(d.Root, image, version)

	// Already there: hash in place, no copy.
	if old, err := readIndex(final); err == nil {
		files, err := hashSources(ctx, srcs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return d.same(old, files, what)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	parent := filepath.Join(d.Root, stagingDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("%s: creating the staging directory: %w", what, err)
	}
	sweepStaging(parent)
	stage, err := os.MkdirTemp(parent, "publish-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer os.RemoveAll(stage) // gone by rename on success
	var files []File
	for _, s := range srcs {
		f, err := place(ctx, s, filepath.Join(stage, s.Name), opts.Move)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		files = append(files, f)
	}
	if tgz := files[0]; !digest.Equal(tgz.SHA256, m.Artifact.SHA256) || tgz.Size != m.Artifact.Size {
		return nil, fmt.Errorf("%s: %s (sha256 %s, %d bytes) is not the tgz its manifest describes (sha256 %s, %d bytes)",
			what, a.Tarball, tgz.SHA256, tgz.Size, m.Artifact.SHA256, m.Artifact.Size)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	idx := index{SchemaVersion: indexVersion, Image: image, Version: version, Published: now().UTC(), Files: files}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	// Written last, and the staging directory fsynced with it.
	if err := atomicfile.WriteFile(filepath.Join(stage, indexFile), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}

	unlock, err := d.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	if old, err := readIndex(final); err == nil {
		return d.same(old, files, what) // another process published it meanwhile
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Chmod(stage, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Rename(stage, final); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := errors.Join(atomicfile.Sync(filepath.Dir(final)), atomicfile.Sync(d.Root)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return d.version(&idx), nil
}

// same compares what is being published with what is there: the tgz, the
// manifest and the validation script must be the same bytes. Signatures are
// not compared: ECDSA signs with a random nonce, so signing the same bytes
// twice gives other signature files; the ones published first stay.
func (d *Dir) same(old *index, files []File, what string) (*Version, error) {
	content := func(fs []File) map[string]File {
		out := map[string]File{}
		for _, f := range fs {
			if f.Role != RoleSignature {
				out[f.Role] = f
			}
		}
		return out
	}
	a, b := content(old.Files), content(files)
	for _, role := range ContentRoles {
		x, y := a[role], b[role]
		switch {
		case x.SHA256 == y.SHA256:
		case x.SHA256 == "":
			return nil, fmt.Errorf("%s: %w: the published version has no %s", what, ErrExists, role)
		case y.SHA256 == "":
			return nil, fmt.Errorf("%s: %w: the published version has a %s, this one none", what, ErrExists, role)
		default:
			return nil, fmt.Errorf("%s: %w: its %s has sha256 %s, this one %s (versions are immutable: publish under a new version)",
				what, ErrExists, role, x.SHA256, y.SHA256)
		}
	}
	v := d.version(old)
	v.Existed = true
	return v, nil
}

func (d *Dir) version(idx *index) *Version {
	dir := filepath.Join(d.Root, idx.Image, idx.Version)
	v := &Version{Image: idx.Image, Version: idx.Version, Published: idx.Published, Files: idx.Files, Dir: dir}
	for _, f := range idx.Files {
		p := filepath.Join(dir, f.Name)
		switch f.Role {
		case RoleTarball:
			v.Tarball, v.SHA256, v.Size = p, f.SHA256, f.Size
		case RoleManifest:
			v.Manifest = p
		case RoleValidationScript:
			v.ValidationScript = p
		}
	}
	return v
}

// place copies (or moves) a file into the staging directory, fsyncs it,
// and returns its hash.
func place(ctx context.Context, s Source, dst string, move bool) (File, error) {
	if move {
		err := os.Rename(s.Path, dst)
		if err == nil {
			return hashFile(ctx, s, dst)
		}
		if !errors.Is(err, syscall.EXDEV) {
			return File{}, fmt.Errorf("moving %s into the store: %w", s.Path, err)
		}
	}
	in, err := readlimit.Open(s.Path)
	if err != nil {
		return File{}, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return File{}, err
	}
	defer out.Close()
	if st, err := in.Stat(); err == nil && st.Mode()&0o111 != 0 {
		if err := out.Chmod(0o755); err != nil {
			return File{}, err
		}
	}
	d, err := digest.Copy(ctx, out, in, nil)
	if err != nil {
		return File{}, fmt.Errorf("copying %s into the store: %w", s.Path, err)
	}
	if err := out.Sync(); err != nil {
		return File{}, fmt.Errorf("copying %s into the store: %w", s.Path, err)
	}
	if move {
		in.Close()
		if err := os.Remove(s.Path); err != nil {
			return File{}, err
		}
	}
	return File{Name: s.Name, Role: s.Role, SHA256: d.Hex(), Size: d.Size}, nil
}

func hashSources(ctx context.Context, srcs []Source) ([]File, error) {
	var out []File
	for _, s := range srcs {
		f, err := hashFile(ctx, s, s.Path)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// hashFile is the store's record of source s, read at path.
func hashFile(ctx context.Context, s Source, path string) (File, error) {
	d, err := digest.File(ctx, path)
	if err != nil {
		return File{}, err
	}
	return File{Name: s.Name, Role: s.Role, SHA256: d.Hex(), Size: d.Size}, nil
}

// sweepStaging removes staging directories left by crashed processes.
func sweepStaging(parent string) {
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleStaging {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

func readIndex(dir string) (*index, error) {
	b, err := readlimit.File(filepath.Join(dir, indexFile), maxIndex)
	if err != nil {
		return nil, err
	}
	var idx index
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&idx); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, indexFile), err)
	}
	if idx.SchemaVersion != indexVersion {
		return nil, fmt.Errorf("reading %s: schema version %d, this imagectl reads %d", filepath.Join(dir, indexFile), idx.SchemaVersion, indexVersion)
	}
	return &idx, nil
}

// Images implements Store.
func (d *Dir) Images(ctx context.Context) ([]Image, error) {
	entries, err := os.ReadDir(d.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return []Image{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the store %s: %w", d.Root, err)
	}
	out := []Image{}
	for _, e := range entries {
		if !e.IsDir() || CheckKey("image", e.Name()) != nil {
			continue
		}
		vs, err := d.versions(e.Name())
		if err != nil {
			return nil, err
		}
		if len(vs) > 0 {
			out = append(out, Image{Name: e.Name(), Versions: vs})
		}
	}
	return out, nil
}

// versions lists an image's versions, oldest first.
func (d *Dir) versions(image string) ([]*Version, error) {
	entries, err := os.ReadDir(filepath.Join(d.Root, image))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing image %s in the store: %w", image, err)
	}
	var out []*Version
	for _, e := range entries {
		if !e.IsDir() || CheckKey("version", e.Name()) != nil {
			continue
		}
		idx, err := readIndex(filepath.Join(d.Root, image, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d.version(idx))
	}
	SortVersions(out)
	return out, nil
}

// Version implements Store.
func (d *Dir) Version(ctx context.Context, image, version string) (*Version, error) {
	if err := errors.Join(CheckKey("image", image), CheckKey("version", version)); err != nil {
		return nil, err
	}
	idx, err := readIndex(filepath.Join(d.Root, image, version))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("image %s version %s is not in the store %s: %w", image, version, d.Root, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return d.version(idx), nil
}

// Latest implements Store (LatestOf).
func (d *Dir) Latest(ctx context.Context, image string) (*Version, error) {
	return LatestOf(ctx, d, image)
}

// NextVersion implements Store (NextVersionOf).
func (d *Dir) NextVersion(ctx context.Context, image string, now time.Time) (string, error) {
	return NextVersionOf(ctx, d, image, now)
}

// ListVersions implements Lister.
func (d *Dir) ListVersions(ctx context.Context, image string) ([]*Version, error) {
	return d.versions(image)
}

// ListNames implements Lister: the entries of the image's directory.
func (d *Dir) ListNames(ctx context.Context, image string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(d.Root, image))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing image %s in the store: %w", image, err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}
