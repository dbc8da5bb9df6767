package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/smoke"
)

func TestSmokeRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	tgz := filepath.Join(dir, "x-1.tgz")
	_, errs, code := imagectl(t, nil, "smoke", tgz)
	if code != 1 || !strings.Contains(errs, "x-1.tgz: no such file") {
		t.Errorf("missing tgz: exit %d, %q", code, errs)
	}
	os.WriteFile(tgz, []byte("x"), 0o644)
	_, errs, code = imagectl(t, nil, "smoke", tgz)
	if code != 1 || !strings.Contains(errs, "x-1.manifest.json") {
		t.Errorf("missing manifest: exit %d, %q", code, errs)
	}
	// A manifest whose script and profiles are fine, so that what is
	// refused next is the ssh flags.
	os.WriteFile(filepath.Join(dir, "x-1.manifest.json"), []byte(`{"schema_version": 1, "image": {"name": "x"}, "validation": {"script": "/v.sh"}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.pub"), []byte("# a comment\nssh-ed25519\n"), 0o644)
	_, errs, code = imagectl(t, nil, "smoke", tgz, "--output", "yaml")
	if code != 1 || !strings.Contains(errs, "--output must be text or json") {
		t.Errorf("bad output: exit %d, %q", code, errs)
	}
	for _, tc := range []struct{ flag, value, want string }{
		{"--profile", "vm", `--profile/--stage: profile "vm" is not one of bare-metal, slice`},
		{"--stage", "final", `--profile/--stage: stage "final" is not one of image, converged`},
		{"--baseline", filepath.Join(dir, "none.json"), "--baseline: open " + dir},
		{"--authorized-key", filepath.Join(dir, "none.pub"), "--authorized-key: open " + dir},
		{"--authorized-key", filepath.Join(dir, "bad.pub"), "authorized key 1: not an OpenSSH public key"},
		{"--ssh-user", "Root", `ssh user "Root": not a user name`},
		{"--ssh-port", "70000", "ssh port 70000: not a TCP port"},
	} {
		_, errs, code = imagectl(t, nil, "smoke", tgz, tc.flag, tc.value)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s %s: exit %d, %q", tc.flag, tc.value, code, errs)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("left behind: %v", entries)
	}
}

func sampleResult() *smoke.Result {
	zero := 0
	g := func(f float64) *float64 { return &f }
	return &smoke.Result{
		Image: "x", Version: "1", Accelerator: "tcg", Profile: "slice", Stage: "converged", SystemState: "running",
		Bootstrap: &smoke.Bootstrap{Bundle: "site", Entrypoint: "/opt/site/bootstrap.sh", Exit: &zero, Seconds: 14.5},
		Lines: []smoke.Line{
			{Status: "PASS", Check: "ovs", Detail: "ovsbr0 up"},
			{Status: "FAIL", Check: "dhcp", Detail: "dnsmasq inactive", Remediation: "systemctl restart dnsmasq\nthen rerun"},
		},
		Failures: 1, Seconds: map[string]float64{smoke.PhaseDeploy: 100, smoke.PhaseBoot: 84, smoke.PhaseValidate: 88},
		ConsoleLog: "a/x-1.smoke.log", TimelineFile: "a/x-1.smoke-timeline.json",
		Timeline: &smoke.Timeline{Accelerator: "tcg", Milestones: []smoke.Milestone{
			{Name: smoke.MilestoneQEMUStart, Source: "host"},
			{Name: smoke.MilestoneKernel, Seconds: 31.96, Delta: 31.96, Source: "console"},
			{Name: smoke.MilestoneUserspace, Seconds: 41.41, Delta: 9.46, GuestSeconds: g(9.81), Source: "systemd"},
		}, Missing: []string{smoke.MilestoneLoader}},
	}
}

func TestPrintSmoke(t *testing.T) {
	var b bytes.Buffer
	r := sampleResult()
	printSmoke(&b, r)
	printTimeline(&b, r.Timeline, nil, "")
	printFiles(&b, r)
	want := `PASS ovs: ovsbr0 up
FAIL dhcp: dnsmasq inactive
     remediation: systemctl restart dnsmasq
                  then rerun
profile slice, stage converged
site bootstrap site (/opt/site/bootstrap.sh): exit 0 after 14.5s
boot: system running
2 checks, 1 failed, 0 warnings; 4m32s under tcg (deploy 1m40s, boot 1m24s, validate 1m28s)
boot timeline (seconds since QEMU started):
  milestone                at    delta  source
  qemu-start              0.0     +0.0  host
  kernel                 32.0    +32.0  console
  userspace              41.4     +9.5  systemd
  not seen: loader
console log: a/x-1.smoke.log
timeline: a/x-1.smoke-timeline.json
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestPrintTimelineAgainstABaseline(t *testing.T) {
	r := sampleResult()
	base := &smoke.Timeline{Image: "x", Version: "0.9", Accelerator: "kvm", Profile: "slice", Stage: "converged",
		Milestones: []smoke.Milestone{{Name: smoke.MilestoneQEMUStart}, {Name: smoke.MilestoneKernel, Seconds: 30},
			{Name: smoke.MilestoneBootstrapDone, Seconds: 200}}}
	var b bytes.Buffer
	printTimeline(&b, r.Timeline, base, "old.json")
	want := `boot timeline (seconds since QEMU started):
  milestone                at    delta  source   baseline   change
  qemu-start              0.0     +0.0  host          0.0     +0.0
  kernel                 32.0    +32.0  console      30.0     +2.0
  userspace              41.4     +9.5  systemd         -        -
  bootstrap-done            -        -              200.0        -
  not seen: loader
  baseline: old.json (x 0.9, kvm, profile slice, stage converged)
  the baseline ran under kvm and this run under tcg: their times do not compare
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
