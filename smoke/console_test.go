package smoke

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/validate"
)

// feedAll feeds a console transcript, one line a second.
func feedAll(t *testing.T, w *watcher, console string) (bool, error) {
	t.Helper()
	for i, l := range strings.SplitAfter(console, "\n") {
		done, err := w.feed(l, time.Duration(i)*time.Second)
		if done || err != nil {
			return done, err
		}
	}
	return false, nil
}

func TestWatcherFollowsABoot(t *testing.T) {
	res := &Result{Profile: "bare-metal", Stage: "image"}
	var stages []string
	w := newWatcher(res, func(s string) { stages = append(stages, s) })
	console := "\x1b[2J\x1b[01;01HBdsDxe: starting Boot0001\r\n" +
		"[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org)\r\n" +
		"[  OK  ] Reached target \x1b[0;1;39mMulti-User System\x1b[0m.\r\n" +
		"IMAGECTL_SMOKE multi-user\r\n" +
		"IMAGECTL_SMOKE state=running\r\n" +
		"IMAGECTL_SMOKE cmdline=BOOT_IMAGE=/boot/vmlinuz root=UUID=x ro intel_iommu=on iommu=pt console=ttyS0,115200\r\n" +
		"IMAGECTL_VALIDATE status=PASS check=kernel-arg:iommu=pt:cmdline detail=in%20/proc/cmdline\r\n" +
		"[   80.1] random: crng init done\r\nIMAGECTL_VALIDATE status=WARN check=gpu detail=no%20GPU%25%0Ahere\r\n" +
		"IMAGECTL_VALIDATE summary profile=bare-metal stage=image checks=2 failures=0 warnings=1\r\n" +
		"IMAGECTL_SMOKE validate-exit=0\r\n" +
		"IMAGECTL_SMOKE done\r\n"
	done, err := feedAll(t, w, console)
	if err != nil || !done {
		t.Fatalf("done %v, err %v", done, err)
	}
	if got := strings.Join(stages, ","); got != "kernel,multi-user,settled,done" {
		t.Errorf("stages %s", got)
	}
	want := []Line{{Status: "PASS", Check: "kernel-arg:iommu=pt:cmdline", Detail: "in /proc/cmdline"}, {Status: "WARN", Check: "gpu", Detail: "no GPU%\nhere"}}
	if len(res.Lines) != 2 || res.Lines[0] != want[0] || res.Lines[1] != want[1] {
		t.Errorf("lines %+v", res.Lines)
	}
	if !res.Passed() || res.Warnings != 1 || !strings.Contains(res.KernelCmdline, "iommu=pt") {
		t.Errorf("result %+v: %s", res, res.Failure())
	}
}

func TestWatcherFailures(t *testing.T) {
	for _, tc := range []struct {
		name, console, want string
	}{
		{"panic", "Linux version 6.1\n[ 3.2] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n",
			"the kernel panicked: Kernel panic - not syncing: VFS: Unable to mount root fs"},
		{"emergency", "Linux version 6.1\n[FAILED] Failed to mount boot-efi.mount - /boot/efi.\nYou are in emergency mode. After logging in, type \"journalctl -xb\"\n",
			"emergency mode and never reached multi-user.target: last console lines:\n  Linux version 6.1\n  [FAILED] Failed to mount boot-efi.mount"},
		{"initramfs", "Linux version 6.1\nGave up waiting for root file system device.\n(initramfs) \n", "initramfs shell"},
		{"no script", "IMAGECTL_SMOKE multi-user\nIMAGECTL_SMOKE no-validation-script=/usr/local/sbin/x-validate.sh\n", "no validation script at /usr/local/sbin/x-validate.sh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := feedAll(t, newWatcher(&Result{}, nil), tc.console)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("grub error then stall", func(t *testing.T) {
		w := newWatcher(&Result{}, nil)
		feedAll(t, w, "error: file `/boot/vmlinuz-6.1.0-56-amd64' not found.\nerror: you need to load the kernel first.\n")
		if s := w.stalled(); !strings.Contains(s, "kernel never started") || !strings.Contains(s, "vmlinuz-6.1.0-56-amd64' not found") {
			t.Errorf("stalled: %s", s)
		}
	})
	t.Run("degraded and failing", func(t *testing.T) {
		res := &Result{}
		done, err := feedAll(t, newWatcher(res, nil), "IMAGECTL_SMOKE multi-user\nIMAGECTL_SMOKE state=degraded\nIMAGECTL_SMOKE failed-unit=netdata.service\n"+
			"IMAGECTL_VALIDATE status=FAIL check=service-active:netdata detail=failed\nIMAGECTL_SMOKE done\n")
		if !done || err != nil || res.Passed() {
			t.Fatalf("done %v err %v passed %v", done, err, res.Passed())
		}
		if f := res.Failure(); !strings.Contains(f, "system is degraded (failed units: netdata.service)") || !strings.Contains(f, "service-active:netdata (failed)") {
			t.Errorf("failure: %s", f)
		}
	})
}

// Result lines carry key=value fields in any order; unknown keys are
// skipped; FAIL lines may carry a remediation. Summaries with and without
// the profile and stage parse, and one that disagrees with the run fails it.
func TestWatcherReadsResultFields(t *testing.T) {
	res := &Result{Profile: "slice", Stage: "converged"}
	feedAll(t, newWatcher(res, nil), "IMAGECTL_VALIDATE check=dhcp detail=dnsmasq%20inactive status=FAIL severity=high remediation=systemctl%20restart%20dnsmasq%0Athen%20rerun%2520%09x\r\n"+
		"IMAGECTL_VALIDATE status=PASS check=ovs detail=ovsbr0%2010.100.0.1/24\r\n"+
		"IMAGECTL_VALIDATE summary profile=slice stage=converged checks=2 failures=1 warnings=0\r\n")
	want := []Line{{Status: "FAIL", Check: "dhcp", Detail: "dnsmasq inactive", Remediation: "systemctl restart dnsmasq\nthen rerun%20\tx"},
		{Status: "PASS", Check: "ovs", Detail: "ovsbr0 10.100.0.1/24"}}
	if len(res.Lines) != 2 || res.Lines[0] != want[0] || res.Lines[1] != want[1] {
		t.Errorf("lines %+v", res.Lines)
	}
	if res.Failures != 1 || res.summary == nil || res.summaryMismatch() != "" {
		t.Errorf("failures %d, summary %+v: %s", res.Failures, res.summary, res.summaryMismatch())
	}
	for _, tc := range []struct{ summary, want string }{
		{"summary checks=2 failures=1 warnings=0", ""},
		{"summary profile=bare-metal stage=image checks=2 failures=1 warnings=0", "checked profile bare-metal at stage image, not slice at converged"},
		{"summary profile=slice stage=converged checks=5 failures=1 warnings=0", "reported 5 checks but 2 reached the console"},
	} {
		feedAll(t, newWatcher(res, nil), "IMAGECTL_VALIDATE "+tc.summary+"\r\n")
		if got := res.summaryMismatch(); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.summary, got, tc.want)
		}
		if tc.want != "" && !strings.Contains(res.Failure(), tc.want) {
			t.Errorf("%s: failure %q", tc.summary, res.Failure())
		}
	}
}

// The validation script's own output, from the real generator run on a
// tree, is parsed back line for line.
func TestWatcherReadsTheRealScript(t *testing.T) {
	m := &manifest.Manifest{Image: manifest.Image{Name: "t", Version: "1"}, KernelArgs: []string{"iommu=pt"},
		Validation: manifest.Validation{Script: "/usr/local/sbin/t-validate.sh", Marker: "/etc/imagectl/build.json",
			FilesExist: []string{"/etc/a file"}, Checks: []manifest.Check{{Name: "true", Command: "true"}}}}
	script, err := validate.Script(m)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/a file"), nil, 0o644)
	p := filepath.Join(t.TempDir(), "v.sh")
	os.WriteFile(p, script, 0o755)
	out, _ := exec.Command("sh", p, "--root", root).Output()
	res := &Result{}
	feedAll(t, newWatcher(res, nil), string(out))
	n := strings.Count(string(out), validate.Prefix+" status=")
	if n < 5 || len(res.Lines) != n {
		t.Fatalf("%d lines parsed of %d:\n%s", len(res.Lines), n, out)
	}
	found := false
	for _, l := range res.Lines {
		found = found || (l.Check == "exists:/etc/a file" && l.Status == "PASS" && l.Detail == "present")
	}
	if !found {
		t.Errorf("no PASS for the file with a space: %+v", res.Lines)
	}
}

func TestReplaceCmdlineDefault(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\n",
			"GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"console=ttyS0,115200\"\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\n"},
		// curtin's regex is unanchored: a commented line comes first.
		{"#GRUB_CMDLINE_LINUX_DEFAULT=\"x\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n",
			"#GRUB_CMDLINE_LINUX_DEFAULT=\"console=ttyS0,115200\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"},
		{"GRUB_TIMEOUT=5", "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"console=ttyS0,115200\"\n"},
	} {
		if got := replaceCmdlineDefault(tc.in, kernelOpts); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestSmokeScriptIsValidShell(t *testing.T) {
	for _, p := range []guestPlan{
		{validation: "/usr/local/sbin/it's-validate.sh", profile: "bare-metal", stage: "image"},
		{validation: "/usr/local/sbin/v.sh", profile: "slice", stage: "converged", bootstrap: testBootstrap("/opt/b")},
		{validation: "/usr/local/sbin/v.sh", profile: "slice", stage: "converged", keepUp: true},
	} {
		checkShell(t, smokeScriptFor(p, defaultGuestPaths))
	}
	checkShell(t, bootstrapScript(&bootstrapSpec{bundle: "b", dir: "/opt/it's", entrypoint: "/opt/it's/run",
		env: map[string]string{"A": "x y", "B": "it's"}}, defaultGuestPaths))
}

func checkShell(t *testing.T, script string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.sh")
	os.WriteFile(p, []byte(script), 0o755)
	if out, err := exec.Command("sh", "-n", p).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s\n%s", err, out, script)
	}
	sc := testenv.Tool(t, "shellcheck", "make deps installs it")
	if out, err := exec.Command(sc, "-s", "sh", p).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %s\n%s", out, script)
	}
}

// TestScriptThatDiesFails: PASS lines followed by the script dying (no
// summary, a non-zero exit) is not a pass, and neither is a script that
// never reports its exit.
func TestScriptThatDiesFails(t *testing.T) {
	for _, tc := range []struct{ name, tail, want string }{
		{"exit 2", "IMAGECTL_SMOKE validate-exit=2\r\n", "the validation script exited 2"},
		{"no exit", "", "did not run to its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{}
			w := newWatcher(res, nil)
			feedAll(t, w, "IMAGECTL_SMOKE multi-user\r\nIMAGECTL_SMOKE state=running\r\n"+
				"IMAGECTL_VALIDATE status=PASS check=first detail=ok\r\n"+tc.tail+"IMAGECTL_SMOKE done\r\n")
			if res.Passed() || !strings.Contains(res.Failure(), tc.want) {
				t.Errorf("passed %v, failure %q; want %q", res.Passed(), res.Failure(), tc.want)
			}
		})
	}
	t.Run("manifest mismatch", func(t *testing.T) {
		zero := 0
		res := &Result{SystemState: "running", Lines: []Line{{Status: "PASS", Check: "x"}}, ValidateExit: &zero, manifestChecked: true}
		if res.Passed() || !strings.Contains(res.Failure(), "not the artifact its manifest describes") {
			t.Errorf("passed %v, failure %q", res.Passed(), res.Failure())
		}
	})
}
