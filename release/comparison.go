package release

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
)

// MaxComparisonFile bounds the smoke comparison file RecordBootComparison
// reads: its summary is a few KiB, its timelines a few more.
const MaxComparisonFile = 4 << 20

// comparisonSchema is the smoke comparison file's schema_version this
// imagectl reads.
const comparisonSchema = 1

// smokeComparison is what a version keeps of the file imagectl smoke
// --compare-first-boot writes beside the tgz
// (NAME-VERSION.smoke-compare.json); its other fields (timelines, the
// console logs' and timelines' paths on the measuring machine) are
// ignored, and its ratio is never kept (store.BootComparison.Settle).
type smokeComparison struct {
	SchemaVersion int       `json:"schema_version"`
	Image         string    `json:"image"`
	Version       string    `json:"version"`
	Profile       string    `json:"profile"`
	Stage         string    `json:"stage"`
	Accelerator   string    `json:"accelerator"`
	MemoryMB      int       `json:"memory_mb"`
	MeasuredAt    time.Time `json:"measured_at"`
	Ratio         *float64  `json:"ratio"`
	Baked         smokePath `json:"baked"`
	FirstBoot     smokePath `json:"first_boot"`
}

type smokePath struct {
	Passed           *bool    `json:"passed"`
	Failure          string   `json:"failure"`
	ValidatedSeconds *float64 `json:"validated_seconds"`
	DownloadBytes    int64    `json:"download_bytes"`
}

func (p smokePath) path(name string) (store.BootPath, error) {
	if p.Passed == nil {
		return store.BootPath{}, fmt.Errorf("%s says not whether it passed", name)
	}
	return store.BootPath{Passed: *p.Passed, Failure: p.Failure, ValidatedSeconds: p.ValidatedSeconds, DownloadBytes: p.DownloadBytes}, nil
}

// ParseBootComparison reads a smoke comparison file (b, at most
// MaxComparisonFile bytes) as the comparison a version keeps, by, at
// now: its schema this imagectl's, one JSON object, both paths saying
// whether they passed, and whole as store.BootComparison.Settle makes it.
func ParseBootComparison(b []byte, by string, now time.Time) (*store.BootComparison, error) {
	if len(b) > MaxComparisonFile {
		return nil, fmt.Errorf("it is %d bytes, more than the %d a smoke comparison file may be", len(b), MaxComparisonFile)
	}
	var f smokeComparison
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("it is not a smoke comparison (imagectl smoke --compare-first-boot writes one): %w", err)
	}
	if dec.More() {
		return nil, errors.New("it holds more than one JSON value")
	}
	if f.SchemaVersion != comparisonSchema {
		return nil, fmt.Errorf("its schema_version is %d, this imagectl reads %d", f.SchemaVersion, comparisonSchema)
	}
	baked, errB := f.Baked.path("the baked path")
	first, errF := f.FirstBoot.path("the first-boot path")
	if err := errors.Join(errB, errF); err != nil {
		return nil, err
	}
	c := &store.BootComparison{Image: f.Image, Version: f.Version, Profile: f.Profile, Stage: f.Stage, Accelerator: f.Accelerator,
		MemoryMB: f.MemoryMB, MeasuredAt: f.MeasuredAt, RecordedBy: by, RecordedAt: now, Baked: baked, FirstBoot: first, Ratio: f.Ratio}
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
