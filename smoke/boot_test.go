package smoke

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/qemuproc"
	"github.com/gpuaas/imagectl/internal/tcpport"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
)

// These tests boot real QEMU with Debian's OVMF on a disk with no
// bootloader: the firmware finds nothing to boot, which is enough to test
// the timeout, cancellation and clean-up paths without an image.

func needQEMU(t *testing.T) firmware {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU: skipped with -short")
	}
	testenv.Tool(t, "qemu-system-x86_64", "make deps installs qemu-system-x86")
	fw, err := findFirmware()
	if err != nil {
		testenv.Missing(t, err.Error())
	}
	return fw
}

func blankBoot(t *testing.T, fw firmware, timeout time.Duration) (bootConfig, *Result, *[]event.Event) {
	work := t.TempDir()
	disk := filepath.Join(work, "disk.raw")
	if out, err := exec.Command("truncate", "-s", "64M", disk).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var events []event.Event
	res := &Result{ConsoleLog: filepath.Join(t.TempDir(), "console.log"), Seconds: map[string]float64{}}
	return bootConfig{disk: disk, work: work, firmware: fw, accel: "tcg", memoryMB: 256, timeout: timeout,
		reporter: func(e event.Event) { events = append(events, e) }}, res, &events
}

// boot runs the phases after the deploy, as Run runs them, on c's disk;
// what they leave is gone when it returns.
func boot(t *testing.T, ctx context.Context, c bootConfig, res *Result) error {
	if phases[0].name != PhaseDeploy {
		t.Fatalf("the first phase is %q, not the deploy", phases[0].name)
	}
	r := &run{opts: Options{ConsoleLog: res.ConsoleLog}, rep: c.reporter, m: &manifest.Manifest{}, boot: c, res: res}
	defer r.close()
	return r.do(ctx, phases[1:])
}

func TestBootWithoutKernelTimesOut(t *testing.T) {
	fw := needQEMU(t)
	c, res, events := blankBoot(t, fw, 45*time.Second)
	start := time.Now()
	err := boot(t, context.Background(), c, res)
	if err == nil || !strings.Contains(err.Error(), "timed out after 45s: the kernel never started") {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("boot took %s to give up", took)
	}
	if pids := qemuproc.Children(); len(pids) > 0 {
		t.Errorf("QEMU left running: %v", pids)
	}
	// The firmware's own output (its screen set-up, under load no more)
	// reached the console log.
	if b, _ := os.ReadFile(res.ConsoleLog); !strings.Contains(string(b), "\x1b[") {
		t.Errorf("console log has no firmware output:\n%s", b)
	}
	last := (*events)[len(*events)-1]
	if last.Phase != PhaseBoot || last.Status != "failed" {
		t.Errorf("last event %+v", last)
	}
	// The boot's phase alone: the validation never started.
	var phaseEvents []string
	for _, e := range *events {
		if e.Type == event.TypePhase {
			phaseEvents = append(phaseEvents, e.Phase+" "+e.Status)
		}
	}
	if got := strings.Join(phaseEvents, ", "); got != "boot start, boot failed" {
		t.Errorf("phase events: %s", got)
	}
}

func TestBootCancelled(t *testing.T) {
	fw := needQEMU(t)
	c, res, _ := blankBoot(t, fw, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(5*time.Second, cancel)
	start := time.Now()
	err := boot(t, ctx, c, res)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %s to stop after cancellation", took)
	}
	if pids := qemuproc.Children(); len(pids) > 0 {
		t.Errorf("QEMU left running: %v", pids)
	}
}

// TestPhases pins the order a smoke run reports its phases in, which the
// phases table alone decides.
func TestPhases(t *testing.T) {
	var got []string
	for _, ph := range phases {
		if ph.name != "" {
			got = append(got, ph.name)
		}
		if (ph.name == "") != (ph.summary == nil) {
			t.Errorf("phase %q: a named phase needs a summary, an unnamed one reports nothing", ph.name)
		}
	}
	want := []string{PhaseDeploy, PhaseBoot, PhaseValidate, PhaseUp}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("phases %v, want %v", got, want)
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	tgz := filepath.Join(dir, "x-1.tgz")
	if _, err := Run(context.Background(), tgz, Options{}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing tgz: %v", err)
	}
	os.WriteFile(tgz, []byte("not a tgz"), 0o644)
	if _, err := Run(context.Background(), tgz, Options{}); err == nil || !strings.Contains(err.Error(), "x-1.manifest.json") {
		t.Errorf("missing manifest: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "x-1.manifest.json"), []byte(`{"schema_version": 1, "image": {"name": "x"}}`), 0o644)
	if _, err := Run(context.Background(), tgz, Options{}); err == nil || !strings.Contains(err.Error(), "names no validation script") {
		t.Errorf("manifest without script: %v", err)
	}
	// A profile, stage or bootstrap that cannot run is refused before
	// anything starts (the deploy would need libguestfs first).
	os.WriteFile(filepath.Join(dir, "x-1.manifest.json"), []byte(`{"schema_version": 1, "image": {"name": "x"},
		"validation": {"script": "/v.sh", "profiles": [{"name": "slice", "bootstrap": "site"}]}}`), 0o644)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Profile: "vm"}, `profile "vm" is not one of bare-metal, slice`},
		{Options{Stage: "done"}, `stage "done" is not one of image, converged`},
		{Options{}, `profile "bare-metal": image x serves only slice`},
		{Options{Profile: "slice", Stage: "converged"}, `bundle "site", which the manifest does not have (bundles: none)`},
		{Options{Profile: "slice", AuthorizedKeys: []string{"ssh-ed25519"}}, "authorized key 1: not an OpenSSH public key"},
		{Options{Profile: "slice", AuthorizedKeys: []string{"ssh-ed25519 AAAA"}, SSHUser: "Root"}, `ssh user "Root": not a user name`},
		{Options{Profile: "slice", SSHPort: 70000}, "ssh port 70000: not a TCP port"},
	} {
		if _, err := Run(context.Background(), tgz, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.opts, err, tc.want)
		}
	}
	// A run that holds a port for ssh (it keeps the VM up) and then fails
	// before QEMU starts (its work directory cannot be made, or QEMU or
	// the firmware is missing) lets go of the port: no socket is left open.
	before := openSockets(t)
	if _, err := Run(context.Background(), tgz, Options{Profile: "slice", WorkDir: tgz,
		WhileUp: func(context.Context, SSH) error { return nil }}); err == nil {
		t.Error("a run whose work directory is a file started")
	}
	if after := openSockets(t); after > before {
		t.Errorf("%d sockets open after the failed run, %d before", after, before)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
}

// openSockets counts the sockets this process has open.
func openSockets(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// A VM kept up: once the smoke script is done (the firmware here stands
// in for the guest, its done line fed as the console would bring it), the
// up phase calls WhileUp with the forwarded port, which QEMU listens on;
// then the monitor presses the power button, and a VM that does not power
// off (the firmware ignores it) is stopped. Nothing is left running.
func TestKeptUpThenPoweredOff(t *testing.T) {
	fw := needQEMU(t)
	c, res, events := blankBoot(t, fw, time.Hour)
	hold, port, err := tcpport.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	c.sshPort, c.portHold, c.monitor, c.stopAfterDone = port, hold, filepath.Join(c.work, "qmp.sock"), 2*time.Second
	res.SSH = &SSH{Host: "127.0.0.1", Port: port, User: DefaultSSHUser}
	var got SSH
	dialed := error(nil)
	r := &run{opts: Options{ConsoleLog: res.ConsoleLog, WhileUp: func(ctx context.Context, ep SSH) error {
		got = ep
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", ep.Address())
		if err == nil {
			conn.Close()
		}
		dialed = err
		return nil
	}}, rep: c.reporter, m: &manifest.Manifest{}, boot: c, res: res, guest: guestPlan{keepUp: true}}
	defer r.close()
	ctx := context.Background()
	if err := r.prepareBoot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.vm.start(); err != nil {
		t.Fatal(err)
	}
	// QEMU is up (the forwarded port listening) long before a guest is
	// done.
	for i := 0; ; i++ {
		conn, err := net.Dial("tcp", res.SSH.Address())
		if err == nil {
			conn.Close()
			break
		} else if i == 600 {
			t.Fatalf("QEMU never listened on the forwarded port: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := r.vm.feed(consoleLine{text: markerPrefix + "done\r\n"}); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(phases, func(p phase) bool { return p.name == PhaseUp })
	if err := r.do(ctx, phases[i:]); err != nil {
		t.Fatal(err)
	}
	if got != *res.SSH || dialed != nil {
		t.Errorf("WhileUp got %+v, dialing it: %v", got, dialed)
	}
	if !r.vm.reaped {
		t.Error("QEMU was not reaped")
	}
	var logs []string
	for _, e := range *events {
		if e.Type == event.TypeLog {
			logs = append(logs, e.Message)
		}
	}
	if !slices.Contains(logs, "the VM did not power off after the validation: stopped it") {
		t.Errorf("logs %q", logs)
	}
	if pids := qemuproc.Children(); len(pids) > 0 {
		t.Errorf("QEMU left running: %v", pids)
	}
}

// WhileUp's error is the run's, and Ctrl-C while it runs cancels it and
// stops the VM: either way nothing is left running.
func TestKeptUpErrorAndCancel(t *testing.T) {
	fw := needQEMU(t)
	for _, cancelled := range []bool{false, true} {
		c, res, _ := blankBoot(t, fw, time.Hour)
		c.monitor, c.stopAfterDone = filepath.Join(c.work, "qmp.sock"), 2*time.Second
		res.SSH = &SSH{Host: "127.0.0.1", Port: 1, User: DefaultSSHUser}
		ctx, cancel := context.WithCancel(context.Background())
		upCancelled := false
		r := &run{opts: Options{ConsoleLog: res.ConsoleLog, WhileUp: func(upCtx context.Context, _ SSH) error {
			if !cancelled {
				return errors.New("the host check failed")
			}
			cancel()
			<-upCtx.Done()
			upCancelled = true
			return upCtx.Err()
		}}, rep: c.reporter, m: &manifest.Manifest{}, boot: c, res: res, guest: guestPlan{keepUp: true}}
		if err := r.prepareBoot(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.vm.start(); err != nil {
			t.Fatal(err)
		}
		if err := r.vm.feed(consoleLine{text: markerPrefix + "done\r\n"}); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(phases, func(p phase) bool { return p.name == PhaseUp })
		err := r.do(ctx, phases[i:])
		r.close()
		cancel()
		switch {
		case !cancelled && (err == nil || err.Error() != "while the VM was up: the host check failed"):
			t.Errorf("WhileUp's error: got %v", err)
		case cancelled && (!errors.Is(err, context.Canceled) || !upCancelled):
			t.Errorf("cancelled: got %v, WhileUp's context cancelled: %v", err, upCancelled)
		}
		if pids := qemuproc.Children(); len(pids) > 0 {
			t.Errorf("QEMU left running: %v", pids)
		}
	}
}
