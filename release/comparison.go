package release

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
		return store.BootPath{Passed: p.Passed, Failure: p.Failure, ValidatedSeconds: p.ValidatedSeconds, DownloadBytes: p.DownloadBytes}
	}
	c := &store.BootComparison{Image: f.Image, Version: f.Version, Profile: f.Profile, Stage: f.Stage, Accelerator: f.Accelerator,
		MemoryMB: f.MemoryMB, MeasuredAt: f.MeasuredAt, RecordedBy: by, RecordedAt: now, Baked: path(f.Baked), FirstBoot: path(f.FirstBoot), Ratio: f.Ratio}
	if err := c.Settle(now); err != nil {
		return nil, err
	}
	return c, nil
}

// RecordBootComparison records the smoke comparison file b, read from
// from (for messages), with the version it measured in o.Store, by o.By
// (else $USER of o.Env) at o.Now (ParseBootComparison). It is refused
// when the store holds no such version, or the version's manifest does
// not know its profile. It returns the comparison as recorded.
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
