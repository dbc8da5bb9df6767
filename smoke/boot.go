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
	// script is done before it is killed (default 2 minutes).
	stopAfterDone time.Duration
}

// qemuArgs is the VM: q35 with UEFI firmware in pflash (a private copy of
// the variable store), the scratch disk on virtio, one virtio NIC on
// QEMU's user network (DHCP, as MAAS's network gives), no display, the
// serial console on stdout. -no-reboot turns a reboot (a panic with
// panic=N, a reboot loop) into QEMU exiting.
func qemuArgs(c bootConfig, vars string) []string {
	machine, cpu := "q35,accel=tcg", "max"
	if c.accel == "kvm" {
		machine, cpu = "q35,accel=kvm", "host"
	}
	return []string{
		"-name", "imagectl-smoke",
		"-machine", machine, "-cpu", cpu,
		"-smp", strconv.Itoa(min(2, max(1, runtime.NumCPU()))), "-m", strconv.Itoa(c.memoryMB),
		"-nodefaults", "-display", "none", "-no-reboot",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + c.firmware.code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-drive", "file=" + c.disk + ",format=raw,if=virtio,cache=unsafe,discard=unmap",
		"-nic", "user,model=virtio-net-pci",
		"-chardev", "stdio,id=ser0,signal=off", "-serial", "chardev:ser0",
		"-object", "rng-random,id=rng0,filename=/dev/urandom", "-device", "virtio-rng-pci,rng=rng0",
	}
}

// boot runs the VM until the smoke script is done and the VM has powered
// off, the boot fails, the timeout passes or ctx is cancelled. QEMU is
// gone when it returns.
func boot(ctx context.Context, c bootConfig, res *Result) error {
	if c.stopAfterDone == 0 {
		c.stopAfterDone = 2 * time.Minute
	}
	r := c.reporter
	vars := filepath.Join(c.work, "OVMF_VARS.fd")
	if err := atomicfile.Copy(vars, c.firmware.vars, 0o600); err != nil {
		return fmt.Errorf("copying the UEFI variable store: %w", err)
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return fmt.Errorf("booting the scratch disk: %w (install qemu-system-x86)", err)
	}
	cmd := exec.Command(qemu, qemuArgs(c, vars)...)
	// Its own process group (Ctrl-C is imagectl's to handle), and killed
	// with imagectl should imagectl die without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdin = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 8 << 10}

	bootStart := time.Now()
	bootDone := r.Phase(PhaseBoot, "UEFI boot of the scratch disk under "+strings.ToUpper(c.accel)+" to multi-user.target")
	var valDone func(error)
	phaseErr := func(err error) {
		if valDone != nil {
			valDone(err)
			res.Seconds[PhaseValidate] = time.Since(bootStart).Seconds() - res.Seconds[PhaseBoot]
		} else {
			bootDone(err)
			res.Seconds[PhaseBoot] = time.Since(bootStart).Seconds()
		}
	}
	if err := cmd.Start(); err != nil {
		phaseErr(err)
		return fmt.Errorf("starting QEMU: %w", err)
	}
	res.observed.qemuStarted = bootStart
	lines := make(chan consoleLine, 256)
	exited := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(stdout, 64<<10)
		for {
			// A console that never ends a line is cut into 64 KiB lines:
			// memory stays bounded whatever the guest prints.
			b, err := br.ReadSlice('\n')
			if len(b) > 0 {
				c.console.Write(b)
				lines <- consoleLine{string(b), time.Since(bootStart)}
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		close(lines)
		// Wait only once stdout is drained, as os/exec requires.
		exited <- cmd.Wait()
	}()
	killed, reaped := false, false
	kill := func() {
		if !killed && !reaped {
			killed = true
			cmd.Process.Kill()
		}
	}
	// Whatever happens, QEMU is reaped before boot returns.
	defer func() {
		if reaped {
			return
		}
		kill()
		for range lines {
		}
		<-exited
	}()
	recv := lines

	w := newWatcher(res, func(stage string) {
		switch stage {
		case stageKernel:
			r.Log("the kernel started")
		case stageMultiUser:
			bootDone(nil)
			res.Seconds[PhaseBoot] = time.Since(bootStart).Seconds()
			valDone = r.Phase(PhaseValidate, "wait for the boot to settle, run the image's validation script")
		case stageSettled:
			r.Log("boot settled: system " + res.SystemState)
		}
	})
	var powerOff, expired <-chan time.Time
	handle := func(line consoleLine) error {
		done, err := w.feed(line.text, line.at)
		if err != nil {
			kill()
			err = fmt.Errorf("smoke boot: %w (console log %s)", err, res.ConsoleLog)
			phaseErr(err)
			return err
		}
		if done {
			phaseErr(nil)
			powerOff = time.After(c.stopAfterDone)
			expired = nil
		}
		return nil
	}
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	expired = deadline.C
	for {
		select {
		case <-ctx.Done():
			kill()
			phaseErr(ctx.Err())
			return ctx.Err()
		case <-expired:
			kill()
			err := fmt.Errorf("smoke boot timed out after %s: %s; %s (console log %s)", c.timeout, w.stalled(), w.context(), res.ConsoleLog)
			phaseErr(err)
			return err
		case <-powerOff:
			r.Log("the VM did not power off after the validation: stopped it")
			kill()
			powerOff = nil
		case line, ok := <-recv:
			if !ok {
				recv = nil // QEMU closed the console: its exit comes next
				continue
			}
			if err := handle(line); err != nil {
				return err
			}
		case werr := <-exited:
			reaped = true
			for line := range lines { // what QEMU wrote last
				if err := handle(line); err != nil {
					return err
				}
			}
			if w.stage == stageDone {
				return nil
			}
			msg := "QEMU exited before the validation finished"
			if !killed && werr != nil {
				msg = fmt.Sprintf("QEMU failed (%v): %s", werr, strings.TrimSpace(stderr.String()))
			}
			err := fmt.Errorf("smoke boot: %s: %s; %s (console log %s)", msg, w.stalled(), w.context(), res.ConsoleLog)
			phaseErr(err)
			return err
		}
	}
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
