package qemuproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestChildren starts a process named qemu-* (a copy of sleep) and finds
// and kills it; other children are not touched.
func TestChildren(t *testing.T) {
	sleep := testenv.Tool(t, "sleep", "coreutils has it")
	fake := filepath.Join(t.TempDir(), "qemu-system-test")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	q := exec.Command(fake, "60")
	other := exec.Command(sleep, "60")
	for _, c := range []*exec.Cmd{q, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer other.Process.Kill()
	if got := Children(); len(got) != 1 || got[0] != q.Process.Pid {
		t.Fatalf("Children() = %v, want [%d]", got, q.Process.Pid)
	}
	KillChildren()
	done := make(chan error, 1)
	go func() { done <- q.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the qemu child is still running")
	}
	if got := Children(); len(got) != 0 {
		t.Errorf("after KillChildren: %v", got)
	}
}

// TestKillChildrenWithDrive kills the QEMU child that has a disk as a
// drive, and only it: not one whose drive's path starts with the same
// characters.
func TestKillChildrenWithDrive(t *testing.T) {
	sh := testenv.Tool(t, "sh", "dash or bash has it")
	fake := filepath.Join(t.TempDir(), "qemu-system-test")
	b, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk,1.raw")
	// The shell waits on its stdin, which stays open; its arguments stand
	// for QEMU's: $0 is its drive.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := func(drive string) *exec.Cmd {
		c := exec.Command(fake, "-c", "read x", "file="+drive+",cache=unsafe,format=raw")
		c.Stdin = r
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	keep := start(strings.ReplaceAll(disk, ",", ",,") + ".2")
	kill := start(strings.ReplaceAll(disk, ",", ",,"))
	if n := KillChildrenWithDrive(disk); n != 1 {
		t.Fatalf("killed %d, want 1", n)
	}
	done := make(chan error, 1)
	go func() { done <- kill.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the qemu child with the drive is still running")
	}
	if got := Children(); len(got) != 1 || got[0] != keep.Process.Pid {
		t.Errorf("after KillChildrenWithDrive: %v, want [%d]", got, keep.Process.Pid)
	}
}
