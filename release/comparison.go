package release

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/smoke"
	"github.com/gpuaas/imagectl/store"
)

// ParseBootComparison reads a smoke comparison file (b, as
// smoke.DecodeComparison reads it) as the summary a version keeps, by, at
// now: whole as store.BootComparison.Settle makes it, which computes the
// ratio itself. The timelines and the measuring machine's paths are not
// kept.
func ParseBootComparison(b []byte, by string, now time.Time) (*store.BootComparison, error) {
	f, err := smoke.DecodeComparison(b)
	if err != nil {
		return nil, err
	}
	path := func(p smoke.Path) store.BootPath {
		return store.BootPath{Passed: p.Passed, Failure: p.Failure, ValidatedSeconds: p.ValidatedSeconds, DeploySeconds: p.DeploySeconds, DownloadBytes: p.DownloadBytes}
	}
	c := &store.BootComparison{Image: f.Image, Version: f.Version, Profile: f.Profile, Stage: f.Stage, Accelerator: f.Accelerator,
		MemoryMB: f.MemoryMB, MeasuredAt: f.MeasuredAt, RecordedBy: by, RecordedAt: now, Baked: path(f.Baked), FirstBoot: path(f.FirstBoot), Ratio: f.Ratio,
		ArtifactSHA256: f.ArtifactSHA256, BaseSHA256: f.BaseSHA256, Differences: f.Differences}
	if err := c.Settle(now); err != nil {
		return nil, err
	}
	return c, nil
}

// RecordBootComparison records the smoke comparison file b, read from
// from (for messages), with the version it measured in o.Store, by o.By
// (else $USER of o.Env) at o.Now (ParseBootComparison). It is refused
// when the store holds no such version, when the tgz the comparison
// booted (its artifact_sha256) is not that version's (a rebuild of the
// same version, a file written by hand), or when the version's manifest
// does not know its profile. It returns the comparison as recorded.
func RecordBootComparison(ctx context.Context, b []byte, from string, o Options) (*store.BootComparison, error) {
	clock := time.Now
	if o.Now != nil {
		clock = o.Now
	}
	c, err := ParseBootComparison(b, cmp.Or(o.By, environ.Get(o.Env, "USER"), "unknown"), clock().UTC())
	if err != nil {
		return nil, fmt.Errorf("recording the boot comparison %s: %w", from, err)
	}
	what := fmt.Sprintf("recording the boot comparison %s of %s %s", from, c.Image, c.Version)
	v, err := o.Store.Version(ctx, c.Image, c.Version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%s: %s %s is not a version of the store %s: a comparison is kept with the version it measured, publish it first", what, c.Image, c.Version, o.Store.Location())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if want := digest.Prefix + v.SHA256; c.ArtifactSHA256 != want {
		booted := "says not which tgz it booted (no artifact_sha256: measure it again with this imagectl)"
		if c.ArtifactSHA256 != "" {
			booted = "booted the tgz " + c.ArtifactSHA256
		}
		return nil, fmt.Errorf("%s: it %s, and the store's %s %s is %s: a comparison is kept only with the version whose tgz it measured", what, booted, c.Image, c.Version, want)
	}
	m, err := manifest.Read(v.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: reading its manifest: %w", what, err)
	}
	if ps := manifestProfiles(m); !slices.Contains(ps, c.Profile) {
		return nil, fmt.Errorf("%s: profile %q is not one of %s %s's (%s)", what, c.Profile, c.Image, c.Version, strings.Join(ps, ", "))
	}
	if err := o.Store.AddBootComparison(ctx, *c); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return c, nil
}

// BootComparisons is the latest boot comparison of each profile, stage
// and accelerator recorded with image version in p
// (store.LatestBootComparisons); none without a catalog (p nil).
func BootComparisons(ctx context.Context, p store.Promotions, image, version string) ([]store.BootComparison, error) {
	if p == nil {
		return nil, nil
	}
	cs, err := p.BootComparisons(ctx, image, version)
	if err != nil {
		return nil, err
	}
	return store.LatestBootComparisons(cs), nil
}
