package firstboot

import (
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/shell"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/validate"
)

// Prefix starts every line the script logs, the result line included:
//
//	IMAGECTL_FIRSTBOOT step=3/12 time=2026-11-26T18:00:00Z uptime=41.20 start install: jq less curl
//	IMAGECTL_FIRSTBOOT time firstboot-done=95.31
//	IMAGECTL_FIRSTBOOT result status=ok steps=12 ran=11 already_done=0 not_at_first_boot=1 download_bytes=...
const Prefix = "IMAGECTL_FIRSTBOOT"

// The script's milestones, logged as "time NAME=SECONDS" (seconds since
// the kernel started, /proc/uptime, the clock of validate.Milestones and
// smoke's timeline) when it starts and when every step is done.
const (
	MilestoneStart = "firstboot-start"
	MilestoneDone  = "firstboot-done"
)

// StateDir is where the script keeps its state on the host: done/ (one
// file per finished step, so a rerun skips it), missing-optional, result
// (the result line) and DoneMarker.
const StateDir = "/var/lib/imagectl/firstboot"

// StateDirEnv, set, moves the state directory (for tests).
const StateDirEnv = "IMAGECTL_FIRSTBOOT_STATE_DIR"

// DoneMarker is the file in StateDir the script creates when every step is
// done, as a site bootstrap's done-marker: a recipe's converged
// done_markers can name it, and validate's timeline reads its mtime.
const DoneMarker = "firstboot.done"

// MaxBundleBytes is the largest bundle the script embeds: user-data carries
// the script, and a bundle larger than this belongs on the site's mirror.
const MaxBundleBytes = 16 << 20

// Runs says whether a step runs at first boot.
type Runs string

const (
	// Yes: the step runs at first boot as in the build (Why says what
	// differs, if anything).
	Yes Runs = "yes"
	// Partly: some of the step runs; Why names what does not, and why.
	Partly Runs = "partly"
	// No: the step does not run at first boot; Why says why.
	No Runs = "no"
)

// Verdict is what becomes of a step at first boot.
type Verdict struct {
	Runs Runs   `json:"runs"`
	Why  string `json:"why,omitempty"`
	// Reboot: what the step changes takes effect at the next boot only.
	Reboot bool `json:"reboot,omitempty"`
}

// String is the verdict in one line: "yes", "yes, what differs",
// "partly: what does not run", "no: why".
func (v Verdict) String() string {
	s := string(v.Runs)
	switch {
	case v.Why != "" && v.Runs == Yes:
		s += ", " + v.Why
	case v.Why != "":
		s += ": " + v.Why
	}
	return s
}

// At says whether s runs at first boot, and why not or what differs.
func At(s steps.Step) Verdict {
	v, _ := executor(s)
	return v
}

// render writes a step's shell into the body of its step function.
type render func(g *gen) error

// cleanupAtFirstBoot says, per clean-up action, why it does not run on a
// live host ("" when it runs as in the build).
var cleanupAtFirstBoot = map[string]string{
	steps.CleanAptCache:      "",
	steps.CleanMachineID:     "made at this boot, it names the host to the journal and DHCP",
	steps.CleanCloudInit:     "cloud-init is running this script, its state is this boot's",
	steps.CleanSSHHostKeys:   "made at this boot, clients may know them already",
	steps.CleanLogs:          "they are this boot's record, cloud-init's log included, which the timeline reads",
	steps.CleanPolicyRCD:     "a policy-rc.d on a live host is the site's own (the script removes the one it holds services with)",
	steps.CleanCloudInitNet:  "cloud-init wrote it at this boot and the host's network runs on it",
	steps.CleanInstallerCfgs: "",
	steps.CleanPerBuild:      "it keeps a build's bytes the same from build to build; on a live host they are the host's own (its random seed, dpkg's and debconf's backups)",
}

// cleanupShell is what each clean-up action that runs at first boot runs.
var cleanupShell = map[string]string{
	steps.CleanAptCache:      "apt-get clean; rm -rf /var/lib/apt/lists/*; APT_FRESH=no",
	steps.CleanInstallerCfgs: "rm -f /etc/cloud/cloud.cfg.d/99-installer.cfg /etc/cloud/cloud.cfg.d/subiquity-disable-cloudinit-networking.cfg",
}

// executor is the one place a kind of step meets the first boot: its
// verdict, and the shell that runs it (nil when it does not run). A kind
// missing here has no first-boot rendering, which Script refuses and the
// test over every kind fails on.
func executor(st steps.Step) (Verdict, render) {
	switch s := st.(type) {
	case steps.AptRepository:
		v := Verdict{Runs: Yes, Why: "key file embedded"}
		if s.KeyURL != "" {
			v.Why = "key fetched from its URL at first boot, checked against a build's digest when given one"
		}
		return v, func(g *gen) error { return g.aptRepository(s) }
	case steps.Packages:
		v := Verdict{Runs: Yes}
		if s.Optional {
			v.Why = "what the archive lacks is recorded as missing"
		}
		return v, func(g *gen) error { return g.packages(s) }
	case steps.WriteFile:
		v, apply := Verdict{Runs: Yes, Why: "content embedded"}, bootFile(s.Path)
		switch {
		case apply.cmd != "":
			v.Why += ", " + apply.what
		case apply.what != "":
			v.Why, v.Reboot = v.Why+", "+apply.what, true
		}
		return v, func(g *gen) error {
			if err := g.putFile(s.Path, s.Mode, s.Owner, s.SHA256, s.Content); err != nil {
				return err
			}
			switch {
			case apply.cmd != "":
				return g.line("apply_now %s %s", g.q(apply.what), g.q(apply.cmd))
			case apply.what != "":
				return g.line("reboot_later %s", g.q(s.Path+": "+apply.what))
			}
			return nil
		}
	case steps.Run:
		return Verdict{Runs: Yes, Why: "on the running host, not in a chroot"}, func(g *gen) error {
			return g.line("run_command %s", g.q(s.Command))
		}
	case steps.Services:
		return Verdict{Runs: Yes, Why: "also started or stopped, without waiting"}, func(g *gen) error { return g.services(s) }
	case steps.KernelArgs:
		return Verdict{Runs: Yes, Reboot: true, Why: "the args take effect after a reboot"}, func(g *gen) error {
			return g.line("kernel_args %s", g.join(s.Args))
		}
	case steps.StageBundle:
		switch size := bundleBytes(s); {
		case s.Unresolved:
			return Verdict{Runs: No, Why: "the bundle is unresolved (" + s.Reason + ")"}, nil
		case size > MaxBundleBytes:
			return Verdict{Runs: No, Why: fmt.Sprintf("its %d bytes are more than a first-boot script embeds (%d): stage it from the site's mirror", size, MaxBundleBytes)}, nil
		}
		return Verdict{Runs: Yes, Why: "embedded, every file checked by sha256"}, func(g *gen) error { return g.bundle(s) }
	case steps.InstallValidationScript:
		return Verdict{Runs: Yes, Why: "a build's script when given, else the plan's, which pins no package versions"}, func(g *gen) error {
			return g.putFile(s.Path, 0o755, "root:root", digest.Bytes(g.validation).Hex(), g.validation)
		}
	case steps.WriteBuildMarker:
		return Verdict{Runs: Yes, Why: "a build's marker when given, else the plan's manifest, which lists no packages"}, func(g *gen) error {
			return g.putFile(s.Path, 0o644, "root:root", digest.Bytes(g.marker).Hex(), g.marker)
		}
	case steps.Cleanup:
		var skipped, ran []string
		for _, a := range s.Actions {
			if why, known := cleanupAtFirstBoot[a]; !known || why != "" {
				if !known {
					why = "an action imagectl does not know"
				}
				skipped = append(skipped, a+": "+why)
				continue
			}
			ran = append(ran, a)
		}
		v := Verdict{Runs: Yes}
		switch {
		case len(ran) == 0 && len(skipped) > 0:
			v = Verdict{Runs: No, Why: "not on a live host: " + strings.Join(skipped, "; ")}
		case len(skipped) > 0:
			v = Verdict{Runs: Partly, Why: "not on a live host: " + strings.Join(skipped, "; ")}
		}
		if v.Runs == No {
			return v, nil
		}
		return v, func(g *gen) error {
			for _, a := range ran {
				if err := g.line("%s", cleanupShell[a]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return Verdict{Runs: No, Why: "imagectl has no first-boot rendering of " + st.Kind() + " steps"}, nil
}

// bootApply is what becomes of a file a host reads at boot: cmd applies
// it to the running boot; without one it takes effect at the next boot.
type bootApply struct{ what, cmd string }

// bootFiles are the places whose files a host reads at boot, not when they
// change: a baked image has them from its first boot, a first-boot script
// applies them now where it can.
var bootFiles = []struct {
	dir, suffix string
	apply       bootApply
}{
	{"/etc/modules-load.d/", ".conf", bootApply{"its modules loaded now (systemd-modules-load restarted)", "systemctl restart systemd-modules-load.service"}},
	{"/etc/sysctl.d/", ".conf", bootApply{"applied now (sysctl --system)", "sysctl --system"}},
	{"/etc/udev/rules.d/", ".rules", bootApply{"applied now (udev rules reloaded and triggered)", "udevadm control --reload && udevadm trigger"}},
	{"/etc/systemd/", "", bootApply{"read now (systemctl daemon-reload); a running unit it changes keeps its old settings until restarted", "systemctl daemon-reload"}},
	{"/etc/modprobe.d/", ".conf", bootApply{"module options take effect when the module loads: for one loaded already, after a reboot", ""}},
	{"/etc/default/grub", "", bootApply{"kernel command line settings take effect after update-grub and a reboot", ""}},
}

func bootFile(p string) bootApply {
	for _, b := range bootFiles {
		if strings.HasPrefix(p, b.dir) && strings.HasSuffix(p, b.suffix) {
			return b.apply
		}
	}
	return bootApply{}
}

func bundleBytes(s steps.StageBundle) int64 {
	var n int64
	for _, e := range s.Entries {
		n += e.Size
	}
	return n
}

// Options adjust a script.
type Options struct {
	// ValidationScript and Marker, when set, are a build's (its
	// -validate.sh and its manifest's marker), installed instead of the
	// ones generated from the plan: a comparison with that build runs the
	// same validation.
	ValidationScript []byte
	Marker           []byte
	// KeySHA256 pins the apt keys: the repository's name to the sha256
	// (hex) of its binary keyring, as a build's manifest records it
	// (manifest.AptKey). A key fetched by URL is checked on the host, a key
	// file here. Without FromBuild a key without one is fetched unpinned
	// and its sha256 logged.
	KeySHA256 map[string]string
	// Redact, when set, is applied to the steps' summaries where the
	// script prints them and in its comments (a plan's Redact: a run
	// command's sensitive value is run, never logged). It also decides
	// Result.Sensitive: a value it changes is one the script carries.
	Redact func(string) string
	// FromBuild: the options are a build's (FromBuild); every apt key must
	// then match the digest the build recorded for its repository.
	FromBuild bool
}

// Result is a first-boot script and what its file needs.
type Result struct {
	Script []byte
	// Sensitive: the script carries a sensitive variable's value (in a run
	// command, a file's or bundle's content, a key URL or an apt sources
	// file), found on the raw values before any encoding. Such a script is
	// never printed, and its file is root's alone (Mode).
	Sensitive bool
}

// Mode is the mode of the script's file (userData: of its user-data):
// 0755 (0644), or 0700 (0600) when it carries a sensitive value.
func (r Result) Mode(userData bool) fs.FileMode {
	switch {
	case r.Sensitive && userData:
		return 0o600
	case r.Sensitive:
		return 0o700
	case userData:
		return 0o644
	}
	return 0o755
}

// UserData is the script wrapped into NoCloud user-data (see UserData).
func (r Result) UserData() []byte { return UserData(r.Script, r.Sensitive) }

// FromBuild are the options that make a script do what a build of the
// same recipe did: the build's validation script (generated from its
// manifest, as the build generates it: package versions pinned) and build
// marker, and the digests of its apt keys. The build must be of the
// planned image (planned, the plan's manifest): the same name and version,
// and the same enabled layers with the same digests, else the script
// would install a marker and validation of other steps than it runs.
func FromBuild(m, planned *manifest.Manifest) (Options, error) {
	if err := sameBuild(m, planned); err != nil {
		return Options{}, err
	}
	script, err := validate.Script(m)
	if err != nil {
		return Options{}, err
	}
	marker, err := m.Marker()
	if err != nil {
		return Options{}, fmt.Errorf("the build marker of %s %s: %w", m.Image.Name, m.Image.Version, err)
	}
	keys := map[string]string{}
	for _, k := range m.AptKeys {
		keys[k.Repository] = k.SHA256
	}
	return Options{ValidationScript: script, Marker: marker, KeySHA256: keys, FromBuild: true}, nil
}

// sameBuild says how the build m differs from the plan's manifest.
func sameBuild(m, planned *manifest.Manifest) error {
	if m.Image.Name != planned.Image.Name {
		return fmt.Errorf("the manifest is a build of %s, not of %s", m.Image.Name, planned.Image.Name)
	}
	if m.Image.Version != planned.Image.Version {
		return fmt.Errorf("the manifest is a build of %s %s, the plan's version is %s (give the build's with --version)", m.Image.Name, m.Image.Version, planned.Image.Version)
	}
	enabled := func(ls []manifest.Layer) (names []string, digests map[string]string) {
		digests = map[string]string{}
		for _, l := range ls {
			if l.Enabled {
				names = append(names, l.Name)
				digests[l.Name] = l.Digest
			}
		}
		return names, digests
	}
	built, bd := enabled(m.Layers)
	plannedNames, pd := enabled(planned.Layers)
	if strings.Join(built, ",") != strings.Join(plannedNames, ",") {
		return fmt.Errorf("the build of %s %s has the layers %s, the plan %s", m.Image.Name, m.Image.Version, strings.Join(built, ", "), strings.Join(plannedNames, ", "))
	}
	for _, n := range plannedNames {
		if bd[n] != pd[n] {
			return fmt.Errorf("layer %s of the build of %s %s has digest %s, the plan's is %s: the recipe or its inputs changed since that build", n, m.Image.Name, m.Image.Version, bd[n], pd[n])
		}
	}
	return nil
}

// gen writes a script.
type gen struct {
	b          strings.Builder
	ctx        context.Context
	opts       Options
	validation []byte
	marker     []byte
	// err is the first value no shell word can carry (a NUL byte).
	err error
	// sensitive: a raw value the script carries holds a sensitive value.
	sensitive bool
}

// raw notes whether a value the script carries, before any encoding,
// holds a sensitive value.
func (g *gen) raw(s string) {
	if g.opts.Redact != nil && !g.sensitive && g.opts.Redact(s) != s {
		g.sensitive = true
	}
}

// q quotes a value, refusing a NUL byte.
func (g *gen) q(s string) string {
	if strings.ContainsRune(s, 0) && g.err == nil {
		g.err = fmt.Errorf("%q holds a NUL byte, which no shell word can carry", s)
	}
	g.raw(s)
	return shell.Quote(s)
}

func (g *gen) join(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = g.q(a)
	}
	return strings.Join(q, " ")
}

// line writes one command of a step function's body, indented (only its
// first line: a quoted value's lines are data).
func (g *gen) line(format string, args ...any) error {
	g.b.WriteString("\t" + fmt.Sprintf(format, args...) + "\n")
	return g.err
}

func (g *gen) aptRepository(s steps.AptRepository) error {
	pin, pinned := g.opts.KeySHA256[s.Name]
	if g.opts.FromBuild && !pinned {
		return fmt.Errorf("apt repository %s: the build recorded no digest of its key", s.Name)
	}
	if s.KeyURL != "" {
		if err := g.line("put_key %s %s %s %s", g.q(s.Name), g.q(s.KeyURL), g.q(s.KeyringPath), g.q(pin)); err != nil {
			return err
		}
	} else {
		keyring, err := steps.Keyring(s.KeyContent)
		if err != nil {
			return fmt.Errorf("signing key of apt repository %s (%s): %w", s.Name, s.KeyFile, err)
		}
		got := digest.Bytes(keyring).Hex()
		if pinned && got != pin {
			return fmt.Errorf("signing key of apt repository %s (%s): its keyring has sha256 %s, the build's had %s", s.Name, s.KeyFile, got, pin)
		}
		if err := g.putFile(s.KeyringPath, 0o644, "root:root", got, keyring); err != nil {
			return err
		}
	}
	if err := g.putFile(s.SourcesPath, 0o644, "root:root", digest.Bytes([]byte(s.Sources)).Hex(), []byte(s.Sources)); err != nil {
		return err
	}
	return g.line("APT_FRESH=no")
}

func (g *gen) packages(s steps.Packages) error {
	for _, p := range s.Packages {
		if strings.HasPrefix(p, "-") {
			return fmt.Errorf("package %q: a name cannot start with '-' (apt-get would read an option)", p)
		}
	}
	fn, opt := "packages", "-"
	if s.Optional {
		fn = "optional_packages"
	}
	if s.NoRecommends {
		opt = "--no-install-recommends"
	}
	return g.line("%s %s %s", fn, opt, g.join(s.Packages))
}

func (g *gen) services(s steps.Services) error {
	if len(s.Enable) > 0 {
		if err := g.line("services enable %s", g.join(s.Enable)); err != nil {
			return err
		}
	}
	if len(s.Disable) > 0 {
		return g.line("services disable %s", g.join(s.Disable))
	}
	return nil
}

// putFile embeds content: text (valid UTF-8 without control characters
// but newlines and tabs) as it is, anything else as base64.
func (g *gen) putFile(path string, mode fs.FileMode, owner, sha string, content []byte) error {
	if got := digest.Bytes(content).Hex(); got != sha {
		return fmt.Errorf("%s: its content has sha256 %s, the plan's is %s", path, got, sha)
	}
	g.raw(string(content))
	enc, data := "text", string(content)
	if !isText(content) {
		enc, data = "base64", wrap(base64.StdEncoding.EncodeToString(content), 76)
	}
	return g.line("put_file %s %s %s %s %s %s", g.q(path), fsmode.String(mode), g.q(owner), sha, enc, g.q(data))
}

func isText(b []byte) bool {
	return utf8.Valid(b) && textsafe.Escape(string(b), "\n\t") == string(b)
}

func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

// Script writes the first-boot script of a plan's layers (its Layers and
// Manifest): the steps of every enabled layer, in order, each logged with
// its summary and a timestamp, those that do not run at first boot logged
// with why. It fails on a step no first boot can render, a file whose
// content is not what the plan hashed, a bundle changed since the plan was
// made, and a value no shell word can carry.
func Script(ctx context.Context, layers []*compile.Layer, m *manifest.Manifest, opts Options) (Result, error) {
	b, sensitive, err := script(ctx, layers, m, opts)
	return Result{Script: b, Sensitive: sensitive}, err
}

func script(ctx context.Context, layers []*compile.Layer, m *manifest.Manifest, opts Options) ([]byte, bool, error) {
	if err := m.Image.Check(); err != nil {
		return nil, false, fmt.Errorf("first-boot script: %w", err)
	}
	g := &gen{ctx: ctx, opts: opts, validation: opts.ValidationScript, marker: opts.Marker}
	var err error
	if g.validation == nil {
		if g.validation, err = validate.Script(m); err != nil {
			return nil, false, err
		}
	}
	if g.marker == nil {
		if g.marker, err = m.Marker(); err != nil {
			return nil, false, fmt.Errorf("first-boot script: the build marker: %w", err)
		}
	}
	type planned struct {
		layer string
		step  steps.Step
	}
	var all []planned
	for _, l := range layers {
		if !l.Enabled {
			continue
		}
		for _, s := range l.Steps {
			all = append(all, planned{l.Name, s})
		}
	}
	var body, calls strings.Builder
	for i, p := range all {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		n := i + 1
		text := p.step.Summary()
		if opts.Redact != nil {
			text = opts.Redact(text)
		}
		summary := shell.Comment(p.layer + ": " + text)
		v, run := executor(p.step)
		if run == nil {
			if v.Runs != No {
				return nil, false, fmt.Errorf("first-boot script: step %d (%s) runs but has no shell", n, p.step.Kind())
			}
			if strings.HasPrefix(v.Why, "imagectl has no first-boot rendering") {
				return nil, false, fmt.Errorf("first-boot script: step %d of layer %s: %s", n, p.layer, v.Why)
			}
			fmt.Fprintf(&calls, "not_here %d %s %s\n", n, g.q(summary), g.q(v.Why))
			continue
		}
		g.b.Reset()
		if v.Runs == Partly {
			g.line("partly %s", g.q(v.Why))
		}
		if err := run(g); err != nil {
			return nil, false, fmt.Errorf("first-boot script: step %d of layer %s (%s): %w", n, p.layer, p.step.Kind(), err)
		}
		fn := fmt.Sprintf("step_%d", n)
		fmt.Fprintf(&body, "\n# Step %d, layer %s: %s\n# At first boot: %s\n%s() {\n%s}\n", n, shell.Comment(p.layer), shell.Comment(text), shell.Comment(v.String()), fn, g.b.String())
		key := digest.Bytes([]byte(fn + "\n" + g.b.String())).Hex()[:16]
		fmt.Fprintf(&calls, "step %d %s %s %s\n", n, key, g.q(summary), fn)
	}
	if g.err != nil {
		return nil, false, fmt.Errorf("first-boot script: %w", g.err)
	}
	var out strings.Builder
	header(&out, m, len(all), compile.RemovesAptLists(layers))
	out.WriteString("\n" + lib)
	out.WriteString("\n# The steps, in the plan's order.\n")
	out.WriteString(body.String())
	out.WriteString("\nbegin\n" + calls.String() + "end\n")
	return []byte(out.String()), g.sensitive, nil
}

// header is the script's opening: what it is, and the values its
// functions read. noTranslations: a clean-up removes apt's lists
// (compile.RemovesAptLists), so apt-get update leaves out the Translation
// indexes, as the build's does (apply.Applier.NoTranslations).
func header(w *strings.Builder, m *manifest.Manifest, n int, noTranslations bool) {
	fmt.Fprintf(w, "#!/bin/sh\n")
	fmt.Fprintf(w, "# First-boot script for %s %s, generated by imagectl from its plan: what a build\n", shell.Comment(m.Image.Name), shell.Comment(m.Image.Version))
	fmt.Fprintf(w, "# bakes in, done on a host booted from the base image (%s).\n", shell.Comment(m.Base.Source))
	fmt.Fprintf(w, "# Run it as root (NoCloud user-data does). Each step logs a '%s step=N/%d ...' line\n", Prefix, n)
	fmt.Fprintf(w, "# with a timestamp; a step that does not run at first boot says why. It stops at\n")
	fmt.Fprintf(w, "# the first failing step, exiting non-zero. The last line is\n")
	fmt.Fprintf(w, "# '%s result status=ok|failed ... download_bytes=N ... reboot_required=yes|no ...'.\n", Prefix)
	fmt.Fprintf(w, "# State in %s: a rerun skips the steps done before.\n", StateDir)
	fmt.Fprintf(w, "# shellcheck disable=SC2016 # values are single-quoted data: a $ or ` in them is not to expand\n")
	fmt.Fprintf(w, "set -eu\n\n")
	fmt.Fprintf(w, "export DEBIAN_FRONTEND=noninteractive LC_ALL=C\n")
	fmt.Fprintf(w, "PREFIX=%s\nSTATE_DIR=${%s:-%s}\nSTEPS=%d\n", Prefix, StateDirEnv, StateDir, n)
	fmt.Fprintf(w, "IMAGE=%s\nVERSION=%s\n", shell.Quote(m.Image.Name), shell.Quote(m.Image.Version))
	fmt.Fprintf(w, "MILESTONE_START=%s\nMILESTONE_DONE=%s\nDONE_MARKER=%s\n", MilestoneStart, MilestoneDone, DoneMarker)
	translations := "no"
	if noTranslations {
		translations = "yes"
	}
	fmt.Fprintf(w, "APT_NO_TRANSLATIONS=%s\n", translations)
}

//go:embed sh/lib.sh
var libFile string

// lib is sh/lib.sh after its opening comment.
var lib = func() string {
	head, body, ok := strings.Cut(libFile, "\n\n")
	for _, l := range strings.Split(head, "\n") {
		ok = ok && strings.HasPrefix(l, "#")
	}
	if !ok {
		panic("firstboot: sh/lib.sh does not open with a comment ended by a blank line")
	}
	return body
}()
