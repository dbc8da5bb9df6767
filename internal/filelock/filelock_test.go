package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDir(t *testing.T) {
	d := Dir{Path: filepath.Join(t.TempDir(), "layers"), What: "the layer cache"}
	unlock, err := d.Wait(false) // creates the directory
	if err != nil {
		t.Fatal(err)
	}
	if u, ok, err := d.Try(false); err != nil || !ok {
		t.Errorf("a second shared lock: %v, %v", ok, err)
	} else {
		u()
	}
	if _, ok, err := d.Try(true); err != nil || ok {
		t.Errorf("exclusive while shared: %v, %v", ok, err)
	}
	unlock()
	u, ok, err := d.Try(true)
	if err != nil || !ok {
		t.Fatalf("exclusive once released: %v, %v", ok, err)
	}
	u()

	blocked := Dir{Path: filepath.Join(d.Path, "lock", "x"), What: "the registry cache"}
	if _, err := blocked.Wait(true); err == nil || !strings.HasPrefix(err.Error(), "locking the registry cache "+blocked.Path+": ") {
		t.Errorf("a lock that cannot be made: %v", err)
	}
	if _, err := os.Stat(d.File()); err != nil {
		t.Error(err)
	}
}

func TestWaitContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store", ".lock")
	unlock, err := WaitContext(context.Background(), path, "the store x")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := WaitContext(ctx, path, "the store x"); !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "waiting for the lock of the store x: ") {
		t.Errorf("while held: %v", err)
	}
	done := make(chan error)
	go func() {
		u, err := WaitContext(context.Background(), path, "the store x")
		if err == nil {
			u()
		}
		done <- err
	}()
	unlock()
	if err := <-done; err != nil {
		t.Errorf("once released: %v", err)
	}
}

// TestUnlockWithCopiesAlive: unlock frees the lock even while a copy of
// the lock's open file lives on, as it does in a child process another
// goroutine forked and that has not yet exec'd (close-on-exec). A dup of
// the descriptor stands in for that child.
func TestUnlockWithCopiesAlive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, ok, err := Lock(path, true, false)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	copyFd := -1
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			if copyFd, err = syscall.Dup(fd); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if copyFd < 0 {
		t.Fatal("the lock's descriptor is not in /proc/self/fd")
	}
	defer syscall.Close(copyFd)
	unlock()
	again, ok, err := Lock(path, true, false)
	if err != nil || !ok {
		t.Fatalf("the lock is still held after unlock while a copy of its file is open: ok=%v err=%v", ok, err)
	}
	again()
}
