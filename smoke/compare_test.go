package smoke

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
)

// The first-boot path's user-data, parsed back as cloud-init reads it:
// write_files holds the first-boot script byte for byte, runcmd runs it
// first (with -e on, so what follows runs only when it succeeded) and the
// site bootstrap second, exactly as the baked path runs it, and the login
// is the baked path's.
func TestFirstBootUserData(t *testing.T) {
	script := firstboot.Result{Script: []byte("#!/bin/sh\necho 'it''s' \"$(x)\"\n\xff\n")}
	b := testBootstrap("/usr/local/share/gpuaas/site-bootstrap/h200-slice-vm")
	login := &guestLogin{user: "ubuntu", keys: []string{"ssh-ed25519 AAAAC3Nz it's me"}}
	ud := firstBootUserData(script, b, login)
	if !strings.HasPrefix(ud, "#cloud-config\n") {
		t.Fatalf("not a cloud-config:\n%s", ud)
	}
	var doc struct {
		WriteFiles []struct {
			Path, Owner, Permissions, Encoding, Content string
		} `yaml:"write_files"`
		RunCmd []any `yaml:"runcmd"`
		Users  []struct {
			Name              string   `yaml:"name"`
			Shell             string   `yaml:"shell"`
			LockPasswd        bool     `yaml:"lock_passwd"`
			Sudo              string   `yaml:"sudo"`
			SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys"`
		} `yaml:"users"`
	}
	if err := yaml.Unmarshal([]byte(ud), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, ud)
	}
	if len(doc.WriteFiles) != 1 || doc.WriteFiles[0].Path != firstboot.ScriptPath || doc.WriteFiles[0].Encoding != "b64" {
		t.Fatalf("write_files %+v", doc.WriteFiles)
	}
	if got, err := base64.StdEncoding.DecodeString(doc.WriteFiles[0].Content); err != nil || string(got) != string(script.Script) {
		t.Errorf("the script does not come back: %v %q", err, got)
	}
	if len(doc.RunCmd) != 2 {
		t.Fatalf("runcmd %q", doc.RunCmd)
	}
	if doc.RunCmd[0] != firstboot.RunCmd(false) {
		t.Errorf("runcmd[0] %q, want the first-boot script", doc.RunCmd[0])
	}
	if cmd, _ := doc.RunCmd[1].([]any); len(cmd) != 3 || cmd[0] != "sh" || cmd[1] != "-c" || cmd[2] != firstBootBootstrap(b, defaultGuestPaths) {
		t.Errorf("runcmd[1] %q, want the site bootstrap", doc.RunCmd[1])
	}
	if len(doc.Users) != 1 || doc.Users[0].Name != "ubuntu" || doc.Users[0].SSHAuthorizedKeys[0] != login.keys[0] || !doc.Users[0].LockPasswd {
		t.Errorf("users %+v", doc.Users)
	}
	// Without a bootstrap or a login: the script alone.
	if err := yaml.Unmarshal([]byte(firstBootUserData(script, nil, nil)), &doc); err != nil || len(doc.RunCmd) != 1 {
		t.Errorf("%v, runcmd %q", err, doc.RunCmd)
	}
	// A script that carries a sensitive value: its seed is root's alone,
	// and runcmd removes the script once it succeeded.
	p := guestPlan{validation: "/v.sh", profile: "bare-metal", stage: "image", firstBoot: &firstboot.Result{Script: []byte("x"), Sensitive: true}}
	found := false
	for _, f := range guestFiles(p, "i-1") {
		if f.path == "/var/lib/cloud/seed/nocloud/user-data" {
			found = true
			if f.mode != 0o600 || !strings.Contains(f.content, firstboot.RunCmd(true)) {
				t.Errorf("sensitive seed: mode %o\n%s", f.mode, f.content)
			}
		}
	}
	if !found {
		t.Error("no user-data among the guest files")
	}
	if m := consoleLogMode(p); m != 0o600 {
		t.Errorf("the sensitive first boot's console log is %o", m)
	}
	p.firstBoot.Sensitive = false
	if m := consoleLogMode(p); m != 0o644 {
		t.Errorf("the console log is %o", m)
	}
}

// The first-boot path's smoke script is valid shell; it copies the
// script's result line to the console and reboots once, when the result
// says so, before the validation.
func TestFirstBootSmokeScript(t *testing.T) {
	p := guestPlan{validation: "/usr/local/sbin/v.sh", profile: "slice", stage: "converged", bootstrap: testBootstrap("/opt/b"),
		firstBoot: &firstboot.Result{Script: []byte("x")}}
	s := smokeScriptFor(p, defaultGuestPaths)
	checkShell(t, s)
	reboot, validation := strings.Index(s, "systemctl reboot"), strings.Index(s, MilestoneValidationStart)
	if reboot < 0 || reboot > validation || !strings.Contains(s, rebootPending(defaultGuestPaths)) || !strings.Contains(s, rebootedMarker) {
		t.Errorf("no reboot before the validation:\n%s", s)
	}
	// The bootstrap runs in the second boot, after the reboot's branch and
	// before the validation; the first boot reports no bootstrap.
	bootstrap := strings.Index(s, "time "+MilestoneBootstrapStart)
	if bootstrap < reboot || bootstrap > validation || strings.Count(s, "bootstrap-exit=") != 1 || strings.Index(s, "bootstrap-exit=") < bootstrap {
		t.Errorf("the bootstrap does not run between the reboot and the validation:\n%s", s)
	}
	p.bootstrap = nil
	checkShell(t, smokeScriptFor(p, defaultGuestPaths))
	if s := smokeScriptFor(p, defaultGuestPaths); strings.Contains(s, "bootstrap") {
		t.Errorf("a bootstrap at stage image:\n%s", s)
	}
	p.firstBoot = nil
	if s := smokeScriptFor(p, defaultGuestPaths); strings.Contains(s, "reboot") {
		t.Errorf("the baked path's smoke script reboots:\n%s", s)
	}
	if args := strings.Join(qemuArgs(bootConfig{reboot: true}, "vars"), " "); strings.Contains(args, "-no-reboot") {
		t.Errorf("the first-boot path's QEMU exits on reboot: %s", args)
	}
	if args := strings.Join(qemuArgs(bootConfig{}, "vars"), " "); !strings.Contains(args, "-no-reboot") {
		t.Errorf("the baked path's QEMU survives a reboot: %s", args)
	}
}

// bootOne and bootTwo are the boot ids of the consoles below' first and
// second boots (the kernel's /proc/sys/kernel/random/boot_id).
const (
	bootOne = "5d3c8a0e-4f1b-4a57-9c2e-1b7f0d6e9a31"
	bootTwo = "b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9"
)

// firstBootConsole is a first-boot path's console at stage converged: the
// first boot runs the script (which requires a reboot), the smoke script
// reports it and reboots, and the second boot runs the site bootstrap and
// validates.
const firstBootConsole = `BdsDxe: starting Boot0001
[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)
IMAGECTL_SMOKE clock=20.0 boot=5d3c8a0e-4f1b-4a57-9c2e-1b7f0d6e9a31
IMAGECTL_SMOKE multi-user
[   21.0] cloud-init[600]: IMAGECTL_FIRSTBOOT time firstboot-start=22.00
IMAGECTL_FIRSTBOOT step=1/3 time=2026-11-26T18:00:00Z uptime=22.10 start packages: jq
IMAGECTL_FIRSTBOOT time firstboot-done=50.00
IMAGECTL_FIRSTBOOT result status=ok steps=3 ran=3 already_done=0 not_at_first_boot=0 download_bytes=5000 archive_bytes=4000 index_bytes=1000 missing_optional=- reboot_required=yes seconds=28.000
IMAGECTL_SMOKE state=running
IMAGECTL_SMOKE cmdline=BOOT_IMAGE=/vmlinuz root=UUID=x ro console=ttyS0,115200
IMAGECTL_FIRSTBOOT result status=ok steps=3 ran=3 already_done=0 not_at_first_boot=0 download_bytes=5000 archive_bytes=4000 index_bytes=1000 missing_optional=- reboot_required=yes seconds=28.000
IMAGECTL_SMOKE systemd unit=manager boot=5d3c8a0e-4f1b-4a57-9c2e-1b7f0d6e9a31 UserspaceTimestampMonotonic=3000000 FinishTimestampMonotonic=54000000
IMAGECTL_SMOKE systemd unit=multi-user.target boot=5d3c8a0e-4f1b-4a57-9c2e-1b7f0d6e9a31 ActiveEnterTimestampMonotonic=19000000
IMAGECTL_SMOKE received-bytes=16000000
IMAGECTL_SMOKE clock=55.0 boot=5d3c8a0e-4f1b-4a57-9c2e-1b7f0d6e9a31
IMAGECTL_SMOKE reboot
BdsDxe: starting Boot0001
[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)
IMAGECTL_SMOKE clock=10.0 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_SMOKE multi-user
IMAGECTL_SMOKE state=running
IMAGECTL_SMOKE cmdline=BOOT_IMAGE=/vmlinuz root=UUID=x ro intel_iommu=on console=ttyS0,115200
IMAGECTL_FIRSTBOOT result status=ok steps=3 ran=3 already_done=0 not_at_first_boot=0 download_bytes=5000 archive_bytes=4000 index_bytes=1000 missing_optional=- reboot_required=yes seconds=28.000
IMAGECTL_SMOKE time bootstrap-start=10.50 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_BOOTSTRAP modprobe vfio_pci
IMAGECTL_SMOKE time bootstrap-done=10.80 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_SMOKE bootstrap-exit=0
IMAGECTL_SMOKE time validation-start=11.00 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_VALIDATE status=PASS check=kernel-arg:intel_iommu=on:cmdline detail=in%20/proc/cmdline
IMAGECTL_VALIDATE summary profile=slice stage=converged checks=1 failures=0 warnings=0
IMAGECTL_SMOKE validate-exit=0
IMAGECTL_SMOKE time validation-done=13.00 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_SMOKE received-bytes=4000
IMAGECTL_SMOKE systemd unit=multi-user.target boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9 ActiveEnterTimestampMonotonic=9000000
IMAGECTL_SMOKE clock=14.0 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_SMOKE done
`

// feedFirstBoot feeds firstBootConsole to a watcher, each line at the
// host time it would arrive.
func feedFirstBoot(t *testing.T, res *Result) (bool, error) {
	t.Helper()
	w := newWatcher(res, nil)
	// The first boot's kernel at 5 s (its clock zero at 5 s: the clock
	// line at 25 s read 20.0); every guest line arrives a second after
	// its reading. The reboot at 61 s; the second kernel at 70 s (its
	// clock zero there).
	at := map[string]float64{"IMAGECTL_SMOKE clock=20.0 boot=" + bootOne: 25, "IMAGECTL_SMOKE clock=55.0 boot=" + bootOne: 60,
		"IMAGECTL_SMOKE reboot": 61, "IMAGECTL_SMOKE clock=10.0 boot=" + bootTwo: 80, "IMAGECTL_SMOKE clock=14.0 boot=" + bootTwo: 84}
	now := 0.0
	kernels := []float64{5, 70}
	for _, l := range strings.Split(strings.TrimSuffix(firstBootConsole, "\n"), "\n") {
		switch {
		case strings.Contains(l, "Linux version"):
			now, kernels = kernels[0], kernels[1:]
		case at[l] != 0:
			now = at[l]
		default:
			now += 0.01
		}
		done, err := w.feed(l+"\r\n", time.Duration(now*float64(time.Second)))
		if done || err != nil {
			return done, err
		}
	}
	return false, nil
}

func firstBootResult() *Result {
	return &Result{Image: "demo", Version: "1", Accelerator: "kvm", Profile: "slice", Stage: "converged", FirstBoot: &FirstBoot{},
		Bootstrap: &Bootstrap{Bundle: "b", Entrypoint: "/opt/b/run"}}
}

func TestWatcherFollowsTheFirstBootPath(t *testing.T) {
	res := firstBootResult()
	done, err := feedFirstBoot(t, res)
	if !done || err != nil {
		t.Fatalf("done %v, err %v", done, err)
	}
	if !res.Passed() {
		t.Fatalf("failed: %s", res.Failure())
	}
	fb := res.FirstBoot
	if !fb.Rebooted || !fb.RebootRequired || fb.DownloadBytes != 5000 || fb.ArchiveBytes != 4000 || fb.IndexBytes != 1000 {
		t.Errorf("first boot %+v", fb)
	}
	// Both boots' received bytes (the counters start again at the reboot).
	if res.ReceivedBytes == nil || *res.ReceivedBytes != 16004000 {
		t.Errorf("received bytes %v", res.ReceivedBytes)
	}
	// The second boot's state and command line (the kernel args the
	// script added took effect); the bootstrap's exit the second boot's.
	if !strings.Contains(res.KernelCmdline, "intel_iommu=on") || res.Bootstrap.Exit == nil || *res.Bootstrap.Exit != 0 {
		t.Errorf("cmdline %q, bootstrap %+v", res.KernelCmdline, res.Bootstrap)
	}
	tl := newTimeline(res, true)
	var got []string
	for _, m := range tl.Milestones {
		got = append(got, fmt.Sprintf("%s=%g", m.Name, m.Seconds))
	}
	want := "qemu-start=0 kernel=5 userspace=8 multi-user=24 firstboot-start=27 firstboot-done=55 " +
		"boot-finished=59 reboot=61 reboot-kernel=70 reboot-multi-user=79 bootstrap-start=80.5 bootstrap-done=80.8 validation-start=81 validation-done=83"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}

// A first-boot path fails on the script's failure (first, before what
// follows from it), and on a reboot the script required but that did not
// come.
func TestFirstBootPathFailures(t *testing.T) {
	res := firstBootResult()
	w := newWatcher(res, nil)
	feedAll(t, w, "IMAGECTL_FIRSTBOOT time firstboot-start=22.00\nIMAGECTL_FIRSTBOOT step=2/3 error apt-get install failed\n"+
		"IMAGECTL_FIRSTBOOT result status=failed steps=3 ran=1 failed_step=2 download_bytes=10 reboot_required=no\n"+
		"IMAGECTL_SMOKE multi-user\nIMAGECTL_SMOKE state=degraded\nIMAGECTL_SMOKE failed-unit=cloud-final.service\n"+
		"IMAGECTL_SMOKE bootstrap-unfinished\nIMAGECTL_VALIDATE status=PASS check=x detail=y\nIMAGECTL_SMOKE validate-exit=0\nIMAGECTL_SMOKE done\n")
	if f := res.Failure(); !strings.HasPrefix(f, "the first-boot script failed at step 2 of 3: apt-get install failed;") {
		t.Errorf("failure %q", f)
	}
	res = firstBootResult()
	res.Bootstrap = nil
	w = newWatcher(res, nil)
	feedAll(t, w, "IMAGECTL_FIRSTBOOT result status=ok steps=1 ran=1 reboot_required=yes\nIMAGECTL_SMOKE multi-user\nIMAGECTL_SMOKE state=running\n"+
		"IMAGECTL_VALIDATE status=PASS check=x detail=y\nIMAGECTL_SMOKE validate-exit=0\nIMAGECTL_SMOKE done\n")
	if f := res.Failure(); !strings.Contains(f, "requires a reboot") {
		t.Errorf("failure %q", f)
	}
	// A unit that failed in the first boot fails the path, although the
	// second boot is clean.
	res = firstBootResult()
	res.Bootstrap = nil
	feedAll(t, newWatcher(res, nil), "IMAGECTL_SMOKE multi-user\nIMAGECTL_SMOKE state=degraded\nIMAGECTL_SMOKE failed-unit=nvidia-persistenced.service\n"+
		"IMAGECTL_FIRSTBOOT result status=ok steps=1 ran=1 reboot_required=yes\nIMAGECTL_SMOKE reboot\n"+
		"[    0.000000] Linux version 6.1.0-28-amd64\nIMAGECTL_SMOKE multi-user\nIMAGECTL_SMOKE state=running\n"+
		"IMAGECTL_VALIDATE status=PASS check=x detail=y\nIMAGECTL_SMOKE validate-exit=0\nIMAGECTL_SMOKE done\n")
	if f := res.Failure(); f != "units failed in the boot before the reboot: nvidia-persistenced.service" {
		t.Errorf("failure %q", f)
	}
	// A reboot on the baked path, or a second one, is an error.
	for _, r := range []*Result{{}, {FirstBoot: &FirstBoot{Rebooted: true}}} {
		if _, err := newWatcher(r, nil).feed("IMAGECTL_SMOKE reboot\r\n", time.Second); err == nil {
			t.Errorf("no error for a reboot of %+v", r)
		}
	}
}

// passedResult is a result that passed, validated at validated seconds.
func passedResult(t *testing.T, validated float64, fb *FirstBoot) *Result {
	t.Helper()
	zero := 0
	r := &Result{Artifact: "a", Image: "demo", Version: "1", Accelerator: "kvm", Profile: "bare-metal", Stage: "image",
		SystemState: "running", ValidateExit: &zero, Lines: []Line{{Status: "PASS", Check: "c"}}, FirstBoot: fb,
		ConsoleLog: "x.log", TimelineFile: "x.json", MemoryMB: 2048, Seconds: map[string]float64{PhaseDeploy: 12.3456}}
	r.Timeline = &Timeline{Milestones: []Milestone{{Name: MilestoneQEMUStart}, {Name: MilestoneKernel, Seconds: 4},
		{Name: MilestoneValidationDone, Seconds: validated}}}
	if fb != nil {
		r.Timeline.Milestones = append(r.Timeline.Milestones, Milestone{Name: MilestoneFirstBootDone, Seconds: validated - 10})
	}
	if !r.Passed() && (fb == nil || fb.Status == "ok") {
		t.Fatal(r.Failure())
	}
	return r
}

func TestComparison(t *testing.T) {
	now := time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)
	fb := &FirstBoot{Console: firstboot.Console{Status: "ok", DownloadBytes: 5000, ArchiveBytes: 4000, IndexBytes: 1000, Seconds: 28, RebootRequired: true}, Rebooted: true}
	baked, first := passedResult(t, 20, nil), passedResult(t, 80, fb)
	bakedRx, firstRx := int64(900), int64(16000)
	baked.ReceivedBytes, first.ReceivedBytes = &bakedRx, &firstRx
	baked.ArtifactSHA256 = "sha256:" + strings.Repeat("ab", 32)
	c := newComparison(baked, nil, first, nil, now, nil)
	if c.Ratio == nil || *c.Ratio != 0.25 || !c.Baked.Passed || !c.FirstBoot.Passed || c.FirstBoot.DownloadBytes != 5000 ||
		*c.FirstBoot.Reboot != true || *c.FirstBoot.FirstBootSeconds != 28 || c.Baked.DownloadBytes != 0 ||
		c.ArtifactSHA256 != baked.ArtifactSHA256 || c.MemoryMB != 2048 || *c.Baked.DeploySeconds != 12.346 || *c.FirstBoot.ReceivedBytes != 16000 {
		t.Errorf("%+v", c)
	}
	var got []string
	for _, m := range c.Milestones {
		got = append(got, m.Name+" "+num1(m.Baked)+" "+num1(m.FirstBoot))
	}
	if want := "qemu-start 0.0 0.0; kernel 4.0 4.0; firstboot-done - 70.0; validation-done 20.0 80.0"; strings.Join(got, "; ") != want {
		t.Errorf("side by side %s\nwant %s", strings.Join(got, "; "), want)
	}
	text := c.Text()
	for _, s := range []string{"baked:     validated in 20.0 s", "first-boot: validated in 80.0 s (1 checks, 0 warnings), after one reboot",
		"ratio baked/first-boot: 0.250", "downloaded by the first-boot script's apt: 5000 bytes (archives 4000, indexes 1000)",
		"received by the guest up to validated: baked 900 bytes, first-boot 16000 bytes",
		"validated in 20.0 s (1 checks, 0 warnings); deployed in 12.3 s before QEMU started (32.3 s with it)",
		"  validation-done            20.0       80.0", "  firstboot-done                -       70.0"} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q:\n%s", s, text)
		}
	}

	// The JSON names another engineer's code decodes.
	p := filepath.Join(t.TempDir(), "x-1.smoke-compare.json")
	if err := writeJSON(p, c); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema_version", "image", "version", "profile", "stage", "accelerator", "memory_mb", "measured_at", "ratio", "baked", "first_boot", "milestones"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no %s in\n%s", k, raw)
		}
	}
	for _, k := range []string{"passed", "validated_seconds", "download_bytes", "received_bytes", "deploy_seconds", "console_log", "timeline_file"} {
		for _, path := range []string{"baked", "first_boot"} {
			if _, ok := doc[path].(map[string]any)[k]; !ok {
				t.Errorf("no %s.%s in\n%s", path, k, raw)
			}
		}
	}
	if doc["artifact_sha256"] != baked.ArtifactSHA256 {
		t.Errorf("artifact_sha256 %v", doc["artifact_sha256"])
	}
	if doc["measured_at"] != "2026-11-26T18:00:00Z" || doc["memory_mb"] != 2048.0 || doc["ratio"] != 0.25 {
		t.Errorf("measured_at %v, memory_mb %v, ratio %v", doc["measured_at"], doc["memory_mb"], doc["ratio"])
	}
	back, err := ReadComparison(p)
	if err != nil || *back.Ratio != 0.25 || back.FirstBoot.ArchiveBytes != 4000 || back.File != p {
		t.Errorf("read back: %v %+v", err, back)
	}

	// A failed path is a failure with its reason, never a time, and there
	// is no ratio.
	failed := passedResult(t, 5, &FirstBoot{Console: firstboot.Console{Status: "failed", FailedStep: 2, Steps: 3, Errors: []string{"apt-get install failed"}, DownloadBytes: 10}})
	c = newComparison(baked, nil, failed, fmt.Errorf("%w: x", ErrFailed), now, nil)
	if c.Ratio != nil || c.FirstBoot.Passed || c.FirstBoot.ValidatedSeconds != nil || !strings.Contains(c.FirstBoot.Failure, "failed at step 2 of 3") || c.FirstBoot.DownloadBytes != 10 {
		t.Errorf("%+v", c.FirstBoot)
	}
	if text := c.Text(); !strings.Contains(text, "first-boot: FAILED: the first-boot script failed at step 2") || !strings.Contains(text, "ratio: none") {
		t.Errorf("text:\n%s", text)
	}
	if err := writeJSON(p, c); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile(p)
	if strings.Contains(string(raw), `"ratio"`) || !strings.Contains(string(raw), `"failure": "the first-boot script failed`) || strings.Contains(string(raw), `"validated_seconds": 5`) {
		t.Errorf("failed comparison:\n%s", raw)
	}
	// A path that failed to boot (an error, not ErrFailed) says the error;
	// one that never started says so.
	c = newComparison(nil, errors.New("no UEFI firmware"), nil, nil, now, nil)
	if c.Baked.Failure != "no UEFI firmware" || c.FirstBoot.Failure != "it did not start" || c.Ratio != nil {
		t.Errorf("%+v", c)
	}
	os.WriteFile(p, []byte(`{"schema_version": 9}`), 0o644)
	if _, err := ReadComparison(p); err == nil || !strings.Contains(err.Error(), "schema_version is 9") {
		t.Errorf("schema 9: %v", err)
	}
}

// A real first-boot path's console (testdata/first-boot-reboot.console):
// the script's lines among cloud-init's, its kernel arg requiring a
// reboot, the reboot, and the validation in the second boot, where the
// arg is on the kernel's command line.
func TestFirstBootRebootTranscript(t *testing.T) {
	res := &Result{Image: "imagectl-reboot-check", Version: "0.0.0-compare", Accelerator: "tcg", Profile: "bare-metal", Stage: "image", FirstBoot: &FirstBoot{}}
	done, err := replay(t, newWatcher(res, nil), "first-boot-reboot.console")
	if !done || err != nil || !res.Passed() {
		t.Fatalf("done %v, err %v: %s", done, err, res.Failure())
	}
	fb := res.FirstBoot
	if !fb.Rebooted || !fb.RebootRequired || fb.Status != "ok" || fb.Steps != 7 || fb.DownloadBytes != 15853080 || fb.ArchiveBytes != 53080 {
		t.Errorf("first boot %+v", fb)
	}
	if !strings.Contains(res.KernelCmdline, "imagectl_reboot_check=1") {
		t.Errorf("the second boot's command line %q lacks the arg", res.KernelCmdline)
	}
	tl := newTimeline(res, true)
	at := func(name string) float64 {
		if m := tl.Find(name); m != nil {
			return m.Seconds
		}
		t.Errorf("no %s in %+v", name, tl.Milestones)
		return -1
	}
	order := []string{MilestoneKernel, MilestoneMultiUser, MilestoneFirstBootStart, MilestoneFirstBootDone, MilestoneCloudInitDone,
		MilestoneReboot, MilestoneRebootKernel, MilestoneRebootMultiUser, MilestoneValidationStart, MilestoneValidationDone}
	for i := 1; i < len(order); i++ {
		if at(order[i-1]) > at(order[i]) {
			t.Errorf("%s at %.1f is before %s at %.1f", order[i], at(order[i]), order[i-1], at(order[i-1]))
		}
	}
	if len(tl.Missing) != 1 || tl.Missing[0] != MilestoneLoader {
		t.Errorf("missing %v", tl.Missing)
	}
}

// unannouncedRebootConsole is a first-boot path at stage image whose VM
// reboots after the script's result line without the smoke script's
// reboot (a postinst, cloud-init's power_state), then validates in the
// second boot: the review's case, whose validation-done would have been
// timed on the first boot's clock zero.
const unannouncedRebootConsole = `BdsDxe: starting Boot0001
[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)
IMAGECTL_SMOKE clock=20.0 boot=5d3c8a0e-4f1b-4a57-9c2e-1b7f0d6e9a31
IMAGECTL_FIRSTBOOT time firstboot-start=22.00
IMAGECTL_FIRSTBOOT time firstboot-done=300.00
IMAGECTL_FIRSTBOOT result status=ok steps=3 ran=3 already_done=0 not_at_first_boot=0 download_bytes=5000 archive_bytes=4000 index_bytes=1000 missing_optional=- reboot_required=no seconds=278.000
[  301.000000] reboot: Restarting system
BdsDxe: starting Boot0001
[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)
IMAGECTL_SMOKE clock=20.0 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_SMOKE multi-user
IMAGECTL_SMOKE state=running
IMAGECTL_FIRSTBOOT result status=ok steps=3 ran=3 already_done=0 not_at_first_boot=0 download_bytes=5000 archive_bytes=4000 index_bytes=1000 missing_optional=- reboot_required=no seconds=278.000
IMAGECTL_SMOKE time validation-start=24.00 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_VALIDATE status=PASS check=x detail=y
IMAGECTL_SMOKE validate-exit=0
IMAGECTL_SMOKE time validation-done=28.00 boot=b81f2e47-09ac-4d3e-8f65-2c4a7e1d03b9
IMAGECTL_SMOKE done
`

// An unannounced reboot fails the run, on either path, saying so; and a
// timeline whose validation-done precedes the first boot's end (the times
// of two boots on one clock) is no passed path.
func TestUnannouncedReboot(t *testing.T) {
	for _, res := range []*Result{firstBootResult(), {}} {
		res.Bootstrap = nil
		done, err := feedAll(t, newWatcher(res, nil), unannouncedRebootConsole)
		if done || err == nil || !strings.Contains(err.Error(), "rebooted without the smoke script's reboot") {
			t.Errorf("first boot %v: done %v, err %v", res.FirstBoot != nil, done, err)
		}
	}
	fb := &FirstBoot{Console: firstboot.Console{Status: "ok", Seconds: 278}}
	r := passedResult(t, 33, fb)
	r.Timeline.Milestones = append(r.Timeline.Milestones, Milestone{Name: MilestoneRebootMultiUser, Seconds: 40})
	r.Timeline.Find(MilestoneFirstBootDone).Seconds = 300
	p := newPath(r, nil, nil)
	if p.Passed || p.ValidatedSeconds != nil || !strings.Contains(p.Failure, "firstboot-done at 300.0 s") || !strings.Contains(p.Failure, "reboot-multi-user at 40.0 s") {
		t.Errorf("path %+v", p)
	}
	c := newComparison(passedResult(t, 20, nil), nil, r, nil, time.Now(), nil)
	if c.Ratio != nil || c.FirstBoot.Passed {
		t.Errorf("a ratio %v, first boot %+v, from a path timed on two boots", c.Ratio, c.FirstBoot)
	}
}

// The first-boot path's site bootstrap: in the first boot's runcmd only
// when the first-boot script requires no reboot; otherwise the smoke
// script runs it in the second boot, once, when the script succeeded.
func TestFirstBootBootstrapWaitsForTheReboot(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	os.MkdirAll(bundle, 0o755)
	os.WriteFile(filepath.Join(bundle, "bootstrap.sh"), []byte("#!/bin/sh\necho ran >>\"$RAN\"\n"), 0o755)
	b := testBootstrap(bundle)
	ran := filepath.Join(dir, "ran")
	b.env = map[string]string{"RAN": ran}
	g := guestPaths{tty: filepath.Join(dir, "tty"), state: filepath.Join(dir, "state"), log: filepath.Join(dir, "bootstrap.log"),
		firstBoot: filepath.Join(dir, "firstboot"), rebooted: filepath.Join(dir, "rebooted")}
	os.MkdirAll(g.firstBoot, 0o755)
	runs := func() int {
		b, _ := os.ReadFile(ran)
		return strings.Count(string(b), "ran\n")
	}
	sh := func(script string) {
		t.Helper()
		checkShell(t, script)
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	result := func(line string) { os.WriteFile(filepath.Join(g.firstBoot, "result"), []byte(line+"\n"), 0o644) }
	for _, tc := range []struct {
		result string
		runs   int
	}{
		{"result status=ok steps=1 reboot_required=yes seconds=1", 0},
		{"result status=ok steps=1 reboot_required=no seconds=1", 1},
		// Not reached after a failed script (runcmd stops), but never
		// deferred to a reboot that does not come.
		{"result status=failed steps=1 failed_step=1 reboot_required=yes", 2},
	} {
		result(tc.result)
		sh(firstBootBootstrap(b, g))
		if got := runs(); got != tc.runs {
			t.Errorf("after %q: %d runs, want %d", tc.result, got, tc.runs)
		}
	}
	// The second boot: the smoke script's part runs it once the VM
	// rebooted for a script that succeeded, and once only.
	os.Remove(ran)
	os.RemoveAll(g.state)
	p := guestPlan{bootstrap: b, firstBoot: &firstboot.Result{Script: []byte("x")}}
	second := "set -u\n" + secondBootBootstrap(p, g)
	sh(second)
	if runs() != 0 {
		t.Errorf("ran before the reboot")
	}
	os.WriteFile(g.rebooted, nil, 0o644)
	sh(second)
	if runs() != 0 {
		t.Errorf("ran without the first-boot script's done marker")
	}
	os.WriteFile(filepath.Join(g.firstBoot, firstboot.DoneMarker), nil, 0o644)
	sh(second)
	sh(second)
	if runs() != 1 {
		t.Errorf("%d runs in the second boot, want 1", runs())
	}
	if got, _ := os.ReadFile(filepath.Join(g.state, "bootstrap.exit")); string(got) != "0\n" {
		t.Errorf("exit file %q", got)
	}
	console, _ := os.ReadFile(g.tty)
	if !strings.Contains(string(console), markerPrefix+"time "+MilestoneBootstrapStart+"=") {
		t.Errorf("console:\n%s", console)
	}
}

// The work the first-boot path did not do as the build did, from its
// console: steps not at first boot or in part, with why, and the optional
// packages the build installed that the first boot lacked; the text says
// the comparison is not like for like, and keeps the ratio.
func TestComparisonDifferences(t *testing.T) {
	res := firstBootResult()
	res.Bootstrap = nil
	feedAll(t, newWatcher(res, nil), "IMAGECTL_FIRSTBOOT step=2/4 time=2026-11-26T18:00:11Z not-at-first-boot bundles: stage big (why: over 16 MiB)\n"+
		"IMAGECTL_FIRSTBOOT step=3/4 partly: the initramfs is not rebuilt\n"+
		"IMAGECTL_FIRSTBOOT result status=ok steps=4 ran=3 not_at_first_boot=1 missing_optional=nvtop,htop reboot_required=no seconds=1\n")
	built := []manifest.Package{{Name: "jq", Version: "1.6"}, {Name: "nvtop:amd64", Version: "3.0.1-1"}}
	got := differences(res, built)
	want := []string{"not at first boot: step 2/4: bundles: stage big (why: over 16 MiB)",
		"in part at first boot: step 3/4: the initramfs is not rebuilt",
		"optional package nvtop: the build installed 3.0.1-1, the first boot found no candidate"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := differences(passedResult(t, 20, nil), built); d != nil {
		t.Errorf("the baked path's differences %q", d)
	}
	fb := &FirstBoot{Console: firstboot.Console{Status: "ok", Seconds: 28}}
	c := newComparison(passedResult(t, 20, nil), nil, passedResult(t, 80, fb), nil, time.Now(), nil)
	if strings.Contains(c.Text(), "not like for like") {
		t.Errorf("like for like, yet:\n%s", c.Text())
	}
	c.Differences = got
	text := c.Text()
	if c.Ratio == nil || !strings.Contains(text, "ratio baked/first-boot: 0.250") ||
		!strings.Contains(text, "not like for like: the paths did not do the same work (3 difference(s)):\n  - not at first boot: step 2/4") {
		t.Errorf("text:\n%s", text)
	}
}

// A comparison file that says a path passed without its time is refused;
// Text of one made otherwise does not panic.
func TestComparisonPassedWithoutTime(t *testing.T) {
	b := []byte(`{"schema_version": 1, "baked": {"passed": true, "validated_seconds": 3}, "first_boot": {"passed": true}}`)
	if _, err := DecodeComparison(b); err == nil || !strings.Contains(err.Error(), "the first-boot path passed but has no validated_seconds") {
		t.Errorf("decoded: %v", err)
	}
	c := &Comparison{Baked: Path{Passed: true}, FirstBoot: Path{Passed: true}}
	if text := c.Text(); !strings.Contains(text, "passed, with no time to validated") {
		t.Errorf("text:\n%s", text)
	}
}

// A base image to download with no cache directory is refused before
// anything runs, saying why there is none, and without the URL's
// credentials.
func TestBaseReachable(t *testing.T) {
	p := &plan.Plan{Manifest: &manifest.Manifest{Base: manifest.Base{Source: "https://user:s3cret-token@images.example/base.qcow2"}}}
	err := baseReachable(p, "", errors.New("$HOME is not set"))
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "images.example/base.qcow2: no cache directory to download it into: $HOME is not set") {
		t.Errorf("%v", err)
	}
	if err := baseReachable(p, "/cache", nil); err != nil {
		t.Error(err)
	}
	p.Inputs.BasePath = "/img/base.qcow2"
	if err := baseReachable(p, "", nil); err != nil {
		t.Error(err)
	}
}

// Several pairs: the median pair's comparison (of an even count the lower
// middle one), so that its ratio is still its paths' ratio, with every
// pair's ratio and the spread; a pair with a failed path is the
// comparison.
func TestPairsComparison(t *testing.T) {
	now := time.Now()
	fb := &FirstBoot{Console: firstboot.Console{Status: "ok", Seconds: 28}}
	pair := func(baked, first float64) *Comparison {
		return newComparison(passedResult(t, baked, nil), nil, passedResult(t, first, fb), nil, now, nil)
	}
	one := pair(20, 80)
	if c := pairsComparison([]*Comparison{one}); c != one || c.Ratios != nil || c.Spread != nil {
		t.Errorf("one pair: %+v", c)
	}
	a, b := pair(30, 100), pair(20, 80) // 0.3, 0.25
	c := pairsComparison([]*Comparison{a, b})
	if c != b || *c.Ratio != 0.25 || !slices.Equal(c.Ratios, []float64{0.3, 0.25}) || *c.Spread != 0.2 {
		t.Errorf("two pairs: ratio %v, ratios %v, spread %v", *c.Ratio, c.Ratios, c.Spread)
	}
	if *c.Ratio != round3(*c.Baked.ValidatedSeconds / *c.FirstBoot.ValidatedSeconds) {
		t.Errorf("the ratio is not its paths'")
	}
	text := c.Text()
	for _, s := range []string{"2 pairs, the order alternating; their ratios: 0.300 0.250", "ratio baked/first-boot: 0.250", "median of 2 pairs, spread 20.0%"} {
		if !strings.Contains(text, s) {
			t.Errorf("text lacks %q:\n%s", s, text)
		}
	}
	x, y, z := pair(30, 100), pair(20, 80), pair(27, 100)
	if c := pairsComparison([]*Comparison{x, y, z}); c != z || !slices.Equal(c.Ratios, []float64{0.3, 0.25, 0.27}) {
		t.Errorf("three pairs: %v %v", *c.Ratio, c.Ratios)
	}
	failed := newComparison(passedResult(t, 20, nil), nil, nil, errors.New("no base"), now, nil)
	if c := pairsComparison([]*Comparison{pair(20, 80), failed}); c != failed || c.Ratios != nil || c.Ratio != nil {
		t.Errorf("a failed pair: %+v", c)
	}
	if got := pairFile("/o/x-1.smoke-first-boot.log", 1); got != "/o/x-1.smoke-first-boot.pair2.log" {
		t.Errorf("pairFile %s", got)
	}
	if got := pairFile("/o/x.json", 0); got != "/o/x.json" {
		t.Errorf("pairFile %s", got)
	}
}

// A path's failure goes through redact.Text and the recipe's sensitive
// values (Compare's hide), whichever path and whether it started or not.
func TestComparisonHidesSecrets(t *testing.T) {
	hide := func(s string) string { return strings.ReplaceAll(s, "site-token-4711", "[sensitive]") }
	failed := firstBootResult()
	failed.FirstBoot.Status = "failed"
	failed.FirstBoot.Errors = []string{"apt: 401 with site-token-4711 from https://user:pw-4711@mirror.example/debian"}
	c := newComparison(nil, errors.New("fetching https://user:pw-4711@mirror.example/x with site-token-4711"), failed,
		fmt.Errorf("%w: x", ErrFailed), time.Now(), hide)
	for _, f := range []string{c.Baked.Failure, c.FirstBoot.Failure} {
		if f == "" || strings.Contains(f, "4711") {
			t.Errorf("a failure shows a secret, or says nothing: %q", f)
		}
	}
	testenv.Holds(t, "the baked path's failure", c.Baked.Failure, "[sensitive]", "mirror.example/x")
}

// The base image's URL is given without its credentials in the base
// phase's event, packBase's errors (a download that fails) and its log
// line (a base packed).
func TestPackBaseHidesCredentials(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	const secret = "pw-s3cret-4711"
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("builder", secret)
	u.Path = "/base.raw"
	var events []event.Event
	rep := event.Reporter(func(e event.Event) { events = append(events, e) })
	p := &plan.Plan{Manifest: &manifest.Manifest{Base: manifest.Base{Source: u.String(), Format: "raw",
		SHA256: "sha256:" + strings.Repeat("0", 64)}}}
	_, _, err := packBase(context.Background(), p, t.TempDir(), srv.Client(), t.TempDir(), rep)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("a failed download: %v", err)
	}
	// A base image on disk (a bare ext4 filesystem with /etc/os-release)
	// whose source is the URL: packed, and said so without its password.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=debian\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "base.raw")
	if out, err := exec.Command("mkfs.ext4", "-q", "-d", root, img, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	sum, err := digest.File(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	p.Manifest.Base.SHA256 = sum.String()
	p.Inputs.BasePath = img
	if _, _, err := packBase(context.Background(), p, "", nil, t.TempDir(), rep); err != nil {
		t.Fatal(err)
	}
	logged := false
	for _, e := range events {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), secret) {
			t.Errorf("an event shows the base URL's password: %s", b)
		}
		logged = logged || (e.Type == event.TypeLog && strings.Contains(e.Message, "packed for the first-boot path"))
	}
	if !logged {
		t.Errorf("no log line for the packed base in %v", events)
	}
}

// The boot ids of the timed lines: a second boot that the console shows
// no kernel banner of (a quiet or lost console) but whose smoke script
// reports a new boot id, without the announced reboot, fails the run on
// either path; so does a line of the boot before the announced reboot
// once it was announced; a timed line without an id is not used.
func TestBootIDs(t *testing.T) {
	var quiet []string
	for _, l := range strings.Split(unannouncedRebootConsole, "\n") {
		if !strings.Contains(l, "Linux version") || len(quiet) < 3 {
			quiet = append(quiet, l)
		}
	}
	for _, res := range []*Result{firstBootResult(), {}} {
		res.Bootstrap = nil
		done, err := feedAll(t, newWatcher(res, nil), strings.Join(quiet, "\n"))
		if done || err == nil || !strings.Contains(err.Error(), "rebooted without the smoke script's reboot: a timed line of boot "+bootTwo+" while boot "+bootOne+" was timed") {
			t.Errorf("first boot %v: done %v, err %v", res.FirstBoot != nil, done, err)
		}
		if res.observed.guest[MilestoneValidationDone] != 0 {
			t.Errorf("first boot %v: the second boot's validation-done was placed", res.FirstBoot != nil)
		}
	}
	// The first boot's id again after the announced reboot.
	stale := strings.Replace(firstBootConsole, "clock=10.0 boot="+bootTwo, "clock=10.0 boot="+bootOne, 1)
	if done, err := feedAll(t, newWatcher(firstBootResult(), nil), stale); done || err == nil || !strings.Contains(err.Error(), "after the smoke script announced its reboot") {
		t.Errorf("a line of the first boot after the reboot: done %v, err %v", done, err)
	}
	// The announced reboot's second boot, then the first boot's id again.
	back := strings.Replace(firstBootConsole, "validation-done=13.00 boot="+bootTwo, "validation-done=13.00 boot="+bootOne, 1)
	if done, err := feedAll(t, newWatcher(firstBootResult(), nil), back); done || err == nil || !strings.Contains(err.Error(), "a boot before the announced reboot") {
		t.Errorf("a line of the first boot in the second: done %v, err %v", done, err)
	}
	// A validation-done without its boot id: no time to validated.
	res := firstBootResult()
	noID := strings.Replace(firstBootConsole, "validation-done=13.00 boot="+bootTwo, "validation-done=13.00", 1)
	if done, err := feedAll(t, newWatcher(res, nil), noID); !done || err != nil {
		t.Fatalf("done %v, err %v", done, err)
	}
	if _, ok := res.observed.guest[MilestoneValidationDone]; ok {
		t.Error("a validation-done without a boot id was used")
	}
	if p := newPath(res, nil, nil); p.Passed || !strings.Contains(p.Failure, "no "+MilestoneValidationDone) {
		t.Errorf("path %+v", p)
	}
	// A boot id garbled by a kernel message written into the line is no
	// other boot's: the line is not used, and the run goes on.
	res = firstBootResult()
	garbled := strings.Replace(firstBootConsole, "validation-done=13.00 boot="+bootTwo, "validation-done=13.00 boot="+bootTwo[:10]+"[   97.1]", 1)
	if done, err := feedAll(t, newWatcher(res, nil), garbled); !done || err != nil {
		t.Fatalf("a garbled boot id: done %v, err %v", done, err)
	}
	if _, ok := res.observed.guest[MilestoneValidationDone]; ok {
		t.Error("a validation-done with a garbled boot id was used")
	}
}

// No line of the first boot carried its id: the first id seen, after the
// announced reboot, is the second boot's, and its lines are used.
func TestBootIDFirstSeenAfterTheReboot(t *testing.T) {
	res := firstBootResult()
	console := strings.ReplaceAll(firstBootConsole, " boot="+bootOne, "")
	if console == firstBootConsole || !strings.Contains(console, "boot="+bootTwo) {
		t.Fatal("the first-boot console no longer carries both boots' ids")
	}
	if done, err := feedAll(t, newWatcher(res, nil), console); !done || err != nil {
		t.Fatalf("done %v, err %v", done, err)
	}
	if _, ok := res.observed.guest[MilestoneValidationDone]; !ok {
		t.Error("the second boot's validation-done was not used")
	}
}

// cutBoot keeps only what has the shape of a boot id.
func TestCutBoot(t *testing.T) {
	for val, want := range map[string][2]string{
		"13.00 boot=" + bootOne:                  {"13.00", bootOne},
		"13.00":                                  {"13.00", ""},
		"13.00 boot=":                            {"13.00", ""},
		"13.00 boot=" + bootOne[:12] + "[":       {"13.00", ""},
		"13.00 boot=" + strings.ToUpper(bootOne): {"13.00", ""},
	} {
		if rest, id := cutBoot(val); rest != want[0] || id != want[1] {
			t.Errorf("cutBoot(%q) = %q, %q; want %q, %q", val, rest, id, want[0], want[1])
		}
	}
}

// A console whose validation ends, on the guest's clock, before the
// first-boot script's end in the same boot (times that cannot be of one
// boot: the first-boot script's lines carry no boot id) gives a timeline
// that did not pass, and a run that fails saying why.
func TestTimelineOutOfOrderFromConsole(t *testing.T) {
	console := `BdsDxe: starting Boot0001
[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)
IMAGECTL_SMOKE clock=20.0 boot=` + bootOne + `
IMAGECTL_SMOKE multi-user
IMAGECTL_FIRSTBOOT time firstboot-start=22.00
IMAGECTL_FIRSTBOOT time firstboot-done=300.00
IMAGECTL_FIRSTBOOT result status=ok steps=3 ran=3 already_done=0 not_at_first_boot=0 download_bytes=5000 archive_bytes=4000 index_bytes=1000 missing_optional=- reboot_required=no seconds=278.000
IMAGECTL_SMOKE state=running
IMAGECTL_SMOKE time validation-start=24.00 boot=` + bootOne + `
IMAGECTL_VALIDATE status=PASS check=x detail=y
IMAGECTL_VALIDATE summary profile=bare-metal stage=image checks=1 failures=0 warnings=0
IMAGECTL_SMOKE validate-exit=0
IMAGECTL_SMOKE time validation-done=28.00 boot=` + bootOne + `
IMAGECTL_SMOKE clock=29.0 boot=` + bootOne + `
IMAGECTL_SMOKE done
`
	res := &Result{Image: "demo", Version: "1", Profile: "bare-metal", Stage: "image", FirstBoot: &FirstBoot{}}
	if done, err := feedAll(t, newWatcher(res, nil), console); !done || err != nil {
		t.Fatalf("done %v, err %v", done, err)
	}
	if why := res.Failure(); why != "" {
		t.Fatalf("the checks alone failed: %s", why)
	}
	res.Timeline = newTimeline(res, res.Passed())
	if res.Timeline.Passed {
		t.Errorf("a timeline with validation-done before firstboot-done passed: %+v", res.Timeline.Milestones)
	}
	testenv.Holds(t, "the run's failure", res.Failure(), "firstboot-done at", "the times are not of one boot")
	if p := newPath(res, nil, nil); p.Passed || p.ValidatedSeconds != nil {
		t.Errorf("path %+v", p)
	}
}
