//go:build guestfs

package guestfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"libguestfs.org/guestfs"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/qemuproc"
)

// Executor opens libguestfs sessions.
type Executor struct {
	// MemoryMB is the appliance's memory (default 2048: apt and dpkg
	// triggers such as initramfs builds need room).
	MemoryMB int
}

var _ builder.Executor = Executor{}

// session is one launched appliance. mu is held for the duration of every
// libguestfs call, which the library requires to come from one thread at a
// time; Close from another goroutine during a call kills the appliance's
// QEMU instead, so that call returns at once.
type session struct {
	mu     sync.Mutex
	g      *guestfs.Guestfs
	accel  string
	pid    int
	killed atomic.Bool // set by Close from another goroutine during a call
	closed bool
	mounts []builder.Mount
}

// Open launches the appliance on disk, grows the root filesystem to the
// disk's size and mounts the guest.
func (e Executor) Open(ctx context.Context, disk string, opts builder.SessionOptions) (builder.Session, error) {
	accel, err := Accelerator(ctx, opts.Accel, opts.Log)
	if err != nil {
		return nil, err
	}
	g, gerr := guestfs.Create()
	if gerr != nil {
		return nil, fmt.Errorf("creating the libguestfs handle: %v", gerr)
	}
	g.Quiet()
	s := &session{g: g, accel: accel}
	ok := false
	defer func() {
		if !ok {
			s.shutdown()
		}
	}()
	format := opts.Format
	if format == "" {
		format = "qcow2"
	}
	mem := e.MemoryMB
	if mem == 0 {
		mem = 2048
	}
	setup := []func() error{
		func() error { return g.Set_identifier("imagectl") },
		func() error { return g.Set_network(true) },
		func() error { return g.Set_memsize(mem) },
		func() error { return g.Set_smp(min(2, max(1, numCPU()))) },
		// The appliance must not get the terminal's Ctrl-C: imagectl stops
		// it itself, after saying why.
		func() error { return g.Set_pgroup(true) },
		func() error {
			return g.Add_drive(disk, &guestfs.OptargsAdd_drive{
				Format_is_set: true, Format: format,
				Discard_is_set: true, Discard: "besteffort",
				// The overlay is thrown away if the build fails.
				Cachemode_is_set: true, Cachemode: "unsafe",
			})
		},
	}
	if accel == "tcg" {
		setup = append(setup, func() error { return g.Set_backend_settings([]string{"force_tcg"}) })
	}
	for _, f := range setup {
		if err := f(); err != nil {
			return nil, fmt.Errorf("configuring the appliance: %w", err)
		}
	}

	// Launch is the slow part (seconds under KVM, ~15 s under TCG);
	// cancellation kills the QEMU it started so it returns early.
	stop := context.AfterFunc(ctx, qemuproc.KillChildren)
	err = g.Launch()
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("launching the libguestfs appliance (%s): %w; run libguestfs-test-tool for details", accel, err)
	}
	if pid, err := g.Get_pid(); err == nil {
		s.pid = pid
	}
	root, err := s.growAndMount(opts.Log)
	if err != nil {
		return nil, err
	}
	if opts.Log != nil {
		opts.Log(fmt.Sprintf("appliance up (%s), guest root %s", accel, root))
	}
	ok = true
	return s, nil
}

// growAndMount finds the guest's root, grows its partition and ext
// filesystem to the end of the disk when it is the last partition, and
// mounts the guest's filesystems as its fstab says.
func (s *session) growAndMount(log func(string)) (string, error) {
	g := s.g
	roots, err := g.Inspect_os()
	if err != nil {
		return "", fmt.Errorf("inspecting the base image: %w", err)
	}
	if len(roots) != 1 {
		return "", fmt.Errorf("inspecting the base image: found %d operating systems, want 1", len(roots))
	}
	root := roots[0]
	if err := s.grow(root, log); err != nil {
		return "", fmt.Errorf("growing the root filesystem: %w", err)
	}
	mps, err := g.Inspect_get_mountpoints(root)
	if err != nil {
		return "", fmt.Errorf("reading the guest's mount points: %w", err)
	}
	points := make([]string, 0, len(mps))
	for mp := range mps {
		points = append(points, mp)
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) < len(points[j]) })
	for _, mp := range points {
		dev := mps[mp]
		if err := g.Mount(dev, mp); err != nil {
			return "", fmt.Errorf("mounting %s on %s: %w", dev, mp, err)
		}
		m := builder.Mount{Point: mp, Device: dev, Partition: -1}
		m.Type, _ = g.Vfs_type(dev)
		switch {
		case dev == "/dev/sda":
			m.Partition = 0
		case strings.HasPrefix(dev, "/dev/sda"):
			if n, err := g.Part_to_partnum(dev); err == nil {
				m.Partition = n
			}
		}
		s.mounts = append(s.mounts, m)
	}
	return root, nil
}

func (s *session) grow(root string, log func(string)) error {
	g := s.g
	dev, err := g.Part_to_dev(root)
	if err != nil {
		return nil // not on a partition: nothing to grow
	}
	num, err := g.Part_to_partnum(root)
	if err != nil {
		return err
	}
	parts, err := g.Part_list(dev)
	if err != nil {
		return err
	}
	var last, mine *guestfs.Partition
	for i := range *parts {
		p := &(*parts)[i]
		if last == nil || p.Part_end > last.Part_end {
			last = p
		}
		if int(p.Part_num) == num {
			mine = p
		}
	}
	sectors, err := g.Blockdev_getsz(dev)
	if err != nil {
		return err
	}
	ptype, err := g.Part_get_parttype(dev)
	if err != nil {
		return err
	}
	end := sectors - 1
	if ptype == "gpt" {
		end = sectors - 34 // the backup GPT takes the last 33 sectors
	}
	if mine == nil || mine != last || int64(mine.Part_end/512) >= end-2048 {
		return nil // not last, or already fills the disk
	}
	fstype, err := g.Vfs_type(root)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(fstype, "ext") {
		if log != nil {
			log(fmt.Sprintf("root filesystem is %s: not growing it (only ext2/3/4 are grown)", fstype))
		}
		return nil
	}
	if ptype == "gpt" {
		if err := g.Part_expand_gpt(dev); err != nil {
			return err
		}
	}
	if err := g.Part_resize(dev, num, end); err != nil {
		return err
	}
	if err := g.E2fsck(root, &guestfs.OptargsE2fsck{Forceall_is_set: true, Forceall: true}); err != nil {
		return err
	}
	return g.Resize2fs(root)
}

func (s *session) Accelerator() string { return s.accel }

func (s *session) Mounts() []builder.Mount { return s.mounts }

// Checkpoint unmounts the guest (which leaves its filesystems clean on the
// disk), syncs the appliance's block devices, runs fn, and mounts the
// guest again as it was. With the drive's cache mode "unsafe" QEMU ignores
// flushes, but its raw writes are already in the image file (the host's
// page cache) when the guest's I/O completes, which is what fn reads.
func (s *session) Checkpoint(ctx context.Context, fn func() error) error {
	if err := s.call(ctx, func(g *guestfs.Guestfs) error {
		if err := g.Umount_all(); err != nil {
			return err
		}
		return g.Sync()
	}); err != nil {
		return fmt.Errorf("unmounting the guest: %w", err)
	}
	ferr := fn()
	if err := s.call(context.WithoutCancel(ctx), func(g *guestfs.Guestfs) error {
		for _, m := range s.mounts {
			if err := g.Mount(m.Device, m.Point); err != nil {
				return fmt.Errorf("mounting %s on %s: %w", m.Device, m.Point, err)
			}
		}
		return nil
	}); err != nil && ferr == nil {
		ferr = fmt.Errorf("mounting the guest again: %w", err)
	}
	return ferr
}

// call runs f under the session lock, refusing when the session is gone.
func (s *session) call(ctx context.Context, f func(g *guestfs.Guestfs) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.killed.Load() {
		return errors.New("the appliance was stopped")
	}
	err := f(s.g)
	if err != nil && s.killed.Load() {
		return errors.New("the appliance was stopped")
	}
	return err
}

const exitMarker = "imagectl-exit="

func (s *session) Run(ctx context.Context, cmd string) (string, error) {
	var out string
	err := s.call(ctx, func(g *guestfs.Guestfs) error {
		var err error
		// The wrapper always succeeds so the output comes back even when
		// the command fails; its exit status is the last line.
		out, err = g.Sh("exec 2>&1\n(\n" + cmd + "\n)\necho \"" + exitMarker + "$?\"")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("running %s: %w", firstLine(cmd), err)
	}
	out = strings.TrimRight(out, "\n")
	i := strings.LastIndex(out, exitMarker)
	if i < 0 {
		return out, fmt.Errorf("running %s: no exit status in its output", firstLine(cmd))
	}
	code, _ := strconv.Atoi(strings.TrimSpace(out[i+len(exitMarker):]))
	out = strings.TrimRight(out[:i], "\n")
	if code != 0 {
		return out, &builder.CommandError{Command: cmd, ExitCode: code, Output: lastLines(out, 25)}
	}
	return out, nil
}

func (s *session) WriteFile(ctx context.Context, p string, content []byte, mode fs.FileMode, owner string) error {
	err := s.call(ctx, func(g *guestfs.Guestfs) error {
		if err := g.Mkdir_p(path.Dir(p)); err != nil {
			return err
		}
		if err := g.Write(p, content); err != nil {
			return err
		}
		if err := g.Chmod(int(fsmode.ToUnix(mode)), p); err != nil {
			return err
		}
		if isRoot(owner) {
			return g.Chown(0, 0, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if !isRoot(owner) {
		// Names resolve against the guest's own passwd and group.
		if _, err := s.Run(ctx, "chown "+quote(owner)+" "+quote(p)); err != nil {
			return fmt.Errorf("setting the owner of %s: %w", p, err)
		}
	}
	return nil
}

func (s *session) ReadFile(ctx context.Context, p string) ([]byte, error) {
	var b []byte
	err := s.call(ctx, func(g *guestfs.Guestfs) error {
		var err error
		b, err = g.Read_file(p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return b, nil
}

func (s *session) Exists(ctx context.Context, p string) (bool, error) {
	var ok bool
	err := s.call(ctx, func(g *guestfs.Guestfs) error {
		var err error
		ok, err = g.Exists(p)
		return err
	})
	return ok, err
}

// TarIn and TarOut hand libguestfs one end of a pipe as /dev/fd/N: the
// library opens that path in this process and streams through it, so no
// tar file touches the disk.
func (s *session) TarIn(ctx context.Context, r io.Reader, dir string) error {
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
	err = s.call(ctx, func(g *guestfs.Guestfs) error {
		return g.Tar_in(fdPath(pr), dir, &guestfs.OptargsTar_in{Xattrs_is_set: true, Xattrs: true})
	})
	pr.Close()
	if cerr := <-copyErr; err == nil && cerr != nil && !errors.Is(cerr, syscall.EPIPE) {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unpacking into %s: %w", dir, err)
	}
	return nil
}

func (s *session) TarOut(ctx context.Context, w io.Writer) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	copyErr := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, pr)
		pr.Close()
		copyErr <- err
	}()
	err = s.call(ctx, func(g *guestfs.Guestfs) error {
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

// Close shuts the appliance down. From another goroutine while a call is
// running it kills QEMU, which ends that call; the owner's later Close
// then releases the handle.
func (s *session) Close() error {
	if !s.mu.TryLock() {
		s.kill()
		return nil
	}
	defer s.mu.Unlock()
	return s.shutdownLocked()
}

func (s *session) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shutdownLocked()
}

func (s *session) shutdownLocked() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if !s.killed.Load() {
		// Umount and Shutdown report write errors that Close would swallow.
		if uerr := s.g.Umount_all(); uerr != nil {
			err = uerr
		}
		if serr := s.g.Shutdown(); serr != nil && err == nil {
			err = serr
		}
	}
	s.g.Close()
	return err
}

func (s *session) kill() {
	if s.pid > 0 {
		s.killed.Store(true)
		syscall.Kill(s.pid, syscall.SIGKILL)
	}
}

// isRoot reports whether an owner names root, which needs no lookup in the
// guest's passwd.
func isRoot(owner string) bool {
	switch owner {
	case "root:root", "0:0", "root", "0":
		return true
	}
	return false
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
