//go:build guestfs

package appliance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"libguestfs.org/guestfs"

	"github.com/gpuaas/imagectl/internal/qemuproc"
)

// TestHandle launches a real appliance on a blank disk (no base image
// needed; ~15 s under TCG), uses it, then cancels a call that would block
// for ten minutes: the call returns at once with the context's error, the
// handle refuses further calls, Close releases it and no QEMU is left.
// With -race it checks that the cancellation and the call share the
// handle's state safely.
func TestHandle(t *testing.T) {
	if testing.Short() {
		t.Skip("launches a libguestfs appliance: skipped with -short")
	}
	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	accel, err := Accelerator(ctx, "auto", func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	h, err := Launch(ctx, disk, Options{Identifier: "imagectl-test", Accel: accel, MemoryMB: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Accelerator() != accel {
		t.Errorf("Accelerator() = %q, want %q", h.Accelerator(), accel)
	}
	// Under TCG the appliance's kernel runs without address space
	// randomization (tcgAppend); under KVM with. Read from QEMU's own
	// command line (the Go binding's Get_append returns one character).
	appended := false
	for _, pid := range qemuproc.Children() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(string(b), "\x00")
		for i, a := range args[:len(args)-1] {
			if a == "-append" {
				appended = appended || slices.Contains(strings.Fields(args[i+1]), tcgAppend)
			}
		}
	}
	if appended != (accel == "tcg") {
		t.Errorf("under %s, norandmaps on the appliance kernel's command line: %v", accel, appended)
	}

	if err := h.Call(ctx, func(g *guestfs.Guestfs) error {
		if err := g.Mkfs("ext4", "/dev/sda", nil); err != nil {
			return err
		}
		return g.Mount("/dev/sda", "/")
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteFile(ctx, "/etc/imagectl/hello", []byte("hi\n"), 0o640|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if b, err := h.ReadFile(ctx, "/etc/imagectl/hello"); err != nil || string(b) != "hi\n" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	var mode int64
	if err := h.Call(ctx, func(g *guestfs.Guestfs) error {
		st, err := g.Statns("/etc/imagectl/hello")
		if err == nil {
			mode = st.St_mode & 0o7777
		}
		return err
	}); err != nil || mode != 0o2640 {
		t.Errorf("mode %o, %v; want 2640", mode, err)
	}
	// Over MaxWrite (libguestfs's write is limited to a few MB): uploaded
	// from a pipe, whole, with its mode.
	big := bytes.Repeat([]byte("imagectl upload\n"), (MaxWrite+(1<<20))/16)
	if err := h.WriteFile(ctx, "/srv/seed/user-data", big, 0o600); err != nil {
		t.Fatal(err)
	}
	var sum string
	if err := h.Call(ctx, func(g *guestfs.Guestfs) error {
		st, err := g.Statns("/srv/seed/user-data")
		if err == nil {
			mode = st.St_mode & 0o7777
			sum, err = g.Checksum("sha256", "/srv/seed/user-data")
		}
		return err
	}); err != nil || mode != 0o600 || sum != fmt.Sprintf("%x", sha256.Sum256(big)) {
		t.Errorf("uploaded: mode %o, sha256 %s, %v", mode, sum, err)
	}
	if ok, err := h.Exists(ctx, "/etc/imagectl/nope"); ok || err != nil {
		t.Errorf("Exists(nope) = %v, %v", ok, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(time.Second, cancel)
	start := time.Now()
	err = h.Call(cctx, func(g *guestfs.Guestfs) error { return g.Sleep(600) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the cancelled call took %s to return", took)
	}
	if _, err := h.ReadFile(ctx, "/etc/imagectl/hello"); !errors.Is(err, ErrStopped) {
		t.Errorf("a call after the kill: %v, want ErrStopped", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("closing a killed appliance: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("closing twice: %v", err)
	}
	if pids := qemuproc.Children(); len(pids) > 0 {
		t.Errorf("QEMU processes left running: %v", pids)
	}
}

// TestLaunchGivesUpOnAnApplianceThatDoesNotComeUp: an appliance that does
// not come up within the launch timeout (here far shorter than any boot,
// standing for a kernel hung early under TCG) is killed and launched
// again, saying so, up to three launches; then Launch fails saying why,
// and no QEMU is left. With 1 ms the time runs out before QEMU has
// started: it is looked for until it has, and killed then.
func TestLaunchGivesUpOnAnApplianceThatDoesNotComeUp(t *testing.T) {
	if testing.Short() {
		t.Skip("launches a libguestfs appliance: skipped with -short")
	}
	ctx := context.Background()
	accel, err := Accelerator(ctx, "auto", func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	for _, timeout := range []time.Duration{300 * time.Millisecond, time.Millisecond} {
		t.Run(timeout.String(), func(t *testing.T) {
			disk := filepath.Join(t.TempDir(), "disk.raw")
			if err := os.WriteFile(disk, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(disk, 64<<20); err != nil {
				t.Fatal(err)
			}
			var logged []string
			h, err := Launch(ctx, disk, Options{Identifier: "imagectl-test", Accel: accel, MemoryMB: 512, LaunchTimeout: timeout,
				Log: func(s string) { logged = append(logged, s) }})
			if err == nil {
				h.Close()
				t.Fatalf("an appliance came up within %v", timeout)
			}
			if want := fmt.Sprintf("it did not come up within %v, 3 times", timeout); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q, want %q in it", err, want)
			}
			if len(logged) != 2 || !strings.Contains(logged[0], "killed, launching it again (2 of 3)") || !strings.Contains(logged[1], "(3 of 3)") {
				t.Errorf("logged %q", logged)
			}
			if pids := qemuproc.Children(); len(pids) > 0 {
				t.Errorf("QEMU left running: %v", pids)
			}
		})
	}
}
