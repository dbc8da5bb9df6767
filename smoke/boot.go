package smoke

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/event"
)

// firmware is a UEFI code image and the variable store template that goes
// with it.
type firmware struct{ code, vars string }

// Debian's ovmf package: the 4 MiB build first, then the legacy 2 MiB one.
// The plain builds do not enforce Secure Boot (shim and GRUB boot either
// way).
var firmwareCandidates = []firmware{
	{"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
	{"/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"},
}

func findFirmware() (firmware, error) {
	for _, f := range firmwareCandidates {
		if _, err := os.Stat(f.code); err != nil {
			continue
		}
		if _, err := os.Stat(f.vars); err == nil {
			return f, nil
		}
	}
	return firmware{}, errors.New("no UEFI firmware: install Debian's ovmf package (/usr/share/OVMF/OVMF_CODE_4M.fd and OVMF_VARS_4M.fd)")
}

// consoleLine is a line of the serial console and when it arrived, since
// QEMU started.
type consoleLine struct {
	text string
	at   time.Duration
}

type bootConfig struct {
	disk, work string
	firmware   firmware
	accel      string
	memoryMB   int
	timeout    time.Duration
	console    io.Writer
	reporter   event.Reporter
	// stopAfterDone is how long the VM gets to power off once the smoke
	// script is done (or, kept up, once its power button was pressed)
	// before it is killed (default 2 minutes).
	stopAfterDone time.Duration
	// sshPort, when set, is the port on 127.0.0.1 QEMU forwards to the
	// guest's port 22.
	sshPort int
	// portHold, when set, holds sshPort (tcpport) until QEMU starts.
	portHold io.Closer
	// monitor, when set, is the unix socket of QEMU's monitor (QMP), which
	// presses the power button of a VM kept up.
	monitor string
	// reboot: a reboot restarts the VM instead of ending QEMU (the
	// first-boot path, which reboots once when its script requires it).
	reboot bool
}

// qemuArgs is the VM: q35 with UEFI firmware in pflash (a private copy of
// the variable store), the scratch disk on virtio, one virtio NIC on
// QEMU's user network (DHCP, as MAAS's network gives), no display, the
// serial console on stdout. -no-reboot turns a reboot (a panic with
// panic=N, a reboot loop) into QEMU exiting, except on the first-boot path
// (c.reboot), where the guest reboots once and the timeout bounds a loop. With an ssh port, the user
// network forwards it, on 127.0.0.1 only, to the guest's port 22; with a
// monitor socket, QMP listens on it.
func qemuArgs(c bootConfig, vars string) []string {
	machine, cpu := "q35,accel=tcg", "max"
	if c.accel == "kvm" {
		machine, cpu = "q35,accel=kvm", "host"
	}
	nic := "user,model=virtio-net-pci"
	if c.sshPort != 0 {
		nic += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:22", c.sshPort)
	}
	args := []string{
		"-name", "imagectl-smoke",
		"-machine", machine, "-cpu", cpu,
		"-smp", strconv.Itoa(min(2, max(1, runtime.NumCPU()))), "-m", strconv.Itoa(c.memoryMB),
		"-nodefaults", "-display", "none", "-no-reboot",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + c.firmware.code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-drive", "file=" + c.disk + ",format=raw,if=virtio,cache=unsafe,discard=unmap",
		"-nic", nic,
		"-chardev", "stdio,id=ser0,signal=off", "-serial", "chardev:ser0",
		"-object", "rng-random,id=rng0,filename=/dev/urandom", "-device", "virtio-rng-pci,rng=rng0",
	}
	if c.monitor != "" {
		args = append(args, "-qmp", "unix:"+c.monitor+",server=on,wait=off")
	}
	if c.reboot {
		args = slices.DeleteFunc(args, func(a string) bool { return a == "-no-reboot" })
	}
	return args
}

// vm is the smoke's QEMU: started by the boot phase, followed through its
// console by the boot, validate and power-off phases, and gone once stop
// returns.
type vm struct {
	c      bootConfig
	res    *Result
	cmd    *exec.Cmd
	stdout io.Reader
	stderr strings.Builder
	w      *watcher
	// multiUser: the console showed multi-user.target.
	multiUser bool

	lines  chan consoleLine
	exited chan error
	// recv and wait are lines and exited while they are still to be read.
	recv           <-chan consoleLine
	wait           <-chan error
	exitErr        error
	killed, reaped bool

	deadline          *time.Timer
	expired, powerOff <-chan time.Time
	// wake, while set, makes follow check reached again once it is closed.
	wake <-chan struct{}
	// keepUp: the smoke script leaves the VM up once done; the power-off
	// phase presses its power button (pressPowerButton).
	keepUp bool
}

// newVM prepares the VM, a private copy of the firmware's variable store
// and QEMU's command; nothing runs yet.
func newVM(c bootConfig, res *Result) (*vm, error) {
	if c.stopAfterDone == 0 {
		c.stopAfterDone = 2 * time.Minute
	}
	vars := filepath.Join(c.work, "OVMF_VARS.fd")
	if err := atomicfile.Copy(vars, c.firmware.vars, 0o600); err != nil {
		return nil, fmt.Errorf("copying the UEFI variable store: %w", err)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return nil, fmt.Errorf("booting the scratch disk: %w (install qemu-system-x86)", err)
	}
	v := &vm{c: c, res: res, cmd: exec.Command(qemu, qemuArgs(c, vars)...)}
	// Its own process group (Ctrl-C is imagectl's to handle), and killed
	// with imagectl should imagectl die without cleaning up.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	v.cmd.Stdin = nil
	if v.stdout, err = v.cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	v.cmd.Stderr = &limitedWriter{w: &v.stderr, n: 8 << 10}
	return v, nil
}

// start starts QEMU, the console's reader and the timeout; stop ends
// them.
func (v *vm) start() error {
	if v.c.portHold != nil {
		v.c.portHold.Close()
	}
	started := time.Now()
	if err := v.cmd.Start(); err != nil {
		return fmt.Errorf("starting QEMU: %w", err)
	}
	v.res.observed.qemuStarted = started
	v.lines, v.exited = make(chan consoleLine, 256), make(chan error, 1)
	v.recv, v.wait = v.lines, v.exited
	go func() {
		br := bufio.NewReaderSize(v.stdout, 64<<10)
		for {
			// A console that never ends a line is cut into 64 KiB lines:
			// memory stays bounded whatever the guest prints.
			b, err := br.ReadSlice('\n')
			if len(b) > 0 {
				v.c.console.Write(b)
				v.lines <- consoleLine{string(b), time.Since(started)}
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		close(v.lines)
		// Wait only once stdout is drained, as os/exec requires.
		v.exited <- v.cmd.Wait()
	}()
	r := v.c.reporter
	v.w = newWatcher(v.res, func(stage string) {
		switch stage {
		case stageKernel:
			r.Log("the kernel started")
		case stageMultiUser:
			v.multiUser = true
		case stageSettled:
			r.Log("boot settled: system " + v.res.SystemState)
		}
	})
	v.deadline = time.NewTimer(v.c.timeout)
	v.expired = v.deadline.C
	return nil
}

// done: the smoke script is done.
func (v *vm) done() bool { return v.w.stage == stageDone }

// follow reads the console until reached holds (nil: until QEMU is gone
// and all it wrote is read), the boot fails, the timeout passes or ctx is
// cancelled; on a failure it kills QEMU. Once the smoke script is done,
// the VM has stopAfterDone to power off before it is stopped.
func (v *vm) follow(ctx context.Context, reached func() bool) error {
	for reached == nil || !reached() {
		if v.reaped && v.recv == nil {
			if v.done() {
				return nil
			}
			msg := "QEMU exited before the validation finished"
			if !v.killed && v.exitErr != nil {
				msg = fmt.Sprintf("QEMU failed (%v): %s", v.exitErr, strings.TrimSpace(v.stderr.String()))
			}
			return fmt.Errorf("smoke boot: %s: %s; %s (console log %s)", msg, v.w.stalled(), v.w.context(), v.res.ConsoleLog)
		}
		select {
		case <-ctx.Done():
			v.kill()
			return ctx.Err()
		case <-v.expired:
			v.kill()
			return fmt.Errorf("smoke boot timed out after %s: %s; %s (console log %s)", v.c.timeout, v.w.stalled(), v.w.context(), v.res.ConsoleLog)
		case <-v.powerOff:
			v.c.reporter.Log("the VM did not power off after the validation: stopped it")
			v.kill()
			v.powerOff = nil
		case line, ok := <-v.recv:
			if !ok {
				v.recv = nil // QEMU closed the console: its exit comes next
				continue
			}
			if err := v.feed(line); err != nil {
				return err
			}
		case err := <-v.wait:
			v.reaped, v.exitErr, v.wait = true, err, nil
		case <-v.wake:
			v.wake = nil
		}
	}
	return nil
}

// feed hands a console line to the watcher.
func (v *vm) feed(line consoleLine) error {
	done, err := v.w.feed(line.text, line.at)
	if err != nil {
		v.kill()
		return fmt.Errorf("smoke boot: %w (console log %s)", err, v.res.ConsoleLog)
	}
	if done {
		if !v.keepUp {
			v.powerOff = time.After(v.c.stopAfterDone)
		}
		v.expired = nil
	}
	return nil
}

// pressPowerButton shuts down a VM kept up: QEMU presses its ACPI power
// button, and the VM has stopAfterDone to power off before it is stopped;
// it is stopped at once when the monitor cannot press it.
func (v *vm) pressPowerButton(ctx context.Context) {
	if v.reaped || v.killed {
		return
	}
	if err := powerDown(ctx, v.c.monitor); err != nil {
		v.c.reporter.Log("pressing the VM's power button: " + err.Error() + ": stopped it")
		v.kill()
		return
	}
	v.powerOff = time.After(v.c.stopAfterDone)
}

func (v *vm) kill() {
	if !v.killed && !v.reaped {
		v.killed = true
		v.cmd.Process.Kill()
	}
}

// stop kills QEMU if it was started and still runs, and reaps it.
func (v *vm) stop() {
	if v.deadline == nil {
		return
	}
	v.deadline.Stop()
	if v.reaped {
		return
	}
	v.kill()
	for range v.lines {
	}
	<-v.exited
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
