package smoke

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func testBootstrap(dir string) *bootstrapSpec {
	return &bootstrapSpec{bundle: "demo", dir: dir, entrypoint: dir + "/bootstrap.sh",
		env: map[string]string{"SITE": "lab 1", "QUOTED": `it's "x" $HOME`, "MULTI": "a\nb"}}
}

// runcmdOf parses user-data as cloud-init would (YAML after the
// #cloud-config header) and returns its runcmd.
func runcmdOf(t *testing.T, userData string) []any {
	t.Helper()
	if !strings.HasPrefix(userData, "#cloud-config\n") {
		t.Fatalf("user-data does not start with #cloud-config:\n%s", userData)
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(userData), &doc); err != nil {
		t.Fatalf("user-data is not YAML: %v\n%s", err, userData)
	}
	rc, _ := doc["runcmd"].([]any)
	return rc
}

func TestUserDataWithoutBootstrap(t *testing.T) {
	if rc := runcmdOf(t, seedUserData(nil, nil)); rc != nil {
		t.Errorf("runcmd %v", rc)
	}
}

// The user-data's runcmd is the bootstrap script, exactly, whatever the
// environment's values hold.
func TestUserDataRunsTheBootstrap(t *testing.T) {
	b := testBootstrap("/usr/local/share/gpuaas/site-bootstrap/h200-slice-vm")
	rc := runcmdOf(t, seedUserData(b, nil))
	if len(rc) != 1 {
		t.Fatalf("runcmd %v", rc)
	}
	cmd, _ := rc[0].([]any)
	if len(cmd) != 3 || cmd[0] != "sh" || cmd[1] != "-c" || cmd[2] != bootstrapScript(b, defaultGuestPaths) {
		t.Errorf("runcmd entry %q", cmd)
	}
}

// The bootstrap script, run as cloud-init's runcmd would run it, runs the
// entrypoint in the bundle's directory with the profile's environment,
// relays its output to the log and the console, and records its times and
// exit status.
func TestBootstrapScriptRuns(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle")
	os.MkdirAll(bundle, 0o755)
	os.WriteFile(filepath.Join(bundle, "bootstrap.sh"), []byte(`#!/bin/sh
echo "in $(pwd)"
printf 'SITE=%s QUOTED=%s\n' "$SITE" "$QUOTED"
printf 'MULTI=%s\n' "$MULTI"
echo "to stderr" >&2
printf 'no newline at the end'
exit 3
`), 0o755)
	g := guestPaths{tty: filepath.Join(dir, "tty"), state: filepath.Join(dir, "state"), log: filepath.Join(dir, "bootstrap.log")}
	b := testBootstrap(bundle)
	start := time.Now()
	err := exec.Command("sh", "-c", bootstrapScript(b, g)).Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("the script's exit: %v, want the bootstrap's 3", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s", took)
	}
	output := "in " + bundle + "\nSITE=lab 1 QUOTED=it's \"x\" $HOME\nMULTI=a\nb\nto stderr\nno newline at the end\n"
	if got, _ := os.ReadFile(g.log); string(got) != output {
		t.Errorf("log:\n%s\nwant:\n%s", got, output)
	}
	if got, _ := os.ReadFile(filepath.Join(g.state, "bootstrap.exit")); string(got) != "3\n" {
		t.Errorf("exit file %q", got)
	}
	// What reached the console, the watcher reads back.
	console, _ := os.ReadFile(g.tty)
	res := &Result{Bootstrap: &Bootstrap{Bundle: "demo", Entrypoint: b.entrypoint}}
	w := newWatcher(res, nil)
	feedAll(t, w, string(console)+markerPrefix+"bootstrap-exit=3\r\n")
	if _, ok := res.observed.guest[MilestoneBootstrapStart]; !ok {
		t.Errorf("no bootstrap-start on the console:\n%s", console)
	}
	if _, ok := res.observed.guest[MilestoneBootstrapDone]; !ok {
		t.Errorf("no bootstrap-done on the console:\n%s", console)
	}
	// Its time lines carry the boot they were read in: this host's.
	if id, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil && w.bootID != strings.TrimSpace(string(id)) {
		t.Errorf("the time lines' boot %q, this host's %q:\n%s", w.bootID, id, console)
	}
	f := res.bootstrapFailure()
	if !strings.Contains(f, "the site bootstrap demo ("+b.entrypoint+") exited 3 after") || !strings.Contains(f, "to stderr | no newline at the end") {
		t.Errorf("failure: %s", f)
	}
}

// The bootstrap's output is its own: a line that looks like the smoke's or
// the validation's is not taken for one.
func TestBootstrapOutputIsNotParsed(t *testing.T) {
	res := &Result{Bootstrap: &Bootstrap{}}
	done, err := feedAll(t, newWatcher(res, nil), bootstrapPrefix+"IMAGECTL_VALIDATE status=PASS check=x detail=y\r\n"+
		bootstrapPrefix+markerPrefix+"done\r\n")
	if done || err != nil || len(res.Lines) != 0 || len(res.Bootstrap.tail) != 2 {
		t.Errorf("done %v, err %v, lines %v, tail %q", done, err, res.Lines, res.Bootstrap.tail)
	}
}

// The smoke script runs the validation with the profile and stage, and
// reports the bootstrap only when one was to run.
func TestSmokeScriptForThePlan(t *testing.T) {
	image := smokeScriptFor(guestPlan{validation: "/usr/local/sbin/v.sh", profile: "bare-metal", stage: "image"}, defaultGuestPaths)
	if !strings.Contains(image, `sh '/usr/local/sbin/v.sh' --profile 'bare-metal' --stage 'image'`) || strings.Contains(image, "bootstrap") {
		t.Errorf("stage image:\n%s", image)
	}
	conv := smokeScriptFor(guestPlan{validation: "/usr/local/sbin/v.sh", profile: "slice", stage: "converged",
		bootstrap: testBootstrap("/opt/b")}, defaultGuestPaths)
	if !strings.Contains(conv, "--profile 'slice' --stage 'converged'") || !strings.Contains(conv, "bootstrap-unfinished") {
		t.Errorf("stage converged:\n%s", conv)
	}
	// The bootstrap's exit status is reported before the validation starts.
	if strings.Index(conv, "bootstrap-exit") > strings.Index(conv, "validation-start") {
		t.Error("the bootstrap is reported after the validation starts")
	}
}

func TestGuestFiles(t *testing.T) {
	p := guestPlan{validation: "/usr/local/sbin/v.sh", profile: "slice", stage: "converged", bootstrap: testBootstrap("/opt/b")}
	files := map[string]string{}
	for _, f := range guestFiles(p, "i-1") {
		files[f.path] = f.content
	}
	if !strings.Contains(files["/var/lib/cloud/seed/nocloud/user-data"], "runcmd:") ||
		!strings.Contains(files["/var/lib/cloud/seed/nocloud/meta-data"], "instance-id: i-1") ||
		!strings.Contains(files[smokeScript], "--stage 'converged'") || files[smokeUnit] == "" {
		t.Errorf("files %v", files)
	}
	if _, ok := files[emulatedAllowance]; ok {
		t.Error("the emulation allowance is written for a boot that is not emulated")
	}
	// Under TCG, netplan's OVS units (10 s each, sized for hardware) get
	// more time through systemd's prefix drop-in.
	p.emulated = true
	files = map[string]string{}
	for _, f := range guestFiles(p, "i-1") {
		files[f.path] = f.content
	}
	if c := files["/etc/systemd/system/netplan-ovs-.service.d/imagectl-smoke-emulated.conf"]; !strings.Contains(c, "[Service]\nTimeoutStartSec=5min\n") {
		t.Errorf("emulation allowance %q", c)
	}
}

// A bootstrap that never ends keeps cloud-final, and so the boot, from
// settling: the timeout names it.
func TestStalledInTheBootstrap(t *testing.T) {
	res := &Result{Bootstrap: &Bootstrap{Bundle: "h200-ib"}}
	w := newWatcher(res, nil)
	feedAll(t, w, markerPrefix+"clock=50.00 boot="+bootOne+"\r\n"+markerPrefix+"multi-user\r\n"+markerPrefix+"time bootstrap-start=61.30 boot="+bootOne+"\r\n"+
		bootstrapPrefix+"installing DOCA\r\n")
	if s := w.stalled(); !strings.Contains(s, "the site bootstrap h200-ib was still running") {
		t.Errorf("stalled: %s", s)
	}
}

// rx_bytes, as the smoke script reads it, is one count of bytes: this
// host's interfaces but lo.
func TestRxBytes(t *testing.T) {
	checkShell(t, rxBytesFunc+"rx_bytes\n")
	out, err := exec.Command("sh", "-c", rxBytesFunc+"rx_bytes").Output()
	n, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || perr != nil || n < 0 {
		t.Errorf("rx_bytes: %q, %v, %v", out, err, perr)
	}
}
