package qemuproc

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestKillChildrenUsing kills the QEMU child whose command line names a
// path, and only it.
func TestKillChildrenUsing(t *testing.T) {
	sleep := testenv.Tool(t, "sleep", "coreutils has it")
	fake := filepath.Join(t.TempDir(), "qemu-system-test")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fake, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// sleep 60 and sleep 61s: "61s" stands for the disk of the one to kill.
	keep, kill := exec.Command(fake, "60"), exec.Command(fake, "61s")
	for _, c := range []*exec.Cmd{keep, kill} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer keep.Process.Kill()
	defer kill.Process.Kill()
	if n := KillChildrenUsing("61s"); n != 1 {
		t.Fatalf("killed %d, want 1", n)
	}
	done := make(chan error, 1)
	go func() { done <- kill.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the qemu child naming the path is still running")
	}
	if got := Children(); len(got) != 1 || got[0] != keep.Process.Pid {
		t.Errorf("after KillChildrenUsing: %v, want [%d]", got, keep.Process.Pid)
	}
}
