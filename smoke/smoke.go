package smoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/internal/appliance"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/tcpport"
	"github.com/gpuaas/imagectl/manifest"
)

// Phases of a smoke run, as its events and Result.Seconds name them. The
// phases table says in which order they run.
const (
	PhaseDeploy   = "deploy"
	PhaseBoot     = "boot"
	PhaseValidate = "validate"
	// PhaseUp is Options.WhileUp's time, the VM up after the validation.
	PhaseUp = "up"
)

// Options configure a smoke run.
type Options struct {
	// Manifest is the build manifest of the tgz (default: the
	// .manifest.json beside it).
	Manifest string
	// ConsoleLog is where the serial console is kept (default: beside the
	// tgz, <name>-<version>.smoke.log).
	ConsoleLog string
	// Timeline is where the boot timeline is written as JSON, on every run
	// that booted, passed or not (default: beside the tgz,
	// <name>-<version>.smoke-timeline.json; with a ConsoleLog given, beside
	// it, its name with -timeline.json for .log).
	Timeline string
	// Profile is the deploy profile the validation checks, bare-metal or
	// slice (default: the manifest's default profile, else bare-metal).
	Profile string
	// Stage is what the validation checks, image (the host as deployed) or
	// converged (after the profile's site bootstrap, which the first boot
	// runs from user-data first) (default: the manifest's default stage,
	// else image).
	Stage string
	// WorkDir holds the scratch disk and firmware variables while the run
	// lasts (default: $TMPDIR). The disk is sparse; it needs about the
	// tgz's unpacked size.
	WorkDir string
	// Accel is auto, kvm or tcg, as for builds.
	Accel string
	// Timeout bounds the boot and the validation (default 15 minutes under
	// TCG, 5 under KVM).
	Timeout time.Duration
	// MemoryMB is the VM's memory (default 2048).
	MemoryMB int
	// DiskSize is the scratch disk's size in bytes (default 8 GiB).
	DiskSize int64
	// UpdateInitramfs rebuilds every kernel's initramfs as curtin does
	// (update-initramfs -u), which is where a DKMS module that cannot build
	// fails a deploy. It costs many minutes under TCG, so by default only a
	// missing initramfs is created (curtin's -c case).
	UpdateInitramfs bool
	// AuthorizedKeys are OpenSSH public keys (lines of a .pub file) the
	// NoCloud seed authorizes for SSHUser, who may sudo without a
	// password, as MAAS's deploy does for the node's owner.
	AuthorizedKeys []string
	// SSHUser is the login the keys are for (default ubuntu, as on MAAS's
	// Ubuntu deploys).
	SSHUser string
	// SSHPort is the port on 127.0.0.1 QEMU forwards to the guest's port
	// 22 (default, with AuthorizedKeys or WhileUp: a free one).
	SSHPort int
	// WhileUp, when set, is called once the validation has run (passed
	// or not) with the VM still up, and where it answers ssh; the VM's
	// power button is pressed when it returns, and its error is Run's.
	// Its ctx is cancelled should the VM stop first.
	WhileUp func(ctx context.Context, ssh SSH) error
	// Events receives progress; nil discards it.
	Events func(event.Event)
}

// Line is one result line of the validation script.
type Line struct {
	Status string `json:"status"`
	Check  string `json:"check"`
	Detail string `json:"detail"`
	// Remediation is what to do about a FAIL, when the script says.
	Remediation string `json:"remediation,omitempty"`
}

// Bootstrap is the site bootstrap a stage converged run ran at first boot.
type Bootstrap struct {
	Bundle string `json:"bundle"`
	// Entrypoint is the path it ran, in the image.
	Entrypoint string `json:"entrypoint"`
	// Log is where its output went in the guest (it was on the console
	// too, each line after IMAGECTL_BOOTSTRAP).
	Log string `json:"log"`
	// Exit is its exit status; nil when it did not finish before the
	// validation.
	Exit *int `json:"exit,omitempty"`
	// Seconds is how long it ran, by the guest's clock.
	Seconds float64 `json:"seconds"`
	// tail is the last lines of its output, for a failure.
	tail []string
}

// Result is what a smoke run saw.
type Result struct {
	Artifact    string `json:"artifact"`
	Image       string `json:"image"`
	Version     string `json:"version"`
	Accelerator string `json:"accelerator"`
	ConsoleLog  string `json:"console_log"`
	// Profile and Stage are what the validation checked.
	Profile string `json:"profile"`
	Stage   string `json:"stage"`
	// Bootstrap is the site bootstrap that ran first, at stage converged
	// when the profile names one.
	Bootstrap *Bootstrap `json:"bootstrap,omitempty"`
	// ManifestMatches is false when the tgz's sha256 is not the one its
	// manifest records (which fails the run: the result would not be about
	// the artifact the manifest describes).
	ManifestMatches bool `json:"manifest_matches"`
	manifestChecked bool
	// ValidateExit is the validation script's exit status, when it ran to
	// the end; a script that died after some PASS lines fails the run.
	ValidateExit *int `json:"validate_exit,omitempty"`
	// KernelCmdline is the command line the booted kernel reported.
	KernelCmdline string `json:"kernel_cmdline,omitempty"`
	// SystemState is `systemctl is-system-running --wait` once the boot
	// reached multi-user.target ("running" is a clean boot).
	SystemState string   `json:"system_state,omitempty"`
	FailedUnits []string `json:"failed_units,omitempty"`
	// FailedUnitsBeforeReboot are the units that had failed in the first
	// boot of the first-boot path, before its reboot: they fail the run
	// as they would on the baked path.
	FailedUnitsBeforeReboot []string `json:"failed_units_before_reboot,omitempty"`
	Lines                   []Line   `json:"lines"`
	Failures                int      `json:"failures"`
	Warnings                int      `json:"warnings"`
	// Seconds per phase (deploy, boot, validate, up).
	Seconds map[string]float64 `json:"seconds"`
	// MemoryMB is the VM's memory the run used.
	MemoryMB int `json:"memory_mb"`
	// ArtifactSHA256 is the deployed tgz's sha256 ("sha256:<hex>"),
	// hashed as it was extracted: the bytes this run booted.
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	// ReceivedBytes is what the guest's network interfaces (all but lo)
	// received up to the validation's end, over every boot of the run, as
	// the smoke script read their rx_bytes; nil when it did not report.
	ReceivedBytes *int64 `json:"received_bytes,omitempty"`
	// SSH is where the VM answered ssh, when a port was forwarded.
	SSH *SSH `json:"ssh,omitempty"`
	// Timeline is the first boot's milestones, when it booted; it is
	// written to TimelineFile too.
	Timeline     *Timeline `json:"timeline,omitempty"`
	TimelineFile string    `json:"timeline_file,omitempty"`
	// FirstBoot is what the first-boot path of a comparison saw of the
	// first-boot script (nil on a smoke run of a tgz).
	FirstBoot *FirstBoot `json:"first_boot,omitempty"`
	// summary is the validation script's summary line, when it came.
	summary  *summary
	observed observations
}

// summary is what the run checks of the validation script's summary line.
type summary struct {
	profile, stage string
	checks         int
}

// Passed reports whether the image booted cleanly, any bootstrap
// succeeded, and every check passed or warned.
func (r *Result) Passed() bool { return r.Failure() == "" }

// Failure explains why a run did not pass ("" when it did).
func (r *Result) Failure() string {
	var why []string
	if s := r.FirstBoot.failure(); s != "" {
		why = append(why, s)
	}
	if s := r.bootstrapFailure(); s != "" {
		why = append(why, s)
	}
	if len(r.FailedUnitsBeforeReboot) > 0 {
		why = append(why, "units failed in the boot before the reboot: "+strings.Join(r.FailedUnitsBeforeReboot, ", "))
	}
	if r.SystemState != "running" {
		s := "the boot reached multi-user.target but the system is " + r.SystemState
		if len(r.FailedUnits) > 0 {
			s += " (failed units: " + strings.Join(r.FailedUnits, ", ") + ")"
		}
		why = append(why, s)
	}
	if len(r.Lines) == 0 {
		why = append(why, "the validation script reported no checks")
	}
	switch {
	case r.ValidateExit == nil:
		why = append(why, "the validation script did not run to its end")
	case *r.ValidateExit != 0 && r.Failures == 0:
		why = append(why, fmt.Sprintf("the validation script exited %d", *r.ValidateExit))
	}
	if s := r.summaryMismatch(); s != "" {
		why = append(why, s)
	}
	if r.Timeline != nil {
		if s := r.Timeline.validatedOutOfOrder(); s != "" {
			why = append(why, s)
		}
	}
	if r.manifestChecked && !r.ManifestMatches {
		why = append(why, "the tgz is not the artifact its manifest describes (sha256 differs)")
	}
	var failed []string
	for _, l := range r.Lines {
		if l.Status == "FAIL" {
			failed = append(failed, l.Check+" ("+l.Detail+")")
		}
	}
	if len(failed) > 0 {
		why = append(why, fmt.Sprintf("%d validation check(s) failed: %s", len(failed), strings.Join(failed, "; ")))
	}
	return strings.Join(why, "; ")
}

// FirstBoot is what the first-boot path saw of the first-boot script: its
// console lines (the result line and the times), and the reboot the path
// made when the script required one.
type FirstBoot struct {
	firstboot.Console
	// Rebooted: the VM rebooted once after the script, which required it,
	// and the validation ran in the second boot.
	Rebooted bool `json:"rebooted"`
}

// failure says why the first-boot script did not do its part ("" when it
// did, or on a run without one).
func (f *FirstBoot) failure() string {
	if f == nil {
		return ""
	}
	if s := f.Failure(); s != "" {
		return s
	}
	if f.RebootRequired && !f.Rebooted {
		return "the first-boot script requires a reboot (reboot_required=yes) and the VM did not reboot before the validation"
	}
	return ""
}

// bootstrapFailure names a bootstrap that failed or never finished.
func (r *Result) bootstrapFailure() string {
	b := r.Bootstrap
	if b == nil {
		return ""
	}
	what := fmt.Sprintf("the site bootstrap %s (%s)", b.Bundle, b.Entrypoint)
	if b.Exit == nil {
		return what + " did not finish before the boot settled: cloud-init did not run the user-data's runcmd"
	}
	if *b.Exit == 0 {
		return ""
	}
	s := fmt.Sprintf("%s exited %d after %.1fs", what, *b.Exit, b.Seconds)
	if len(b.tail) > 0 {
		s += "; its last output: " + strings.Join(b.tail, " | ")
	}
	return s
}

// summaryMismatch is set when the validation script's summary disagrees
// with the run: another profile or stage checked, results lost on the way.
func (r *Result) summaryMismatch() string {
	s := r.summary
	if s == nil {
		return ""
	}
	if (s.profile != "" && s.profile != r.Profile) || (s.stage != "" && s.stage != r.Stage) {
		return fmt.Sprintf("the validation script checked profile %s at stage %s, not %s at %s", s.profile, s.stage, r.Profile, r.Stage)
	}
	if s.checks != len(r.Lines) {
		return fmt.Sprintf("the validation script reported %d checks but %d reached the console", s.checks, len(r.Lines))
	}
	return ""
}

// ErrFailed is wrapped by Run's error when the image deployed and booted
// but did not pass: a failed check, a degraded boot.
var ErrFailed = errors.New("smoke test failed")

// Run deploys the tgz onto a scratch disk as curtin would, boots it under
// UEFI, and collects the validation script's results, phase by phase
// (phases), once the manifest, the profile and stage, the firmware and the
// accelerator are known to be usable. It returns the result with an error
// wrapping ErrFailed when the image did not pass, or another error (with
// what the run saw so far) when the deploy or the boot failed or timed
// out. The scratch disk and QEMU are gone when it returns, cancelled or
// not; the console log stays.
func Run(ctx context.Context, tgz string, opts Options) (*Result, error) {
	sr, err := newRun(ctx, tgz, opts, nil)
	if err != nil {
		return nil, err
	}
	return sr.execute(ctx)
}

// outputFiles is o with its console log and timeline defaults filled in:
// beside the tgz (files), the timeline beside a console log given.
func (o Options) outputFiles(files manifest.Files) Options {
	if o.Timeline == "" {
		o.Timeline = files.SmokeTimeline
		if o.ConsoleLog != "" {
			o.Timeline = strings.TrimSuffix(o.ConsoleLog, ".log") + "-timeline.json"
		}
	}
	if o.ConsoleLog == "" {
		o.ConsoleLog = files.SmokeLog
	}
	return o
}

// firstBootSource is what the first-boot path of a comparison boots
// instead of the tgz: the base image's root filesystem packed into a tgz
// (deployed as the tgz would be), with the first-boot script in the seed.
type firstBootSource struct {
	base   string // the base image, as the result names it
	tgz    string // its root filesystem, packed
	script firstboot.Result
}

// newRun checks what a run needs and prepares it: the manifest, the
// profile and stage, the firmware and the accelerator, the scratch
// directory. With fb, it deploys fb's tgz and seeds the first-boot script,
// the tgz standing for the build the manifest describes.
func newRun(ctx context.Context, tgz string, opts Options, fb *firstBootSource) (*run, error) {
	files := manifest.FilesBeside(tgz)
	if opts.Manifest == "" {
		opts.Manifest = files.Manifest
	}
	opts = opts.outputFiles(files)
	if opts.MemoryMB == 0 {
		opts.MemoryMB = 2048
	}
	if opts.DiskSize == 0 {
		opts.DiskSize = 8 << 30
	}
	r := event.Reporter(opts.Events)
	disk := tgz
	if fb != nil {
		disk = fb.tgz
	}
	if st, err := os.Stat(disk); err != nil {
		return nil, fmt.Errorf("smoke test of %s: %w", tgz, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("smoke test of %s: not a regular file", disk)
	}
	m, err := manifest.Read(opts.Manifest)
	if err != nil {
		return nil, fmt.Errorf("smoke test of %s: the manifest: %w", tgz, err)
	}
	if m.Validation.Script == "" {
		return nil, fmt.Errorf("smoke test of %s: manifest %s names no validation script", tgz, opts.Manifest)
	}
	plan, err := planGuest(m, opts.Profile, opts.Stage)
	if err != nil {
		return nil, fmt.Errorf("smoke test of %s: %w", tgz, err)
	}
	if opts.SSHUser == "" {
		opts.SSHUser = DefaultSSHUser
	}
	if err := checkLogin(opts.SSHUser, opts.AuthorizedKeys); err != nil {
		return nil, fmt.Errorf("smoke test of %s: %w", tgz, err)
	}
	if len(opts.AuthorizedKeys) > 0 {
		plan.login = &guestLogin{user: opts.SSHUser, keys: opts.AuthorizedKeys}
	}
	plan.keepUp = opts.WhileUp != nil
	if fb != nil {
		plan.firstBoot = &fb.script
	}
	if opts.SSHPort < 0 || opts.SSHPort > 65535 {
		return nil, fmt.Errorf("smoke test of %s: ssh port %d: not a TCP port", tgz, opts.SSHPort)
	}
	var portHold io.Closer
	made := false
	if opts.SSHPort == 0 && (plan.login != nil || plan.keepUp) {
		// Held until QEMU starts (bootConfig.portHold): the deploy before
		// the boot takes minutes under TCG, and a port merely found free
		// now could be another process's by then. Until QEMU forwards it,
		// a connection to it is refused. Closed when QEMU starts (or by
		// the run's close), else here.
		if portHold, opts.SSHPort, err = tcpport.Reserve(); err != nil {
			return nil, fmt.Errorf("smoke test of %s: the port for ssh: %w", tgz, err)
		}
		defer func() {
			if !made {
				portHold.Close()
			}
		}()
	}
	if err := canDeploy(); err != nil {
		return nil, err
	}
	fw, err := findFirmware()
	if err != nil {
		return nil, err
	}
	accel, err := appliance.Accelerator(ctx, opts.Accel, r.Log)
	if err != nil {
		return nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Minute
		if accel == "tcg" {
			opts.Timeout = 15 * time.Minute
		}
		if fb != nil {
			// The first boot installs what the image has baked in, and
			// may reboot.
			opts.Timeout *= 2
		}
	}
	res := &Result{Artifact: tgz, Image: m.Image.Name, Version: m.Image.Version, Accelerator: accel,
		ConsoleLog: opts.ConsoleLog, Profile: plan.profile, Stage: plan.stage, Seconds: map[string]float64{}, MemoryMB: opts.MemoryMB}
	if fb != nil {
		res.Artifact, res.FirstBoot = fb.base, &FirstBoot{}
		r.Log("the first-boot path: " + fb.base + " with the first-boot script in its user-data, rebooted once when the script requires it")
	}
	if opts.SSHPort != 0 {
		res.SSH = &SSH{Host: "127.0.0.1", Port: opts.SSHPort, User: opts.SSHUser}
		r.Log(fmt.Sprintf("ssh -p %d %s@127.0.0.1 reaches the VM once it has booted", opts.SSHPort, opts.SSHUser))
	}
	if b := plan.bootstrap; b != nil {
		res.Bootstrap = &Bootstrap{Bundle: b.bundle, Entrypoint: b.entrypoint, Log: defaultGuestPaths.log}
		r.Log(fmt.Sprintf("stage %s: the first boot runs the site bootstrap %s from user-data before the validation", plan.stage, b.entrypoint))
	} else if plan.stage == manifest.StageConverged {
		r.Log("stage converged: profile " + plan.profile + " names no bootstrap bundle, so the converged checks run on the host as deployed")
	}

	work, err := os.MkdirTemp(opts.WorkDir, "imagectl-smoke-")
	if err != nil {
		return nil, fmt.Errorf("smoke test of %s: scratch directory: %w", tgz, err)
	}
	sr := &run{tgz: disk, opts: opts, rep: r, m: m, guest: plan, res: res, boot: bootConfig{
		disk: filepath.Join(work, "disk.raw"), work: work, firmware: fw, accel: accel, memoryMB: opts.MemoryMB,
		timeout: opts.Timeout, reporter: r, sshPort: opts.SSHPort, portHold: portHold, reboot: fb != nil,
	}}
	if plan.keepUp {
		// A unix socket's path holds at most 107 bytes: the monitor's
		// goes in a directory of its own under $TMPDIR when the work
		// directory is deeper.
		if sr.boot.monitor = filepath.Join(work, "qmp.sock"); len(sr.boot.monitor) > 107 {
			dir, err := os.MkdirTemp("", "imagectl-qmp-")
			if err != nil {
				os.RemoveAll(work)
				return nil, fmt.Errorf("smoke test of %s: a directory for QEMU's monitor socket: %w", tgz, err)
			}
			sr.monitorDir, sr.boot.monitor = dir, filepath.Join(dir, "qmp.sock")
		}
	}
	made = true
	return sr, nil
}

// execute runs the phases, writes the timeline of a run that booted, and
// ends what the phases started.
func (sr *run) execute(ctx context.Context) (*Result, error) {
	res, opts, r := sr.res, sr.opts, sr.rep
	defer sr.close()
	err := sr.do(ctx, phases)
	if !res.observed.qemuStarted.IsZero() {
		res.Timeline = newTimeline(res, err == nil && res.Passed())
		if werr := writeJSON(opts.Timeline, res.Timeline); werr != nil {
			r.Log("keeping the boot timeline: " + werr.Error())
		} else {
			res.TimelineFile = opts.Timeline
		}
	}
	if err != nil {
		return res, err
	}
	if why := res.Failure(); why != "" {
		return res, fmt.Errorf("%w: %s: %s", ErrFailed, res.Artifact, why)
	}
	return res, nil
}

// run is one smoke run: what its phases read and fill, in order.
type run struct {
	tgz   string
	opts  Options
	rep   event.Reporter
	m     *manifest.Manifest
	guest guestPlan
	boot  bootConfig
	res   *Result

	dep     *deployed
	console *atomicfile.File
	vm      *vm
	// monitorDir holds QEMU's monitor socket when the work directory is
	// too deep for it.
	monitorDir string
}

// close ends what the phases started, on every path: QEMU, the console
// log (kept: it is what explains a failure), the scratch directory.
func (r *run) close() {
	if r.vm != nil {
		r.vm.stop()
	}
	if r.boot.portHold != nil {
		r.boot.portHold.Close()
	}
	if r.console != nil {
		if err := r.console.Commit(); err != nil {
			r.rep.Log("keeping the console log: " + err.Error())
		}
	}
	os.RemoveAll(r.boot.work)
	if r.monitorDir != "" {
		os.RemoveAll(r.monitorDir)
	}
}

// phase is one part of a smoke run. A phase with a name is reported as
// that phase's events (start, then ok or failed, with its summary) and
// timed in the result's Seconds; one without reports nothing of its own.
type phase struct {
	name    string
	summary func(r *run) string
	// skip leaves the phase out, events and all.
	skip func(r *run) bool
	run  func(r *run, ctx context.Context) error
	// wrap, when set, is what the run returns for the phase's error; its
	// failed event states the error as it is.
	wrap func(r *run, err error) error
}

// phases are a smoke run, in order.
var phases = []phase{
	// The tgz laid onto a scratch disk as curtin lays it, hashed as it is
	// read.
	{name: PhaseDeploy, summary: func(r *run) string {
		return "lay " + filepath.Base(r.tgz) + " onto a scratch disk as curtin does (GPT, ESP, ext4 root, GRUB for UEFI)"
	}, run: (*run).deploy, wrap: func(r *run, err error) error { return fmt.Errorf("deploying %s: %w", r.tgz, err) }},
	// The tgz deployed against the one its manifest describes (not on the
	// first-boot path, which deploys the base image).
	{run: (*run).checkManifest, skip: func(r *run) bool { return r.guest.firstBoot != nil }},
	// What the boot needs before QEMU starts: the console log and the VM.
	{run: (*run).prepareBoot},
	// QEMU, until the console shows multi-user.target.
	{name: PhaseBoot, summary: func(r *run) string {
		return "UEFI boot of the scratch disk under " + strings.ToUpper(r.boot.accel) + " to multi-user.target"
	}, run: (*run).startBoot},
	// The boot settling and the validation script, until the smoke script
	// says it is done; left out when it said so before multi-user.target.
	{name: PhaseValidate, summary: func(*run) string {
		return "wait for the boot to settle, run the image's validation script"
	}, skip: func(r *run) bool { return !r.vm.multiUser }, run: (*run).validate},
	// The VM kept up for Options.WhileUp.
	{name: PhaseUp, summary: func(r *run) string {
		return "keep the VM up, ssh at " + r.res.SSH.Address() + ", for the caller's checks"
	}, skip: func(r *run) bool { return r.opts.WhileUp == nil }, run: (*run).whileUp},
	// The VM powering off, or stopped when it does not.
	{run: (*run).powerOff},
}

// do runs phases in order until one fails.
func (r *run) do(ctx context.Context, phases []phase) error {
	for _, ph := range phases {
		if ph.skip != nil && ph.skip(r) {
			continue
		}
		if ph.name == "" {
			if err := ph.run(r, ctx); err != nil {
				return err
			}
			continue
		}
		end := r.rep.Phase(ph.name, ph.summary(r))
		start := time.Now()
		err := ph.run(r, ctx)
		r.res.Seconds[ph.name] = time.Since(start).Seconds()
		end(err)
		if err != nil {
			if ph.wrap != nil {
				err = ph.wrap(r, err)
			}
			return err
		}
	}
	return nil
}

func (r *run) deploy(ctx context.Context) error {
	r.guest.emulated = r.boot.accel == "tcg"
	if r.guest.emulated {
		r.rep.Log("under TCG: netplan's Open vSwitch units get 5 min to start instead of their 10 s (" + emulatedAllowance + ")")
	}
	var err error
	r.dep, err = deploy(ctx, r.tgz, r.boot.disk, deployConfig{
		accel: r.boot.accel, size: r.opts.DiskSize, guest: r.guest, initramfs: r.opts.UpdateInitramfs, log: r.rep.Log,
	})
	if err == nil {
		r.res.ArtifactSHA256 = r.dep.tgz.String()
	}
	return err
}

func (r *run) checkManifest(context.Context) error {
	res, a := r.res, r.m.Artifact
	if a == nil {
		return nil
	}
	res.ManifestMatches, res.manifestChecked = r.dep.tgz.Matches(a.SHA256), true
	if !res.ManifestMatches {
		r.rep.Log(fmt.Sprintf("the tgz's sha256 %s is not the %s its manifest records: smoking it anyway", r.dep.tgz.Hex(), a.SHA256))
	}
	return nil
}

func (r *run) prepareBoot(context.Context) error {
	var err error
	if r.console, err = atomicfile.Create(r.opts.ConsoleLog, consoleLogMode(r.guest)); err != nil {
		return fmt.Errorf("console log: %w", err)
	}
	r.boot.console = r.console
	if r.vm, err = newVM(r.boot, r.res); err != nil {
		return err
	}
	r.vm.keepUp = r.guest.keepUp
	return nil
}

// consoleLogMode is the console log's mode: the first-boot path's carries
// the script's whole output (apt's, its commands', the bootstrap's), so it
// is the owner's alone when the script holds a sensitive value.
func consoleLogMode(p guestPlan) os.FileMode {
	if fb := p.firstBoot; fb != nil && fb.Sensitive {
		return 0o600
	}
	return 0o644
}

func (r *run) startBoot(ctx context.Context) error {
	if err := r.vm.start(); err != nil {
		return err
	}
	return r.vm.follow(ctx, func() bool { return r.vm.multiUser || r.vm.done() })
}

func (r *run) validate(ctx context.Context) error { return r.vm.follow(ctx, r.vm.done) }

// whileUp calls Options.WhileUp while the console is still read (a
// console nobody reads would stall the guest), until it returns or the VM
// stops.
func (r *run) whileUp(ctx context.Context) error {
	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	returned := make(chan struct{})
	var upErr error
	go func() {
		defer close(returned)
		upErr = r.opts.WhileUp(upCtx, *r.res.SSH)
	}()
	r.vm.wake = returned
	err := r.vm.follow(ctx, func() bool {
		select {
		case <-returned:
			return true
		default:
			return r.vm.reaped
		}
	})
	cancel()
	<-returned
	r.vm.wake = nil
	switch {
	case err != nil:
		return err
	case r.vm.reaped:
		return fmt.Errorf("the VM stopped while it was to stay up (console log %s); the caller's checks: %v", r.res.ConsoleLog, upErr)
	case upErr != nil:
		return fmt.Errorf("while the VM was up: %w", upErr)
	}
	return nil
}

func (r *run) powerOff(ctx context.Context) error {
	if r.guest.keepUp {
		r.vm.pressPowerButton(ctx)
	}
	return r.vm.follow(ctx, nil)
}

// deployConfig is what the deploy needs besides the tgz and the disk.
type deployConfig struct {
	accel string
	size  int64
	guest guestPlan
	// initramfs: update every existing initramfs, not only create missing ones
	initramfs bool
	log       func(string)
}

// deployed is what the deploy learned.
type deployed struct {
	tgz         digest.Digest // of the tgz, hashed as it was extracted
	kernelLines []string      // the linux lines of the generated grub.cfg
}
