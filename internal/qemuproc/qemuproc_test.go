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
	q := exec.Command(fakeQEMU(t, sleep), "60")
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
	mustExit(t, q)
	if got := Children(); len(got) != 0 {
		t.Errorf("after KillChildren: %v", got)
	}
}

// TestKillChildrenWithDrive kills the QEMU child that has a disk as a
// drive, and only it: not one whose drive's path starts with the same
// characters.
func TestKillChildrenWithDrive(t *testing.T) {
	fake := fakeQEMU(t, testenv.Tool(t, "sh", "dash or bash has it"))
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
	mustExit(t, kill)
	if got := Children(); len(got) != 1 || got[0] != keep.Process.Pid {
		t.Errorf("after KillChildrenWithDrive: %v, want [%d]", got, keep.Process.Pid)
	}
}

// fakeQEMU is a copy of the program at path named qemu-system-test: its
// processes are QEMU's to Children.
func fakeQEMU(t *testing.T, path string) string {
	t.Helper()
	fake := filepath.Join(t.TempDir(), "qemu-system-test")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return fake
}

// mustExit waits up to 5 s for c, killed, to exit.
func mustExit(t *testing.T, c *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s is still running", c.Path)
	}
}
