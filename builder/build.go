package builder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/ext4tar"
	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/layers"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/validate"
)

// BuildOptions configure a build.
type BuildOptions struct {
	Executor Executor
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
	Tarball          string
	ManifestPath     string
	ValidationScript string
	// SBOM and Provenance are the SPDX document and the in-toto statement
	// beside the tgz; CycloneDX the SBOM as CycloneDX.
	SBOM, Provenance, CycloneDX string
	// Signatures are the signature files published with them, if signed:
	// the tgz's and the manifest's, and the DSSE attestations.
	Signatures []string
	Manifest   *manifest.Manifest
}

// Build executes a plan: verifies the base image, makes a raw working copy
// of it, restores the deepest run of unchanged layers from the layer cache
// (when opts.LayerCache is set), applies the remaining layers in one
// appliance session (none when every layer was cached), packs the root
// filesystem into the tgz and writes the manifest and validation script.
// Outputs appear under their final names only when all of them are
// complete; a failed or cancelled build leaves none of them and no work
// directory behind.
func Build(ctx context.Context, plan *Plan, opts BuildOptions) (res *Result, err error) {
	if err := plan.Resolved(); err != nil {
		return nil, err
	}
	if opts.Executor == nil {
		return nil, errors.New("no executor: this imagectl was built without libguestfs support (build it with -tags guestfs)")
	}
	rep := event.Reporter(opts.Events)
	started := time.Now().UTC()
	img := plan.Source.Image

	outDir := opts.OutputDir
	if outDir == "" {
		outDir = plan.Artifacts.Directory
		if !filepath.IsAbs(outDir) {
			outDir = filepath.Join(plan.Source.Dir, outDir)
		}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the artifact directory: %w", err)
	}

	// 1. The base image, verified before anything else happens.
	end := rep.Phase(PhaseVerifyBase, plan.Base.Source)
	basePath, err := BaseCache{Dir: filepath.Join(opts.CacheDir, cachedir.Base), Client: opts.HTTPClient}.Resolve(ctx, plan.Base, img.Base.Path,
		func(done, total int64) {
			rep.Progress(PhaseVerifyBase, done, total)
		})
	end(err)
	if err != nil {
		return nil, err
	}

	// 2. A raw working copy of the base in a work directory removed on
	// every path: the appliance customizes it, and the packer reads the
	// root filesystem from it on the host afterwards.
	work, err := os.MkdirTemp(opts.WorkDir, "imagectl-build-")
	if err != nil {
		return nil, fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	disk := filepath.Join(work, "disk.raw")
	end = rep.Phase(PhasePrepare, "raw working copy of the base image")
	err = prepareDisk(ctx, basePath, plan.Base.Format, disk, plan.Base.SizeBytes)
	end(err)
	if err != nil {
		return nil, err
	}

	// 3. The layer cache: the deepest run of unchanged layers is restored
	// onto the disk, and only the layers after it are applied.
	var lc *layerCache
	var restored []*layercache.Entry
	if opts.LayerCache != "" {
		lc, restored, err = openLayerCache(ctx, plan, opts, disk, rep, func() error {
			return prepareDisk(ctx, basePath, plan.Base.Format, disk, plan.Base.SizeBytes)
		})
		if err != nil {
			return nil, ctxErr(ctx, err)
		}
		defer lc.close()
	}

	m := plan.Manifest()
	m.Build.Started = started
	m.Lineage.SourceRevision = sourceRevision(plan.Source.Dir)
	m.Lineage.ParentVersion = opts.ParentVersion
	ap := &applier{rep: rep, client: opts.HTTPClient}
	var mounts []Mount
	for i, e := range restored {
		if e == nil {
			continue
		}
		var meta layerMeta
		if err := json.Unmarshal(e.Meta, &meta); err != nil {
			return nil, fmt.Errorf("layer cache entry for %s: %w", e.Layer, err)
		}
		created := e.Created
		m.Layers[i].Steps, m.Layers[i].CachedAt = meta.Steps, &created
		ap.missing = append(ap.missing, meta.Missing...)
		ap.keys = append(ap.keys, meta.AptKeys...)
		if plan.Layers[i].Name == layers.FinalizeLayer {
			m.Packages, mounts = meta.Packages, meta.Mounts
			m.MissingOptional, m.AptKeys = nonNil(ap.missing), ap.keys
		}
		rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusCached, Layer: plan.Layers[i].Name, Summary: "restored from the layer cache, made " + created.Format(time.RFC3339)})
	}

	// 4. One appliance for the layers left, when any are.
	sessOpts := SessionOptions{Accel: opts.Accel, Log: rep.Log, Format: "raw"}
	var sess Session
	if len(restored) < len(plan.Layers) {
		end = rep.Phase(PhaseLaunch, "libguestfs appliance")
		sess, err = opts.Executor.Open(ctx, disk, sessOpts)
		end(err)
		if err != nil {
			return nil, err
		}
		// Close is idempotent and may run from the cancellation goroutine
		// while a guest call blocks: it then stops the appliance so the call
		// returns.
		closeSess := func() { sess.Close() }
		defer closeSess()
		stop := context.AfterFunc(ctx, closeSess)
		defer stop()
		m.Builder.Accelerator = sess.Accelerator()
		mounts = sess.Mounts()
		if err := applyLayers(ctx, plan, m, ap, sess, len(restored), lc, disk, rep); err != nil {
			return nil, err
		}
	}

	// 5. Pack the root filesystem, streaming: compression and sha256 in one
	// pass, no uncompressed tar on disk.
	tgzPath := filepath.Join(outDir, plan.Artifacts.Tarball)
	end = rep.Phase(PhasePack, tgzPath)
	pk := rootPacker{mode: opts.Packer, disk: disk, level: plan.Artifacts.CompressionLevel, log: rep.Log,
		reopen: func() (Session, error) { return opts.Executor.Open(ctx, disk, sessOpts) }}
	tgz, pack, packer, err := pk.pack(ctx, sess, mounts, tgzPath)
	end(err)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	defer tgz.Abort()
	if sess != nil {
		sess.Close()
	}

	// 6. The deployability check on the packed tgz: findings are reported
	// and recorded in the manifest (upload refuses what has errors).
	end = rep.Phase(PhaseCheck, "deployability of the tgz")
	findings, err := validate.CheckDeployable(ctx, tgz.Name(), validate.DeployOptions{KernelArgs: plan.KernelArgs, BareMetal: true})
	end(err)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	m.Deploy = []manifest.DeployFinding{}
	for _, f := range validate.ApplyWaivers(findings, plan.Waivers) {
		m.Deploy = append(m.Deploy, manifest.DeployFinding{Check: f.Check, Severity: f.Severity, Message: f.Message,
			Waived: f.Waived, WaiverReason: f.WaiverReason})
		if f.Waived {
			rep.Log(fmt.Sprintf("deployability %s (waived by the recipe: %s): %s: %s", f.Severity, f.WaiverReason, f.Check, f.Message))
			continue
		}
		rep.Log(fmt.Sprintf("deployability %s: %s: %s (fix: %s)", f.Severity, f.Check, f.Message, f.Fix))
	}

	m.Build.Finished = time.Now().UTC()
	m.Build.Seconds = m.Build.Finished.Sub(started).Seconds()
	m.Artifact = &manifest.Artifact{File: plan.Artifacts.Tarball, SHA256: pack.SHA256, Size: pack.Size, Compression: "gzip",
		CompressionLevel: plan.Artifacts.CompressionLevel, Entries: pack.Entries, Packer: packer}

	// 7. The SBOM, read from the packed tgz, and the provenance.
	end = rep.Phase(PhaseDescribe, plan.Artifacts.SBOM+", "+plan.Artifacts.CycloneDX+", "+plan.Artifacts.Provenance)
	docs, err := describe(ctx, plan, m, tgz.Name(), packer)
	end(err)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}

	// 8. The manifest and the validation script, then publish them all.
	end = rep.Phase(PhaseManifest, plan.Artifacts.Manifest)
	res, err = publish(ctx, m, tgz, outDir, plan.Artifacts, docs, opts.Sign)
	end(err)
	return res, err
}

// applyLayers applies the plan's layers from index first on, with services
// kept from starting, snapshotting each into the layer cache when lc is set.
func applyLayers(ctx context.Context, plan *Plan, m *manifest.Manifest, ap *applier, sess Session, first int, lc *layerCache, disk string, rep event.Reporter) error {
	ap.s = sess
	// The final layer's steps need the manifest as it stands then.
	snapshot := func(ctx context.Context) error {
		pkgs, err := installedPackages(ctx, sess)
		if err != nil {
			return err
		}
		m.Packages = pkgs
		m.MissingOptional, m.AptKeys = nonNil(ap.missing), ap.keys
		return nil
	}
	ap.validationScript = func(ctx context.Context) ([]byte, error) {
		return validate.Script(m)
	}
	ap.marker = func(ctx context.Context) ([]byte, error) {
		return m.Marker()
	}
	if err := sess.WriteFile(ctx, "/usr/sbin/policy-rc.d", []byte("#!/bin/sh\n# imagectl: no services start during the build\nexit 101\n"), 0o755, "root:root"); err != nil {
		return ctxErr(ctx, fmt.Errorf("preparing the guest: %w", err))
	}
	for i := first; i < len(plan.Layers); i++ {
		l, ml := plan.Layers[i], &m.Layers[i]
		final := l.Name == layers.FinalizeLayer
		if final {
			if err := snapshot(ctx); err != nil {
				return ctxErr(ctx, fmt.Errorf("reading the guest's packages: %w", err))
			}
		}
		missing, keys := len(ap.missing), len(ap.keys)
		for _, st := range l.Steps {
			start := time.Now()
			rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusStart, Layer: l.Name, Kind: st.Kind(), Summary: st.Summary()})
			err := ap.apply(ctx, st)
			secs := time.Since(start).Seconds()
			if err != nil {
				err = ctxErr(ctx, fmt.Errorf("layer %s, %s step: %w", l.Name, st.Kind(), err))
				rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusFailed, Layer: l.Name, Kind: st.Kind(), Summary: st.Summary(), Seconds: secs, Message: err.Error()})
				return err
			}
			rep.Emit(event.Event{Type: event.TypeStep, Status: event.StatusOK, Layer: l.Name, Kind: st.Kind(), Summary: st.Summary(), Seconds: secs})
			ml.Steps = append(ml.Steps, manifest.Step{Kind: st.Kind(), Summary: st.Summary(), Seconds: secs})
		}
		if lc == nil || !l.Enabled {
			continue
		}
		meta := layerMeta{Steps: ml.Steps, Missing: ap.missing[missing:], AptKeys: ap.keys[keys:]}
		if final {
			meta.Packages, meta.Mounts = m.Packages, sess.Mounts()
		}
		end := rep.Phase(PhaseSnapshot, "layer "+l.Name)
		err := sess.Checkpoint(ctx, func() error { return lc.save(ctx, plan, i, disk, meta) })
		end(err)
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("caching layer %s: %w", l.Name, err))
		}
	}
	return nil
}

func publish(ctx context.Context, m *manifest.Manifest, tgz *atomicfile.File, outDir string, a Artifacts, docs *documents,
	sign func(SignRequest) (map[string][]byte, error)) (*Result, error) {
	mb, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	script, err := validate.Script(m)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Tarball:          filepath.Join(outDir, a.Tarball),
		ManifestPath:     filepath.Join(outDir, a.Manifest),
		ValidationScript: filepath.Join(outDir, a.ValidationScript),
		SBOM:             filepath.Join(outDir, a.SBOM),
		Provenance:       filepath.Join(outDir, a.Provenance),
		CycloneDX:        filepath.Join(outDir, a.CycloneDX),
		Manifest:         m,
	}
	sigs := map[string][]byte{}
	if sign != nil {
		sum, err := digest.Parse(m.Artifact.SHA256)
		if err != nil {
			return nil, fmt.Errorf("signing the build: the manifest's artifact sha256: %w", err)
		}
		req := SignRequest{Tarball: res.Tarball, SHA256: sum[:], Size: m.Artifact.Size, ManifestPath: res.ManifestPath, Manifest: mb,
			Attestations: map[string][]byte{
				filepath.Join(outDir, a.ProvenanceAttestation): docs.provenance,
				filepath.Join(outDir, a.SBOMAttestation):       docs.sbomStatement,
				filepath.Join(outDir, a.CycloneDXAttestation):  docs.cyclonedxStatement,
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
	if err := set.WriteFile(res.ValidationScript, script, 0o755); err != nil {
		return nil, err
	}
	if err := set.WriteFile(res.SBOM, docs.sbom, 0o644); err != nil {
		return nil, err
	}
	if err := set.WriteFile(res.CycloneDX, docs.cyclonedx, 0o644); err != nil {
		return nil, err
	}
	if err := set.WriteFile(res.Provenance, docs.provenance, 0o644); err != nil {
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
	if err := set.WriteFile(res.ManifestPath, mb, 0o644); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Signatures of an earlier artifact of the same name would not match.
	beside := manifest.FilesBeside(res.Tarball)
	for _, p := range append([]string{beside.TarballSignature, beside.TarballBundle, beside.ManifestSignature, beside.ManifestBundle}, beside.Attestations()...) {
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

// rootPacker packs the customized root filesystem into the tgz.
type rootPacker struct {
	mode   string // auto, host or appliance
	disk   string // the raw disk the session customized
	level  int
	log    func(string)
	reopen func() (Session, error)
}

// pack reads the root filesystem on the host when it can: the appliance is
// shut down first, so the filesystem is clean, and the disk is read
// directly, much faster than a tar-out through the appliance. When the
// guest's layout or filesystem is one the host-side reader does not
// support, it packs through the appliance instead and says why; the two
// are never mixed in one tgz. It returns the temporary file that becomes
// the tgz when published, and which packer made it.
func (p rootPacker) pack(ctx context.Context, sess Session, mounts []Mount, tgzPath string) (*atomicfile.File, PackResult, string, error) {
	mode := p.mode
	if mode == "" {
		mode = "auto"
	}
	why := hostUnpackable(mounts)
	switch {
	case mode != "auto" && mode != "host" && mode != "appliance":
		return nil, PackResult{}, "", fmt.Errorf("unknown packer %q (auto, host or appliance)", mode)
	case mode == "host" && why != "":
		return nil, PackResult{}, "", fmt.Errorf("packing on the host: %s", why)
	case mode == "appliance" || why != "":
		if why != "" {
			p.log("packing through the appliance: " + why)
		}
		if sess == nil {
			return p.appliance(ctx, tgzPath)
		}
		f, res, err := packSession(ctx, sess, tgzPath, p.level)
		return f, res, "appliance", err
	}
	if sess != nil {
		if err := sess.Close(); err != nil {
			return nil, PackResult{}, "", fmt.Errorf("shutting the appliance down before packing: %w", err)
		}
	}
	f, err := atomicfile.Create(tgzPath, 0o644)
	if err != nil {
		return nil, PackResult{}, "", err
	}
	res, err := PackDisk(ctx, p.disk, mounts[0].Partition, f, p.level)
	if err == nil {
		return f, res, "host", nil
	}
	f.Abort()
	if !ext4tar.IsUnsupported(err) || mode == "host" || ctx.Err() != nil {
		return nil, PackResult{}, "", fmt.Errorf("packing the root filesystem on the host: %w", err)
	}
	p.log(fmt.Sprintf("packing through the appliance (launching it again): %v", err))
	return p.appliance(ctx, tgzPath)
}

// appliance packs through a new appliance session on the disk.
func (p rootPacker) appliance(ctx context.Context, tgzPath string) (*atomicfile.File, PackResult, string, error) {
	sess, err := p.reopen()
	if err != nil {
		return nil, PackResult{}, "", err
	}
	defer sess.Close()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	f, res, err := packSession(ctx, sess, tgzPath, p.level)
	return f, res, "appliance", err
}

// hostUnpackable says why the host-side reader cannot pack the guest, or ""
// when it can: it reads one ext4 root filesystem on a partition of the disk
// (or the whole disk); only an EFI system partition may be mounted besides,
// since nothing under /boot/efi goes into the tgz.
func hostUnpackable(mounts []Mount) string {
	if len(mounts) == 0 || mounts[0].Point != "/" {
		return "the guest's root filesystem is not known"
	}
	root := mounts[0]
	if root.Partition < 0 {
		return fmt.Sprintf("the root filesystem is on %s, not on a partition of the disk", root.Device)
	}
	if root.Type != "ext4" {
		return fmt.Sprintf("the root filesystem is %s, not ext4", root.Type)
	}
	for _, m := range mounts[1:] {
		if m.Point != "/boot/efi" {
			return fmt.Sprintf("the guest mounts %s on %s, and only the root filesystem is read on the host", m.Device, m.Point)
		}
	}
	return ""
}

// packSession packs the guest's root filesystem into a temporary file that
// becomes the tgz when published.
func packSession(ctx context.Context, sess Session, tgzPath string, level int) (*atomicfile.File, PackResult, error) {
	f, err := atomicfile.Create(tgzPath, 0o644)
	if err != nil {
		return nil, PackResult{}, err
	}
	res, err := PackSession(ctx, sess, f, level)
	if err != nil {
		f.Abort()
		return nil, PackResult{}, fmt.Errorf("packing the root filesystem: %w", err)
	}
	return f, res, nil
}

// PackSession streams the session's root filesystem (tar-out with xattrs and
// numeric owners) through Repack into w: compression and sha256 in one pass,
// no uncompressed tar on disk.
func PackSession(ctx context.Context, sess Session, w io.Writer, level int) (PackResult, error) {
	pr, pw := io.Pipe()
	type packed struct {
		res PackResult
		err error
	}
	done := make(chan packed, 1)
	go func() {
		res, err := Repack(ctx, pr, w, level)
		if err == nil {
			// tar pads its output past the end-of-archive marker: take it
			// all, or the writer would see a broken pipe.
			_, err = io.Copy(io.Discard, pr)
		}
		pr.CloseWithError(errors.New("packing stopped"))
		done <- packed{res, err}
	}()
	err := sess.TarOut(ctx, pw)
	pw.CloseWithError(err)
	p := <-done
	if p.err != nil {
		// The repacker's error is the cause; the tar-out's broken pipe is
		// its consequence.
		err = p.err
	}
	return p.res, err
}

// prepareDisk writes a sparse raw copy of the base image and grows it to
// size (the appliance grows the partition and filesystem).
func prepareDisk(ctx context.Context, base, format, disk string, size int64) error {
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-q", "-f", format, "-O", "raw", base, disk).CombinedOutput(); err != nil {
		return fmt.Errorf("copying the base image: qemu-img convert: %v: %s", ctxErr(ctx, err), strings.TrimSpace(string(out)))
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

// installedPackages reads the guest's dpkg database.
func installedPackages(ctx context.Context, s Session) ([]manifest.Package, error) {
	out, err := s.Run(ctx, `dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n'`)
	if err != nil {
		return nil, err
	}
	var pkgs []manifest.Package
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || !strings.HasPrefix(f[0], "ii") {
			continue
		}
		pkgs = append(pkgs, manifest.Package{Name: f[1], Version: f[2], Architecture: f[3]})
	}
	if len(pkgs) == 0 {
		return nil, errors.New("the guest's dpkg database lists no installed package")
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	return pkgs, nil
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

func manifestBundle(b steps.StageBundle) manifest.Bundle {
	mb := manifest.Bundle{Name: b.Name, Destination: b.Destination, Entrypoint: b.Entrypoint, Digest: b.Digest}
	for _, e := range b.Entries {
		mb.Entries = append(mb.Entries, manifest.BundleEntry{Path: e.Path, Type: e.Type, Mode: fsmode.String(e.Mode), Size: e.Size, SHA256: e.SHA256, Target: e.Target})
	}
	return mb
}
