package firstboot

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

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
	steps.CleanPolicyRCD:     "",
	steps.CleanCloudInitNet:  "cloud-init wrote it at this boot and the host's network runs on it",
	steps.CleanInstallerCfgs: "",
}

// cleanupShell is what each clean-up action that runs at first boot runs.
var cleanupShell = map[string]string{
	steps.CleanAptCache:      "apt-get clean; rm -rf /var/lib/apt/lists/*; APT_FRESH=no",
	steps.CleanPolicyRCD:     "rm -f /usr/sbin/policy-rc.d",
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
		return Verdict{Runs: Yes, Why: "content embedded"}, func(g *gen) error {
			return g.putFile(s.Path, s.Mode, s.Owner, s.SHA256, s.Content)
		}
	case steps.Run:
		return Verdict{Runs: Yes, Why: "on the running host, not in a chroot"}, func(g *gen) error {
			return g.line("(cd / && sh -c %s)", g.q(s.Command))
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
	// KeySHA256 pins the apt keys fetched by URL: the repository's name to
	// the sha256 (hex) of its binary keyring, as a build's manifest records
	// it (manifest.AptKey). A key without one is fetched unpinned and its
	// sha256 logged.
	KeySHA256 map[string]string
	// Redact, when set, is applied to the steps' summaries where the
	// script prints them and in its comments (a plan's Redact: a run
	// command's sensitive value is run, never logged).
	Redact func(string) string
}

// FromBuild are the options that make a script do what a build of the
// same recipe did: the build's validation script (generated from its
// manifest, as the build generates it: package versions pinned) and build
// marker, and the digests of the apt keys it fetched by URL.
func FromBuild(m *manifest.Manifest) (Options, error) {
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
	return Options{ValidationScript: script, Marker: marker, KeySHA256: keys}, nil
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
}

// q quotes a value, refusing a NUL byte.
func (g *gen) q(s string) string {
	if strings.ContainsRune(s, 0) && g.err == nil {
		g.err = fmt.Errorf("%q holds a NUL byte, which no shell word can carry", s)
	}
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
	if s.KeyURL != "" {
		if err := g.line("put_key %s %s %s", g.q(s.KeyURL), g.q(s.KeyringPath), g.q(g.opts.KeySHA256[s.Name])); err != nil {
			return err
		}
	} else {
		keyring, err := dearmor(s.KeyContent)
		if err != nil {
			return fmt.Errorf("signing key of apt repository %s (%s): %w", s.Name, s.KeyFile, err)
		}
		if err := g.putFile(s.KeyringPath, 0o644, "root:root", digest.Bytes(keyring).Hex(), keyring); err != nil {
			return err
		}
	}
	if err := g.putFile(s.SourcesPath, 0o644, "root:root", digest.Bytes([]byte(s.Sources)).Hex(), []byte(s.Sources)); err != nil {
		return err
	}
	return g.line("APT_FRESH=no")
}

// dearmor returns an OpenPGP key in binary form, which apt reads from a
// .gpg keyring named by Signed-By (as the build writes it).
func dearmor(key []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(key)
	if !bytes.HasPrefix(trimmed, []byte("-----BEGIN PGP")) {
		if len(trimmed) == 0 || trimmed[0]&0x80 == 0 {
			return nil, fmt.Errorf("not an OpenPGP key (neither armored nor binary)")
		}
		return key, nil
	}
	block, err := armor.Decode(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("reading the armored key: %w", err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(block.Body); err != nil {
		return nil, fmt.Errorf("reading the armored key: %w", err)
	}
	return out.Bytes(), nil
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
func Script(ctx context.Context, layers []*compile.Layer, m *manifest.Manifest, opts Options) ([]byte, error) {
	if err := m.Image.Check(); err != nil {
		return nil, fmt.Errorf("first-boot script: %w", err)
	}
	g := &gen{ctx: ctx, opts: opts, validation: opts.ValidationScript, marker: opts.Marker}
	var err error
	if g.validation == nil {
		if g.validation, err = validate.Script(m); err != nil {
			return nil, err
		}
	}
	if g.marker == nil {
		if g.marker, err = m.Marker(); err != nil {
			return nil, fmt.Errorf("first-boot script: the build marker: %w", err)
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
			return nil, err
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
				return nil, fmt.Errorf("first-boot script: step %d (%s) runs but has no shell", n, p.step.Kind())
			}
			if strings.HasPrefix(v.Why, "imagectl has no first-boot rendering") {
				return nil, fmt.Errorf("first-boot script: step %d of layer %s: %s", n, p.layer, v.Why)
			}
			fmt.Fprintf(&calls, "not_here %d %s %s\n", n, g.q(summary), g.q(v.Why))
			continue
		}
		g.b.Reset()
		if v.Runs == Partly {
			g.line("partly %s", g.q(v.Why))
		}
		if err := run(g); err != nil {
			return nil, fmt.Errorf("first-boot script: step %d of layer %s (%s): %w", n, p.layer, p.step.Kind(), err)
		}
		fn := fmt.Sprintf("step_%d", n)
		fmt.Fprintf(&body, "\n# Step %d, layer %s: %s\n# At first boot: %s\n%s() {\n%s}\n", n, shell.Comment(p.layer), shell.Comment(text), shell.Comment(v.String()), fn, g.b.String())
		key := digest.Bytes([]byte(fn + "\n" + g.b.String())).Hex()[:16]
		fmt.Fprintf(&calls, "step %d %s %s %s\n", n, key, g.q(summary), fn)
	}
	if g.err != nil {
		return nil, fmt.Errorf("first-boot script: %w", g.err)
	}
	var out strings.Builder
	header(&out, m, len(all))
	out.WriteString("\n" + lib)
	out.WriteString("\n# The steps, in the plan's order.\n")
	out.WriteString(body.String())
	out.WriteString("\nbegin\n" + calls.String() + "end\n")
	return []byte(out.String()), nil
}

func header(w *strings.Builder, m *manifest.Manifest, n int) {
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
