//go:build guestfs

package appliance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"libguestfs.org/guestfs"

	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/qemuproc"
)

// Options configure an appliance.
type Options struct {
	// Identifier names the appliance in libguestfs's messages and QEMU's
	// command line ("imagectl", "imagectl-smoke").
	Identifier string
	// Accel is "kvm" or "tcg", as Accelerator decided.
	Accel string
	// MemoryMB is the appliance's memory (default 2048: apt, dpkg triggers
	// and initramfs builds need room).
	MemoryMB int
	// Network gives the appliance a user-mode network (apt inside it).
	Network bool
	// Format is the disk's format, "raw" or "qcow2" (default "raw").
	Format string
	// Discard passes the guest's discards on to the disk image, where the
	// format and the host allow.
	Discard bool
	// LaunchTimeout bounds one launch (default 5 minutes under TCG, where
	// a launch takes 15 to 60 s, 2 under KVM): libguestfs waits for the
	// appliance without end once QEMU has started, and an appliance
	// kernel that hangs early in its boot (seen under TCG on a loaded
	// host: QEMU busy, nothing read of its disks) would hold the build or
	// smoke run forever. A launch that runs past it is killed and tried
	// again, up to launchAttempts launches in all.
	LaunchTimeout time.Duration
	// Log, when set, is told of a launch that did not come up in time.
	Log func(string)
}

// launchAttempts is how many times Launch launches an appliance that does
// not come up in time before it gives up.
const launchAttempts = 3

// launchTimeout is o.LaunchTimeout or its default.
func (o Options) launchTimeout() time.Duration {
	switch {
	case o.LaunchTimeout > 0:
		return o.LaunchTimeout
	case o.Accel == "kvm":
		return 2 * time.Minute
	}
	return 5 * time.Minute
}

// Handle is one launched appliance with its disk attached. Its calls run
// one at a time; Kill and Close may be called from any goroutine.
type Handle struct {
	guard
	g     *guestfs.Guestfs
	accel string
}

// tcgAppend is added to the appliance kernel's command line under TCG.
// QEMU's TCG translates guest code per virtual address, and with address
// space randomization every process a build runs (each dpkg, maintainer
// script, sh and sed) maps its libraries somewhere new, so QEMU translated
// them anew each time: 15,000 to 45,000 new blocks a second through
// package installs, filling its 1 GiB translation cache every two minutes.
// Without randomization the same code keeps its translation; in two pairs
// of demo builds the packages steps took 96 and 109 s instead of 149 and
// 161 s, the builds 189 and 208 s instead of 273 and more (docs/speed.md).
// The appliance is a throwaway VM that runs only the build's own steps;
// under KVM, which translates nothing, it keeps randomization.
var tcgAppend = "norandmaps"

// Launch starts an appliance on disk. The disk's cache mode is "unsafe"
// (QEMU ignores flushes): every disk imagectl attaches is a scratch copy
// thrown away when the run fails. Cancelling ctx during the launch kills
// the QEMU it started, so Launch returns early; a launch that does not
// come up within o's launch timeout is killed and tried again (see
// Options.LaunchTimeout). The caller owns the returned Handle and must
// Close it.
func Launch(ctx context.Context, disk string, o Options) (*Handle, error) {
	timeout := o.launchTimeout()
	for attempt := 1; ; attempt++ {
		g, hung, err := launch(ctx, disk, o, timeout)
		switch {
		case err == nil:
			h := &Handle{g: g, accel: o.Accel}
			if pid, err := g.Get_pid(); err == nil {
				h.pid = pid
			}
			return h, nil
		case !hung:
			return nil, err
		case attempt == launchAttempts:
			return nil, fmt.Errorf("%w, %d times; run libguestfs-test-tool for details", err, launchAttempts)
		}
		if o.Log != nil {
			o.Log(fmt.Sprintf("the appliance (%s) did not come up within %v: killed, launching it again (%d of %d)", o.Accel, timeout, attempt+1, launchAttempts))
		}
	}
}

// launch launches an appliance on disk once. hung is set when it did not
// come up within timeout and was killed: its handle is closed then.
func launch(ctx context.Context, disk string, o Options, timeout time.Duration) (_ *guestfs.Guestfs, hung bool, _ error) {
	g, gerr := guestfs.Create()
	if gerr != nil {
		return nil, false, fmt.Errorf("creating the libguestfs handle: %v", gerr)
	}
	g.Quiet()
	format := o.Format
	if format == "" {
		format = "raw"
	}
	mem := o.MemoryMB
	if mem == 0 {
		mem = 2048
	}
	drive := &guestfs.OptargsAdd_drive{
		Format_is_set: true, Format: format,
		Cachemode_is_set: true, Cachemode: "unsafe",
	}
	if o.Discard {
		drive.Discard_is_set, drive.Discard = true, "besteffort"
	}
	setup := []func() error{
		func() error { return g.Set_identifier(o.Identifier) },
		func() error { return g.Set_network(o.Network) },
		func() error { return g.Set_memsize(mem) },
		func() error { return g.Set_smp(min(2, max(1, runtime.NumCPU()))) },
		// The appliance must not get the terminal's Ctrl-C: imagectl stops
		// it itself, after saying why.
		func() error { return g.Set_pgroup(true) },
		func() error { return g.Add_drive(disk, drive) },
	}
	if o.Accel == "tcg" {
		setup = append(setup, func() error { return g.Set_backend_settings([]string{"force_tcg"}) },
			func() error { return g.Set_append(&tcgAppend) })
	}
	for _, f := range setup {
		if err := f(); err != nil {
			g.Close()
			return nil, false, fmt.Errorf("configuring the appliance for %s: %w", disk, err)
		}
	}

	// Launch is the slow part (seconds under KVM, ~15 s under TCG). The
	// appliance's pid is not known until it returns, so cancellation kills
	// this process's QEMU children, and the timeout the one QEMU that has
	// disk as a drive (the others may be other appliances' and VMs'); a
	// QEMU not started yet when the time runs out (libguestfs checks its
	// appliance first) is looked for again until it is. Once Launch has
	// returned and the lock is taken, the timer kills nothing; a launch
	// that came up in the instant before is killed and launched again.
	var mu sync.Mutex
	returned, killed := false, false
	var timer *time.Timer
	mu.Lock()
	timer = time.AfterFunc(timeout, func() {
		mu.Lock()
		defer mu.Unlock()
		if !returned && !killed {
			if killed = qemuproc.KillChildrenWithDrive(disk) > 0; !killed {
				timer.Reset(min(timeout, time.Second))
			}
		}
	})
	mu.Unlock()
	stop := context.AfterFunc(ctx, qemuproc.KillChildren)
	err := g.Launch()
	stop()
	mu.Lock()
	returned = true
	hung = killed
	mu.Unlock()
	timer.Stop()
	if err != nil || hung {
		g.Close()
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if hung {
			return nil, true, fmt.Errorf("launching the libguestfs appliance (%s) on %s: it did not come up within %v", o.Accel, disk, timeout)
		}
		return nil, false, fmt.Errorf("launching the libguestfs appliance (%s) on %s: %w; run libguestfs-test-tool for details", o.Accel, disk, err)
	}
	return g, false, nil
}

// Accelerator is "kvm" or "tcg".
func (h *Handle) Accelerator() string { return h.accel }

// Call runs f on the libguestfs handle, alone. A cancelled ctx kills the
// appliance, and f's error is then ctx's; after Kill or Close it returns
// ErrStopped without calling f.
func (h *Handle) Call(ctx context.Context, f func(g *guestfs.Guestfs) error) error {
	return h.call(ctx, func() error { return f(h.g) })
}

// Kill stops the appliance from any goroutine, ending a running call; the
// owner's Close still releases the handle.
func (h *Handle) Kill() { h.kill() }

// Close unmounts everything, shuts the appliance down (which reports the
// write errors libguestfs's close would swallow) and releases the handle;
// a killed appliance is only released. From another goroutine while a call
// runs it kills the appliance instead, so that call returns; the owner's
// Close then releases. Close is safe to call more than once.
func (h *Handle) Close() error {
	return h.close(func(killed bool) error {
		var err error
		if !killed {
			if uerr := h.g.Umount_all(); uerr != nil {
				err = fmt.Errorf("unmounting the guest: %w", uerr)
			}
			if serr := h.g.Shutdown(); serr != nil && err == nil {
				err = fmt.Errorf("shutting the appliance down: %w", serr)
			}
		}
		h.g.Close()
		return err
	})
}

// callFor is Call for a libguestfs call that returns a value.
func callFor[T any](ctx context.Context, h *Handle, f func(g *guestfs.Guestfs) (T, error)) (T, error) {
	var v T
	err := h.Call(ctx, func(g *guestfs.Guestfs) error {
		var err error
		v, err = f(g)
		return err
	})
	return v, err
}

// firstDriveLink is where udev links the first drive libguestfs adds: it
// gives its drives the ids hd0, hd1, ..., which QEMU reports in the SCSI
// device identification, and translates device names by these links.
const firstDriveLink = "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_hd0"

// FirstDrive returns the name the appliance's kernel gave the first drive
// (the disk Launch attached), as tools in the guest see it, or "" where the
// guest cannot tell (no such link, no readlink). It runs in the guest, so
// a root must be mounted. libguestfs presents that drive as /dev/sda
// whatever the kernel named it, and the kernel probes the appliance's
// disks in no fixed order: on a loaded host the first drive is sometimes
// /dev/sdb, and tools such as grub-mkconfig write that name into what they
// generate.
func (h *Handle) FirstDrive(ctx context.Context) (string, error) {
	out, code, err := h.Run(ctx, "if [ -e "+firstDriveLink+" ]; then readlink -f "+firstDriveLink+" 2>/dev/null; fi")
	if err != nil {
		return "", fmt.Errorf("reading which disk the appliance's kernel named %s: %w", firstDriveLink, err)
	}
	name := strings.TrimSpace(out)
	if code != 0 || !devName.MatchString(name) {
		return "", nil
	}
	return name, nil
}

// devName is a whole disk's device name.
var devName = regexp.MustCompile(`^/dev/[a-z]+$`)

const exitMarker = "imagectl-exit="

// Run runs a shell script in the guest (libguestfs chroots into the
// mounted root, with /dev, /proc and /sys bound) with stderr folded into
// stdout, and returns its output and exit status. err is set only when
// the script could not be run or its status not read.
func (h *Handle) Run(ctx context.Context, script string) (out string, code int, err error) {
	// The wrapper always succeeds so the output comes back even when the
	// script fails; its exit status is the last line.
	out, err = callFor(ctx, h, func(g *guestfs.Guestfs) (string, error) {
		return g.Sh("exec 2>&1\n(\n" + script + "\n)\necho \"" + exitMarker + "$?\"")
	})
	if err != nil {
		return "", 0, err
	}
	out = strings.TrimRight(out, "\n")
	i := strings.LastIndex(out, exitMarker)
	if i < 0 {
		return out, 0, errors.New("no exit status in its output")
	}
	code, _ = strconv.Atoi(strings.TrimSpace(out[i+len(exitMarker):]))
	return strings.TrimRight(out[:i], "\n"), code, nil
}

// MaxWrite is the largest content WriteFile hands libguestfs's write
// call, whose messages are limited to a few MB (guestfs_write documents 2
// to 4 MB); a larger one goes through Upload.
const MaxWrite = 2 << 20

// WriteFile writes a file in the guest with mode, creating its parent
// directories; a new file is root's. Content over MaxWrite is uploaded
// from a pipe (Upload).
func (h *Handle) WriteFile(ctx context.Context, p string, content []byte, mode fs.FileMode) error {
	if len(content) > MaxWrite {
		return h.Upload(ctx, bytes.NewReader(content), p, mode)
	}
	err := h.Call(ctx, func(g *guestfs.Guestfs) error {
		return place(g, p, mode, func() error { return g.Write(p, content) })
	})
	if err != nil {
		return fmt.Errorf("writing %s in the guest: %w", p, err)
	}
	return nil
}

// Upload writes what r holds to the file p in the guest with mode,
// creating its parent directories, through libguestfs's upload (no size
// limit) from one end of a pipe, as TarIn streams: nothing touches the
// host's disk. A read error of r fails it.
func (h *Handle) Upload(ctx context.Context, r io.Reader, p string, mode fs.FileMode) error {
	err := h.streamIn(ctx, r, func(g *guestfs.Guestfs, src string) error {
		return place(g, p, mode, func() error { return g.Upload(src, p) })
	})
	if err != nil {
		return fmt.Errorf("uploading %s into the guest: %w", p, err)
	}
	return nil
}

// place makes the file p in the guest, as WriteFile and Upload do: its
// parent directories, then put writing it, then its mode.
func place(g *guestfs.Guestfs, p string, mode fs.FileMode, put func() error) error {
	if err := g.Mkdir_p(path.Dir(p)); err != nil {
		return err
	}
	if err := put(); err != nil {
		return err
	}
	return g.Chmod(int(fsmode.ToUnix(mode)), p)
}

// ReadFile reads a file of the guest.
func (h *Handle) ReadFile(ctx context.Context, p string) ([]byte, error) {
	b, err := callFor(ctx, h, func(g *guestfs.Guestfs) ([]byte, error) { return g.Read_file(p) })
	if err != nil {
		return nil, fmt.Errorf("reading %s in the guest: %w", p, err)
	}
	return b, nil
}

// Exists reports whether a path exists in the guest.
func (h *Handle) Exists(ctx context.Context, p string) (bool, error) {
	ok, err := callFor(ctx, h, func(g *guestfs.Guestfs) (bool, error) { return g.Exists(p) })
	if err != nil {
		return false, fmt.Errorf("looking for %s in the guest: %w", p, err)
	}
	return ok, nil
}

// TarIn unpacks the uncompressed tar stream r into the guest directory
// dir, as root (owners and modes kept) with xattrs. TarIn and TarOut hand
// libguestfs one end of a pipe as /dev/fd/N: the library opens that path
// in this process and streams through it, so no tar file touches the disk.
// A read error of r fails the unpacking. TarIn stops reading r when it
// returns, early when the unpacking failed: a caller producing r through
// an io.Pipe closes the pipe's reader then, so that its writer stops too.
func (h *Handle) TarIn(ctx context.Context, r io.Reader, dir string) error {
	err := h.streamIn(ctx, r, func(g *guestfs.Guestfs, src string) error {
		return g.Tar_in(src, dir, &guestfs.OptargsTar_in{Xattrs_is_set: true, Xattrs: true})
	})
	if err != nil {
		return fmt.Errorf("unpacking into %s in the guest: %w", dir, err)
	}
	return nil
}

// streamIn calls f with the /dev/fd path of a pipe's read end while r is
// copied into its write end (TarIn, Upload): a read error of r fails it,
// and the pipe is closed when f returns, so that the copy stops too.
func (h *Handle) streamIn(ctx context.Context, r io.Reader, f func(g *guestfs.Guestfs, src string) error) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	copyErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(pw, r)
		pw.Close()
		copyErr <- err
	}()
	err = h.Call(ctx, func(g *guestfs.Guestfs) error { return f(g, fdPath(pr)) })
	pr.Close() // unblocks the copy if f stopped reading
	if cerr := <-copyErr; err == nil && cerr != nil && !errors.Is(cerr, syscall.EPIPE) {
		err = cerr
	}
	return err
}

// TarOut streams the guest's root filesystem to w as tar with xattrs and
// numeric owners.
func (h *Handle) TarOut(ctx context.Context, w io.Writer) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("tar-out of the guest: %w", err)
	}
	copyErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, pr)
		pr.Close()
		copyErr <- err
	}()
	err = h.Call(ctx, func(g *guestfs.Guestfs) error {
		return g.Tar_out("/", fdPath(pw), &guestfs.OptargsTar_out{
			Xattrs_is_set: true, Xattrs: true,
			Numericowner_is_set: true, Numericowner: true,
		})
	})
	pw.Close()
	cerr := <-copyErr
	if err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("tar-out of the guest: %w", err)
	}
	return nil
}

func fdPath(f *os.File) string { return "/dev/fd/" + strconv.Itoa(int(f.Fd())) }
