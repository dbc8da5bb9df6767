package deploycheck

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/tgztest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/recipes"
)

const dpkgStatus = `Package: linux-generic
Status: install ok installed

Package: cloud-init
Status: install ok installed

Package: netplan.io
Status: install ok installed

Package: grub-efi-amd64
Status: install ok installed

Package: grub-efi-amd64-signed
Status: install ok installed

Package: shim-signed
Status: install ok installed

Package: efibootmgr
Status: install ok installed

Package: e2fsprogs
Status: install ok installed
`

// goodRoot is a root filesystem that deploys: every check passes.
func goodRoot() map[string]string {
	return map[string]string{
		"./etc/os-release":                                 "NAME=\"Ubuntu\"\nID=ubuntu\n",
		"./etc/machine-id":                                 "",
		"./var/lib/dpkg/status":                            dpkgStatus,
		"./usr/bin/lsb_release":                            "#!/usr/bin/python3\n",
		"./boot/vmlinuz-6.8.0-1-generic":                   "kernel",
		"./boot/initrd.img-6.8.0-1-generic":                "initrd",
		"./etc/default/grub":                               "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt\"\n",
		"./etc/default/grub.d/99-imagectl-kernel-args.cfg": "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX\"\n",
		"./etc/default/grub.d/50-cloudimg-settings.cfg":    "GRUB_CMDLINE_LINUX_DEFAULT=\"console=tty1\"\n",
	}
}

func writeTgz(t *testing.T, files map[string]string) string {
	t.Helper()
	var entries []tgztest.Entry
	for _, n := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(n, "/") {
			entries = append(entries, tgztest.Dir(n))
			continue
		}
		entries = append(entries, tgztest.File(n, files[n]))
	}
	return tgztest.Write(t, filepath.Join(t.TempDir(), "root.tgz"), entries...)
}

func checks(fs []Finding) string {
	var names []string
	for _, f := range fs {
		names = append(names, f.Check)
		if f.Fix == "" || f.Message == "" {
			f := f
			names = append(names, "(no fix for "+f.Check+")")
		}
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

func TestDeployableGood(t *testing.T) {
	fs, err := CheckDeployable(context.Background(), writeTgz(t, goodRoot()), DeployOptions{KernelArgs: []string{"intel_iommu=on", "iommu=pt"}, BareMetal: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 0 {
		t.Errorf("findings on a good root: %+v", fs)
	}
}

func TestDeployableFindings(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(map[string]string)
		want   string
	}{
		"debian":    {func(r map[string]string) { r["./etc/os-release"] = "ID=debian\n" }, "os-release"},
		"no kernel": {func(r map[string]string) { delete(r, "./boot/vmlinuz-6.8.0-1-generic") }, "kernel"},
		"virtual only": {func(r map[string]string) {
			r["./var/lib/dpkg/status"] = strings.Replace(dpkgStatus, "linux-generic", "linux-virtual", 1)
		}, "generic-kernel"},
		"no cloud-init": {func(r map[string]string) {
			r["./var/lib/dpkg/status"] = strings.Replace(dpkgStatus, "Package: cloud-init", "Package: cloud-utils", 1)
		}, "cloud-init"},
		"no lsb": {func(r map[string]string) { delete(r, "./usr/bin/lsb_release") }, "lsb-release"},
		"no shim": {func(r map[string]string) {
			r["./var/lib/dpkg/status"] = strings.Replace(dpkgStatus, "shim-signed", "shim", 1)
		}, "uefi-packages"},
		"esp content":  {func(r map[string]string) { r["./boot/efi/EFI/ubuntu/grubx64.efi"] = "x" }, "boot-efi"},
		"curtin hooks": {func(r map[string]string) { r["./curtin/curtin-hooks"] = "#!/bin/sh\n" }, "curtin-hooks"},
		"policy-rc.d":  {func(r map[string]string) { r["./usr/sbin/policy-rc.d"] = "exit 101\n" }, "policy-rc.d"},
		"machine-id":   {func(r map[string]string) { r["./etc/machine-id"] = "0123456789abcdef\n" }, "machine-id"},
		"ssh keys":     {func(r map[string]string) { r["./etc/ssh/ssh_host_ed25519_key"] = "k" }, "ssh-host-keys"},
		"cloud state":  {func(r map[string]string) { r["./var/lib/cloud/instance/boot-finished"] = "" }, "cloud-init-state"},
		"kernel args":  {func(r map[string]string) { r["./etc/default/grub"] = "GRUB_CMDLINE_LINUX=\"quiet\"\n" }, "kernel-args"},
		"drop-in default": {func(r map[string]string) {
			r["./etc/default/grub.d/60-site.cfg"] = "GRUB_CMDLINE_LINUX_DEFAULT=\"\"\n"
		}, "grub-dropin-default"},
		"commented default": {func(r map[string]string) {
			r["./etc/default/grub"] = "#GRUB_CMDLINE_LINUX_DEFAULT=\"splash\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt\"\n"
		}, "grub-commented-default"},
	} {
		t.Run(name, func(t *testing.T) {
			root := goodRoot()
			tc.change(root)
			fs, err := CheckDeployable(context.Background(), writeTgz(t, root), DeployOptions{KernelArgs: []string{"intel_iommu=on", "iommu=pt"}, BareMetal: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := checks(fs); got != tc.want {
				t.Errorf("findings %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeployableRefusesZstd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "root.tar.zst")
	os.WriteFile(p, []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, 0o644)
	fs, err := CheckDeployable(context.Background(), p, DeployOptions{})
	if err != nil || checks(fs) != "compression" || !strings.Contains(fs[0].Message, "zstd") {
		t.Errorf("%+v %v", fs, err)
	}
}

// TestDeployChecksListsEveryCheck keeps recipes.DeployChecks (what recipes
// may waive) in step with the checks the code makes.
func TestDeployChecksListsEveryCheck(t *testing.T) {
	src, err := os.ReadFile("check.go")
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]bool{}
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`add\("([a-z.-]+)"`),
		regexp.MustCompile(`Check: "([a-z.-]+)"`),
		regexp.MustCompile(`\{"[a-z.-]+", "([a-z.-]+)", "`),
	} {
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			made[m[1]] = true
		}
	}
	listed := map[string]bool{}
	for _, c := range recipes.DeployChecks {
		listed[c] = true
		if !made[c] {
			t.Errorf("recipes.DeployChecks lists %q, which no check makes", c)
		}
	}
	for c := range made {
		if !listed[c] {
			t.Errorf("check %q is missing from recipes.DeployChecks", c)
		}
	}
}

// Errors block until every one is waived.
func TestBlocking(t *testing.T) {
	fs := []Finding{{Check: "os-release", Severity: "error"}, {Check: "machine-id", Severity: "error"}, {Check: "stale-netplan", Severity: "warning"}}
	if !Blocking(fs) {
		t.Fatal("errors are not blocking")
	}
	fs = ApplyWaivers(fs, []manifest.Waiver{{Check: "os-release", Reason: "Debian lab image"}})
	if !fs[0].Waived || fs[0].WaiverReason != "Debian lab image" || fs[1].Waived {
		t.Fatalf("waived %+v", fs)
	}
	if !Blocking(fs) {
		t.Fatal("machine-id is still an error")
	}
	fs = ApplyWaivers(fs, []manifest.Waiver{{Check: "machine-id", Reason: "x"}})
	if Blocking(fs) {
		t.Fatal("all errors are waived, yet blocking")
	}
}

func TestApplyWaivers(t *testing.T) {
	fs := []Finding{{Check: "os-release", Severity: "error"}, {Check: "machine-id", Severity: "warning"}}
	fs = ApplyWaivers(fs, []manifest.Waiver{{Check: "os-release", Reason: "Debian lab image"}, {Check: "kernel", Reason: "unused"}})
	if !fs[0].Waived || fs[0].WaiverReason != "Debian lab image" || fs[1].Waived || Blocking(fs) {
		t.Errorf("waived %+v", fs)
	}
}

// CheckArtifact reads the manifest beside the tgz (or the one given): its
// kernel args are expected, its waivers applied.
func TestCheckArtifact(t *testing.T) {
	ctx := context.Background()
	root := goodRoot()
	root["./etc/os-release"] = "ID=debian\n"
	tgz := writeTgz(t, root)
	r, err := CheckArtifact(ctx, tgz, ArtifactOptions{BareMetal: true})
	if err != nil || r.Deployable || r.Artifact != tgz || checks(r.Findings) != "os-release" {
		t.Fatalf("no manifest: %+v %v", r, err)
	}
	beside := manifest.FilesBeside(tgz).Manifest
	manifesttest.Write(t, beside, &manifest.Manifest{SchemaVersion: manifest.SchemaVersion, KernelArgs: []string{"intel_iommu=on"},
		DeployWaivers: []manifest.Waiver{{Check: "os-release", Reason: "lab"}}})
	r, err = CheckArtifact(ctx, tgz, ArtifactOptions{BareMetal: true})
	if err != nil || !r.Deployable || len(r.Findings) != 1 || !r.Findings[0].Waived || r.Findings[0].WaiverReason != "lab" {
		t.Fatalf("the manifest beside: %+v %v", r, err)
	}
	other := filepath.Join(t.TempDir(), "other.json")
	manifesttest.Write(t, other, &manifest.Manifest{SchemaVersion: manifest.SchemaVersion, KernelArgs: []string{"hugepages=8"}})
	r, err = CheckArtifact(ctx, tgz, ArtifactOptions{Manifest: other, BareMetal: true})
	if err != nil || r.Deployable || checks(r.Findings) != "kernel-args os-release" {
		t.Fatalf("--manifest: %+v %v", r, err)
	}
	if _, err := CheckArtifact(ctx, tgz, ArtifactOptions{Manifest: filepath.Join(t.TempDir(), "none.json")}); err == nil {
		t.Error("a missing manifest was ignored")
	}
	good, err := CheckArtifact(ctx, writeTgz(t, goodRoot()), ArtifactOptions{BareMetal: true})
	if err != nil || !good.Deployable || good.Findings == nil || len(good.Findings) != 0 {
		t.Errorf("a good tgz: %+v %v", good, err)
	}
}
