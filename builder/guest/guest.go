// Package guest owns the seam between a build and the appliance that
// customizes its disk: Executor starts a Session on a disk image, whose
// guest filesystems are mounted (Mount) and whose failed commands are
// CommandErrors. The libguestfs executor (package builder/guestfs, built
// with the guestfs tag) is the real one; the CLI supplies it, so the build
// itself compiles without cgo.
package guest

import (
	"context"
	"io"
	"io/fs"
	"strconv"
	"strings"
)

// Executor starts sessions on disk images.
type Executor interface {
	// Open launches one appliance for the whole customization of disk,
	// grows the root filesystem to fill the disk, and mounts the guest's
	// filesystems. Everything else in a build happens in the returned
	// session.
	Open(ctx context.Context, disk string, opts SessionOptions) (Session, error)
}

// SessionOptions configure a session.
type SessionOptions struct {
	// Accel is "auto" (KVM when it works, else TCG, said in the log), "kvm"
	// or "tcg".
	Accel string
	// Log receives one line per notable event ("falling back to TCG: ...").
	Log func(string)
	// Format is the disk's format, "raw" or "qcow2" (default "qcow2").
	Format string
	// AnyDiskName is set when no tool will run in the guest (the appliance
	// packer's tar-out): the session is kept whatever name the appliance's
	// kernel gave the image's disk. Otherwise a session is launched again
	// until the guest's tools see the disk as /dev/sda (builder/guestfs).
	AnyDiskName bool
}

// Mount is one of the guest's filesystems as the session mounted it.
type Mount struct {
	// Point is the mount point in the guest ("/", "/boot/efi").
	Point string
	// Device is the appliance's device ("/dev/sda1").
	Device string
	// Partition is the partition number on the session's disk, 0 when the
	// filesystem is the whole disk, -1 when it is on something else (LVM,
	// RAID).
	Partition int
	// Type is the filesystem type ("ext4", "vfat").
	Type string
}

// Session is an open appliance with the guest mounted. Its methods are
// called from one goroutine; Close may be called from any and ends a
// blocked call (used for cancellation).
type Session interface {
	// Accelerator is "kvm" or "tcg".
	Accelerator() string
	// Mounts lists the guest's filesystems, "/" first.
	Mounts() []Mount
	// Checkpoint unmounts the guest's filesystems and flushes the disk, so
	// that it holds a clean, consistent state, calls fn (which may read the
	// disk image, never write it), and mounts them again.
	Checkpoint(ctx context.Context, fn func() error) error
	// Run runs a shell command in the guest (chrooted, never booted) and
	// returns its combined output; a non-zero exit is a *CommandError.
	Run(ctx context.Context, cmd string) (string, error)
	// WriteFile writes a file, creating parent directories, with the mode
	// and owner ("user:group", names resolved in the guest).
	WriteFile(ctx context.Context, path string, content []byte, mode fs.FileMode, owner string) error
	// ReadFile reads a file of the guest.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// Exists reports whether a path exists in the guest.
	Exists(ctx context.Context, path string) (bool, error)
	// TarIn unpacks an uncompressed tar stream into a guest directory,
	// keeping the owners, modes and xattrs it carries.
	TarIn(ctx context.Context, r io.Reader, dir string) error
	// TarOut streams the guest's root filesystem as tar with xattrs and
	// numeric owners.
	TarOut(ctx context.Context, w io.Writer) error
	// Close unmounts, shuts the appliance down and releases it. It is safe
	// to call more than once.
	Close() error
}

// CommandError is a guest command that exited non-zero.
type CommandError struct {
	Command  string
	ExitCode int
	// Output is the tail of what the command printed.
	Output string
}

func (e *CommandError) Error() string {
	msg := "command failed"
	if e.ExitCode > 0 {
		msg = "command exited " + strconv.Itoa(e.ExitCode)
	}
	out := e.Output
	if out != "" {
		out = ":\n" + indent(out)
	}
	return msg + ": " + e.Command + out
}

// indent prefixes every line with four spaces, for command output in errors.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}
