package upload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/manifest"
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
	// Events receives progress; may be nil.
	Events func(maas.Event)
	// Configure adjusts the client configuration made from the site (tests
	// shorten waits and chunks with it).
	Configure func(*maas.Config)
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

// ManifestPath is where the build puts a tgz's manifest.
func ManifestPath(tgz string) string {
	return strings.TrimSuffix(tgz, ".tgz") + ".manifest.json"
}

// Artifact uploads a built tgz to a site under its immutable versioned
// name. Before sending a byte it checks the tgz's size and sha256 against
// its manifest and runs opts.Verify; env supplies the site's API key when
// the site reads it from the environment.
func Artifact(ctx context.Context, site *Site, env []string, tgz string, opts Options) (*Result, error) {
	mpath := opts.Manifest
	if mpath == "" {
		mpath = ManifestPath(tgz)
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
	emit := func(e maas.Event) {
		if opts.Events != nil {
			e.Time = time.Now()
			opts.Events(e)
		}
	}
	start := time.Now()
	summary := fmt.Sprintf("check %s against %s", tgz, mpath)
	emit(maas.Event{Type: "phase", Status: "start", Phase: PhaseVerify, Summary: summary})
	err = verify(ctx, tgz, m.Artifact, emit)
	if err == nil && opts.Verify != nil {
		err = opts.Verify(ctx, tgz, mpath)
	}
	end := maas.Event{Type: "phase", Status: "ok", Phase: PhaseVerify, Summary: summary, Seconds: time.Since(start).Seconds()}
	if err != nil {
		end.Status, end.Message = "failed", err.Error()
	}
	emit(end)
	if err != nil {
		return nil, fmt.Errorf("uploading %s: %w", tgz, err)
	}
	cfg, err := site.Config(env)
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
	switch {
	case name != "":
	case m.MAAS != nil && m.MAAS.Name != "":
		name = m.MAAS.Name
		if m.MAAS.Title != "" {
			title = m.MAAS.Title
		}
	default:
		name = "custom/" + m.Image.Name
	}
	vn := VersionedName(name, m.Image.Version)
	sum := strings.ToLower(strings.TrimPrefix(m.Artifact.SHA256, "sha256:"))
	res, err := c.Upload(ctx, maas.Image{Path: tgz, SHA256: sum, Size: m.Artifact.Size, Name: vn, Title: title,
		Architecture: arch, BaseImage: baseImage, Filetype: "tgz"}, opts.Events)
	out := &Result{Name: vn, DistroSeries: DistroSeries(vn), Title: title, SHA256: sum, Size: m.Artifact.Size, Site: site.Name}
	if res != nil {
		out.Result = *res
	}
	if err != nil {
		return out, fmt.Errorf("uploading %s to site %q: %w", tgz, site.Name, err)
	}
	return out, nil
}

// verify streams the tgz through sha256 and compares it with the manifest.
func verify(ctx context.Context, tgz string, a *manifest.Artifact, emit func(maas.Event)) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != a.Size {
		return fmt.Errorf("%s has %d bytes, its manifest says %d: refusing to upload it", tgz, st.Size(), a.Size)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var done int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := f.Read(buf)
		h.Write(buf[:n])
		done += int64(n)
		if done%(64<<20) < int64(n) || rerr == io.EOF {
			emit(maas.Event{Type: "progress", Phase: PhaseVerify, Done: done, Total: a.Size})
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading %s: %w", tgz, rerr)
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, strings.TrimPrefix(a.SHA256, "sha256:")) {
		return fmt.Errorf("%s has sha256 %s, its manifest says %s: refusing to upload it", tgz, got, a.SHA256)
	}
	return nil
}
