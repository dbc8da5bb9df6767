package builder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/apply"
	"github.com/gpuaas/imagectl/builder/attest"
	"github.com/gpuaas/imagectl/builder/base"
	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/debcache"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/builder/pack"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/deploycheck"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/validate"
)

// BuildOptions configure a build.
type BuildOptions struct {
	Executor guest.Executor
	// CacheDir holds downloaded base images by digest.
	CacheDir string
	// WorkDir is where the raw working disk goes (default: os.TempDir()).
	WorkDir string
	// OutputDir overrides the recipe's artifact directory.
	OutputDir string
	// Accel is passed to the executor: auto, kvm or tcg.
	Accel string
	// Events receives progress; nil discards it.
	Events func(event.Event)
	// HTTPClient fetches base images and apt keys (default http.DefaultClient).
	HTTPClient *http.Client
	// ParentVersion is the version this build follows (the store's latest
	// of the image), recorded as the manifest's lineage.parent_version.
	ParentVersion string
	// LayerCache is the layer cache's directory; "" builds without it.
	LayerCache string
	// PackageCache is the package cache's directory (builder/debcache):
	// packages steps fetch their archives on the host into it; "" leaves
	// every download to the appliance's apt.
	PackageCache string
	// Env is the environment whose http_proxy, https_proxy and no_proxy
	// the package cache's fetches go through.
	Env []string
	// Refresh rebuilds every layer, replacing what the cache holds.
	Refresh bool
	// CacheMaxAge bounds the age of cached layers that install packages or
	// run commands (default DefaultCacheMaxAge).
	CacheMaxAge time.Duration
	// Sign, when set, signs the outputs before they are published (see
	// SignRequest). It returns the signature files' contents by path,
	// which are published with the rest, all or none. Without it,
	// signature files of an earlier artifact of the same name are removed.
	Sign func(SignRequest) (map[string][]byte, error)
	// KeepDpkgSyncs leaves dpkg in the appliance syncing every file it
	// writes (apply.Applier.KeepDpkgSyncs); by default it does not: the
	// outputs are the same, the netdata layer installs faster.
	KeepDpkgSyncs bool
	// Packer chooses how the root filesystem is read for the tgz: "host"
	// (from the disk image after the appliance has shut down), "appliance"
	// (tar-out through the appliance), or "auto" (default: host when the
	// filesystem is one it supports, else the appliance, saying why).
	Packer string
}

// SignRequest is what a build asks its signer to sign: the tgz by the
// sha256 and size the packer computed, the manifest by its bytes, and the
// in-toto statements (the provenance, the SBOM's) to sign as DSSE
// attestations of the tgz, by the path of the envelope to write.
type SignRequest struct {
	Tarball      string
	SHA256       []byte
	Size         int64
	ManifestPath string
	Manifest     []byte
	Attestations map[string][]byte
}

// Result is what a successful build wrote.
type Result struct {
	// Files are the paths of the build's files in the output directory:
	// the tgz, the manifest, the validation script, the SBOMs and the
	// provenance were written; of the signatures and attestations it
	// names, only those in Signatures were.
	Files manifest.Files
	// Signatures are the signature files published with them, if signed:
	// the tgz's and the manifest's, and the DSSE attestations.
	Signatures []string
	Manifest   *manifest.Manifest
}

// Build executes a plan, phase by phase (phases): verifies the base image,
// makes a raw working copy of it, restores the deepest run of unchanged
// layers from the layer cache (when opts.LayerCache is set), applies the
// remaining layers in one appliance session (none when every layer was
// cached), packs the root filesystem into the tgz, checks it, describes it
// and writes the manifest and validation script. Outputs appear under
// their final names only when all of them are complete; a failed or
// cancelled build leaves none of them and no work directory behind.
func Build(ctx context.Context, plan *plan.Plan, opts BuildOptions) (*Result, error) {
	if err := plan.Resolved(); err != nil {
		return nil, err
	}
	if opts.Executor == nil {
		return nil, errors.New("no executor: this imagectl was built without libguestfs support (build it with -tags guestfs)")
	}
	b := &build{plan: plan, opts: opts, rep: event.Reporter(opts.Events)}
	defer b.cleanUp()
	started := time.Now().UTC()
	b.outDir = opts.OutputDir
	if b.outDir == "" {
		b.outDir = plan.Output.Directory
		if !filepath.IsAbs(b.outDir) {
			b.outDir = filepath.Join(plan.Inputs.Dir, b.outDir)
		}
	}
	if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the artifact directory: %w", err)
	}
	b.tgzPath = filepath.Join(b.outDir, plan.Output.Files.Tarball)
	b.m = plan.Manifest.Clone()
	b.m.Build.Started = started
	b.ap = &apply.Applier{Events: b.rep, Client: opts.HTTPClient, AptProxy: plan.AptProxy(), KeepDpkgSyncs: opts.KeepDpkgSyncs,
		NoTranslations: compile.RemovesAptLists(plan.Layers)}
	if opts.PackageCache != "" {
		b.ap.Debs = &debcache.Fetcher{Cache: debcache.Cache{Dir: opts.PackageCache}, Client: debcache.ProxyClient(opts.Env)}
	}
	b.sessOpts = guest.SessionOptions{Accel: opts.Accel, Log: b.rep.Log, Format: "raw"}
	for _, ph := range phases {
		if ph.skip != nil && ph.skip(b) {
			continue
		}
		end := func(error) {}
		if ph.name != "" {
			end = b.rep.Phase(ph.name, ph.summary(b))
		}
		start := time.Now()
		err := ph.run(b, ctx)
		if ph.timing != nil {
			*ph.timing(&b.timings) += time.Since(start).Seconds()
		}
		end(err)
		if err != nil {
			if ph.yieldsToCtx {
				err = ctxErr(ctx, err)
			}
			return nil, err
		}
	}
	b.rep.Timings("", b.m.Build.Seconds, timingFigures(b.timings))
	return b.res, nil
}

// build is one run of Build: what its phases read and fill, in order.
type build struct {
	plan *plan.Plan
	opts BuildOptions
	rep  event.Reporter

	outDir, tgzPath string
	m               *manifest.Manifest
	ap              *apply.Applier
	sessOpts        guest.SessionOptions

	basePath, disk string
	lc             *layerCache
	restored       []*layercache.Entry
	sess           guest.Session
	mounts         []guest.Mount
	tgz            *atomicfile.File
	packed         pack.Result
	packer         string
	sourceDate     time.Time
	docs           *attest.Documents
	res            *Result
	// timings are where the build's time has gone so far.
	timings manifest.Timings

	// cleanups run when the build ends, last first, on every path.
	cleanups []func()
}

func (b *build) onEnd(f func()) { b.cleanups = append(b.cleanups, f) }

func (b *build) cleanUp() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
}

// phase is one named part of a build. A phase with a name is reported as
// that phase's events (start, then ok or failed, with its summary); one
// without reports what it does itself (the layer cache's restores, the
// layers' steps and snapshots).
type phase struct {
	name    string
	summary func(b *build) string
	// skip leaves the phase out, events and all.
	skip func(b *build) bool
	run  func(b *build, ctx context.Context) error
	// yieldsToCtx: the phase's error yields to the context's, so a
	// cancelled build says so rather than the broken pipe it caused.
	yieldsToCtx bool
	// reports are the phases an unnamed phase reports itself.
	reports []string
	// timing is the part of manifest.Timings the phase's time counts
	// in; nil: the phase counts its own (the layers) or is not counted.
	timing func(*manifest.Timings) *float64
}

// phases are a build, in order.
var phases = []phase{
	// The base image, verified before anything else happens.
	{name: PhaseVerifyBase, summary: func(b *build) string { return base.Shown(b.plan.Manifest.Base.Source) }, run: (*build).verifyBase, timing: baseTime},
	// A raw working copy of the base in a work directory removed on every
	// path: the appliance customizes it, and the packer reads the root
	// filesystem from it on the host afterwards.
	{name: PhasePrepare, summary: func(*build) string { return "raw working copy of the base image" }, run: (*build).prepare, timing: baseTime},
	// The layer cache: the deepest run of unchanged layers is restored onto
	// the disk and into the manifest, and only the layers after it are
	// applied.
	{run: (*build).restore, yieldsToCtx: true, reports: []string{PhaseRestore}, timing: snapshotTime},
	// One appliance for the layers left, when any are.
	{name: PhaseLaunch, summary: func(*build) string { return "libguestfs appliance" }, skip: (*build).allRestored, run: (*build).launch,
		timing: func(t *manifest.Timings) *float64 { return &t.Launch }},
	// Each layer counts its own time, as it went (applyLayers).
	{skip: (*build).allRestored, run: (*build).applyLayers, reports: []string{PhaseSnapshot}},
	// The root filesystem, streamed: compression and sha256 in one pass,
	// no uncompressed tar on disk.
	{name: PhasePack, summary: func(b *build) string { return b.tgzPath }, run: (*build).pack, yieldsToCtx: true,
		timing: func(t *manifest.Timings) *float64 { return &t.Pack }},
	// The deployability check on the packed tgz: findings are reported
	// and recorded in the manifest (upload refuses what has errors).
	{name: PhaseCheck, summary: func(*build) string { return "deployability of the tgz" }, run: (*build).check, yieldsToCtx: true},
	// The SBOM, read from the packed tgz, and the provenance.
	{name: PhaseDescribe, summary: func(b *build) string {
		f := b.plan.Output.Files
		return f.SBOM + ", " + f.CycloneDX + ", " + f.Provenance
	}, run: (*build).describe, yieldsToCtx: true, timing: func(t *manifest.Timings) *float64 { return &t.SBOM }},
	// The manifest and the validation script, then publish them all.
	{name: PhaseManifest, summary: func(b *build) string { return b.plan.Output.Files.Manifest }, run: (*build).publish},
}

// baseTime and snapshotTime are the parts two phases each count in.
func baseTime(t *manifest.Timings) *float64     { return &t.Base }
func snapshotTime(t *manifest.Timings) *float64 { return &t.Snapshot }

func (b *build) verifyBase(ctx context.Context) error {
	var err error
	b.basePath, err = base.Cache{Dir: filepath.Join(b.opts.CacheDir, cachedir.Base), Client: b.opts.HTTPClient}.Resolve(ctx, b.plan.Manifest.Base, b.plan.Inputs.BasePath,
		func(done, total int64) {
			b.rep.Progress(PhaseVerifyBase, done, total)
		})
	return err
}

func (b *build) prepare(ctx context.Context) error {
	work, err := os.MkdirTemp(b.opts.WorkDir, "imagectl-build-")
	if err != nil {
		return fmt.Errorf("creating a work directory: %w", err)
	}
	b.onEnd(func() { os.RemoveAll(work) })
	b.disk = filepath.Join(work, "disk.raw")
	if err := b.prepareDisk(ctx); err != nil {
		return err
	}
	return b.chooseSourceDate(ctx)
}

// chooseSourceDate sets the build's source date E (pack.SourceDate) from
// $SOURCE_DATE_EPOCH or else from the base image, before any layer
// changes the disk: the tgz's times are clamped to it, the guest's
// commands run with it, the manifest and the marker record it.
func (b *build) chooseSourceDate(ctx context.Context) error {
	sd, ok, err := pack.FromEnv(b.opts.Env)
	if err != nil {
		return err
	}
	if !ok {
		sd, err = pack.BaseSourceDate(ctx, b.disk, b.m.Build.Started)
		if errors.Is(err, pack.ErrNoSourceDate) {
			b.rep.Log("no source date: " + err.Error() + "; the tgz keeps the build's times (set " + pack.SourceDateEnv + " for the same bytes from the same inputs)")
			return nil
		}
		if err != nil {
			return fmt.Errorf("choosing the source date from the base image: %w", err)
		}
	}
	b.sourceDate = sd.Time
	b.m.Build.SourceDate = &manifest.SourceDate{Epoch: sd.Epoch(), From: sd.From}
	b.ap.SourceDate = sd.Time
	return nil
}

func (b *build) prepareDisk(ctx context.Context) error {
	bm := b.plan.Manifest.Base
	return prepareDisk(ctx, b.basePath, bm.Format, b.disk, bm.Size)
}

func (b *build) restore(ctx context.Context) error {
	m := b.m
	if b.opts.LayerCache != "" {
		var err error
		b.lc, b.restored, err = openLayerCache(ctx, b.plan, b.opts, b.disk, b.rep, func() error { return b.prepareDisk(ctx) })
		if err != nil {
			return err
		}
		b.onEnd(b.lc.close)
	}
	m.Lineage.SourceRevision = sourceRevision(b.plan.Inputs.Dir)
	m.Lineage.ParentVersion = b.opts.ParentVersion
	for i, e := range b.restored {
		if e == nil {
			continue
		}
		var meta layerMeta
		if err := json.Unmarshal(e.Meta, &meta); err != nil {
			return fmt.Errorf("layer cache entry for %s: %w", e.Layer, err)
		}
		created := e.Created
		m.Layers[i].Steps, m.Layers[i].CachedAt = meta.Steps, &created
		b.ap.Missing = append(b.ap.Missing, meta.Missing...)
		b.ap.Keys = append(b.ap.Keys, meta.AptKeys...)
		if b.plan.Layers[i].Name == compile.FinalizeLayer {
			m.Packages, b.mounts = meta.Packages, meta.Mounts
			m.MissingOptional, m.AptKeys = append([]string{}, b.ap.Missing...), b.ap.Keys
		}
		b.rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusCached, Layer: b.plan.Layers[i].Name, Summary: "restored from the layer cache, made " + created.Format(time.RFC3339)})
	}
	return nil
}

// allRestored: every layer came from the layer cache, so no appliance is
// needed before packing.
func (b *build) allRestored() bool { return len(b.restored) == len(b.plan.Layers) }

func (b *build) launch(ctx context.Context) error {
	sess, err := b.opts.Executor.Open(ctx, b.disk, b.sessOpts)
	if err != nil {
		return err
	}
	b.sess = sess
	// Close is idempotent and may run from the cancellation goroutine
	// while a guest call blocks: it then stops the appliance so the call
	// returns.
	closeSess := func() { sess.Close() }
	b.onEnd(closeSess)
	stop := context.AfterFunc(ctx, closeSess)
	b.onEnd(func() { stop() })
	b.m.Builder.Accelerator = sess.Accelerator()
	b.mounts = sess.Mounts()
	if b.opts.Packer == "host" {
		// Refused now, not after every layer has been applied.
		if err := pack.HostRefusal(b.disk, b.mounts); err != nil {
			return fmt.Errorf("base image %s: %w", base.Shown(b.plan.Manifest.Base.Source), err)
		}
	}
	if !b.sourceDate.IsZero() {
		b.ap.Session = sess
		return b.ap.KeepClockPast(ctx, b.sourceDate)
	}
	return nil
}

func (b *build) applyLayers(ctx context.Context) error {
	return applyLayers(ctx, b.plan, b.m, b.ap, b.sess, len(b.restored), b.lc, b.disk, b.rep, &b.timings)
}

func (b *build) pack(ctx context.Context) error {
	pk := pack.Root{Mode: b.opts.Packer, Disk: b.disk, Level: b.plan.Output.CompressionLevel, Log: b.rep.Log, Epoch: b.sourceDate,
		Reopen: func() (guest.Session, error) {
			// Only tar-out runs in it: the disk's name does not matter.
			o := b.sessOpts
			o.AnyDiskName = true
			return b.opts.Executor.Open(ctx, b.disk, o)
		}}
	var err error
	if b.tgz, b.packed, b.packer, err = pk.Pack(ctx, b.sess, b.mounts, b.tgzPath); err != nil {
		return err
	}
	b.onEnd(b.tgz.Abort)
	if b.sess != nil {
		b.sess.Close()
	}
	return nil
}

func (b *build) check(ctx context.Context) error {
	m := b.m
	findings, err := deploycheck.CheckDeployable(ctx, b.tgz.Name(), deploycheck.DeployOptions{KernelArgs: m.KernelArgs, BareMetal: true})
	if err != nil {
		return err
	}
	m.Deploy = []manifest.DeployFinding{}
	for _, f := range deploycheck.ApplyWaivers(findings, m.DeployWaivers) {
		m.Deploy = append(m.Deploy, manifest.DeployFinding{Check: f.Check, Severity: f.Severity, Message: f.Message,
			Waived: f.Waived, WaiverReason: f.WaiverReason})
		if f.Waived {
			b.rep.Log(fmt.Sprintf("deployability %s (waived by the recipe: %s): %s: %s", f.Severity, f.WaiverReason, f.Check, f.Message))
			continue
		}
		b.rep.Log(fmt.Sprintf("deployability %s: %s: %s (fix: %s)", f.Severity, f.Check, f.Message, f.Fix))
	}
	return nil
}

func (b *build) describe(ctx context.Context) error {
	// The tgz's sha256 and the manifest's times are final from here.
	m := b.m
	m.Build.Finished = time.Now().UTC()
	m.Build.Seconds = m.Build.Finished.Sub(m.Build.Started).Seconds()
	m.Artifact = &manifest.Artifact{File: b.plan.Output.Files.Tarball, SHA256: b.packed.SHA256, Size: b.packed.Size, Compression: "gzip",
		CompressionLevel: b.plan.Output.CompressionLevel, Entries: b.packed.Entries, Packer: b.packer}
	var err error
	b.docs, err = attest.Describe(ctx, b.plan, m, b.tgz.Name(), b.packer, fetchedDebs(b.ap.Fetched))
	return err
}

func (b *build) publish(ctx context.Context) error {
	// Every counted phase has run: the manifest says where the time went.
	t := b.timings
	b.m.Build.Timings = &t
	var err error
	b.res, err = publish(ctx, b.m, b.tgz, manifest.FilesBeside(b.tgzPath), b.docs, b.opts.Sign)
	return err
}

// applyLayers applies the plan's layers from index first on, with services
// kept from starting, snapshotting each into the layer cache when lc is set.
// Each layer's timings go into its manifest layer and are added to total.
func applyLayers(ctx context.Context, plan *plan.Plan, m *manifest.Manifest, ap *apply.Applier, sess guest.Session, first int, lc *layerCache, disk string, rep event.Reporter, total *manifest.Timings) error {
	ap.Session = sess
	// The final layer's steps need the manifest as it stands then.
	snapshot := func(ctx context.Context) error {
		pkgs, err := apply.InstalledPackages(ctx, sess)
		if err != nil {
			return err
		}
		m.Packages = pkgs
		m.MissingOptional, m.AptKeys = append([]string{}, ap.Missing...), ap.Keys
		return nil
	}
	ap.ValidationScript = func(ctx context.Context) ([]byte, error) {
		return validate.Script(m)
	}
	ap.Marker = func(ctx context.Context) ([]byte, error) {
		return m.Marker()
	}
	if err := sess.WriteFile(ctx, "/usr/sbin/policy-rc.d", []byte("#!/bin/sh\n# imagectl: no services start during the build\nexit 101\n"), 0o755, "root:root"); err != nil {
		return ctxErr(ctx, fmt.Errorf("preparing the guest: %w", err))
	}
	for i := first; i < len(plan.Layers); i++ {
		l, ml := plan.Layers[i], &m.Layers[i]
		final := l.Name == compile.FinalizeLayer
		if final {
			if err := snapshot(ctx); err != nil {
				return ctxErr(ctx, fmt.Errorf("reading the guest's packages: %w", err))
			}
		}
		missing, keys := len(ap.Missing), len(ap.Keys)
		before, stepsTime := ap.Timings, 0.0
		for _, st := range l.Steps {
			start := time.Now()
			rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusStart, Layer: l.Name, Kind: st.Kind(), Summary: st.Summary()})
			err := ap.Apply(ctx, st)
			secs := time.Since(start).Seconds()
			if err != nil {
				err = ctxErr(ctx, fmt.Errorf("layer %s, %s step: %w", l.Name, st.Kind(), err))
				rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusFailed, Layer: l.Name, Kind: st.Kind(), Summary: st.Summary(), Seconds: secs, Message: err.Error()})
				return err
			}
			rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusOK, Layer: l.Name, Kind: st.Kind(), Summary: st.Summary(), Seconds: secs})
			ml.Steps = append(ml.Steps, manifest.Step{Kind: st.Kind(), Summary: st.Summary(), Seconds: secs})
			stepsTime += secs
		}
		lt := layerTimings(before, ap.Timings, stepsTime)
		ml.Timings = &lt
		if lc == nil || !l.Enabled {
			total.Add(lt)
			rep.Timings(l.Name, stepsTime, timingFigures(lt))
			continue
		}
		meta := layerMeta{Steps: ml.Steps, Missing: ap.Missing[missing:], AptKeys: ap.Keys[keys:]}
		if final {
			meta.Packages, meta.Mounts = m.Packages, sess.Mounts()
		}
		end := rep.Phase(PhaseSnapshot, "layer "+l.Name)
		start := time.Now()
		err := sess.Checkpoint(ctx, func() error { return lc.save(ctx, plan, i, disk, meta) })
		lt.Snapshot = time.Since(start).Seconds()
		end(err)
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("caching layer %s: %w", l.Name, err))
		}
		total.Add(lt)
		rep.Timings(l.Name, stepsTime+lt.Snapshot, timingFigures(lt))
	}
	return nil
}

// layerTimings is one layer's timings: the packages steps' figures the
// applier added while the layer ran (before to after), and the rest of its
// steps' time as commands.
func layerTimings(before, after manifest.Timings, stepsTime float64) manifest.Timings {
	t := manifest.Timings{
		Resolve:       after.Resolve - before.Resolve,
		Download:      after.Download - before.Download,
		Install:       after.Install - before.Install,
		DownloadBytes: after.DownloadBytes - before.DownloadBytes,
		CachedBytes:   after.CachedBytes - before.CachedBytes,
	}
	t.Commands = max(0, stepsTime-t.Resolve-t.Download-t.Install)
	return t
}

// publish writes the build's files, named by f (in the output
// directory), with tgz: all of them or none.
func publish(ctx context.Context, m *manifest.Manifest, tgz *atomicfile.File, f manifest.Files, docs *attest.Documents,
	sign func(SignRequest) (map[string][]byte, error)) (*Result, error) {
	mb, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	script, err := validate.Script(m)
	if err != nil {
		return nil, err
	}
	res := &Result{Files: f, Manifest: m}
	sigs := map[string][]byte{}
	if sign != nil {
		sum, err := digest.Parse(m.Artifact.SHA256)
		if err != nil {
			return nil, fmt.Errorf("signing the build: the manifest's artifact sha256: %w", err)
		}
		req := SignRequest{Tarball: f.Tarball, SHA256: sum[:], Size: m.Artifact.Size, ManifestPath: f.Manifest, Manifest: mb,
			Attestations: map[string][]byte{
				f.ProvenanceAttestation: docs.Provenance,
				f.SBOMAttestation:       docs.SBOMStatement,
				f.CycloneDXAttestation:  docs.CycloneDXStatement,
			}}
		if sigs, err = sign(req); err != nil {
			return nil, fmt.Errorf("signing the build: %w", err)
		}
	}
	// The script, the SBOMs and provenance, the signatures, the tgz, then
	// the manifest, published in that order, all or none: a manifest
	// under its final name always describes a complete, signed tgz beside
	// it.
	var set atomicfile.Set
	defer set.Abort()
	if err := set.WriteFile(f.ValidationScript, script, 0o755); err != nil {
		return nil, err
	}
	if err := set.WriteFile(f.SBOM, docs.SBOM, 0o644); err != nil {
		return nil, err
	}
	if err := set.WriteFile(f.CycloneDX, docs.CycloneDX, 0o644); err != nil {
		return nil, err
	}
	if err := set.WriteFile(f.Provenance, docs.Provenance, 0o644); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(sigs))
	for _, p := range names {
		if err := set.WriteFile(p, sigs[p], 0o644); err != nil {
			return nil, err
		}
	}
	res.Signatures = names
	set.Add(tgz)
	if err := set.WriteFile(f.Manifest, mb, 0o644); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Signatures of an earlier artifact of the same name would not match.
	for _, p := range append([]string{f.TarballSignature, f.TarballBundle, f.ManifestSignature, f.ManifestBundle}, f.Attestations()...) {
		if sigs[p] == nil {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("removing the signature of an earlier build: %w", err)
			}
		}
	}
	if err := set.Commit(); err != nil {
		return nil, err
	}
	return res, nil
}

// prepareDisk writes a sparse raw copy of the base image and grows it to
// size (the appliance grows the partition and filesystem).
func prepareDisk(ctx context.Context, baseImage, format, disk string, size int64) error {
	if err := base.ToRaw(ctx, baseImage, format, disk); err != nil {
		return fmt.Errorf("copying the base image: %w", ctxErr(ctx, err))
	}
	st, err := os.Stat(disk)
	if err != nil {
		return err
	}
	if size > st.Size() {
		if err := os.Truncate(disk, size); err != nil {
			return fmt.Errorf("growing the disk to %d bytes: %w", size, err)
		}
	}
	return nil
}

// sourceRevision is the git commit of the recipe's checkout, "" outside one.
func sourceRevision(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += "-dirty"
	}
	return rev
}

// ctxErr prefers the context's error: a cancelled build says so rather
// than reporting the broken pipe the cancellation caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("build cancelled: %w", ctx.Err())
	}
	return err
}

// fetchedDebs are the package archives the layers applied in this build
// fetched, for the provenance (a layer restored from the layer cache
// fetched none).
func fetchedDebs(debs []debcache.Deb) []provenance.Package {
	var ps []provenance.Package
	for _, d := range debs {
		ps = append(ps, provenance.Package{Name: d.Name, Version: d.Version, Architecture: d.Architecture, URI: d.URL, SHA256: d.SHA256})
	}
	return ps
}
