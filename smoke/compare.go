package smoke

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/base"
	"github.com/gpuaas/imagectl/builder/ext4tar"
	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/builder/pack"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// The two paths of a comparison, as CompareOptions.WhileEachUp and the
// events name them.
const (
	PathBaked     = "baked"
	PathFirstBoot = "first-boot"
)

// PhaseBase is the comparison's preparation of the first-boot path: the
// base image resolved and its root filesystem packed (not timed in any
// timeline).
const PhaseBase = "base"

// ComparisonSchemaVersion is the version of the comparison file's JSON
// form.
const ComparisonSchemaVersion = 1

// MaxComparison is the largest comparison file ReadComparison and
// DecodeComparison read: its summary is a few KiB, its timelines a few
// more.
const MaxComparison = 4 << 20

// CompareOptions configure a comparison: Options are both paths' (the
// same accelerator, memory, disk, network, profile and stage; ConsoleLog
// and Timeline the baked path's).
type CompareOptions struct {
	Options
	// Recipe is the recipe the tgz was built from, loaded with the
	// build's variables: its plan gives the first-boot script and the
	// base image.
	Recipe *recipes.Recipe
	// BaseCache is where downloaded base images are kept by digest, as
	// builds keep them (required for a base image given by URL).
	BaseCache string
	// BaseCacheErr is why BaseCache is empty (cachedir.Default's error),
	// for the error of a base image that must be downloaded.
	BaseCacheErr error
	HTTPClient   *http.Client
	// FirstBootConsoleLog, FirstBootTimeline and Output are where the
	// first-boot path's console log and timeline and the comparison go
	// (default: beside the tgz, manifest.FilesBeside).
	FirstBootConsoleLog, FirstBootTimeline, Output string
	// WhileEachUp, when set, is each path's Options.WhileUp, told which
	// path's VM is up (Options.WhileUp itself is not used).
	WhileEachUp func(ctx context.Context, path string, ssh SSH) error
	// Pairs is how many times both paths run (default 1), the order
	// alternating (baked first in the first pair, the first-boot path
	// first in the second, ...), so that the host's warming up and load
	// are not all on one path: the comparison reports each pair's ratio,
	// their median and spread. The second pair's files are named
	// .pair2.log etc. beside the first's.
	Pairs int
}

// Comparison is the baked image against the same work done at first boot:
// both paths booted one after the other under the same accelerator,
// memory and network, validated at the same profile and stage. Written
// beside the tgz as <name>-<version>.smoke-compare.json; its JSON names
// are kept for the tools that read it.
type Comparison struct {
	SchemaVersion int       `json:"schema_version"`
	Image         string    `json:"image"`
	Version       string    `json:"version"`
	Profile       string    `json:"profile"`
	Stage         string    `json:"stage"`
	Accelerator   string    `json:"accelerator"`
	MemoryMB      int       `json:"memory_mb"`
	MeasuredAt    time.Time `json:"measured_at"`
	// Ratio is the baked path's time to validated over the first-boot
	// path's, only when both passed (in every pair). Over several pairs
	// it is the median pair's (of an even count, the lower of the two
	// middle ones), and Baked, FirstBoot, Milestones and Differences are
	// that pair's, so that Ratio is still their validated times' ratio.
	Ratio *float64 `json:"ratio,omitempty"`
	// Ratios are each pair's ratio, in the order the pairs ran, and
	// Spread is (max - min) / Ratio: how much the pairs disagree (only
	// with more than one pair, all passed).
	Ratios []float64 `json:"ratios,omitempty"`
	Spread *float64  `json:"spread,omitempty"`
	// ArtifactSHA256 is the baked tgz's sha256 as deployed
	// ("sha256:<hex>"), BaseSHA256 the base image's the first-boot path
	// deployed: what the comparison measured, so that a record is kept
	// only with the version whose bytes it booted.
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	BaseSHA256     string `json:"base_sha256,omitempty"`
	// Differences are the work the first-boot path did not do as the
	// build did (a step not run at first boot, or run in part, with why;
	// an optional package the build installed and the first boot could
	// not): empty when the two paths did the same work. The ratio is kept
	// either way; readers say it is not like for like.
	Differences []string `json:"differences,omitempty"`
	Baked       Path     `json:"baked"`
	FirstBoot   Path     `json:"first_boot"`
	// Milestones are both timelines side by side, in seconds since QEMU
	// started, in time order (sideBySide).
	Milestones []SideBySide `json:"milestones"`
	// File is where the comparison was written ("" when it was not).
	File string `json:"-"`
	// BakedResult and FirstBootResult are the two smoke runs (nil for a
	// path that never started).
	BakedResult, FirstBootResult *Result `json:"-"`
}

// Path is one path of a comparison.
type Path struct {
	Passed bool `json:"passed"`
	// Failure says why the path failed: never a time.
	Failure string `json:"failure,omitempty"`
	// ValidatedSeconds is the time from QEMU's start to the validation's
	// end (validation-done), when the path passed.
	ValidatedSeconds *float64 `json:"validated_seconds,omitempty"`
	// DeploySeconds is the curtin-style deploy's time, before QEMU
	// started (not in ValidatedSeconds, which runs from QEMU's start).
	DeploySeconds *float64 `json:"deploy_seconds,omitempty"`
	// ReceivedBytes is what the guest's network interfaces received up to
	// validated (every boot), measured the same way on both paths: the
	// smoke script's reading of their rx_bytes, whatever fetched it (apt,
	// cloud-init, the site bootstrap). Nil when it was not measured.
	ReceivedBytes *int64 `json:"received_bytes,omitempty"`
	// DownloadBytes is what the first-boot script's apt downloaded (its
	// archives and indexes), a part of the first boot's ReceivedBytes; 0
	// for the baked path, which runs no such script.
	DownloadBytes int64 `json:"download_bytes"`
	ArchiveBytes  int64 `json:"archive_bytes,omitempty"`
	IndexBytes    int64 `json:"index_bytes,omitempty"`
	// Reboot: the first-boot path rebooted once (its script required it).
	Reboot *bool `json:"reboot,omitempty"`
	// FirstBootSeconds is the first-boot script's own time.
	FirstBootSeconds *float64 `json:"first_boot_seconds,omitempty"`
	// Artifact is what the path deployed: the tgz, or the base image.
	Artifact     string `json:"artifact"`
	ConsoleLog   string `json:"console_log"`
	TimelineFile string `json:"timeline_file"`
	Checks       int    `json:"checks"`
	Failures     int    `json:"failures"`
	Warnings     int    `json:"warnings"`
}

// SideBySide is one milestone of both paths; a path that lacks it is nil.
type SideBySide struct {
	Name      string   `json:"name"`
	Baked     *float64 `json:"baked"`
	FirstBoot *float64 `json:"first_boot"`
}

// Compare boots the tgz (the baked path, Run) and then the recipe's base
// image with the first-boot script in its user-data (the first-boot path),
// under the same options, and compares their timelines. The first-boot
// path deploys the base image's root filesystem as the tgz is deployed
// (packed on the host first, untimed); its script is the build's
// (firstboot.FromBuild with the manifest beside the tgz: the same
// validation script and marker), followed at stage converged by the same
// site bootstrap; when the script succeeded and requires a reboot, the VM
// reboots once and the second boot runs the bootstrap, then validates. It returns the comparison, written to
// Output, with an error wrapping ErrFailed when a path failed (that path
// is then a failure in the comparison, never a time), or another error
// when nothing could be compared.
func Compare(ctx context.Context, tgz string, opts CompareOptions) (*Comparison, error) {
	files := manifest.FilesBeside(tgz)
	if opts.Manifest == "" {
		opts.Manifest = files.Manifest
	}
	opts.FirstBootConsoleLog = cmp.Or(opts.FirstBootConsoleLog, files.FirstBootSmokeLog)
	opts.FirstBootTimeline = cmp.Or(opts.FirstBootTimeline, files.FirstBootSmokeTimeline)
	opts.Output = cmp.Or(opts.Output, files.SmokeCompare)
	if opts.Recipe == nil {
		return nil, fmt.Errorf("comparing %s with its first boot: no recipe", tgz)
	}
	m, err := manifest.Read(opts.Manifest)
	if err != nil {
		return nil, fmt.Errorf("comparing %s with its first boot: the manifest: %w", tgz, err)
	}
	script, p, err := firstBootScript(ctx, m, opts.Recipe)
	if err != nil {
		return nil, fmt.Errorf("comparing %s with its first boot: %w", tgz, err)
	}
	if err := baseReachable(p, opts.BaseCache, opts.BaseCacheErr); err != nil {
		return nil, fmt.Errorf("comparing %s with its first boot: %w", tgz, err)
	}
	cleanup := func() {}
	rep := event.Reporter(opts.Events)
	pairs := max(opts.Pairs, 1)
	// The base is packed only once a baked run started: its tgz is not on
	// disk during the first one, nor packed for nothing when it cannot
	// start.
	var baseImage, baseTgz string
	packed := func() error {
		if baseTgz != "" {
			return nil
		}
		work, err := os.MkdirTemp(opts.WorkDir, "imagectl-smoke-base-")
		if err != nil {
			return fmt.Errorf("comparing %s with its first boot: scratch directory: %w", tgz, err)
		}
		cleanup = func() { os.RemoveAll(work) }
		end := rep.Phase(PhaseBase, "resolve the base image "+base.Shown(p.Manifest.Base.Source)+" and pack its root filesystem for the first-boot path")
		baseImage, baseTgz, err = packBase(ctx, p, opts.BaseCache, opts.HTTPClient, work, rep)
		end(err)
		if err != nil {
			return fmt.Errorf("comparing %s with its first boot: %w", tgz, err)
		}
		return nil
	}
	defer func() { cleanup() }()
	accel := ""
	runBaked := func(pair int) (*Result, error) {
		o := opts.Options
		o.WhileUp = whileUp(opts, PathBaked)
		if pair > 0 {
			o = o.outputFiles(files)
			o.ConsoleLog, o.Timeline = pairFile(o.ConsoleLog, pair), pairFile(o.Timeline, pair)
		}
		if accel != "" {
			o.Accel = accel
		}
		return Run(ctx, tgz, o)
	}
	runFirstBoot := func(pair int) (*Result, error) {
		if err := packed(); err != nil {
			return nil, err
		}
		o := opts.Options
		o.WhileUp = whileUp(opts, PathFirstBoot)
		o.ConsoleLog, o.Timeline = pairFile(opts.FirstBootConsoleLog, pair), pairFile(opts.FirstBootTimeline, pair)
		// The same accelerator as the baked path, whatever auto would
		// pick now.
		o.Accel = accel
		sr, err := newRun(ctx, tgz, o, &firstBootSource{base: baseImage, tgz: baseTgz, script: script})
		if err != nil {
			return nil, err
		}
		return sr.execute(ctx)
	}
	var all []*Comparison
	for pair := range pairs {
		var baked, first *Result
		var bakedErr, fbErr error
		if pair%2 == 0 {
			baked, bakedErr = runBaked(pair)
			if baked == nil {
				return nil, bakedErr
			}
			accel = baked.Accelerator
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			first, fbErr = runFirstBoot(pair)
			if first == nil && baseTgz == "" {
				return nil, fbErr // the base could not be packed: nothing to compare
			}
		} else {
			first, fbErr = runFirstBoot(pair)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			baked, bakedErr = runBaked(pair)
			if baked == nil {
				return nil, bakedErr
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// What came from the runs may hold the recipe's sensitive values.
		hide := func(s string) string { return string(p.Redact([]byte(s))) }
		c := newComparison(baked, bakedErr, first, fbErr, time.Now(), hide)
		c.Differences = differences(first, m.Packages)
		for i := range c.Differences {
			c.Differences[i] = hide(c.Differences[i])
		}
		all = append(all, c)
		if c.Ratio == nil {
			break // a path failed: that pair is the comparison
		}
	}
	c := pairsComparison(all)
	if sum := p.Manifest.Base.SHA256; sum != "" {
		c.BaseSHA256 = digest.Prefix + strings.TrimPrefix(sum, digest.Prefix)
	}
	if err := writeJSON(opts.Output, c); err != nil {
		return c, fmt.Errorf("writing the comparison: %w", err)
	}
	c.File = opts.Output
	var failed []string
	if !c.Baked.Passed {
		failed = append(failed, "the baked path: "+c.Baked.Failure)
	}
	if !c.FirstBoot.Passed {
		failed = append(failed, "the first-boot path: "+c.FirstBoot.Failure)
	}
	if len(failed) > 0 {
		return c, fmt.Errorf("%w: comparing %s with its first boot: %s", ErrFailed, tgz, strings.Join(failed, "; "))
	}
	return c, nil
}

// pairFile is a file of the pair'th pair (from 0): path itself for the
// first, <path>.pairN before its extension for the others.
func pairFile(path string, pair int) string {
	if pair == 0 {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + fmt.Sprintf(".pair%d", pair+1) + ext
}

// pairsComparison is the comparison of the pairs that ran: the last one
// when a path failed in it (the failure is the comparison's), else the
// median pair's, with every pair's ratio and their spread.
func pairsComparison(all []*Comparison) *Comparison {
	last := all[len(all)-1]
	if last.Ratio == nil || len(all) == 1 {
		return last
	}
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b *Comparison) int { return cmp.Compare(*a.Ratio, *b.Ratio) })
	c := sorted[(len(sorted)-1)/2]
	for _, x := range all {
		c.Ratios = append(c.Ratios, *x.Ratio)
	}
	if *c.Ratio > 0 {
		s := round3((*sorted[len(sorted)-1].Ratio - *sorted[0].Ratio) / *c.Ratio)
		c.Spread = &s
	}
	return c
}

func whileUp(opts CompareOptions, path string) func(context.Context, SSH) error {
	if opts.WhileEachUp == nil {
		return nil
	}
	return func(ctx context.Context, ssh SSH) error { return opts.WhileEachUp(ctx, path, ssh) }
}

// firstBootScript plans the recipe at the build's version and writes its
// first-boot script with the build's validation script and marker.
func firstBootScript(ctx context.Context, m *manifest.Manifest, r *recipes.Recipe) (firstboot.Result, *plan.Plan, error) {
	p, err := plan.New(r, plan.Options{Version: m.Image.Version})
	if err != nil {
		return firstboot.Result{}, nil, err
	}
	opts, err := firstboot.FromBuild(m, p.Manifest)
	if err != nil {
		return firstboot.Result{}, nil, fmt.Errorf("the recipe's plan against the build: %w", err)
	}
	opts.Redact = func(s string) string { return string(p.Redact([]byte(s))) }
	res, err := firstboot.Script(ctx, p.Layers, p.Manifest, opts)
	return res, p, err
}

// packBase resolves the plan's base image as a build does (verified,
// downloads cached by digest), converts it to a raw disk in work, and
// packs its root filesystem (the ext4 partition with /etc/os-release) on
// the host into a tgz there.
func packBase(ctx context.Context, p *plan.Plan, cache string, client *http.Client, work string, rep event.Reporter) (image, tgz string, err error) {
	b := p.Manifest.Base
	source := base.Shown(b.Source)
	image, err = base.Cache{Dir: cache, Client: client}.Resolve(ctx, b, p.Inputs.BasePath, func(done, total int64) {
		rep.Progress(PhaseBase, done, total)
	})
	if err != nil {
		// Resolve's errors name the source as base.Shown shows it.
		return "", "", fmt.Errorf("resolving the base image: %w", err)
	}
	raw := filepath.Join(work, "base.raw")
	if err := base.ToRaw(ctx, image, b.Format, raw); err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		return "", "", fmt.Errorf("base image %s: converting it to a raw disk: %w", source, err)
	}
	defer os.Remove(raw)
	part, err := rootPartition(ctx, raw)
	if err != nil {
		return "", "", fmt.Errorf("base image %s: finding its root filesystem: %w", source, err)
	}
	tgz = filepath.Join(work, "base.tgz")
	f, err := os.Create(tgz)
	if err != nil {
		return "", "", fmt.Errorf("base image %s: creating the tgz of its root filesystem: %w", source, err)
	}
	// Fast compression: the tgz lives only until the deploy has read it.
	_, err = pack.Disk(ctx, raw, part, f, 1, time.Time{})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", fmt.Errorf("base image %s: packing its root filesystem on partition %d: %w", source, part, err)
	}
	rep.Log(fmt.Sprintf("base image %s: its root filesystem (partition %d) packed for the first-boot path", source, part))
	return image, tgz, nil
}

// baseReachable fails, before anything runs, when the base image is a
// download and there is no cache directory to keep it in (cacheErr: why
// there is none).
func baseReachable(p *plan.Plan, cache string, cacheErr error) error {
	if p.Inputs.BasePath != "" || cache != "" {
		return nil
	}
	why := "no cache directory to download it into"
	if cacheErr != nil {
		why += ": " + cacheErr.Error()
	}
	return fmt.Errorf("base image %s: %s", base.Shown(p.Manifest.Base.Source), why)
}

// rootPartition is the partition of the raw disk whose ext4 filesystem
// holds /etc/os-release (0: the disk is the filesystem).
func rootPartition(ctx context.Context, raw string) (int, error) {
	root := -1
	err := pack.EachExt4(ctx, raw, func(part int, fsys *ext4tar.FS) error {
		err := fsys.WalkHeaders(ctx, func(h *tar.Header) error {
			if h.Name == "./etc/os-release" {
				root = part
				return pack.ErrStop
			}
			return nil
		})
		if errors.Is(err, pack.ErrStop) {
			return pack.ErrStop
		}
		return ctx.Err() // a filesystem the host cannot read: another may be the root
	})
	if err != nil {
		return 0, err
	}
	if root < 0 {
		return 0, errors.New("no ext4 partition with /etc/os-release: no root filesystem the host can pack")
	}
	return root, nil
}

// newComparison compares two runs: each path's result (nil when it never
// started) and error; hide redacts the recipe's sensitive values from
// what the runs said (nil: none).
func newComparison(baked *Result, bakedErr error, first *Result, firstErr error, now time.Time, hide func(string) string) *Comparison {
	c := &Comparison{SchemaVersion: ComparisonSchemaVersion, MeasuredAt: now.UTC().Truncate(time.Second),
		BakedResult: baked, FirstBootResult: first}
	if baked != nil {
		c.Image, c.Version, c.Profile, c.Stage, c.Accelerator = baked.Image, baked.Version, baked.Profile, baked.Stage, baked.Accelerator
		c.MemoryMB, c.ArtifactSHA256 = baked.MemoryMB, baked.ArtifactSHA256
	}
	c.Baked = newPath(baked, bakedErr, hide)
	c.FirstBoot = newPath(first, firstErr, hide)
	if first != nil && first.FirstBoot != nil {
		fb := first.FirstBoot
		c.FirstBoot.DownloadBytes, c.FirstBoot.ArchiveBytes, c.FirstBoot.IndexBytes = fb.DownloadBytes, fb.ArchiveBytes, fb.IndexBytes
		rebooted := fb.Rebooted
		c.FirstBoot.Reboot = &rebooted
		if fb.Status == "ok" {
			s := round3(fb.Seconds)
			c.FirstBoot.FirstBootSeconds = &s
		}
	}
	if b, f := c.Baked.ValidatedSeconds, c.FirstBoot.ValidatedSeconds; c.Baked.Passed && c.FirstBoot.Passed && b != nil && f != nil && *f > 0 {
		r := round3(*b / *f)
		c.Ratio = &r
	}
	var bt, ft *Timeline
	if baked != nil {
		bt = baked.Timeline
	}
	if first != nil {
		ft = first.Timeline
	}
	c.Milestones = sideBySide(bt, ft)
	return c
}

// newPath is one path of a comparison: a failure with its reason, or the
// time to validated. Its failure goes through redact.Text (credentials,
// registered secrets) and hide (the recipe's sensitive values; nil: none).
func newPath(r *Result, err error, hide func(string) string) Path {
	clean := func(s string) string {
		s = redact.Text(s)
		if hide != nil {
			s = hide(s)
		}
		return s
	}
	if r == nil {
		why := "it did not start"
		if err != nil {
			why = err.Error()
		}
		return Path{Failure: clean(why)}
	}
	p := Path{Artifact: r.Artifact, ConsoleLog: r.ConsoleLog, TimelineFile: r.TimelineFile,
		Checks: len(r.Lines), Failures: r.Failures, Warnings: r.Warnings, ReceivedBytes: r.ReceivedBytes}
	if s, ok := r.Seconds[PhaseDeploy]; ok {
		s = round3(s)
		p.DeploySeconds = &s
	}
	switch {
	case err != nil && !errors.Is(err, ErrFailed):
		p.Failure = err.Error()
	case err != nil || !r.Passed():
		p.Failure = r.Failure()
	}
	p.Failure = clean(p.Failure)
	if p.Failure != "" {
		return p
	}
	if r.Timeline == nil || r.Timeline.Find(MilestoneValidationDone) == nil {
		p.Failure = "the timeline has no " + MilestoneValidationDone + ": no time to validated"
		return p
	}
	if s := r.Timeline.validatedOutOfOrder(); s != "" {
		p.Failure = s
		return p
	}
	p.Passed = true
	s := r.Timeline.Find(MilestoneValidationDone).Seconds
	p.ValidatedSeconds = &s
	return p
}

// differences are the work the first-boot path did not do as the build
// did, from what its script said on the console: the steps not run at
// first boot and those run in part, each with why, and the optional
// packages the build installed (built, the manifest's packages) that the
// first boot found no candidate for. None when the path never ran its
// script.
func differences(first *Result, built []manifest.Package) []string {
	if first == nil || first.FirstBoot == nil {
		return nil
	}
	fb := first.FirstBoot
	var out []string
	for _, n := range fb.NotHere {
		out = append(out, "not at first boot: "+n)
	}
	for _, n := range fb.Partly {
		out = append(out, "in part at first boot: "+n)
	}
	versions := map[string]string{}
	for _, p := range built {
		name, _, _ := strings.Cut(p.Name, ":")
		versions[name] = p.Version
	}
	for _, name := range fb.MissingOptional {
		if v, ok := versions[name]; ok {
			out = append(out, fmt.Sprintf("optional package %s: the build installed %s, the first boot found no candidate", name, v))
		}
	}
	return out
}

// sideBySide pairs the milestones of the two timelines by name, in time
// order: the baked path's in its order, and each milestone only the
// first-boot path has placed among them by the first-boot path's time
// (after the last row whose first-boot time is not later), so that each
// column reads in order.
func sideBySide(baked, first *Timeline) []SideBySide {
	empty := &Timeline{}
	if baked == nil {
		baked = empty
	}
	if first == nil {
		first = empty
	}
	var out []SideBySide
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		s := SideBySide{Name: name}
		if m := baked.Find(name); m != nil {
			v := m.Seconds
			s.Baked = &v
		}
		if m := first.Find(name); m != nil {
			v := m.Seconds
			s.FirstBoot = &v
		}
		out = append(out, s)
	}
	for _, m := range baked.Milestones {
		add(m.Name)
	}
	for _, m := range first.Milestones {
		if seen[m.Name] {
			continue
		}
		add(m.Name)
		row := out[len(out)-1]
		out = out[:len(out)-1]
		// After the last row that comes no later on the first-boot path
		// (a row it lacks goes by the baked path's order).
		at := 0
		for i := range out {
			if out[i].FirstBoot != nil && *out[i].FirstBoot <= m.Seconds {
				at = i + 1
			}
		}
		out = slices.Insert(out, at, row)
	}
	return out
}

// ReadComparison reads a comparison file Compare wrote.
func ReadComparison(path string) (*Comparison, error) {
	b, err := readlimit.File(path, MaxComparison)
	if err != nil {
		return nil, err // it names path
	}
	c, err := DecodeComparison(b)
	if err != nil {
		return nil, fmt.Errorf("reading comparison %s: %w", path, err)
	}
	c.File = path
	return c, nil
}

// DecodeComparison reads a comparison file's bytes: at most
// MaxComparison, one JSON object of this imagectl's schema.
func DecodeComparison(b []byte) (*Comparison, error) {
	if len(b) > MaxComparison {
		return nil, fmt.Errorf("it is %d bytes, more than the %d a smoke comparison file may be", len(b), MaxComparison)
	}
	var c Comparison
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("it is not a smoke comparison (imagectl smoke --compare-first-boot writes one): %w", err)
	}
	if dec.More() {
		return nil, errors.New("it holds more than one JSON value")
	}
	if c.SchemaVersion != ComparisonSchemaVersion {
		return nil, fmt.Errorf("its schema_version is %d, this imagectl reads %d", c.SchemaVersion, ComparisonSchemaVersion)
	}
	// A path that does not say whether it passed is not read as failed.
	var said struct {
		Baked     struct{ Passed *bool } `json:"baked"`
		FirstBoot struct{ Passed *bool } `json:"first_boot"`
	}
	if err := json.Unmarshal(b, &said); err != nil {
		return nil, err
	}
	var errs []error
	if said.Baked.Passed == nil {
		errs = append(errs, errors.New("the baked path says not whether it passed"))
	}
	if said.FirstBoot.Passed == nil {
		errs = append(errs, errors.New("the first-boot path says not whether it passed"))
	}
	for _, p := range []struct {
		name string
		p    Path
	}{{PathBaked, c.Baked}, {PathFirstBoot, c.FirstBoot}} {
		if p.p.Passed && p.p.ValidatedSeconds == nil {
			errs = append(errs, fmt.Errorf("the %s path passed but has no validated_seconds", p.name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &c, nil
}

// Text is the comparison for people: both timelines side by side, each
// path's time to validated or its failure, the ratio, and what the first
// boot downloaded. Values from the runs are not escaped here: the caller
// prints it through textsafe.
func (c *Comparison) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: baked image against its first boot, profile %s, stage %s, under %s with %d MiB\n",
		c.Image, c.Version, c.Profile, c.Stage, strings.ToUpper(c.Accelerator), c.MemoryMB)
	fmt.Fprintln(&b, "timelines (seconds since QEMU started):")
	fmt.Fprintf(&b, "  %-20s %10s %10s\n", "milestone", "baked", "first-boot")
	for _, m := range c.Milestones {
		fmt.Fprintf(&b, "  %-20s %10s %10s\n", m.Name, num1(m.Baked), num1(m.FirstBoot))
	}
	for _, p := range []struct {
		name string
		p    Path
	}{{PathBaked, c.Baked}, {PathFirstBoot, c.FirstBoot}} {
		fmt.Fprintf(&b, "%-10s ", p.name+":")
		if !p.p.Passed {
			fmt.Fprintf(&b, "FAILED: %s\n", p.p.Failure)
			continue
		}
		if p.p.ValidatedSeconds == nil { // not a file Compare wrote
			b.WriteString("passed, with no time to validated\n")
			continue
		}
		fmt.Fprintf(&b, "validated in %.1f s (%d checks, %d warnings)", *p.p.ValidatedSeconds, p.p.Checks, p.p.Warnings)
		if p.p.Reboot != nil && *p.p.Reboot {
			b.WriteString(", after one reboot")
		}
		if d := p.p.DeploySeconds; d != nil {
			fmt.Fprintf(&b, "; deployed in %.1f s before QEMU started (%.1f s with it)", *d, *d+*p.p.ValidatedSeconds)
		}
		b.WriteString("\n")
	}
	if len(c.Ratios) > 1 {
		fmt.Fprintf(&b, "%d pairs, the order alternating; their ratios:", len(c.Ratios))
		for _, r := range c.Ratios {
			fmt.Fprintf(&b, " %.3f", r)
		}
		b.WriteString("; the timelines above are the median pair's\n")
	}
	if c.Ratio != nil {
		fmt.Fprintf(&b, "ratio baked/first-boot: %.3f (the baked image is validated in %.0f%% of the first boot's time)", *c.Ratio, *c.Ratio*100)
		if c.Spread != nil {
			fmt.Fprintf(&b, "; median of %d pairs, spread %.1f%% ((max - min) / median)", len(c.Ratios), *c.Spread*100)
		}
		b.WriteString("\n")
	} else {
		b.WriteString("ratio: none (a path failed)\n")
	}
	if len(c.Differences) > 0 {
		fmt.Fprintf(&b, "not like for like: the paths did not do the same work (%d difference(s)):\n", len(c.Differences))
		for _, d := range c.Differences {
			fmt.Fprintf(&b, "  - %s\n", d)
		}
	}
	fmt.Fprintf(&b, "received by the guest up to validated: baked %s, first-boot %s\n", bytesText(c.Baked.ReceivedBytes), bytesText(c.FirstBoot.ReceivedBytes))
	fmt.Fprintf(&b, "downloaded by the first-boot script's apt: %d bytes (archives %d, indexes %d)\n",
		c.FirstBoot.DownloadBytes, c.FirstBoot.ArchiveBytes, c.FirstBoot.IndexBytes)
	return b.String()
}

// bytesText is a measured byte count, or says it was not measured.
func bytesText(n *int64) string {
	if n == nil {
		return "not measured"
	}
	return fmt.Sprintf("%d bytes", *n)
}

func num1(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *f)
}
