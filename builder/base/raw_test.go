package base

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// ToRaw copies a qcow2 image to a raw disk with the same bytes; a format
// that is not the file's fails naming qemu-img's complaint.
func TestToRaw(t *testing.T) {
	qemu := testenv.Tool(t, "qemu-img", "make deps installs qemu-utils")
	dir := t.TempDir()
	src := filepath.Join(dir, "src.raw")
	data := bytes.Repeat([]byte("imagectl"), 128<<10) // 1 MiB
	os.WriteFile(src, data, 0o644)
	qcow := filepath.Join(dir, "src.qcow2")
	if err := ToRaw(context.Background(), src, "", filepath.Join(dir, "copy.raw")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(qemu, "convert", "-q", "-f", "raw", "-O", "qcow2", src, qcow).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	raw := filepath.Join(dir, "out.raw")
	if err := ToRaw(context.Background(), qcow, "qcow2", raw); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(raw); !bytes.Equal(got, data) {
		t.Errorf("the raw copy differs (%d bytes)", len(got))
	}
	if err := ToRaw(context.Background(), src, "qcow2", filepath.Join(dir, "bad.raw")); err == nil || !strings.Contains(err.Error(), "qemu-img convert -f qcow2 -O raw") {
		t.Errorf("a raw file read as qcow2: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ToRaw(ctx, qcow, "qcow2", filepath.Join(dir, "cancelled.raw")); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}
