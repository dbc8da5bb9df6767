package appliance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Accelerator decides how the appliance runs. "kvm" and "tcg" are taken as
// given; "auto" (or "") is KVM when /dev/kvm exists and QEMU can start a
// vCPU on it the way libguestfs asks (-cpu max), TCG otherwise, with the
// reason sent to log. Some hosts expose /dev/kvm yet cannot run a stock
// guest (nested virtualization refusing MSRs), and there QEMU aborts at
// start: the probe costs tens of milliseconds and spares the build a failed
// appliance launch.
func Accelerator(ctx context.Context, want string, log func(string)) (string, error) {
	switch want {
	case "kvm", "tcg":
		return want, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("accelerator %q is not auto, kvm or tcg", want)
	}
	if log == nil {
		log = func(string) {}
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		log("no /dev/kvm: the appliance runs under TCG (software emulation), several times slower")
		return "tcg", nil
	}
	if err := probeKVM(ctx); err != nil {
		log("/dev/kvm is present but QEMU cannot run a vCPU on it (" + err.Error() + "): falling back to TCG (software emulation), several times slower")
		return "tcg", nil
	}
	return "kvm", nil
}

func probeKVM(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	qemu := "qemu-system-x86_64"
	if p, err := exec.LookPath(qemu); err == nil {
		qemu = p
	}
	cmd := exec.CommandContext(ctx, qemu, "-machine", "accel=kvm", "-cpu", "max", "-nodefaults",
		"-display", "none", "-S", "-qmp", "stdio")
	cmd.Stdin = strings.NewReader(`{"execute":"qmp_capabilities"}` + "\n" + `{"execute":"quit"}` + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 && strings.Contains(msg[:i], "error:") {
			msg = msg[strings.Index(msg, "error:"):]
			msg = strings.SplitN(msg, "\n", 2)[0]
		}
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}
