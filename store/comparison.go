package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
)

// BootComparison is one measurement, kept with an image version, of its
// baked tgz against the same work done at first boot on its recipe's base
// image (imagectl smoke --compare-first-boot), under one accelerator and
// memory, at one validation profile and stage: what a reader of the
// version needs, without timelines or the measuring machine's paths. It
// is of the version, not of a site.
type BootComparison struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	Profile string `json:"profile"`
	Stage   string `json:"stage"`
	// Accelerator is "kvm" or "tcg": times under one are not comparable
	// with times under the other.
	Accelerator string    `json:"accelerator"`
	MemoryMB    int       `json:"memory_mb"`
	MeasuredAt  time.Time `json:"measured_at"`
	RecordedAt  time.Time `json:"recorded_at"`
	RecordedBy  string    `json:"recorded_by"`
	// ArtifactSHA256 is the sha256 of the tgz the baked path booted
	// ("sha256:<hex>"): release records a comparison only with the
	// version whose tgz it is. BaseSHA256 is the base image's the
	// first-boot path started from. Both are absent from records made
	// before they were measured.
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	BaseSHA256     string `json:"base_sha256,omitempty"`
	// Differences are the work the first-boot path did not do as the
	// build did (a step not run at first boot, or run in part, and why;
	// an optional package it could not install): none when both paths
	// did the same work. The ratio is kept either way, and read as not
	// like for like (Summary). Settle keeps at most MaxDifferences, each
	// cut to MaxDifferenceLen characters.
	Differences []string `json:"differences,omitempty"`
	Baked       BootPath `json:"baked"`
	FirstBoot   BootPath `json:"first_boot"`
	// Ratio is Baked's validated seconds over FirstBoot's when both paths
	// passed, absent otherwise: Settle computes it, never taking a ratio
	// from the input.
	Ratio *float64 `json:"ratio,omitempty"`
}

// BootPath is one path of a BootComparison: the baked tgz, or the base
// image doing the work at first boot.
type BootPath struct {
	Passed bool `json:"passed"`
	// Failure is why the path failed (its install could not reach a
	// repository, its validation failed); a failed path is never a time.
	Failure string `json:"failure,omitempty"`
	// ValidatedSeconds is how long the path took from boot to "validated";
	// absent when it did not get there.
	ValidatedSeconds *float64 `json:"validated_seconds,omitempty"`
	// DeploySeconds is how long the path's deploy took, before it booted
	// (not in ValidatedSeconds); absent when not measured.
	DeploySeconds *float64 `json:"deploy_seconds,omitempty"`
	// DownloadBytes is what the path downloaded while booting.
	DownloadBytes int64 `json:"download_bytes"`
}

// Accelerators are the accelerators a comparison runs under.
var Accelerators = []string{"kvm", "tcg"}

// MaxBootComparison bounds one comparison kept with a version, encoded:
// its fields are a few hundred bytes, the rest is the paths' failures and
// the differences, cut (Settle) so that even escaped they fit.
const MaxBootComparison = 48 << 10

// MaxFailureLen is how many characters of a path's failure a comparison
// keeps: Settle cuts a longer one (a failure is recorded, never refused
// for its length).
const MaxFailureLen = 2048

// MeasuredSkew is how far after it was recorded a comparison may say it
// was measured (the measuring machine's clock ahead): a later one would
// stay the latest for good.
const MeasuredSkew = 5 * time.Minute

// KeepPerComparison is how many comparisons of one profile, stage,
// accelerator and memory a version keeps: its latest measured
// (AppendBootComparisons).
const KeepPerComparison = 10

// KeepBootComparisons is how many comparisons a version keeps in all, its
// latest measured: memory is not a closed set, and a version's file stays
// far within MaxRecords (KeepBootComparisons × MaxBootComparison).
const KeepBootComparisons = 200

// MaxDifferences and MaxDifferenceLen bound a comparison's Differences:
// Settle keeps the first MaxDifferences-1 and a count of the rest, each
// cut to MaxDifferenceLen characters.
const (
	MaxDifferences   = 12
	MaxDifferenceLen = 200
)

// Check says what keeps c, as recorded (Settle), from being kept, nil
// when nothing does: its keys (image, version, and a profile, stage and
// accelerator of their sets), its measure (memory, when measured), each
// path whole (a passed one has its seconds and no failure), a ratio only
// when both passed and then the one its seconds make, and its size
// within MaxBootComparison. Stores check what they read with it too.
func (c *BootComparison) Check() error {
	errs := []error{CheckKey("image", c.Image), CheckKey("version", c.Version)}
	for _, k := range []struct {
		name, v string
		set     []string
	}{{"profile", c.Profile, manifest.Profiles}, {"stage", c.Stage, manifest.Stages}, {"accelerator", c.Accelerator, Accelerators}} {
		if !slices.Contains(k.set, k.v) {
			errs = append(errs, fmt.Errorf("%s %q is not one of %s", k.name, k.v, strings.Join(k.set, ", ")))
		}
	}
	if c.MemoryMB <= 0 {
		errs = append(errs, fmt.Errorf("memory_mb %d is not a size", c.MemoryMB))
	}
	if c.MeasuredAt.IsZero() {
		errs = append(errs, errors.New("it says not when it was measured (measured_at)"))
	} else if !c.RecordedAt.IsZero() && c.MeasuredAt.After(c.RecordedAt.Add(MeasuredSkew)) {
		errs = append(errs, fmt.Errorf("it says it was measured at %s, after it was recorded (%s): the measuring machine's clock is wrong",
			c.MeasuredAt.UTC().Format(time.RFC3339), c.RecordedAt.UTC().Format(time.RFC3339)))
	}
	for _, d := range []struct{ name, v string }{{"artifact_sha256", c.ArtifactSHA256}, {"base_sha256", c.BaseSHA256}} {
		if d.v != "" && !isSHA256(d.v) {
			errs = append(errs, fmt.Errorf("its %s %q is not \"sha256:\" and 64 lowercase hex digits", d.name, d.v))
		}
	}
	if len(c.Differences) > MaxDifferences {
		errs = append(errs, fmt.Errorf("it has %d differences, more than the %d kept", len(c.Differences), MaxDifferences))
	}
	for i, d := range c.Differences {
		if strings.TrimSpace(d) == "" || utf8.RuneCountInString(d) > MaxDifferenceLen+1 {
			errs = append(errs, fmt.Errorf("its difference %d is empty or longer than %d characters", i+1, MaxDifferenceLen))
		}
	}
	errs = append(errs, c.Baked.check("the baked path"), c.FirstBoot.check("the first-boot path"))
	switch want, ok := c.computedRatio(); {
	case c.Ratio == nil:
		if ok {
			errs = append(errs, errors.New("both paths passed, and it has no ratio"))
		}
	case !ok:
		errs = append(errs, errors.New("it has a ratio, and a path that failed: a failed path is never a time"))
	case *c.Ratio != want:
		errs = append(errs, fmt.Errorf("its ratio %g is not the baked path's seconds over the first-boot path's (%g)", *c.Ratio, want))
	}
	if b, err := json.Marshal(c); err != nil {
		errs = append(errs, err)
	} else if len(b) > MaxBootComparison {
		errs = append(errs, fmt.Errorf("the comparison is %d bytes, more than the %d one kept with a version may be", len(b), MaxBootComparison))
	}
	return errors.Join(errs...)
}

func (p *BootPath) check(name string) error {
	var errs []error
	s := p.ValidatedSeconds
	if s != nil && (math.IsNaN(*s) || math.IsInf(*s, 0) || *s <= 0) {
		errs = append(errs, fmt.Errorf("%s's validated_seconds %g is not a duration", name, *s))
	}
	if d := p.DeploySeconds; d != nil && (math.IsNaN(*d) || math.IsInf(*d, 0) || *d < 0) {
		errs = append(errs, fmt.Errorf("%s's deploy_seconds %g is not a duration", name, *d))
	}
	if p.Passed && s == nil {
		errs = append(errs, fmt.Errorf("%s passed, and says not in how many seconds (validated_seconds)", name))
	}
	if utf8.RuneCountInString(p.Failure) > MaxFailureLen+1 {
		errs = append(errs, fmt.Errorf("%s's failure is longer than %d characters", name, MaxFailureLen))
	}
	if p.Passed && p.Failure != "" {
		errs = append(errs, fmt.Errorf("%s passed, and has a failure", name))
	}
	if p.DownloadBytes < 0 {
		errs = append(errs, fmt.Errorf("%s's download_bytes %d is negative", name, p.DownloadBytes))
	}
	return errors.Join(errs...)
}

// isSHA256 says whether s is "sha256:" and 64 lowercase hex digits.
func isSHA256(s string) bool {
	h, ok := strings.CutPrefix(s, digest.Prefix)
	return ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == ""
}

// computedRatio is Baked's seconds over FirstBoot's, ok when both paths
// passed with their seconds.
func (c *BootComparison) computedRatio() (float64, bool) {
	b, f := c.Baked.ValidatedSeconds, c.FirstBoot.ValidatedSeconds
	if !c.Baked.Passed || !c.FirstBoot.Passed || b == nil || f == nil || *f <= 0 {
		return 0, false
	}
	return *b / *f, true
}

// Settle makes c a comparison as it is recorded, or says why it cannot be
// one: its ratio computed from the paths' seconds when both passed (a
// ratio given with a failed path is refused, one given with both passed
// replaced), its times in UTC (RecordedAt now when unset), its failures
// and differences cut to their bounds, and Check.
func (c *BootComparison) Settle(now time.Time) error {
	if c.Ratio != nil && (!c.Baked.Passed || !c.FirstBoot.Passed) {
		return errors.New("it has a ratio, and a path that failed: a failed path is never a time")
	}
	c.Ratio = nil
	if r, ok := c.computedRatio(); ok {
		c.Ratio = &r
	}
	if c.RecordedAt.IsZero() {
		c.RecordedAt = now
	}
	c.Differences = cutDifferences(c.Differences)
	for _, p := range []*BootPath{&c.Baked, &c.FirstBoot} {
		p.Failure = textsafe.Cut(p.Failure, MaxFailureLen)
	}
	c.RecordedAt, c.MeasuredAt = c.RecordedAt.UTC(), c.MeasuredAt.UTC()
	return c.Check()
}

// cutDifferences is ds within MaxDifferences and MaxDifferenceLen: the
// rest counted, never refused; blank ones dropped.
func cutDifferences(ds []string) []string {
	var out []string
	for _, d := range ds {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, textsafe.Cut(d, MaxDifferenceLen))
		}
	}
	if len(out) > MaxDifferences {
		out = append(out[:MaxDifferences-1], fmt.Sprintf("and %d more", len(out)-MaxDifferences+1))
	}
	return out
}

// ComparisonKey is what a version keeps one latest comparison of: times
// under another accelerator or memory are not comparable.
type ComparisonKey struct {
	Profile, Stage, Accelerator string
	MemoryMB                    int
}

// Key is c's ComparisonKey.
func (c *BootComparison) Key() ComparisonKey {
	return ComparisonKey{c.Profile, c.Stage, c.Accelerator, c.MemoryMB}
}

// LikeForLike says whether both paths did the same work (no
// Differences).
func (c *BootComparison) LikeForLike() bool { return len(c.Differences) == 0 }

// Summary is c on one line, for show, release notes and commit messages:
// "validated in X s baked vs Y s at first boot (deploy A s vs B s), RATIO
// (ACCELERATOR, MEMORY MiB, PROFILE/STAGE, measured WHEN)" when both paths
// passed, else "not compared: " and the path that failed and why (cut to
// 300 characters); then "; not like for like: " and the differences when
// there are any. It is not escaped: its reader escapes it for where it
// goes.
func (c *BootComparison) Summary() string {
	where := fmt.Sprintf("%s, %d MiB, %s/%s, measured %s", c.Accelerator, c.MemoryMB, c.Profile, c.Stage, c.MeasuredAt.UTC().Format(time.RFC3339))
	var s string
	if c.Ratio != nil && c.Baked.ValidatedSeconds != nil && c.FirstBoot.ValidatedSeconds != nil {
		s = fmt.Sprintf("validated in %.1f s baked vs %.1f s at first boot", *c.Baked.ValidatedSeconds, *c.FirstBoot.ValidatedSeconds)
		if c.Baked.DeploySeconds != nil || c.FirstBoot.DeploySeconds != nil {
			s += fmt.Sprintf(" (deploy %s vs %s)", seconds(c.Baked.DeploySeconds), seconds(c.FirstBoot.DeploySeconds))
		}
		s += fmt.Sprintf(", %.2fx (%s)", *c.Ratio, where)
	} else {
		var failed []string
		for _, p := range []struct {
			name string
			p    BootPath
		}{{"the baked path", c.Baked}, {"the first-boot path", c.FirstBoot}} {
			if !p.p.Passed {
				failed = append(failed, fmt.Sprintf("%s FAILED: %s", p.name, textsafe.Cut(cmp.Or(p.p.Failure, "no reason given"), 300)))
			}
		}
		s = fmt.Sprintf("not compared: %s (%s)", strings.Join(failed, "; "), where)
	}
	if !c.LikeForLike() {
		s += "; not like for like: " + strings.Join(c.Differences, "; ")
	}
	return s
}

// seconds is "X s", or "?" when not measured.
func seconds(s *float64) string {
	if s == nil {
		return "?"
	}
	return fmt.Sprintf("%.1f s", *s)
}

// AppendBootComparisons is a version's comparisons, had (oldest recorded
// first, as its file keeps them), with add appended: one measured at the
// same moment under the same key as one had is that measurement, kept as
// first recorded when it says the same (the same file recorded twice is
// one comparison, and the file unchanged), else replaced by the later;
// and of each key only the KeepPerComparison latest by MeasuredAt are
// kept (the later in the file when equal). Both stores keep their files
// with it.
func AppendBootComparisons(had, add []BootComparison) []BootComparison {
	all := append([]BootComparison{}, had...)
	for _, c := range add {
		i := slices.IndexFunc(all, func(o BootComparison) bool { return o.Key() == c.Key() && o.MeasuredAt.Equal(c.MeasuredAt) })
		if i >= 0 && sameMeasure(all[i], c) {
			continue
		}
		if i >= 0 {
			all = slices.Delete(all, i, i+1)
		}
		all = append(all, c)
	}
	measured := func(c BootComparison) time.Time { return c.MeasuredAt }
	all = keepLatest(all, func(c BootComparison) ComparisonKey { return c.Key() }, measured, KeepPerComparison)
	// and of all, the KeepBootComparisons latest.
	return keepLatest(all, func(BootComparison) struct{} { return struct{}{} }, measured, KeepBootComparisons)
}

// sameMeasure says whether a and b say the same but for who recorded
// them and when.
func sameMeasure(a, b BootComparison) bool {
	a.RecordedAt, a.RecordedBy, b.RecordedAt, b.RecordedBy = time.Time{}, "", time.Time{}, ""
	return reflect.DeepEqual(a, b)
}

// LatestBootComparisons is each key's latest measured comparison of cs
// (the later in cs when equal), by profile, stage, accelerator and
// memory.
func LatestBootComparisons(cs []BootComparison) []BootComparison {
	latest := map[ComparisonKey]BootComparison{}
	for _, c := range cs {
		if o, ok := latest[c.Key()]; !ok || !c.MeasuredAt.Before(o.MeasuredAt) {
			latest[c.Key()] = c
		}
	}
	out := make([]BootComparison, 0, len(latest))
	for _, c := range latest {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Key(), out[j].Key()
		return cmp.Or(cmp.Compare(a.Profile, b.Profile), cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.Accelerator, b.Accelerator), cmp.Compare(a.MemoryMB, b.MemoryMB)) < 0
	})
	return out
}

// CheckBootComparisons says what keeps cs, read from the file of image
// version (path, for the error), from being what a store wrote there:
// each of that version, and whole (Check).
func CheckBootComparisons(path, image, version string, cs []BootComparison) error {
	for i := range cs {
		if cs[i].Image != image || cs[i].Version != version {
			return fmt.Errorf("reading %s: comparison %d is of %s %s", path, i+1, cs[i].Image, cs[i].Version)
		}
		if err := cs[i].Check(); err != nil {
			return fmt.Errorf("reading %s: comparison %d: %w", path, i+1, err)
		}
	}
	return nil
}
