package upload

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/upload/maas"
)

// PhaseVerify is the check of the artifact before anything is sent.
const PhaseVerify = "verify"

// Options adjust Artifact.
type Options struct {
	// Manifest is the build manifest; default the .manifest.json beside
	// the tgz.
	Manifest string
	// Name is the MAAS name the versioned name derives from; default the
	// manifest's maas.name, else custom/<the manifest's image name>.
	Name string
	// BaseImage is the <os>/<series> the image is built on, which MAAS
	// requires of custom images; default the manifest's maas.base_image.
	BaseImage string
	// Verify runs after the artifact matched its manifest and before MAAS
	// is contacted: the signature check. Its error stops the upload.
	Verify func(ctx context.Context, tgz, manifest string) error
	// Content, when set, is the tgz itself, read at offsets (a store
	// version's OpenTarball, streamed from a registry): the tgz path then
	// only names it (and its signatures beside it) and need not exist, and
	// it is not hashed first: Content's own digest must be the manifest's,
	// and its reads are checked against it as they go.
	Content *Content
	// Events receives progress; may be nil.
	Events func(event.Event)
	// Configure adjusts the client configuration made from the site (tests
	// shorten waits and chunks with it).
	Configure func(*maas.Config)
}

// Content is a tgz read at offsets and the digest its reads are checked
// against (digest.CheckedReaderAt, store.Version.OpenTarball).
type Content struct {
	R      io.ReaderAt
	SHA256 string
	Size   int64
}

// Result is what an upload did.
type Result struct {
	maas.Result
	// Name is the boot resource's name; DistroSeries what a deploy (and a
	// site profile's distro_series) uses to select it.
	Name         string `json:"name"`
	DistroSeries string `json:"distro_series"`
	Title        string `json:"title"`
	SHA256       string `json:"sha256"`
	Size         int64  `json:"size"`
	Site         string `json:"site"`
}

// Artifact uploads a built tgz to a site under its immutable versioned
// name. Before sending a byte it checks the tgz's size and sha256 against
// its manifest (a local file by hashing it; opts.Content by the digest its
// reads are checked against) and runs opts.Verify; env supplies the site's
// API key when the site reads it from the environment. The bytes sent are
// read at offsets and checked against the sha256 as they go.
func Artifact(ctx context.Context, site *sites.Site, env []string, tgz string, opts Options) (*Result, error) {
	mpath := opts.Manifest
	if mpath == "" {
		mpath = manifest.FilesBeside(tgz).Manifest
	}
	m, err := manifest.Read(mpath)
	if err != nil {
		return nil, fmt.Errorf("uploading %s: %w", tgz, err)
	}
	if m.Artifact == nil {
		return nil, fmt.Errorf("uploading %s: manifest %s has no artifact section (sha256 and size)", tgz, mpath)
	}
	baseImage := opts.BaseImage
	if baseImage == "" && m.MAAS != nil {
		baseImage = m.MAAS.BaseImage
	}
	if baseImage == "" {
		return nil, fmt.Errorf("uploading %s: no base image: MAAS requires the <os>/<series> a custom image is built on, such as ubuntu/noble, and manifest %s has no maas.base_image (give it with --base-image)", tgz, mpath)
	}
	arch := site.Architecture
	if cpu := func(a string) string { return strings.SplitN(a, "/", 2)[0] }; m.Image.Architecture != "" && cpu(arch) != cpu(m.Image.Architecture) {
		return nil, fmt.Errorf("uploading %s: the image is %s but site %q takes %s", tgz, m.Image.Architecture, site.Name, arch)
	}
	rep := event.Reporter(opts.Events)
	end := rep.Phase(PhaseVerify, fmt.Sprintf("check %s against %s", tgz, mpath))
	content := opts.Content
	if content != nil {
		err = matchesManifest(tgz, content, m.Artifact)
	} else {
		var f *os.File
		if f, err = readlimit.Open(tgz); err == nil {
			defer f.Close()
			err = verify(ctx, tgz, m.Artifact, rep)
		}
		if err == nil {
			// Hashed once above, and checked again as it is read: the file
			// may change on disk in between.
			var r io.ReaderAt
			r, err = digest.NewCheckedReaderAt(f, m.Artifact.Size, m.Artifact.SHA256)
			content = &Content{R: r, SHA256: m.Artifact.SHA256, Size: m.Artifact.Size}
		}
	}
	if err == nil && opts.Verify != nil {
		err = opts.Verify(ctx, tgz, mpath)
	}
	end(err)
	if err != nil {
		return nil, fmt.Errorf("uploading %s: %w", tgz, err)
	}
	cfg, err := maas.ConfigFor(site, env)
	if err != nil {
		return nil, err
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	c, err := maas.New(cfg)
	if err != nil {
		return nil, err
	}
	name := opts.Name
	title := strings.TrimSpace(m.Image.Title + " " + m.Image.Version)
	if name == "" {
		name = m.MAASName()
		if m.MAAS != nil && m.MAAS.Title != "" {
			title = m.MAAS.Title
		}
	}
	vn := manifest.VersionedName(name, m.Image.Version)
	sum := strings.ToLower(strings.TrimPrefix(m.Artifact.SHA256, digest.Prefix))
	res, err := c.Upload(ctx, maas.Image{Content: content.R, Path: tgz, SHA256: sum, Size: m.Artifact.Size, Name: vn, Title: title,
		Architecture: arch, BaseImage: baseImage, Filetype: "tgz"}, opts.Events)
	out := &Result{Name: vn, DistroSeries: manifest.DistroSeries(vn), Title: title, SHA256: sum, Size: m.Artifact.Size, Site: site.Name}
	if res != nil {
		out.Result = *res
	}
	if err != nil {
		return out, fmt.Errorf("uploading %s to site %q: %w", tgz, site.Name, err)
	}
	return out, nil
}

// matchesManifest checks that content is the tgz the manifest describes,
// by the digest its reads are checked against.
func matchesManifest(tgz string, c *Content, a *manifest.Artifact) error {
	switch {
	case c.Size != a.Size:
		return fmt.Errorf("%s has %d bytes, its manifest says %d: refusing to upload it", tgz, c.Size, a.Size)
	case !digest.Equal(c.SHA256, a.SHA256):
		return fmt.Errorf("%s has sha256 %s, its manifest says %s: refusing to upload it", tgz, c.SHA256, a.SHA256)
	}
	return nil
}

// verify streams the tgz through sha256 and compares it with the manifest.
func verify(ctx context.Context, tgz string, a *manifest.Artifact, rep event.Reporter) error {
	st, err := os.Stat(tgz)
	if err != nil {
		return err
	}
	if st.Size() != a.Size {
		return fmt.Errorf("%s has %d bytes, its manifest says %d: refusing to upload it", tgz, st.Size(), a.Size)
	}
	d, err := digest.FileProgress(ctx, tgz, func(done, total int64) { rep.Progress(PhaseVerify, done, total) })
	if err != nil {
		return err
	}
	if !d.Matches(a.SHA256) {
		return fmt.Errorf("%s has sha256 %s, its manifest says %s: refusing to upload it", tgz, d.Hex(), a.SHA256)
	}
	return nil
}
