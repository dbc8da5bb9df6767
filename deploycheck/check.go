package deploycheck

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
)

// Finding is one way a tgz would fail or degrade a MAAS deploy, with the
// fix. Check names are stable so a recipe can waive one by name.
type Finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"` // "error": the deploy fails; "warning": it degrades
	Message  string `json:"message"`
	Fix      string `json:"fix"`
	// Waived is set when the recipe waives the check, for WaiverReason.
	Waived       bool   `json:"waived,omitempty"`
	WaiverReason string `json:"waiver_reason,omitempty"`
}

// ApplyWaivers marks the findings of the checks a recipe waives (its
// waive blocks, as the plan and the manifest record them).
func ApplyWaivers(findings []Finding, waivers []manifest.Waiver) []Finding {
	byCheck := map[string]string{}
	for _, w := range waivers {
		byCheck[w.Check] = w.Reason
	}
	for i := range findings {
		if reason, ok := byCheck[findings[i].Check]; ok {
			findings[i].Waived, findings[i].WaiverReason = true, reason
		}
	}
	return findings
}

// Blocking reports whether any finding is an error the recipe does not waive.
func Blocking(findings []Finding) bool {
	for _, f := range findings {
		if f.Severity == "error" && !f.Waived {
			return true
		}
	}
	return false
}

// Report is the deployability of a built artifact: its findings, with the
// manifest's waivers applied.
type Report struct {
	Artifact string `json:"artifact"`
	// Deployable is false when a finding is an error not waived.
	Deployable bool      `json:"deployable"`
	Findings   []Finding `json:"findings"`
}

// ArtifactOptions adjust CheckArtifact.
type ArtifactOptions struct {
	// Manifest is the build manifest whose kernel args are expected and
	// whose waivers apply; default the .manifest.json beside the tgz when
	// there is one (without one, nothing is waived).
	Manifest string
	// BareMetal is DeployOptions.BareMetal.
	BareMetal bool
}

// CheckArtifact checks a built tgz as CheckDeployable does, against its
// manifest's kernel args, and applies the manifest's waivers.
func CheckArtifact(ctx context.Context, tgz string, opts ArtifactOptions) (*Report, error) {
	mpath := opts.Manifest
	if mpath == "" {
		p := manifest.FilesBeside(tgz).Manifest
		if _, err := os.Stat(p); err == nil {
			mpath = p
		}
	}
	dopts := DeployOptions{BareMetal: opts.BareMetal}
	var waivers []manifest.Waiver
	if mpath != "" {
		m, err := manifest.Read(mpath)
		if err != nil {
			return nil, err
		}
		dopts.KernelArgs, waivers = m.KernelArgs, m.DeployWaivers
	}
	findings, err := CheckDeployable(ctx, tgz, dopts)
	if err != nil {
		return nil, err
	}
	findings = ApplyWaivers(findings, waivers)
	if findings == nil {
		findings = []Finding{}
	}
	return &Report{Artifact: tgz, Deployable: !Blocking(findings), Findings: findings}, nil
}

// DeployOptions are what the check knows beyond the tgz.
type DeployOptions struct {
	// KernelArgs are the recipe's kernel args, expected in GRUB_CMDLINE_LINUX.
	KernelArgs []string
	// BareMetal asks for a generic kernel (curtin installs linux-generic and
	// a virtual-only kernel lacks bare-metal drivers).
	BareMetal bool
}

// tgzFacts is what CheckDeployable keeps of its one pass over the archive:
// the content of the few files the checks read, and of every other entry
// only what the checks ask of it (whether it is there, how many match a
// pattern). No entry's header is kept, so what it holds does not grow
// with the number of entries or the length of their names.
type tgzFacts struct {
	present  map[string]bool   // the names of exact that are in the archive
	counts   map[string]int    // the entries that match each of counted
	contents map[string][]byte // the files of wanted, within their bounds
	read     int64             // the bytes of contents read, repeated entries included
}

// wanted are the files whose content the checks read. A grub.d drop-in's
// name is at most NAME_MAX (255) bytes, as on any filesystem.
var wanted = regexp.MustCompile(`^(etc/os-release|usr/lib/os-release|etc/machine-id|var/lib/dpkg/status|etc/default/grub|etc/default/grub\.d/[^/]{1,250}\.cfg)$`)

// The names whose presence the checks ask, and the patterns (path.Match,
// or a directory and what is under it when ending in "/**") whose
// entries they count.
var (
	exact   = []string{"usr/bin/lsb_release", "curtin/curtin-hooks", "usr/sbin/policy-rc.d", "etc/netplan/50-cloud-init.yaml"}
	counted = []string{"boot/vmlinuz-*", "boot/initrd.img-*", "etc/ssh/ssh_host_*", "boot/efi/**", "var/lib/cloud/instance/**", "var/lib/cloud/instances/**"}
)

// The bounds of what CheckDeployable reads into memory: an archive past
// them is refused, naming the entry, as no root filesystem MAAS deploys.
const (
	// maxWanted is the most read of one wanted file: os-release,
	// machine-id and GRUB's settings are a few hundred bytes.
	maxWanted = 1 << 20
	// maxDpkgStatus is the most read of dpkg's status file: about 1.5 KB
	// a package, 5,000 packages in 8 MiB.
	maxDpkgStatus = 32 << 20
	// maxWantedTotal is the most read of all of them together, entries
	// repeated in the archive included.
	maxWantedTotal = 48 << 20
	// maxGrubDropIns is the most grub.d drop-ins kept: a system has a
	// handful.
	maxGrubDropIns = 256
)

// match reports whether name matches a pattern of counted.
func match(pattern, name string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/**"); ok {
		return name == dir || strings.HasPrefix(name, dir+"/")
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

// CheckDeployable reads a tgz the way curtin will use it and returns what
// would break or slow its deploy. It streams the archive once; nothing is
// extracted, and what it keeps is bounded (tgzFacts): an archive whose
// files the checks read pass their bounds is refused with an error naming
// the entry, as is one that ends early or is damaged, naming the entry
// after which it broke. It stops when ctx is done, even inside an entry.
//
// What curtin does with a custom tgz (https://curtin.readthedocs.io and
// https://github.com/canonical/curtin, with MAAS's preseeds), which the
// checks follow: MAAS deploys it through its Ubuntu path (ID=ubuntu in
// os-release); curtin streams
// the archive into the target with tar --xattrs --numeric-owner, telling
// the compression by MIME type (gzip, bzip2, xz or compress: not zstd),
// after mounting the vfat ESP on /boot/efi (so nothing may be shipped
// there); an image's /curtin/curtin-hooks replaces all its built-in hooks;
// MAAS sends no kernel for custom images, so curtin installs linux-generic
// and needs a kernel and initrd under /boot; it installs the UEFI boot
// packages that are missing (from the archive: slow, and a failure
// offline); MAAS's late commands run cloud-init and netplan in the target
// and curtin identifies it with lsb_release; it rewrites
// GRUB_CMDLINE_LINUX_DEFAULT (console and the node's kernel_opts) with an
// unanchored edit and never touches GRUB_CMDLINE_LINUX, where the recipe's
// kernel args belong; and it leaves /usr/sbin/policy-rc.d, machine-id, SSH
// host keys and cloud-init state as it finds them, to be shared by every
// host deployed.
func CheckDeployable(ctx context.Context, tgzPath string, opts DeployOptions) ([]Finding, error) {
	f, err := readlimit.Open(tgzPath)
	if err != nil {
		return nil, fmt.Errorf("checking the artifact: %w", err) // it names tgzPath
	}
	defer f.Close()
	br := bufio.NewReaderSize(readlimit.WithContext(ctx, f), 1<<20)
	magic, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("checking %s: reading its first bytes: %w", tgzPath, err)
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		what := "not gzip"
		switch {
		case len(magic) == 0:
			what = "empty"
		case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
			what = "zstd"
		}
		return []Finding{{Check: "compression", Severity: "error",
			Message: fmt.Sprintf("%s is %s: curtin's smtar recognises gzip, bzip2, xz and compress only", tgzPath, what),
			Fix:     "build it with imagectl, which writes gzip"}}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("checking %s: reading its gzip header: %w", tgzPath, err)
	}
	facts := tgzFacts{present: map[string]bool{}, counts: map[string]int{}, contents: map[string][]byte{}}
	// The context is looked at on every read of the decompressed stream,
	// so that a huge entry (a gzip bomb) does not outlast it.
	tr := tar.NewReader(readlimit.WithContext(ctx, zr))
	last := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			where := "at its start"
			if last != "" {
				where = fmt.Sprintf("after entry %q", last)
			}
			return nil, fmt.Errorf("checking %s: reading the tar stream %s: %w", tgzPath, where, err)
		}
		last = h.Name
		if err := facts.add(tr, h); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			return nil, fmt.Errorf("checking %s: %w", tgzPath, err)
		}
	}
	return facts.check(opts), nil
}

// add records what the checks need of the entry h, reading its content
// from r when it is a file they read.
func (t *tgzFacts) add(r io.Reader, h *tar.Header) error {
	name := strings.TrimSuffix(strings.TrimPrefix(path.Clean("/"+h.Name), "/"), "/")
	for _, e := range exact {
		if name == e {
			t.present[name] = true
		}
	}
	for _, p := range counted {
		if match(p, name) {
			t.counts[p]++
		}
	}
	if h.Typeflag != tar.TypeReg || !wanted.MatchString(name) {
		return nil
	}
	limit := int64(maxWanted)
	if name == "var/lib/dpkg/status" {
		limit = maxDpkgStatus
	}
	if h.Size > limit {
		return fmt.Errorf("entry %q has %d bytes, more than the %s the check reads of it: not the file a root filesystem has there", h.Name, h.Size, readlimit.Size(limit))
	}
	if t.read+h.Size > maxWantedTotal {
		return fmt.Errorf("entry %q brings the files the checks read (os-release, machine-id, dpkg's status, GRUB's settings) past %s in all: not a root filesystem (are entries repeated?)", h.Name, readlimit.Size(maxWantedTotal))
	}
	if _, seen := t.contents[name]; !seen && strings.HasPrefix(name, "etc/default/grub.d/") && t.grubDropIns() >= maxGrubDropIns {
		return fmt.Errorf("entry %q: more than %d GRUB drop-ins in etc/default/grub.d: not a root filesystem", h.Name, maxGrubDropIns)
	}
	b := make([]byte, h.Size) // at most limit
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("reading entry %q: %w", h.Name, err)
	}
	t.read += int64(len(b))
	t.contents[name] = b
	return nil
}

// grubDropIns counts the grub.d drop-ins kept.
func (t *tgzFacts) grubDropIns() int {
	n := 0
	for p := range t.contents {
		if strings.HasPrefix(p, "etc/default/grub.d/") {
			n++
		}
	}
	return n
}

func (t tgzFacts) has(p string) bool { return t.present[p] }

// count is how many entries match pattern, one of counted.
func (t tgzFacts) count(pattern string) int { return t.counts[pattern] }

// installed parses dpkg's status file into installed package names.
func (t tgzFacts) installed() map[string]bool {
	pkgs := map[string]bool{}
	for _, stanza := range strings.Split(string(t.contents["var/lib/dpkg/status"]), "\n\n") {
		var name string
		ok := false
		for _, line := range strings.Split(stanza, "\n") {
			switch {
			case strings.HasPrefix(line, "Package: "):
				name = strings.TrimPrefix(line, "Package: ")
			case strings.HasPrefix(line, "Status: ") && strings.HasSuffix(line, " installed"):
				ok = true
			}
		}
		if name != "" && ok {
			pkgs[name] = true
		}
	}
	return pkgs
}

var (
	liveDefault    = regexp.MustCompile(`(?m)^[ \t]*GRUB_CMDLINE_LINUX_DEFAULT=`)
	commentDefault = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*GRUB_CMDLINE_LINUX_DEFAULT=`)
	liveCmdline    = regexp.MustCompile(`(?m)^[ \t]*GRUB_CMDLINE_LINUX=(.*)$`)
)

func (t tgzFacts) check(opts DeployOptions) []Finding {
	var fs []Finding
	add := func(check, sev, msg, fix string) {
		fs = append(fs, Finding{Check: check, Severity: sev, Message: msg, Fix: fix})
	}
	pkgs := t.installed()

	osRelease := string(t.contents["etc/os-release"])
	if osRelease == "" {
		osRelease = string(t.contents["usr/lib/os-release"])
	}
	if !regexp.MustCompile(`(?m)^ID=("?)ubuntu("?)$`).MatchString(osRelease) {
		add("os-release", "error", "/etc/os-release does not say ID=ubuntu: MAAS deploys custom tgz images through its Ubuntu path",
			"build from an Ubuntu cloud image")
	}
	switch {
	case t.count("boot/vmlinuz-*") == 0 || t.count("boot/initrd.img-*") == 0:
		add("kernel", "error", "no kernel and initrd under /boot: MAAS sends no kernel for custom images",
			"install a kernel package in a layer (linux-generic for bare metal)")
	case opts.BareMetal && !pkgs["linux-generic"] && !pkgs["linux-image-generic"]:
		add("generic-kernel", "warning", "linux-generic is not installed: curtin installs it at deploy (slow, and a failure without an archive) and GRUB may boot the virtual kernel",
			"install linux-generic and purge linux-virtual (layers/maas-deployable.hcl does)")
	}
	for _, need := range []struct{ pkg, check, why string }{
		{"cloud-init", "cloud-init", "MAAS configures the host through cloud-init and runs `cloud-init --version` in the target"},
		{"netplan.io", "netplan", "MAAS runs `netplan info` in the target and cloud-init renders netplan"},
	} {
		if !pkgs[need.pkg] {
			add(need.check, "error", need.pkg+" is not installed: "+need.why, "install "+need.pkg)
		}
	}
	if !t.has("usr/bin/lsb_release") {
		add("lsb-release", "error", "lsb_release is missing: curtin uses it to identify the target", "install lsb-release")
	}
	var missing []string
	for _, p := range []string{"grub-efi-amd64", "grub-efi-amd64-signed", "shim-signed", "efibootmgr", "e2fsprogs"} {
		if !pkgs[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		add("uefi-packages", "warning", "not installed: "+strings.Join(missing, ", ")+"; curtin installs them at deploy, which fails without an archive",
			"install them in a layer (layers/maas-deployable.hcl does)")
	}
	if t.count("boot/efi/**") > 0 {
		add("boot-efi", "error", "the tgz carries ./boot/efi: curtin mounts the vfat ESP there before extracting, where owners and symlinks fail",
			"leave /boot/efi out of the archive (imagectl's packer does)")
	}
	if t.has("curtin/curtin-hooks") {
		add("curtin-hooks", "error", "/curtin/curtin-hooks replaces all of curtin's built-in hooks (GRUB, kernel, fstab)",
			"remove it unless it calls curtin's hooks itself")
	}
	if t.has("usr/sbin/policy-rc.d") {
		add("policy-rc.d", "error", "/usr/sbin/policy-rc.d stays after deploy and no service ever starts", "remove it in the image's clean-up")
	}
	if b, ok := t.contents["etc/machine-id"]; ok && len(bytes.TrimSpace(b)) > 0 {
		add("machine-id", "error", "/etc/machine-id is not empty: every deployed host would share it", "empty it in the clean-up")
	}
	if keys := t.count("etc/ssh/ssh_host_*"); keys > 0 {
		add("ssh-host-keys", "error", fmt.Sprintf("%d SSH host keys are in the image: every deployed host would share them", keys), "remove /etc/ssh/ssh_host_* in the clean-up")
	}
	if t.count("var/lib/cloud/instance/**")+t.count("var/lib/cloud/instances/**") > 0 {
		add("cloud-init-state", "error", "cloud-init state is in the image: first boot would skip its per-instance work", "run cloud-init clean in the clean-up")
	}
	if t.has("etc/netplan/50-cloud-init.yaml") {
		add("stale-netplan", "warning", "/etc/netplan/50-cloud-init.yaml from the build host is in the image", "remove it in the clean-up")
	}

	grub := t.contents["etc/default/grub"]
	if live := liveDefault.FindIndex(grub); live != nil {
		if c := commentDefault.FindIndex(grub); c != nil && c[0] < live[0] {
			add("grub-commented-default", "warning", "a commented GRUB_CMDLINE_LINUX_DEFAULT line comes before the live one in /etc/default/grub: curtin's unanchored edit changes the comment, not the setting",
				"delete the commented line")
		}
	}
	var dropIns []string
	for p := range t.contents {
		if ok, _ := path.Match("etc/default/grub.d/*.cfg", p); ok {
			dropIns = append(dropIns, p)
		}
	}
	sort.Strings(dropIns)
	for _, p := range dropIns {
		if p == "etc/default/grub.d/50-cloudimg-settings.cfg" || p == "etc/default/grub.d/50-curtin-settings.cfg" {
			continue // curtin disables the first and writes the second itself
		}
		if liveDefault.Match(t.contents[p]) {
			add("grub-dropin-default", "error", "/"+p+" assigns GRUB_CMDLINE_LINUX_DEFAULT: it overrides the console and kernel_opts curtin writes at deploy",
				"set GRUB_CMDLINE_LINUX instead (the recipe's kernel block does)")
		}
	}
	if len(opts.KernelArgs) > 0 {
		var value string
		if m := liveCmdline.FindAllSubmatch(grub, -1); len(m) > 0 {
			value = string(m[len(m)-1][1])
		}
		have := map[string]bool{}
		for _, f := range strings.Fields(strings.Trim(value, `"'`)) {
			have[f] = true
		}
		var absent []string
		for _, a := range opts.KernelArgs {
			if !have[a] {
				absent = append(absent, a)
			}
		}
		if len(absent) > 0 {
			add("kernel-args", "error", "not in GRUB_CMDLINE_LINUX of /etc/default/grub: "+strings.Join(absent, " "),
				"put them in the recipe's kernel block and rebuild")
		}
	}
	return fs
}
