package appliance

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

func TestAccelerator(t *testing.T) {
	ctx := context.Background()
	for _, want := range []string{"kvm", "tcg"} {
		if got, err := Accelerator(ctx, want, nil); err != nil || got != want {
			t.Errorf("Accelerator(%q) = %q, %v", want, got, err)
		}
	}
	if _, err := Accelerator(ctx, "xen", nil); err == nil {
		t.Error("an unknown accelerator was accepted")
	}
	testenv.Tool(t, "qemu-system-x86_64", "make deps installs qemu-system-x86")
	var logs []string
	got, err := Accelerator(ctx, "auto", func(s string) { logs = append(logs, s) })
	if err != nil {
		t.Fatal(err)
	}
	switch got {
	case "kvm":
		if len(logs) != 0 {
			t.Errorf("KVM works but the log says %q", logs)
		}
	case "tcg":
		if len(logs) != 1 || !strings.Contains(logs[0], "TCG") {
			t.Errorf("fell back to TCG without saying why: %q", logs)
		}
		t.Logf("auto chose TCG: %s", logs[0])
	default:
		t.Errorf("auto = %q", got)
	}
}
