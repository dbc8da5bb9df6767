package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload"
	"github.com/gpuaas/imagectl/upload/maas"
)

// ErrNoVerifyKey is returned when neither a verifier nor
// InsecureSkipVerify is given: nothing unverified reaches a site by default.
var ErrNoVerifyKey = errors.New("no key to verify the artifact's signatures with")

// Options are what every operation on a site needs.
type Options struct {
	Store store.Store
	Site  *upload.Site
	// Env supplies the site's API key (KEY=value pairs).
	Env []string
	// Verifier checks the tgz's and manifest's signatures before anything
	// is sent or recorded; nil is refused unless InsecureSkipVerify.
	Verifier           *signing.Verifier
	InsecureSkipVerify bool
	// BaseImage overrides the manifest's maas.base_image.
	BaseImage string
	// By and Reason are recorded with a promotion.
	By, Reason string
	// Now is the clock for promotions; time.Now when nil.
	Now func() time.Time
	// Events receives upload progress; may be nil.
	Events func(maas.Event)
	// Configure adjusts the MAAS client configuration (tests shorten waits).
	Configure func(*maas.Config)
}

// Result is what a promotion, rollback or upload did.
type Result struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	Site    string `json:"site"`
	// Promotion is what was recorded; nil when the version was already
	// the site's (nothing is recorded then) or for an upload.
	Promotion *store.Promotion `json:"promotion,omitempty"`
	// AlreadyCurrent is set when the site already ran the version.
	AlreadyCurrent bool `json:"already_current,omitempty"`
	// Upload is what the upload did (Skipped when MAAS held the image).
	Upload       *upload.Result `json:"upload"`
	DistroSeries string         `json:"distro_series"`
	Verified     bool           `json:"verified"`
}

// Promote makes version the image's version at the site: it must be in
// the store, verify, and have no deployability error; it is uploaded to
// the site's MAAS when MAAS lacks it; then the promotion is recorded.
func Promote(ctx context.Context, image, version string, o Options) (*Result, error) {
	h, err := o.Store.History(ctx, o.Site.Name, image)
	if err != nil {
		return nil, err
	}
	cur, _ := store.State(h)
	return promote(ctx, image, version, cur, false, o)
}

// Rollback returns the image at the site to the version before the
// current one (see store.State), with the same checks as Promote.
func Rollback(ctx context.Context, image string, o Options) (*Result, error) {
	h, err := o.Store.History(ctx, o.Site.Name, image)
	if err != nil {
		return nil, err
	}
	cur, back := store.State(h)
	switch {
	case cur == "":
		return nil, fmt.Errorf("rolling back %s at site %s: it was never promoted there", image, o.Site.Name)
	case back == "":
		return nil, fmt.Errorf("rolling back %s at site %s: %s is the first version promoted there, there is nothing before it", image, o.Site.Name, cur)
	}
	return promote(ctx, image, back, cur, true, o)
}

func promote(ctx context.Context, image, version, cur string, rollback bool, o Options) (*Result, error) {
	doing := "promoting"
	if rollback {
		doing = "rolling back to"
	}
	res, err := Upload(ctx, image, version, o)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s at site %s: %w", doing, image, version, o.Site.Name, err)
	}
	if cur == version {
		res.AlreadyCurrent = true
		return res, nil
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	by := o.By
	if by == "" {
		by = "unknown"
	}
	p := store.Promotion{Image: image, Version: version, Previous: cur, By: by, At: now().UTC(), Reason: o.Reason,
		Rollback: rollback, SHA256: res.Upload.SHA256, DistroSeries: res.DistroSeries}
	if err := o.Store.Record(ctx, o.Site.Name, p); err != nil {
		return nil, err
	}
	res.Promotion = &p
	return res, nil
}

// Upload checks a stored version (deployability findings, then its size,
// sha256 and signatures) and uploads it to the site's MAAS unless MAAS
// already holds it. Nothing is sent when a check fails.
func Upload(ctx context.Context, image, version string, o Options) (*Result, error) {
	v, err := o.Store.Version(ctx, image, version)
	if err != nil {
		return nil, err
	}
	m, err := manifest.Read(v.Manifest)
	if err != nil {
		return nil, err
	}
	// The signatures prove who built the artifact, not which version it
	// is: a validly signed old build filed under another version would
	// otherwise reach MAAS under the old name while the catalog records
	// the new one.
	if m.Image.Name != image || m.Image.Version != version {
		return nil, fmt.Errorf("the store's %s %s holds the manifest of %s %s: refusing it", image, version, m.Image.Name, m.Image.Version)
	}
	if errs := m.DeployErrors(); len(errs) > 0 {
		var msgs []string
		for _, f := range errs {
			msgs = append(msgs, fmt.Sprintf("%s: %s", f.Check, f.Message))
		}
		return nil, fmt.Errorf("%s %s failed its deployability check (imagectl check says why and how to fix it):\n  %s",
			image, version, strings.Join(msgs, "\n  "))
	}
	if o.Verifier == nil && !o.InsecureSkipVerify {
		return nil, ErrNoVerifyKey
	}
	verify := func(ctx context.Context, tgz, manifestPath string) error {
		if o.Verifier == nil {
			return nil
		}
		r, err := signing.VerifyArtifact(ctx, o.Verifier, tgz, manifestPath)
		if err != nil {
			return err
		}
		return r.Err()
	}
	up, err := upload.Artifact(ctx, o.Site, o.Env, v.Tarball, upload.Options{Manifest: v.Manifest, BaseImage: o.BaseImage,
		Verify: verify, Events: o.Events, Configure: o.Configure})
	if err != nil {
		return nil, err
	}
	return &Result{Image: image, Version: version, Site: o.Site.Name, Upload: up, DistroSeries: up.DistroSeries,
		Verified: o.Verifier != nil}, nil
}

// client is the site's MAAS client.
func (o Options) client() (*maas.Client, error) {
	cfg, err := o.Site.Config(o.Env)
	if err != nil {
		return nil, err
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	return maas.New(cfg)
}
