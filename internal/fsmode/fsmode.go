// Package fsmode converts between Unix permission bits, as recipes, tar
// headers and plans write them ("0755", 04755), and io/fs.FileMode, whose
// setuid, setgid and sticky bits live elsewhere; and names a file's type
// for an error (Kind).
package fsmode

import (
	"fmt"
	"io/fs"
)

// FromUnix turns Unix permission bits (with setuid 04000, setgid 02000,
// sticky 01000) into an fs.FileMode.
func FromUnix(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// ToUnix is the inverse of FromUnix; file-type bits are dropped.
func ToUnix(m fs.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// String prints the permission bits as four octal digits, "0644".
func String(m fs.FileMode) string { return fmt.Sprintf("%04o", ToUnix(m)) }

// Kind names the type of a file with mode m as an error says it: "a FIFO",
// "a character device", "a directory", "a regular file".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "of type " + m.Type().String()
}
