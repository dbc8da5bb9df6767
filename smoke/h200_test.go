//go:build guestfs

package smoke

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/guestfs"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// TestSmokeH200StandIn builds the Debian stand-in of the H200 recipe
// (testdata/h200-debian.hcl) and boots it as a slice host at stage
// converged: the test bundles' bootstrap converges the slice baseline in
// the VM (node agent, slice units, the OVS bridge with its address, dnsmasq
// with its subnet file, libvirtd, the done-markers) and every check PASSes,
// but those of hardware the VM lacks (GPUs, InfiniBand, nested KVM, an
// IOMMU), which WARN. Then one broken variant boots once (a second boot
// would cost minutes under TCG) with two breakages smoke must catch: its
// slice bundle leaves the bridge without its address (rebuilt from the
// layer cache: only its bundle changed), and its tgz is repacked with
// iommu=pt taken out of GRUB's files, which is the proof that smoke catches
// a GRUB missing a kernel arg, the bug imagectl exists to prevent.
//
// Both boots also serve the release loop end to end (releaseLoop): each
// VM stays up after its own validation while imagectl hostcheck reaches
// it over the real OpenSSH client with the key its seed authorized. The
// good version's passing result, recorded at the canary of a git catalog,
// turns promote to the group fleet from refused (exit 3, naming the
// missing evidence) to done; the broken version's is recorded as failing
// and its promotion is refused naming the host and the check.
func TestSmokeH200StandIn(t *testing.T) {
	good := standInArtifact(t)
	dir := t.TempDir()
	ssh := newSSHClient(t)
	loop := newReleaseLoop(t, ssh)
	loop.publish(t, good)

	t.Run("converged", func(t *testing.T) {
		up := false
		res, _, err := runSmoke(t, context.Background(), good, Options{Profile: "slice", Stage: "converged",
			AuthorizedKeys: []string{ssh.pub}, WhileUp: func(ctx context.Context, ep SSH) error {
				up = true
				return loop.converged(t, ctx, ep, standInVersion)
			}})
		if err != nil {
			t.Fatal(err)
		}
		if !up || res.SSH == nil || res.Seconds[PhaseUp] == 0 {
			t.Errorf("the VM was not kept up for the release loop: ssh %+v, seconds %v", res.SSH, res.Seconds)
		}
		if res.Profile != "slice" || res.Stage != "converged" || res.SystemState != "running" {
			t.Errorf("profile %q, stage %q, state %q", res.Profile, res.Stage, res.SystemState)
		}
		status := map[string]string{}
		for _, l := range res.Lines {
			status[l.Check] = l.Status
			switch {
			case l.Status == "PASS":
			case l.Status == "WARN" && absentHardware(l.Check):
			default:
				t.Errorf("%s %s: %s", l.Status, l.Check, l.Detail)
			}
		}
		for _, c := range []string{
			"done-marker:h200-ib.done", "done-marker:h200-slice-vm.done", "bridge:ovsbr0", "dhcp:dnsmasq",
			"fabric:netplan", "service-active:gpuaas-node-agent", "service-active:gpuaas-slice-ovs-bridge",
			"service-active:gpuaas-slice-network-baseline", "service-active:libvirtd", "slice:vfio:vfio_pci",
			"kernel-arg:iommu=pt:cmdline", "netdata-collector:cgroups", "command:docker-compose",
		} {
			if status[c] != "PASS" {
				t.Errorf("check %s: %q, want PASS", c, status[c])
			}
		}
		for _, c := range []string{"gpu:nvml", "fabric:address"} {
			if status[c] != "WARN" {
				t.Errorf("check %s: %q, want WARN (absent hardware)", c, status[c])
			}
		}
		if !strings.Contains(res.KernelCmdline, "intel_iommu=on iommu=pt") || !strings.Contains(res.KernelCmdline, "console=ttyS0") {
			t.Errorf("kernel command line %q", res.KernelCmdline)
		}
		if b := res.Bootstrap; b == nil || b.Bundle != "h200-slice-vm" || b.Exit == nil || *b.Exit != 0 {
			t.Errorf("bootstrap %+v", b)
		}
		b, err := os.ReadFile(manifest.FilesBeside(good).SmokeLog)
		if err != nil || !strings.Contains(string(b), "Linux version") || !strings.Contains(string(b), "IMAGECTL_SMOKE done") {
			t.Errorf("console log: %v (%d bytes)", err, len(b))
		}
		checkTimeline(t, good, res)
		if res.Timeline.Find(MilestoneBootstrapDone) == nil {
			t.Error("the timeline has no bootstrap")
		}
	})

	// The broken variant, booted once for both breakages: the bridge
	// without its address, and GRUB without iommu=pt.
	t.Run("broken-bridge-and-grub-without-iommu=pt", func(t *testing.T) {
		bundles := filepath.Join(dir, "broken-bundles")
		for _, b := range []string{"h200-ib", "h200-slice-vm"} {
			if err := os.CopyFS(filepath.Join(bundles, b), os.DirFS("../testdata/bundles/"+b)); err != nil {
				t.Fatal(err)
			}
		}
		conf := filepath.Join(bundles, "h200-slice-vm/site.conf")
		b, err := os.ReadFile(conf)
		if err != nil {
			t.Fatal(err)
		}
		broken := strings.Replace(string(b), "SLICE_BRIDGE_ADDRESS=10.100.0.1/24", "SLICE_BRIDGE_ADDRESS=", 1)
		if broken == string(b) {
			t.Fatal("the slice bundle's site.conf no longer sets SLICE_BRIDGE_ADDRESS")
		}
		if err := os.WriteFile(conf, []byte(broken), 0o644); err != nil {
			t.Fatal(err)
		}
		// A version of its own, so that its evidence is its own.
		built := buildStandIn(t, testbase.Vars(t), dir, filepath.Join(standInDir, "cache"), "broken", bundles, "version="+brokenVersion)
		loop.publish(t, built)
		tgz := withoutKernelArg(t, built, "iommu=pt")
		up := false
		res, _, err := runSmoke(t, context.Background(), tgz, Options{Profile: "slice", Stage: "converged",
			AuthorizedKeys: []string{ssh.pub}, WhileUp: func(ctx context.Context, ep SSH) error {
				up = true
				return loop.broken(t, ctx, ep, brokenVersion)
			}})
		if !errors.Is(err, ErrFailed) {
			t.Fatalf("got %v, want a failed smoke test", err)
		}
		if !up {
			t.Error("the VM was not kept up for the release loop")
		}
		status := map[string]string{}
		var failed []string
		for _, l := range res.Lines {
			status[l.Check] = l.Status
			if l.Status == "FAIL" {
				failed = append(failed, l.Check)
				if l.Remediation == "" {
					t.Errorf("FAIL %s has no remediation", l.Check)
				}
			}
		}
		// Besides the bridge, GRUB's files without iommu=pt fail the
		// kernel arg's three checks (the validation script reads
		// /etc/default/grub and the grub.d drop-ins as grub-mkconfig does,
		// and /proc/cmdline) and the imagectl drop-in's file check (it is
		// not the file the build wrote). Nothing else fails.
		want := []string{"bridge:ovsbr0", "file:" + compile.GrubDropIn,
			"kernel-arg:iommu=pt:default-grub", "kernel-arg:iommu=pt:grub-d", "kernel-arg:iommu=pt:cmdline"}
		slices.Sort(failed)
		slices.Sort(want)
		if !slices.Equal(failed, want) {
			t.Errorf("failed checks %v, want %v", failed, want)
		}
		if res.SystemState != "running" {
			t.Errorf("system state %q", res.SystemState)
		}
		if res.ManifestMatches {
			t.Error("the repacked tgz matches the manifest")
		}

		t.Run("bridge-not-converged", func(t *testing.T) {
			if status["bridge:ovsbr0"] != "FAIL" || !strings.Contains(err.Error(), "bridge:ovsbr0") {
				t.Errorf("bridge:ovsbr0 %q; the error does not name it: %v", status["bridge:ovsbr0"], err)
			}
		})

		// The proof that smoke catches a GRUB missing a kernel arg: the
		// booted kernel's command line lacks iommu=pt and the run fails
		// naming it, while intel_iommu=on, still in GRUB's files, passes.
		t.Run("smoke-catches-grub-missing-kernel-arg", func(t *testing.T) {
			if !strings.Contains(err.Error(), "kernel-arg:iommu=pt:cmdline (not in /proc/cmdline)") {
				t.Errorf("the error does not name the missing kernel arg: %v", err)
			}
			if status["kernel-arg:iommu=pt:cmdline"] != "FAIL" {
				t.Errorf("kernel-arg:iommu=pt:cmdline %q, want FAIL", status["kernel-arg:iommu=pt:cmdline"])
			}
			for _, c := range []string{"kernel-arg:intel_iommu=on:default-grub", "kernel-arg:intel_iommu=on:grub-d", "kernel-arg:intel_iommu=on:cmdline"} {
				if status[c] != "PASS" {
					t.Errorf("%s %q, want PASS", c, status[c])
				}
			}
			if args := strings.Fields(res.KernelCmdline); slices.Contains(args, "iommu=pt") || !slices.Contains(args, "intel_iommu=on") {
				t.Errorf("kernel command line %q", res.KernelCmdline)
			}
		})
	})
}

// absentHardware names the checks that WARN in a VM without GPUs,
// InfiniBand, nested virtualization or an IOMMU.
func absentHardware(check string) bool {
	return strings.HasPrefix(check, "gpu:") || strings.HasPrefix(check, "fabric:address") ||
		strings.HasPrefix(check, "fabric:route") || check == "slice:kvm" || check == "slice:iommu-groups"
}

// standInRecipe loads testdata/h200-debian.hcl with the bundles in bundles
// and the recipe's variables set by flags (NAME=VALUE).
func standInRecipe(t testing.TB, vars, bundles string, flags ...string) *recipes.Recipe {
	t.Helper()
	abs, err := filepath.Abs(bundles)
	if err != nil {
		t.Fatal(err)
	}
	r, diags := recipes.NewParser().LoadFile("../testdata/h200-debian.hcl", recipes.Options{
		Roots:  []string{abs},
		Inputs: recipes.Inputs{Files: []string{vars}, Flags: append([]string{"site_bootstrap_dir=" + abs}, flags...)},
	})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return r
}

// standInDir holds the stand-in's build (and its layer cache) for all the
// tests; TestMain removes it.
var standInDir string

// standInArtifact builds the H200 stand-in once for all the tests and
// returns its tgz (with the manifest beside it).
func standInArtifact(t *testing.T) string {
	t.Helper()
	vars := testbase.Vars(t)
	if standInDir != "" {
		tgz, _ := filepath.Glob(filepath.Join(standInDir, "good", "*.tgz"))
		if len(tgz) != 1 {
			t.Fatal("the H200 stand-in's build failed in an earlier test")
		}
		return tgz[0]
	}
	var err error
	if standInDir, err = os.MkdirTemp("", "imagectl-smoke-test-"); err != nil {
		t.Fatal(err)
	}
	return buildStandIn(t, vars, standInDir, filepath.Join(standInDir, "cache"), "good", "../testdata/bundles")
}

// The stand-in's version (the recipe's default) and the broken variant's.
const (
	standInVersion = "0.0.0-debian"
	brokenVersion  = "0.0.1-debian-broken"
)

// buildStandIn builds testdata/h200-debian.hcl with the bundles in bundles
// and the recipe's variables set by flags (NAME=VALUE) into dir/name,
// through the layer cache in cache, and returns its tgz.
func buildStandIn(t testing.TB, vars, dir, cache, name, bundles string, flags ...string) string {
	t.Helper()
	r := standInRecipe(t, vars, bundles, flags...)
	plan, err := plan.New(r, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := builder.Build(context.Background(), plan, builder.BuildOptions{Executor: guestfs.Executor{},
		CacheDir: filepath.Join(cache, cachedir.Base), LayerCache: filepath.Join(cache, cachedir.Layers), WorkDir: dir, OutputDir: out,
		PackageCache: testenv.PackageCache(t), Env: os.Environ()})
	if err != nil {
		t.Fatalf("building the H200 stand-in (%s): %v", name, err)
	}
	t.Logf("H200 stand-in (%s) built in %s", name, time.Since(start).Round(time.Second))
	return res.Files.Tarball
}
