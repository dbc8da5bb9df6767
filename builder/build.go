package builder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/atomicfile"
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
	// WorkDir is where the temporary overlay goes (default: os.TempDir()).
	WorkDir string
	// OutputDir overrides the recipe's artifact directory.
	OutputDir string
	// Accel is passed to the executor: auto, kvm or tcg.
	Accel string
	// Events receives progress; nil discards it.
	Events func(Event)
	// HTTPClient fetches base images and apt keys (default http.DefaultClient).
	HTTPClient *http.Client
}

// Result is what a successful build wrote.
type Result struct {
	Tarball          string
	ManifestPath     string
	ValidationScript string
	Manifest         *manifest.Manifest
}

// Build executes a plan: verifies the base image, customizes a
// copy-on-write overlay of it in one appliance session, packs the root
// filesystem into the tgz and writes the manifest and validation script.
// Outputs appear under their final names only when all of them are
// complete; a failed or cancelled build leaves none of them and no work
// directory behind.
func Build(ctx context.Context, plan *Plan, opts BuildOptions) (res *Result, err error) {
	if opts.Executor == nil {
		return nil, errors.New("no executor: this imagectl was built without libguestfs support (build it with -tags guestfs)")
	}
	rep := reporter{fn: opts.Events}
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
	end := rep.phase(PhaseVerifyBase, plan.Base.Source)
	basePath, err := BaseCache{Dir: filepath.Join(opts.CacheDir, "base"), Client: opts.HTTPClient}.Resolve(ctx, plan.Base, img.Base.Path,
		func(done, total int64) {
			rep.emit(Event{Type: "progress", Phase: PhaseVerifyBase, Done: done, Total: total})
		})
	end(err)
	if err != nil {
		return nil, err
	}

	// 2. A copy-on-write overlay in a work directory removed on every path.
	work, err := os.MkdirTemp(opts.WorkDir, "imagectl-build-")
	if err != nil {
		return nil, fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(work)
	overlay := filepath.Join(work, "overlay.qcow2")
	end = rep.phase(PhasePrepare, "overlay of the base image")
	err = prepareOverlay(ctx, basePath, plan.Base.Format, overlay, plan.Base.SizeBytes)
	end(err)
	if err != nil {
		return nil, err
	}

	// 3. One appliance for the whole customization.
	end = rep.phase(PhaseLaunch, "libguestfs appliance")
	sess, err := opts.Executor.Open(ctx, overlay, SessionOptions{Accel: opts.Accel, Log: rep.log})
	end(err)
	if err != nil {
		return nil, err
	}
	// Close is idempotent and may run from the cancellation goroutine while
	// a guest call blocks: it then stops the appliance so the call returns.
	closeSess := func() { sess.Close() }
	defer closeSess()
	stop := context.AfterFunc(ctx, closeSess) // cancellation ends a blocked guest call
	defer stop()

	m := plan.Manifest()
	m.Builder.Accelerator = sess.Accelerator()
	m.Build.Started = started
	m.Lineage.SourceRevision = sourceRevision(plan.Source.Dir)

	ap := &applier{s: sess, rep: rep, client: opts.HTTPClient}
	// The final layer's steps need the manifest as it stands then.
	snapshot := func(ctx context.Context) error {
		pkgs, err := installedPackages(ctx, sess)
		if err != nil {
			return err
		}
		m.Packages = pkgs
		m.MissingOptional, m.AptKeys = nonNilStrings(ap.missing), ap.keys
		return nil
	}
	ap.validationScript = func(ctx context.Context) ([]byte, error) {
		return validate.Script(m)
	}
	ap.marker = func(ctx context.Context) ([]byte, error) {
		return m.Marker()
	}

	// 4. The layers, step by step. Services must not start in the guest.
	if err := sess.WriteFile(ctx, "/usr/sbin/policy-rc.d", []byte("#!/bin/sh\n# imagectl: no services start during the build\nexit 101\n"), 0o755, "root:root"); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("preparing the guest: %w", err))
	}
	for i, l := range plan.Layers {
		ml := &m.Layers[i]
		if l.Name == layers.FinalizeLayer {
			if err := snapshot(ctx); err != nil {
				return nil, ctxErr(ctx, fmt.Errorf("reading the guest's packages: %w", err))
			}
		}
		for _, st := range l.Steps {
			start := time.Now()
			rep.emit(Event{Type: "step", Status: "start", Layer: l.Name, Kind: st.Kind(), Summary: st.Summary()})
			err := ap.apply(ctx, st)
			secs := time.Since(start).Seconds()
			if err != nil {
				err = ctxErr(ctx, fmt.Errorf("layer %s, %s step: %w", l.Name, st.Kind(), err))
				rep.emit(Event{Type: "step", Status: "failed", Layer: l.Name, Kind: st.Kind(), Summary: st.Summary(), Seconds: secs, Message: err.Error()})
				return nil, err
			}
			rep.emit(Event{Type: "step", Status: "ok", Layer: l.Name, Kind: st.Kind(), Summary: st.Summary(), Seconds: secs})
			ml.Steps = append(ml.Steps, manifest.Step{Kind: st.Kind(), Summary: st.Summary(), Seconds: secs})
		}
	}

	// 5. Pack the root filesystem, streaming: compression and sha256 in one
	// pass, no uncompressed tar on disk.
	tgzPath := filepath.Join(outDir, plan.Artifacts.Tarball)
	end = rep.phase(PhasePack, tgzPath)
	tgz, pack, err := packSession(ctx, sess, tgzPath, plan.Artifacts.CompressionLevel)
	end(err)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	defer tgz.Abort()
	closeSess()

	// 6. The deployability check on the packed tgz: findings are reported
	// and recorded in the manifest (upload refuses what has errors).
	end = rep.phase(PhaseCheck, "deployability of the tgz")
	findings, err := validate.CheckDeployable(ctx, tgz.Name(), validate.DeployOptions{KernelArgs: plan.KernelArgs, BareMetal: true})
	end(err)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	m.Deploy = []manifest.DeployFinding{}
	for _, f := range findings {
		m.Deploy = append(m.Deploy, manifest.DeployFinding{Check: f.Check, Severity: f.Severity, Message: f.Message})
		rep.log(fmt.Sprintf("deployability %s: %s: %s (fix: %s)", f.Severity, f.Check, f.Message, f.Fix))
	}

	// 7. The manifest and the validation script, then publish all three.
	end = rep.phase(PhaseManifest, plan.Artifacts.Manifest)
	m.Build.Finished = time.Now().UTC()
	m.Build.Seconds = m.Build.Finished.Sub(started).Seconds()
	m.Artifact = &manifest.Artifact{File: plan.Artifacts.Tarball, SHA256: pack.SHA256, Size: pack.Size, Compression: "gzip",
		CompressionLevel: plan.Artifacts.CompressionLevel, Entries: pack.Entries}
	res, err = publish(ctx, m, tgz, outDir, plan.Artifacts)
	end(err)
	return res, err
}

func publish(ctx context.Context, m *manifest.Manifest, tgz *atomicfile.File, outDir string, a Artifacts) (*Result, error) {
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
		Manifest:         m,
	}
	mf, err := atomicfile.Create(res.ManifestPath, 0o644)
	if err != nil {
		return nil, err
	}
	defer mf.Abort()
	sf, err := atomicfile.Create(res.ValidationScript, 0o755)
	if err != nil {
		return nil, err
	}
	defer sf.Abort()
	if _, err := mf.Write(mb); err != nil {
		return nil, err
	}
	if _, err := sf.Write(script); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The tgz goes last-but-one and the manifest last: a manifest under its
	// final name always describes a complete tgz beside it.
	if err := sf.Commit(); err != nil {
		return nil, err
	}
	if err := tgz.Commit(); err != nil {
		os.Remove(res.ValidationScript)
		return nil, err
	}
	if err := mf.Commit(); err != nil {
		os.Remove(res.ValidationScript)
		os.Remove(res.Tarball)
		return nil, err
	}
	return res, nil
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

func prepareOverlay(ctx context.Context, base, format, overlay string, size int64) error {
	absBase, err := filepath.Abs(base)
	if err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", format, "-b", absBase, overlay).CombinedOutput(); err != nil {
		return fmt.Errorf("creating the overlay: qemu-img create: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if size == 0 {
		return nil
	}
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "--output=json", overlay).Output()
	if err != nil {
		return fmt.Errorf("reading the overlay's size: %w", err)
	}
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return fmt.Errorf("reading the overlay's size: %w", err)
	}
	if size <= info.VirtualSize {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", "resize", "-q", overlay, fmt.Sprint(size)).CombinedOutput(); err != nil {
		return fmt.Errorf("growing the overlay to %d bytes: %v: %s", size, err, strings.TrimSpace(string(out)))
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
	mb := manifest.Bundle{Name: b.Name, Destination: b.Destination, Digest: b.Digest}
	for _, e := range b.Entries {
		mb.Entries = append(mb.Entries, manifest.BundleEntry{Path: e.Path, Type: e.Type, Mode: fsmode.String(e.Mode), Size: e.Size, SHA256: e.SHA256, Target: e.Target})
	}
	return mb
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
