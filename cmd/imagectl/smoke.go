package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/smoke"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storeopen"
)

type smokeFlags struct {
	opts           smoke.Options
	store          storeFlags
	output         outputFlag
	baseline       string
	authorizedKeys []string
	// compare is --compare-first-boot's recipe; recipe its variables.
	compare string
	// pairs is --pairs: how many times both paths run.
	pairs  int
	recipe recipeFlags
}

// maxPublicKeys bounds an --authorized-key file: a few OpenSSH public
// keys, a line each.
const maxPublicKeys = 64 << 10

func newSmokeCmd(env []string) *cobra.Command {
	cmd, f := command(env, runSmoke, &cobra.Command{
		Use:   "smoke (ARTIFACT.tgz | IMAGE VERSION)",
		Short: "Deploy a tgz the way MAAS/curtin does, boot it under UEFI and run its validation",
		Long: `Smoke proves on the build machine that an artifact deploys, boots and passes
its own validation, before anyone uploads it.

It lays the tgz onto a scratch disk in one libguestfs appliance as curtin lays
a tgz custom image onto a node with MAAS's flat UEFI layout (GPT, 512 MiB ESP
on /boot/efi, ext4 root; curtin's tar flags; fstab by UUID; a missing initramfs
created (every one rebuilt with --update-initramfs);
GRUB installed for UEFI from inside the image with update-grub, so the
recipe's kernel args reach the kernel command line; a NoCloud seed in place of
MAAS's metadata), boots it in QEMU with OVMF (KVM when usable, else TCG), and
on first boot runs the baked validation script named by the manifest beside
the tgz, reading its lines from the serial console.

The validation checks one profile (--profile bare-metal or slice) at one stage
(--stage image: the host as deployed; converged: after the site bootstrap),
by default the manifest's. At stage converged, when the profile names a
bootstrap bundle, the first boot runs its entrypoint from the NoCloud
user-data's runcmd, as MAAS deploy user-data would, before the validation.

It prints every line (a FAIL with its remediation) and exits 1 on any FAIL, on
a bootstrap that fails, on a boot that does not reach multi-user.target or
settles degraded (the failed units are named), or on a timeout. The console
log is kept beside the tgz (<name>-<version>.smoke.log), and beside it the
boot timeline (<name>-<version>.smoke-timeline.json): when each milestone of
the first boot came, in seconds since QEMU started, from the console and the
guest's systemd. --baseline compares it with an earlier run's. The scratch
disk and QEMU are removed on every path, Ctrl-C included.

Given IMAGE VERSION it smoke-tests that version from the store (--store),
fetching its tgz from a registry into the local cache, verified, when it is
remote; the console log and timeline then go to the current directory.

--compare-first-boot RECIPE measures what baking saved: after the tgz (the
baked path) it boots the recipe's base image (resolved and verified as a build
resolves it) deployed the same way, with the recipe's first-boot script (imagectl
firstboot, installing the build's validation script and marker) in its NoCloud
user-data followed by the same site bootstrap, under the same accelerator,
memory, disk, network, profile and stage (the first-boot path). When the
script says a reboot is required (kernel args) the VM reboots once and
validates in the second boot. It prints both timelines milestone by milestone,
each path's time to validated (validation-done) and their ratio, and the bytes
the first boot downloaded; a path that fails is reported as a failure, with
why, never as a time, and the command exits 1. The recipe takes the variables
the build took (--var, --var-file, --root). The result is written beside the
tgz as <name>-<version>.smoke-compare.json, with the first-boot path's console
log and timeline (<name>-<version>.smoke-first-boot.log,
<name>-<version>.smoke-first-boot-timeline.json). See docs/smoke.md.

--authorized-key puts the keys of an OpenSSH public key file into the NoCloud
seed for the login --ssh-user (ubuntu by default; sudo without a password, as
MAAS's deploy gives the node's owner), and QEMU forwards a loopback port
(--ssh-port, else a free one, printed) to the guest's ssh: a boot that hangs
can be looked into while it runs.`,
		Example: `  imagectl smoke artifacts/imagectl-demo-0.1.0.tgz
  imagectl smoke artifacts/x-1.4.0.tgz --timeout 30m --output json
  imagectl smoke artifacts/x-1.5.0.tgz --profile slice --stage converged \
      --baseline artifacts/x-1.4.0.smoke-timeline.json
  imagectl smoke gpuaas-h200-host 20261123.1 --store oci://registry.example.com/imagectl
  imagectl smoke artifacts/imagectl-demo-0.1.0.tgz --compare-first-boot examples/demo.hcl --var-file base.vars.hcl`,
		Args: cobra.RangeArgs(1, 2),
	})
	f.output = outputFlag{note: "one JSON event per line, then the result"}
	f.store.registerVersions(cmd, "the image store IMAGE VERSION is in: a directory or "+storeopen.Scheme+"REGISTRY/PREFIX (default: $IMAGECTL_STORE, else ./"+store.DefaultDir+")")
	cmd.Flags().StringVar(&f.opts.Manifest, "manifest", "", "the build manifest (default: the .manifest.json beside the tgz)")
	cmd.Flags().StringVar(&f.opts.ConsoleLog, "console-log", "", "where to keep the serial console (default: <name>-<version>.smoke.log beside the tgz)")
	cmd.Flags().StringVar(&f.opts.Timeline, "timeline", "", "where to write the boot timeline JSON (default: <name>-<version>.smoke-timeline.json beside the console log)")
	cmd.Flags().StringVar(&f.baseline, "baseline", "", "an earlier run's timeline JSON to compare this boot's milestones with")
	cmd.Flags().StringVar(&f.opts.Profile, "profile", "", "the deploy profile to validate: bare-metal or slice (default: the manifest's, else bare-metal)")
	cmd.Flags().StringVar(&f.opts.Stage, "stage", "", "the stage to validate: image, or converged to run the profile's site bootstrap first (default: the manifest's, else image)")
	cmd.Flags().StringVar(&f.opts.WorkDir, "work-dir", "", "where the scratch disk goes while the test runs, sparse, up to the unpacked image's size (default: $TMPDIR)")
	cmd.Flags().StringVar(&f.opts.Accel, "accel", "auto", "accelerator for the appliance and the VM: auto (KVM when it works, else TCG), kvm or tcg")
	cmd.Flags().DurationVar(&f.opts.Timeout, "timeout", 0, "limit for the boot and the validation (default 15m under TCG, 5m under KVM)")
	cmd.Flags().IntVar(&f.opts.MemoryMB, "memory", 2048, "the VM's memory in MiB")
	cmd.Flags().StringArrayVar(&f.authorizedKeys, "authorized-key", nil, "an OpenSSH public key file (.pub, one key a line) whose keys may log in to the VM as --ssh-user; repeat it for several")
	cmd.Flags().StringVar(&f.opts.SSHUser, "ssh-user", smoke.DefaultSSHUser, "the login the authorized keys are for, with sudo without a password")
	cmd.Flags().IntVar(&f.opts.SSHPort, "ssh-port", 0, "the port on 127.0.0.1 forwarded to the VM's ssh (default, with --authorized-key: a free one)")
	cmd.Flags().IntVar(&f.pairs, "pairs", 1, "with --compare-first-boot: run both paths this many times, the order alternating, and report each pair's ratio, the median and the spread")
	cmd.Flags().StringVar(&f.compare, "compare-first-boot", "", "also boot the base image of this recipe (the tgz's) with its first-boot script, and compare the two paths' times to validated")
	f.recipe.registerInputs(cmd)
	cmd.Flags().BoolVar(&f.opts.UpdateInitramfs, "update-initramfs", false, "rebuild every initramfs as curtin does, which catches DKMS modules that fail to build (slow under TCG; a missing initramfs is always created)")
	f.output.register(cmd)
	return cmd
}

func runSmoke(ctx context.Context, f *smokeFlags, args []string, s streams, env []string) error {
	if err := f.output.check(); err != nil {
		return err
	}
	opts := f.opts
	if opts.Timeout < 0 {
		return fmt.Errorf("--timeout must not be negative")
	}
	if err := smoke.CheckProfileStage(opts.Profile, opts.Stage); err != nil {
		return fmt.Errorf("--profile/--stage: %w", err)
	}
	for _, path := range f.authorizedKeys {
		b, err := readlimit.File(path, maxPublicKeys)
		if err != nil {
			return fmt.Errorf("--authorized-key: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				opts.AuthorizedKeys = append(opts.AuthorizedKeys, line)
			}
		}
	}
	if f.compare == "" && (len(f.recipe.vars) > 0 || len(f.recipe.varFiles) > 0 || len(f.recipe.roots) > 0) {
		return fmt.Errorf("--var, --var-file and --root are the recipe's of --compare-first-boot, which is not given")
	}
	if f.pairs < 1 || (f.pairs > 1 && f.compare == "") {
		return fmt.Errorf("--pairs %d: give a count of 1 or more, with --compare-first-boot", f.pairs)
	}
	if f.compare != "" && f.baseline != "" {
		return fmt.Errorf("--baseline compares one timeline with an earlier run's; --compare-first-boot compares two of its own: give one of them")
	}
	var base *smoke.Timeline
	if f.baseline != "" {
		var err error
		if base, err = smoke.ReadTimeline(f.baseline); err != nil {
			return fmt.Errorf("--baseline: %w", err)
		}
	}
	opts.Events = progress(s.err, false, isTerminal(s.err, env))
	if f.output.json() {
		opts.Events = progress(s.out, true, false)
	}
	tgz, mpath, ver, err := f.store.artifact(ctx, env, args, opts.Manifest)
	if err != nil {
		return err
	}
	opts.Manifest = mpath
	if ver != nil && opts.ConsoleLog == "" {
		// Not beside the tgz: a store's versions are immutable.
		opts.ConsoleLog = manifest.FilesFor(ver.Image, ver.Version).SmokeLog
	}
	if f.compare != "" {
		return runSmokeCompare(ctx, f, opts, tgz, ver, s, env)
	}
	res, err := smoke.Run(ctx, tgz, opts)
	if res == nil {
		return err
	}
	if f.output.json() {
		v := smokeResult(err, "result", res)
		if base != nil && res.Timeline != nil {
			v["baseline"] = map[string]any{"file": f.baseline, "milestones": smoke.CompareTimelines(base, res.Timeline)}
		}
		if jerr := json.NewEncoder(s.out).Encode(v); jerr != nil {
			return jerr
		}
	} else if _, booted := res.Seconds[smoke.PhaseBoot]; booted {
		printSmoke(s.out, res)
		if res.Timeline != nil {
			printTimeline(s.out, res.Timeline, base, f.baseline)
		}
		printFiles(s.out, res)
	}
	if errors.Is(err, smoke.ErrFailed) {
		return failWith(s.err, 1, err)
	}
	return err
}

// smokeResult is the last line --output json prints for a smoke test or
// a comparison: whether it passed, the error that failed it (redacted),
// and what it found under key.
func smokeResult(err error, key string, found any) map[string]any {
	v := map[string]any{"type": "result", "passed": err == nil, key: found}
	if err != nil {
		v["error"] = redact.Text(err.Error())
	}
	return v
}

func printSmoke(w io.Writer, r *smoke.Result) {
	for _, l := range r.Lines {
		textsafe.Fprintf(w, "%-4s %s: %s\n", l.Status, l.Check, l.Detail)
		if l.Status == "FAIL" && l.Remediation != "" {
			fmt.Fprintf(w, "     remediation: %s\n", strings.ReplaceAll(textsafe.Escape(l.Remediation, "\n"), "\n", "\n                  "))
		}
	}
	textsafe.Fprintf(w, "profile %s, stage %s\n", r.Profile, r.Stage)
	if b := r.Bootstrap; b != nil {
		textsafe.Fprintf(w, "site bootstrap %s (%s): ", b.Bundle, b.Entrypoint)
		if b.Exit == nil {
			fmt.Fprintln(w, "did not finish")
		} else {
			fmt.Fprintf(w, "exit %d after %s\n", *b.Exit, time.Duration(b.Seconds*float64(time.Second)).Round(100*time.Millisecond))
		}
	}
	if r.SystemState != "" {
		textsafe.Fprintf(w, "boot: system %s", r.SystemState)
		for i, u := range r.FailedUnits {
			if i == 0 {
				fmt.Fprint(w, ", failed units:")
			}
			textsafe.Fprintf(w, " %s", u)
		}
		fmt.Fprintln(w)
	}
	if r.KernelCmdline != "" {
		textsafe.Fprintf(w, "kernel command line: %s\n", r.KernelCmdline)
	}
	total := 0.0
	for _, s := range r.Seconds {
		total += s
	}
	fmt.Fprintf(w, "%d checks, %d failed, %d warnings; %s under %s (deploy %s, boot %s, validate %s)\n",
		len(r.Lines), r.Failures, r.Warnings, secs(total), r.Accelerator, secs(r.Seconds[smoke.PhaseDeploy]),
		secs(r.Seconds[smoke.PhaseBoot]), secs(r.Seconds[smoke.PhaseValidate]))
}

// printTimeline prints the boot's milestones in seconds since QEMU started,
// with the time since the previous one, and, given a baseline, the
// baseline's time and the change.
func printTimeline(w io.Writer, t *smoke.Timeline, base *smoke.Timeline, baseFile string) {
	fmt.Fprintln(w, "boot timeline (seconds since QEMU started):")
	row := func(cols ...string) {
		s := fmt.Sprintf("  %-18s %8s %8s  %-8s", cols[0], cols[1], cols[2], cols[3])
		for _, c := range cols[4:] {
			s += fmt.Sprintf(" %8s", c)
		}
		fmt.Fprintln(w, strings.TrimRight(s, " "))
	}
	if base == nil {
		row("milestone", "at", "delta", "source")
		for _, m := range t.Milestones {
			row(m.Name, fmt.Sprintf("%.1f", m.Seconds), fmt.Sprintf("%+.1f", m.Delta), m.Source)
		}
	} else {
		row("milestone", "at", "delta", "source", "baseline", "change")
		for _, c := range smoke.CompareTimelines(base, t) {
			at, delta, source := "-", "-", ""
			if m := t.Find(c.Name); m != nil {
				at, delta, source = fmt.Sprintf("%.1f", m.Seconds), fmt.Sprintf("%+.1f", m.Delta), m.Source
			}
			row(c.Name, at, delta, source, num(c.Baseline, "%.1f"), num(c.Change, "%+.1f"))
		}
	}
	if len(t.Missing) > 0 {
		textsafe.Fprintf(w, "  not seen: %s\n", strings.Join(t.Missing, ", "))
	}
	if base != nil {
		textsafe.Fprintf(w, "  baseline: %s (%s %s, %s, profile %s, stage %s)\n", baseFile, base.Image, base.Version, base.Accelerator, base.Profile, base.Stage)
		if base.Accelerator != t.Accelerator {
			textsafe.Fprintf(w, "  the baseline ran under %s and this run under %s: their times do not compare\n", base.Accelerator, t.Accelerator)
		}
	}
}

// num formats a number that may be absent ("-").
func num(f *float64, format string) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf(format, *f)
}

func printFiles(w io.Writer, r *smoke.Result) {
	textsafe.Fprintf(w, "console log: %s\n", r.ConsoleLog)
	if r.TimelineFile != "" {
		textsafe.Fprintf(w, "timeline: %s\n", r.TimelineFile)
	}
}

func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

// runSmokeCompare is smoke --compare-first-boot: the recipe loaded with
// its variables, then the comparison, printed.
func runSmokeCompare(ctx context.Context, f *smokeFlags, opts smoke.Options, tgz string, ver *store.Version, s streams, env []string) error {
	f.recipe.output = f.output
	r, err := f.recipe.load(ctx, s, f.compare, env)
	if err != nil {
		return err
	}
	co := smoke.CompareOptions{Options: opts, Recipe: r, Pairs: f.pairs}
	if dir, err := cachedir.Default(env); err == nil {
		co.BaseCache = filepath.Join(dir, cachedir.Base)
	} else {
		co.BaseCacheErr = err // reported when the base image must be downloaded
	}
	if ver != nil {
		// Not beside the tgz: a store's versions are immutable.
		files := manifest.FilesFor(ver.Image, ver.Version)
		co.FirstBootConsoleLog, co.FirstBootTimeline, co.Output = files.FirstBootSmokeLog, files.FirstBootSmokeTimeline, files.SmokeCompare
	}
	c, err := smoke.Compare(ctx, tgz, co)
	if c == nil {
		return err
	}
	if f.output.json() {
		if jerr := json.NewEncoder(s.out).Encode(smokeResult(err, "comparison", c)); jerr != nil {
			return jerr
		}
	} else {
		fmt.Fprint(s.out, textsafe.Escape(c.Text(), "\n"))
		for _, p := range []struct {
			name string
			path smoke.Path
		}{{smoke.PathBaked, c.Baked}, {smoke.PathFirstBoot, c.FirstBoot}} {
			textsafe.Fprintf(s.out, "%s: console log %s, timeline %s\n", p.name, p.path.ConsoleLog, p.path.TimelineFile)
		}
		if c.File != "" {
			textsafe.Fprintf(s.out, "comparison: %s\n", c.File)
		}
	}
	if errors.Is(err, smoke.ErrFailed) {
		return failWith(s.err, 1, err)
	}
	return err
}
