package validate

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
		if p := manifest.FilesBeside(tgz).Manifest; fileExists(p) {
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

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// DeployOptions are what the check knows beyond the tgz.
type DeployOptions struct {
	// KernelArgs are the recipe's kernel args, expected in GRUB_CMDLINE_LINUX.
	KernelArgs []string
	// BareMetal asks for a generic kernel (curtin installs linux-generic and
	// a virtual-only kernel lacks bare-metal drivers).
	BareMetal bool
}

// tgzFacts is what CheckDeployable gathers in one pass over the archive.
type tgzFacts struct {
	paths    map[string]*tar.Header
	contents map[string][]byte // small files the checks read
}

// wanted are the files whose content the checks read.
var wanted = regexp.MustCompile(`^(etc/os-release|usr/lib/os-release|etc/machine-id|var/lib/dpkg/status|etc/default/grub|etc/default/grub\.d/[^/]+\.cfg)$`)

// CheckDeployable reads a tgz the way curtin will use it and returns what
// would break or slow its deploy. It streams the archive once; nothing is
// extracted.
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
	f, err := os.Open(tgzPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", tgzPath, err)
	}
	if magic[0] != 0x1f || magic[1] != 0x8b {
		what := "not gzip"
		if bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
			what = "zstd"
		}
		return []Finding{{Check: "compression", Severity: "error",
			Message: fmt.Sprintf("the artifact is %s: curtin's smtar recognises gzip, bzip2, xz and compress only", what),
			Fix:     "build it with imagectl, which writes gzip"}}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", tgzPath, err)
	}
	facts := tgzFacts{paths: map[string]*tar.Header{}, contents: map[string][]byte{}}
	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", tgzPath, err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(path.Clean("/"+h.Name), "/"), "/")
		facts.paths[name] = h
		if h.Typeflag == tar.TypeReg && wanted.MatchString(name) && h.Size < 64<<20 {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			facts.contents[name] = b
		}
	}
	return facts.check(opts), nil
}

func (t tgzFacts) has(p string) bool { _, ok := t.paths[p]; return ok }

// under lists the paths at or below dir.
func (t tgzFacts) under(dir string) []string {
	var out []string
	for p := range t.paths {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

func (t tgzFacts) glob(pattern string) []string {
	var out []string
	for p := range t.paths {
		if ok, _ := path.Match(pattern, p); ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

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
	kernels, initrds := t.glob("boot/vmlinuz-*"), t.glob("boot/initrd.img-*")
	switch {
	case len(kernels) == 0 || len(initrds) == 0:
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
	if len(t.under("boot/efi")) > 0 {
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
	if keys := t.glob("etc/ssh/ssh_host_*"); len(keys) > 0 {
		add("ssh-host-keys", "error", fmt.Sprintf("%d SSH host keys are in the image: every deployed host would share them", len(keys)), "remove /etc/ssh/ssh_host_* in the clean-up")
	}
	if len(t.under("var/lib/cloud/instance"))+len(t.under("var/lib/cloud/instances")) > 0 {
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
	for _, p := range t.glob("etc/default/grub.d/*.cfg") {
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
