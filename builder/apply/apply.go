// Package apply owns the step interpreter: it executes each kind of step
// (package steps) in an appliance session (package guest) and records what
// the manifest needs from running them (missing optional packages, fetched
// apt keys, the installed packages). Packages steps fetch their archives on
// the host through the package cache (builder/debcache) when given one,
// falling back to the guest's own download, and record the archives
// fetched and the time and bytes of apt's update and resolution,
// downloading and installing, each apart.
// The guest's commands run with the build's source date as
// SOURCE_DATE_EPOCH, and the guest's clock is kept past it.
package apply

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/debcache"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/shell"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// aptEnv is the environment of every apt and dpkg call in the guest:
// no prompts, and conffiles the recipe wrote win over the packages'.
const aptEnv = "export DEBIAN_FRONTEND=noninteractive LC_ALL=C; "

const aptInstall = "apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "

// bundleMTime is the modification time of staged bundle files: fixed, so a
// bundle's bytes in the image depend on its content only.
var bundleMTime = time.Unix(946684800, 0) // 2000-01-01

// Applier executes steps in a session and records what the manifest needs.
type Applier struct {
	Session guest.Session
	Events  event.Reporter
	Client  *http.Client

	// Missing are the optional packages the archive did not have, Keys
	// the apt keys fetched: what the manifest records of running steps.
	Missing []string
	Keys    []manifest.AptKey

	// The finalize hooks: the validation script and build marker are
	// generated from the build's own state when their steps run.
	ValidationScript func(ctx context.Context) ([]byte, error)
	Marker           func(ctx context.Context) ([]byte, error)

	// Timings accumulates the packages steps' resolve, download and
	// install time and bytes (the rest of a layer's time is its caller's
	// to measure).
	Timings manifest.Timings

	// AptProxy, when set, is the proxy the guest's apt goes through in
	// packages steps: written into the guest's apt configuration for the
	// step and removed after it, so that it never reaches a layer
	// snapshot or the image.
	AptProxy string

	// Debs, when set, fetches the archives of packages steps on the host
	// into the package cache and hands them to the guest's apt; nil
	// leaves every download to the guest.
	Debs *debcache.Fetcher
	// Fetched are the archives the packages steps fetched (on the host or
	// in the guest), in order: what the provenance lists. Those the index
	// gave no sha256 for have none.
	Fetched []debcache.Deb

	// SourceDate, when set, is the build's source date: the guest's
	// commands (packages steps, run steps, the finalize clean-up) run with
	// SOURCE_DATE_EPOCH set to it, which the tools that write times into
	// files honour (shadow's last password change of the users a postinst
	// adds, mkinitramfs, Python's byte-compilation).
	SourceDate time.Time

	// KeepDpkgSyncs leaves dpkg syncing every file it writes, as on a
	// running system. By default packages steps run dpkg without those
	// syncs (force-unsafe-io): the appliance's disk is thrown away unless
	// the build finishes, and it is flushed as a whole before each layer
	// snapshot and when the appliance shuts down before packing. The
	// setting changes how dpkg writes, not what: the same inputs give the
	// same tgz bytes either way (TestPackageCache builds both).
	KeepDpkgSyncs bool

	// NoTranslations leaves the Translation indexes (packages' long
	// descriptions, which no build step reads: the index records the
	// package cache reads keep no description) out of apt-get update: for
	// builds whose clean-up removes apt's lists (steps.CleanAptCache),
	// where they never reach the image. Under TCG they are half of what an
	// update fetches and decompresses.
	NoTranslations bool

	aptSync bool // apt lists are current for the configured repositories
}

// KeepClockPast makes sure that the guest's clock is past the source date,
// so that every file the build writes is newer than it and has its time
// clamped: the appliance's clock starts from an emulated RTC and can lag
// the host's under TCG. A guest clock not past it is set to the host's,
// which is (the source date is older than the build's start).
func (a *Applier) KeepClockPast(ctx context.Context, sourceDate time.Time) error {
	cmd := fmt.Sprintf("if [ \"$(date +%%s)\" -le %d ]; then date -u -s @%d >/dev/null && echo set; fi", sourceDate.Unix()+1, time.Now().Unix())
	out, err := a.Session.Run(ctx, cmd)
	if err != nil {
		return fmt.Errorf("checking the guest's clock: %w", err)
	}
	if strings.TrimSpace(out) == "set" {
		a.Events.Log(fmt.Sprintf("the guest's clock was not past the source date %s: set to the host's", sourceDate.UTC().Format(time.RFC3339)))
	}
	return nil
}

// run runs a shell command in the guest with the source date exported.
func (a *Applier) run(ctx context.Context, cmd string) (string, error) {
	if !a.SourceDate.IsZero() {
		cmd = fmt.Sprintf("export SOURCE_DATE_EPOCH=%d; ", a.SourceDate.Unix()) + cmd
	}
	return a.Session.Run(ctx, cmd)
}

// Apply executes one step.
func (a *Applier) Apply(ctx context.Context, st steps.Step) error {
	switch s := st.(type) {
	case steps.AptRepository:
		return a.aptRepository(ctx, s)
	case steps.Packages:
		if a.AptProxy == "" {
			return a.packages(ctx, s)
		}
		remove, err := a.useAptProxy(ctx)
		if err != nil {
			return err
		}
		err = a.packages(ctx, s)
		if rerr := remove(); err == nil {
			err = rerr
		}
		return err
	case steps.WriteFile:
		return a.Session.WriteFile(ctx, s.Path, s.Content, s.Mode, s.Owner)
	case steps.Run:
		_, err := a.run(ctx, s.Command)
		return err
	case steps.Services:
		return a.services(ctx, s)
	case steps.KernelArgs:
		return a.kernelArgs(ctx, s)
	case steps.StageBundle:
		return a.stageBundle(ctx, s)
	case steps.InstallValidationScript:
		b, err := a.ValidationScript(ctx)
		if err != nil {
			return err
		}
		return a.Session.WriteFile(ctx, s.Path, b, 0o755, "root:root")
	case steps.WriteBuildMarker:
		b, err := a.Marker(ctx)
		if err != nil {
			return err
		}
		return a.Session.WriteFile(ctx, s.Path, b, 0o644, "root:root")
	case steps.Cleanup:
		_, err := a.run(ctx, cleanupScript(s.Actions))
		return err
	}
	return fmt.Errorf("no executor for %s steps", st.Kind())
}

func (a *Applier) packages(ctx context.Context, s steps.Packages) error {
	if s.Optional {
		return a.optionalPackages(ctx, s.Packages, a.aptInstallCmd(s))
	}
	return a.requiredPackages(ctx, s.Packages, a.aptInstallCmd(s))
}

func (a *Applier) aptUpdate(ctx context.Context) error {
	if a.aptSync {
		return nil
	}
	defer a.timed(&a.Timings.Resolve)()
	if _, err := a.run(ctx, a.aptUpdateCmd()); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	a.aptSync = true
	return nil
}

// aptUpdateCmd is the apt-get update command line: without the
// Translation indexes when NoTranslations, an option of this command line
// only, so nothing of it reaches the guest's configuration.
func (a *Applier) aptUpdateCmd() string {
	cmd := aptEnv + "apt-get update -q"
	if a.NoTranslations {
		cmd += " -o Acquire::Languages=none"
	}
	return cmd
}

// aptInstallCmd is the apt-get install command line of a packages step:
// dpkg without a sync per file it writes (force-unsafe-io) unless
// KeepDpkgSyncs, an option of this command line only, so nothing of it
// reaches the guest's configuration, a snapshot or the image.
func (a *Applier) aptInstallCmd(s steps.Packages) string {
	cmd := aptEnv + aptInstall
	if !a.KeepDpkgSyncs {
		cmd += "-o Dpkg::Options::=--force-unsafe-io "
	}
	if s.NoRecommends {
		cmd += "--no-install-recommends "
	}
	return cmd
}

func (a *Applier) requiredPackages(ctx context.Context, pkgs []string, install string) error {
	if err := a.aptUpdate(ctx); err != nil {
		return err
	}
	return a.install(ctx, install, pkgs)
}

// optionalPackages installs what the archive has. apt's own resolution
// (--print-uris, which changes nothing) names the packages it cannot
// locate or has no candidate for: those are recorded missing, and the rest
// install all at once, in one apt-get install. When apt refuses the rest for
// another reason (a dependency it cannot meet), or their install fails,
// each is tried alone, recording those that cannot be installed.
func (a *Applier) optionalPackages(ctx context.Context, pkgs []string, install string) error {
	if err := a.aptUpdate(ctx); err != nil {
		return err
	}
	missing := map[string]bool{}
	defer func() {
		for _, p := range pkgs { // in the step's order, however found
			if missing[p] {
				a.Missing = append(a.Missing, p)
			}
		}
	}()
	notInstalled := func(p, why string) {
		missing[p] = true
		a.Events.Log(fmt.Sprintf("optional package %s not installed: %s", p, why))
	}
	want := pkgs
	for len(want) > 0 {
		us, err := a.printURIs(ctx, install, want)
		if err == nil {
			err = a.installResolved(ctx, install, want, us)
			if err == nil || !isCommandError(err) {
				return err
			}
			break
		}
		var ce *guest.CommandError
		if !errors.As(err, &ce) {
			return err
		}
		gone := unavailable(ce.Output, want)
		if len(gone) == 0 {
			break
		}
		for _, p := range want {
			if why, ok := gone[p]; ok {
				notInstalled(p, why)
			}
		}
		want = slices.DeleteFunc(slices.Clone(want), func(p string) bool { return missing[p] })
	}
	for _, p := range want {
		err := a.install(ctx, install, []string{p})
		switch {
		case err == nil:
		case isCommandError(err):
			notInstalled(p, lastLine(err.(*guest.CommandError).Output))
		default:
			return err
		}
	}
	return nil
}

// unavailable reads apt's refusal (LC_ALL=C) for the packages it names as
// not in the archive: a name it cannot locate, one with no installation
// candidate (a virtual package, one known only from the status file), a
// version or release of a package that is not there. It returns apt's
// line for each of pkgs so named; a refusal for any other reason names
// none of them, and neither does a line that could be of more than one.
//
// apt names a package as the step wrote it, or by its name alone: without
// the version (name=version) or release (name/release) when the name
// itself is unknown, and without the architecture (name:arch) when it is
// the native one. A line with the name as written is that package's; a
// line with a name alone is the one package's whose name it is.
func unavailable(output string, pkgs []string) map[string]string {
	exact := map[string]string{}
	derived := map[string][]string{}
	for _, p := range pkgs {
		name, ver, hasVer := strings.Cut(p, "=")
		rel := ""
		if !hasVer {
			name, rel, _ = strings.Cut(p, "/")
		}
		bare, _, _ := strings.Cut(name, ":")
		exact["E: Unable to locate package "+p] = p
		exact["E: Package '"+p+"' has no installation candidate"] = p
		var lines []string
		if name != p {
			lines = append(lines, "E: Unable to locate package "+name)
		}
		if bare != p {
			lines = append(lines, "E: Package '"+bare+"' has no installation candidate")
		}
		for _, n := range []string{name, bare} {
			if hasVer {
				lines = append(lines, "E: Version '"+ver+"' for '"+n+"' was not found")
			}
			if rel != "" {
				lines = append(lines, "E: Release '"+rel+"' for '"+n+"' was not found")
			}
		}
		for _, l := range lines {
			if !slices.Contains(derived[l], p) {
				derived[l] = append(derived[l], p)
			}
		}
	}
	gone := map[string]string{}
	for _, l := range strings.Split(output, "\n") {
		l = strings.TrimSpace(l)
		p, ok := exact[l]
		if !ok {
			if ps := derived[l]; len(ps) == 1 {
				p, ok = ps[0], true
			}
		}
		if ok && gone[p] == "" {
			gone[p] = l
		}
	}
	return gone
}

func isCommandError(err error) bool {
	var ce *guest.CommandError
	return errors.As(err, &ce)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func (a *Applier) aptRepository(ctx context.Context, s steps.AptRepository) error {
	key, source := s.KeyContent, s.KeyFile
	if s.KeyURL != "" {
		var err error
		if key, err = fetch(ctx, a.Client, s.KeyURL); err != nil {
			return fmt.Errorf("fetching the signing key of apt repository %s: %w", s.Name, err)
		}
		source = s.KeyURL
	}
	keyring, err := steps.Keyring(key)
	if err != nil {
		return fmt.Errorf("signing key of apt repository %s (%s): %w", s.Name, source, err)
	}
	if err := a.Session.WriteFile(ctx, s.KeyringPath, keyring, 0o644, "root:root"); err != nil {
		return err
	}
	if err := a.Session.WriteFile(ctx, s.SourcesPath, []byte(s.Sources), 0o644, "root:root"); err != nil {
		return err
	}
	a.Keys = append(a.Keys, manifest.AptKey{Repository: s.Name, Source: source, SHA256: digest.Bytes(keyring).Hex()})
	a.aptSync = false
	return nil
}

func fetch(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

func (a *Applier) services(ctx context.Context, s steps.Services) error {
	if len(s.Enable) > 0 {
		if _, err := a.Session.Run(ctx, "systemctl enable -- "+shell.Join(s.Enable)); err != nil {
			return err
		}
	}
	if len(s.Disable) > 0 {
		if _, err := a.Session.Run(ctx, "systemctl disable -- "+shell.Join(s.Disable)); err != nil {
			return err
		}
	}
	return nil
}

const defaultGrub = "/etc/default/grub"

func (a *Applier) kernelArgs(ctx context.Context, s steps.KernelArgs) error {
	var cur []byte
	ok, err := a.Session.Exists(ctx, defaultGrub)
	if err != nil {
		return err
	}
	if ok {
		if cur, err = a.Session.ReadFile(ctx, defaultGrub); err != nil {
			return err
		}
	}
	if err := a.Session.WriteFile(ctx, defaultGrub, addKernelArgs(cur, s.Args), 0o644, "root:root"); err != nil {
		return err
	}
	// curtin regenerates grub.cfg at deploy; doing it here too makes the
	// image boot with the args outside MAAS. Best effort: a failure is said,
	// not fatal.
	if _, err := a.run(ctx, "if command -v update-grub >/dev/null 2>&1; then update-grub; fi"); err != nil {
		if !isCommandError(err) {
			return err
		}
		a.Events.Log("update-grub failed (curtin runs it again at deploy): " + lastLine(err.(*guest.CommandError).Output))
	}
	return nil
}

var cmdlineRE = regexp.MustCompile(`(?m)^([ \t]*GRUB_CMDLINE_LINUX=)(.*)$`)

// addKernelArgs appends args missing from GRUB_CMDLINE_LINUX in the content
// of /etc/default/grub, or adds the variable when the file has none. Only
// the last live assignment is edited: it is the one grub-mkconfig uses.
func addKernelArgs(grub []byte, args []string) []byte {
	locs := cmdlineRE.FindAllSubmatchIndex(grub, -1)
	if len(locs) == 0 {
		out := append([]byte{}, grub...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		return append(out, []byte("GRUB_CMDLINE_LINUX=\""+strings.Join(args, " ")+"\"\n")...)
	}
	loc := locs[len(locs)-1]
	value := strings.TrimSpace(string(grub[loc[4]:loc[5]]))
	if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
		value = value[1 : len(value)-1]
	}
	fields := strings.Fields(value)
	have := map[string]bool{}
	for _, f := range fields {
		have[f] = true
	}
	for _, arg := range args {
		if !have[arg] {
			fields = append(fields, arg)
			have[arg] = true
		}
	}
	var out bytes.Buffer
	out.Write(grub[:loc[4]])
	out.WriteString(`"` + strings.Join(fields, " ") + `"`)
	out.Write(grub[loc[5]:])
	return out.Bytes()
}

// stageBundle streams the bundle as a tar owned by root into its
// destination, re-hashing every file against the plan so a bundle that
// changed since planning fails the build instead of shipping unplanned bytes.
func (a *Applier) stageBundle(ctx context.Context, s steps.StageBundle) error {
	if s.Unresolved {
		return fmt.Errorf("staging bundle %s: unresolved (%s)", s.Name, s.Reason)
	}
	if _, err := a.Session.Run(ctx, "mkdir -p -- "+shell.Quote(s.Destination)); err != nil {
		return err
	}
	return a.tarIn(ctx, s.Destination, "staging bundle "+s.Name, "staging stopped", func(w io.Writer) error {
		return writeBundleTar(ctx, s, w)
	})
}

// tarIn unpacks into the guest directory dir the tar stream that write
// produces, piped to the session as it is written. Its error starts with
// what (the work being done) and is the writer's, else the session's;
// stopped is what the writer's next write fails with once the session has
// stopped reading.
func (a *Applier) tarIn(ctx context.Context, dir, what, stopped string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		err := write(pw)
		pw.CloseWithError(err)
		errc <- err
	}()
	err := a.Session.TarIn(ctx, pr, dir)
	pr.CloseWithError(errors.New(stopped))
	if werr := <-errc; werr != nil {
		return fmt.Errorf("%s: %w", what, werr)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// writeBundleTar writes the bundle's entries as a tar stream (owned by
// root, with fixed times), read from its source and checked against the
// plan (recipes.CopyBundle).
func writeBundleTar(ctx context.Context, s steps.StageBundle, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := recipes.CopyBundle(ctx, s, s.Entries, func(e steps.BundleEntry) (io.Writer, error) {
		h := &tar.Header{Name: "./" + e.Path, Mode: int64(fsmode.ToUnix(e.Mode)), ModTime: bundleMTime, Format: tar.FormatPAX}
		switch e.Type {
		case "dir":
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case "symlink":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
		default:
			h.Typeflag, h.Size = tar.TypeReg, e.Size
		}
		return tw, tw.WriteHeader(h)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// cleanupScript is the shell the cleanup step runs, one block per action.
func cleanupScript(actions []string) string {
	parts := map[string]string{
		steps.CleanAptCache:    "apt-get clean; rm -rf /var/lib/apt/lists/*",
		steps.CleanMachineID:   ": > /etc/machine-id; if [ -f /var/lib/dbus/machine-id ] && [ ! -L /var/lib/dbus/machine-id ]; then rm -f /var/lib/dbus/machine-id; fi",
		steps.CleanCloudInit:   "if command -v cloud-init >/dev/null 2>&1; then cloud-init clean --logs --seed; fi; rm -rf /var/lib/cloud/*",
		steps.CleanSSHHostKeys: "rm -f /etc/ssh/ssh_host_*",
		steps.CleanLogs: "find /var/log -type f \\( -name '*.gz' -o -name '*.[0-9]' -o -name '*.old' \\) -delete; " +
			"find /var/log -type f -exec truncate -s 0 {} +; rm -rf /var/log/journal/*; rm -f /root/.bash_history",
		steps.CleanPolicyRCD:     "rm -f /usr/sbin/policy-rc.d",
		steps.CleanCloudInitNet:  "rm -f /etc/netplan/50-cloud-init.yaml",
		steps.CleanInstallerCfgs: "rm -f /etc/cloud/cloud.cfg.d/99-installer.cfg /etc/cloud/cloud.cfg.d/subiquity-disable-cloudinit-networking.cfg",
		// What differs between two builds of the same inputs and nothing
		// needs (mkosi and Debian's reproducible images remove the same):
		// ldconfig's aux-cache holds the inode numbers and ctimes of the
		// libraries it read (ldconfig rebuilds it), the *-old files are the
		// databases before the last write, the random seed is made at boot.
		steps.CleanPerBuild: "rm -f /var/cache/ldconfig/aux-cache /var/lib/dpkg/*-old /var/cache/debconf/*-old /var/lib/systemd/random-seed",
	}
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, act := range actions {
		b.WriteString(parts[act] + "\n")
	}
	return b.String()
}

// InstalledPackages reads the guest's dpkg database.
func InstalledPackages(ctx context.Context, s guest.Session) ([]manifest.Package, error) {
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
