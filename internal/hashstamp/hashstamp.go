// Package hashstamp owns the records that a file on this host was read
// whole and had a sha256, kept with what tells, without reading it again,
// whether the file is still what was read: its device, inode, size and
// modification and change times (Identity). The kernel moves a file's
// change time on every write and nobody can set it back, so while they are
// all the same, the file is (git's index and restic trust unchanged files
// the same way). A reader may then take the recorded sha256 instead of
// hashing the file again.
//
// File times tick coarsely, so a write in the same tick as the change
// before it leaves them as they were: a file changed less than Settle
// before it was read is not recorded. The times must come from this
// host's clock too, which read is measured by: only files on local
// filesystems (ext4, XFS, Btrfs, F2FS, ZFS, tmpfs, overlay) are recorded,
// not those on NFS or FUSE, whose times are another machine's. A step
// back of the system clock is the one thing that could give a changed
// file its old times again.
package hashstamp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
)

// Settle is how long before it was read a file's last change must be for
// a record of it to be kept: far more than a tick of the file times.
const Settle = 2 * time.Second

// Identity is what is seen of a file without reading it: where it is (its
// path as opened, its filesystem's type, device and inode) and its size
// and times.
type Identity struct {
	Path   string `json:"path"`
	FSType int64  `json:"fs_type"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Size   int64  `json:"size"`
	Mtime  int64  `json:"mtime_ns"`
	Ctime  int64  `json:"ctime_ns"`
}

// Of is the identity of the open file f, its path made absolute, so that
// a record names the file whatever folder a later reader runs in.
func Of(f *os.File) (Identity, error) {
	st, err := stat(f)
	if err != nil {
		return Identity{}, err
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
		return Identity{}, fmt.Errorf("%s: %w", f.Name(), err)
	}
	path, err := filepath.Abs(f.Name())
	if err != nil {
		return Identity{}, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return Identity{Path: path, FSType: int64(fs.Type), Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
}

// zfsSuperMagic is ZFS's statfs type, which x/sys/unix does not name.
const zfsSuperMagic = 0x2fc12fc1

// local says whether a filesystem of type fs sets a file's times from
// this host's clock.
func local(fs int64) bool {
	switch fs {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, zfsSuperMagic,
		unix.TMPFS_MAGIC, unix.OVERLAYFS_SUPER_MAGIC:
		return true
	}
	return false
}

func stat(f *os.File) (*syscall.Stat_t, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("no file status from the system")
	}
	return st, nil
}

// Dir is a folder of records, one a sha256: Record writes them, Holds
// reads them. Only records written by root or this user in a folder of
// theirs, which nobody else may write, are believed.
type Dir string

// record is what a record file holds.
type record struct {
	SHA256 string `json:"sha256"`
	Identity
}

// maxRecord bounds a record's size when it is read.
const maxRecord = 4 << 10

func (d Dir) path(sha256 string) (string, error) {
	sum, err := digest.Parse(sha256)
	if err != nil {
		return "", err
	}
	return filepath.Join(string(d), fmt.Sprintf("%x", sum)), nil
}

// Record records that the file of identity id, whose identity was taken
// at read (before its first byte was read, and found the same after its
// last), has sha256. It records nothing, and says so with false, when the
// file had changed within Settle before read, or is on a filesystem that
// is not local. A record of the same sha256 is replaced.
func (d Dir) Record(sha256 string, id Identity, read time.Time) (bool, error) {
	p, err := d.path(sha256)
	if err != nil {
		return false, err
	}
	if read.Sub(time.Unix(0, id.Ctime)) < Settle || !local(id.FSType) {
		return false, nil
	}
	b, err := json.Marshal(record{SHA256: filepath.Base(p), Identity: id})
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return false, fmt.Errorf("recording the hash of a file: %w", err)
	}
	if err := atomicfile.WriteFile(p, append(b, '\n'), 0o600); err != nil {
		return false, fmt.Errorf("recording the hash of a file: %w", err)
	}
	return true, nil
}

// Holds says whether the file of identity id was recorded with sha256 and
// is unchanged since. A record that cannot be read, or that others may
// have written, holds nothing.
func (d Dir) Holds(sha256 string, id Identity) bool {
	p, err := d.path(sha256)
	if err != nil {
		return false
	}
	rec, _, ok := d.read(p)
	return ok && rec.Identity == id
}

// read reads the record at p, in d: ok only when d is a folder nobody but
// its owner may write and the record is a file of theirs, read without
// following a link, that names its own sha256.
func (d Dir) read(p string) (rec record, fi os.FileInfo, ok bool) {
	if d == "" {
		return rec, nil, false
	}
	if fi, err := os.Lstat(string(d)); err != nil || !fi.IsDir() || !OwnerOnly(fi) {
		return rec, nil, false
	}
	// Not through a link, and not blocking on what is not a file.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return rec, nil, false
	}
	defer f.Close()
	fi, err = f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !OwnerOnly(fi) {
		return rec, nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil || len(b) > maxRecord {
		return rec, nil, false
	}
	if json.Unmarshal(b, &rec) != nil {
		return rec, nil, false
	}
	return rec, fi, rec.SHA256 == filepath.Base(p)
}

// OwnerOnly says whether only root or this user can have written what fi
// describes: theirs, and writable by no group or other.
func OwnerOnly(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Mode&0o022 == 0 && (st.Uid == 0 || int(st.Uid) == os.Geteuid())
}

// Forget removes the record of sha256, if there is one.
func (d Dir) Forget(sha256 string) error {
	p, err := d.path(sha256)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the record that a file had sha256 %s (remove it by hand, or the racks check will keep trusting it): %w", filepath.Base(p), err)
	}
	return nil
}

// Entry is a record as List reads it.
type Entry struct {
	// SHA256 is the sha256 recorded ("sha256:<hex>").
	SHA256 string `json:"sha256"`
	// Path is the file's, as it was opened.
	Path     string    `json:"path"`
	Recorded time.Time `json:"recorded"`
	Bytes    int64     `json:"bytes"`
	// Current is whether the file at Path has the identity recorded still:
	// only then can the record save a hash. A record of a file removed or
	// changed since never can.
	Current bool `json:"current"`
}

// List reads the records in d, by sha256; a folder not made yet holds
// none. What is not a record that Holds would read (a write cut short, a
// file others may have written) is not listed: Sweep removes it.
func (d Dir) List() ([]Entry, error) {
	des, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the hash records %s: %w", d, err)
	}
	var es []Entry
	for _, de := range des {
		rec, fi, ok := d.read(filepath.Join(string(d), de.Name()))
		if !ok {
			continue
		}
		e := rec.entry(fi)
		e.Current = rec.Identity.current()
		es = append(es, e)
	}
	return es, nil
}

// entry is the record rec, read from the file fi describes, as List
// lists it (Current left false).
func (rec record) entry(fi os.FileInfo) Entry {
	return Entry{SHA256: digest.Prefix + rec.SHA256, Path: rec.Path, Recorded: fi.ModTime(), Bytes: fi.Size()}
}

// current says whether the file at id.Path has id's device, inode, size
// and times now.
func (id Identity) current() bool {
	if !filepath.IsAbs(id.Path) {
		return false
	}
	fi, err := os.Stat(id.Path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == id.Dev && st.Ino == id.Ino && st.Size == id.Size &&
		st.Mtim.Nano() == id.Mtime && st.Ctim.Nano() == id.Ctime
}

// cutShort is how old a file in d that is not a record must be for Sweep
// to remove it: a record is written in well under a second, so a younger
// one may be a write in progress.
const cutShort = time.Minute

// Sweep removes the records that can never save a hash again (their file
// removed or changed since: a new record replaces them when it is hashed
// again), and what is not a record: a write cut short, more than a minute
// old, or a file Holds would not believe. A folder that is a link, or that
// others may write, is an error: nothing in it is removed. It returns the records it
// removed and the bytes it freed. A record written anew while Sweep reads
// the old one may go with it; that costs one hash, never a wrong answer.
func (d Dir) Sweep() ([]Entry, int64, error) {
	fi, err := os.Lstat(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err == nil && (!fi.IsDir() || !OwnerOnly(fi)) {
		// Not through a link, nor where others write: what is there is
		// not only records.
		err = errors.New("not a folder of this user's that only they may write: remove or fix it by hand")
	}
	if err != nil {
		return nil, 0, fmt.Errorf("sweeping the hash records %s: %w", d, err)
	}
	des, err := os.ReadDir(string(d))
	if err != nil {
		return nil, 0, fmt.Errorf("sweeping the hash records %s: %w", d, err)
	}
	var (
		removed []Entry
		freed   int64
	)
	for _, de := range des {
		if de.IsDir() {
			continue
		}
		p := filepath.Join(string(d), de.Name())
		rec, fi, ok := d.read(p)
		if ok && rec.Identity.current() {
			continue
		}
		if !ok {
			fi, err = de.Info()
			if err != nil || time.Since(fi.ModTime()) < cutShort {
				continue
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, freed, fmt.Errorf("sweeping the hash records %s: %w", d, err)
		}
		freed += fi.Size()
		if ok {
			removed = append(removed, rec.entry(fi))
		}
	}
	return removed, freed, nil
}
