//go:build guestfs

package guestfs

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"libguestfs.org/guestfs"

	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/internal/appliance"
	"github.com/gpuaas/imagectl/internal/shell"
)

// Executor opens libguestfs sessions.
type Executor struct {
	// MemoryMB is the appliance's memory (default 2048: apt and dpkg
	// triggers such as initramfs builds need room).
	MemoryMB int
}

var _ guest.Executor = Executor{}

// session is guest.Session on an appliance handle, with the guest's
// filesystems mounted. The handle serializes calls and lets Close from
// another goroutine end a running one (builds cancel that way).
type session struct {
	*appliance.Handle
	mounts []guest.Mount
}

// Open launches the appliance on disk, grows the root filesystem to the
// disk's size and mounts the guest.
//
// The appliance's kernel probes its disks (the image's and the
// appliance's own) in no fixed order, and on a loaded host names the
// image's disk /dev/sdb now and then (5 of 21 launches, three at a time
// on a 2-core machine). libguestfs hides that from its API, but not from
// the guest's tools: grub-mkconfig, run by update-grub and by kernel
// packages, writes hd1 instead of hd0 into grub.cfg's search hints, and
// the same inputs would give other tgz bytes. So Open launches again
// until the kernel named the image's disk /dev/sda (untilFirstDrive),
// unless opts.AnyDiskName says no tool will run in the guest.
func (e Executor) Open(ctx context.Context, disk string, opts guest.SessionOptions) (guest.Session, error) {
	accel, err := appliance.Accelerator(ctx, opts.Accel, opts.Log)
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = func(string) {}
	}
	var root string
	s, launches, err := untilFirstDrive(ctx, disk, log, func() (*session, string, error) {
		s, r, named, err := e.open(ctx, disk, accel, opts)
		root = r
		return s, named, err
	})
	if err != nil {
		return nil, err
	}
	if launches > 1 {
		log(fmt.Sprintf("appliance up (%s), guest root %s, after %d launches", accel, root, launches))
	} else {
		log(fmt.Sprintf("appliance up (%s), guest root %s", accel, root))
	}
	return s, nil
}

// open launches the appliance once and mounts the guest, returning the
// guest's root and the name the appliance's kernel gave the image's disk
// ("" when the guest cannot tell; firstDrive, unasked, with
// opts.AnyDiskName).
func (e Executor) open(ctx context.Context, disk, accel string, opts guest.SessionOptions) (_ *session, root, named string, err error) {
	format := opts.Format
	if format == "" {
		format = "qcow2"
	}
	h, err := appliance.Launch(ctx, disk, appliance.Options{
		Identifier: "imagectl", Accel: accel, MemoryMB: e.MemoryMB, Network: true,
		// The overlay is thrown away if the build fails.
		Format: format, Discard: true, Log: opts.Log,
	})
	if err != nil {
		return nil, "", "", err
	}
	s := &session{Handle: h}
	err = h.Call(ctx, func(g *guestfs.Guestfs) error {
		var err error
		root, err = s.growAndMount(g, opts.Log)
		return err
	})
	named = firstDrive
	if err == nil && !opts.AnyDiskName {
		named, err = h.FirstDrive(ctx)
	}
	if err != nil {
		h.Close()
		return nil, "", "", err
	}
	return s, root, named, nil
}

// growAndMount finds the guest's root, grows its partition and ext
// filesystem to the end of the disk when it is the last partition, and
// mounts the guest's filesystems as its fstab says.
func (s *session) growAndMount(g *guestfs.Guestfs, log func(string)) (string, error) {
	roots, err := g.Inspect_os()
	if err != nil {
		return "", fmt.Errorf("inspecting the base image: %w", err)
	}
	if len(roots) != 1 {
		return "", fmt.Errorf("inspecting the base image: found %d operating systems, want 1", len(roots))
	}
	root := roots[0]
	if err := grow(g, root, log); err != nil {
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
		m := guest.Mount{Point: mp, Device: dev, Partition: -1}
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

func grow(g *guestfs.Guestfs, root string, log func(string)) error {
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

func (s *session) Mounts() []guest.Mount { return s.mounts }

// Checkpoint unmounts the guest (which leaves its filesystems clean on the
// disk), syncs the appliance's block devices, runs fn, and mounts the
// guest again as it was. With the drive's cache mode "unsafe" QEMU ignores
// flushes, but its raw writes are already in the image file (the host's
// page cache) when the guest's I/O completes, which is what fn reads.
func (s *session) Checkpoint(ctx context.Context, fn func() error) error {
	if err := s.Call(ctx, func(g *guestfs.Guestfs) error {
		if err := g.Umount_all(); err != nil {
			return err
		}
		return g.Sync()
	}); err != nil {
		return fmt.Errorf("unmounting the guest: %w", err)
	}
	ferr := fn()
	if err := s.Call(context.WithoutCancel(ctx), func(g *guestfs.Guestfs) error {
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

func (s *session) Run(ctx context.Context, cmd string) (string, error) {
	out, code, err := s.Handle.Run(ctx, cmd)
	if err != nil {
		return out, fmt.Errorf("running %s: %w", firstLine(cmd), err)
	}
	if code != 0 {
		return out, &guest.CommandError{Command: cmd, ExitCode: code, Output: lastLines(out, 25)}
	}
	return out, nil
}

func (s *session) WriteFile(ctx context.Context, p string, content []byte, mode fs.FileMode, owner string) error {
	if err := s.Handle.WriteFile(ctx, p, content, mode); err != nil {
		return err
	}
	if isRoot(owner) {
		// A file that was there keeps its owner through the write.
		if err := s.Call(ctx, func(g *guestfs.Guestfs) error { return g.Chown(0, 0, p) }); err != nil {
			return fmt.Errorf("setting the owner of %s: %w", p, err)
		}
		return nil
	}
	// Names resolve against the guest's own passwd and group.
	if _, err := s.Run(ctx, "chown "+shell.Quote(owner)+" "+shell.Quote(p)); err != nil {
		return fmt.Errorf("setting the owner of %s: %w", p, err)
	}
	return nil
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
