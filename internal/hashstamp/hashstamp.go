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
// before it was read is not recorded.
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

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// Settle is how long before it was read a file's last change must be for
// a record of it to be kept: far more than a tick of the file times.
const Settle = 2 * time.Second

// Identity is what is seen of a file without reading it.
type Identity struct {
	Dev   uint64 `json:"dev"`
	Ino   uint64 `json:"ino"`
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns"`
}

// Of is the identity of the open file f.
func Of(f *os.File) (Identity, error) {
	st, err := stat(f)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
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
// reads them. Only records written by root or this user, which nobody
// else may write, are believed.
type Dir string

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
// file had changed within Settle before read. A record of the same sha256
// is replaced.
func (d Dir) Record(sha256 string, id Identity, read time.Time) (bool, error) {
	p, err := d.path(sha256)
	if err != nil {
		return false, err
	}
	if read.Sub(time.Unix(0, id.Ctime)) < Settle {
		return false, nil
	}
	b, err := json.Marshal(id)
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
	if d == "" {
		return false
	}
	p, err := d.path(sha256)
	if err != nil {
		return false
	}
	f, err := readlimit.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := stat(f)
	if err != nil || st.Mode&0o022 != 0 || (st.Uid != 0 && int(st.Uid) != os.Geteuid()) {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil || len(b) > maxRecord {
		return false
	}
	var rec Identity
	if json.Unmarshal(b, &rec) != nil {
		return false
	}
	return rec == id
}

// Forget removes the record of sha256, if there is one.
func (d Dir) Forget(sha256 string) error {
	p, err := d.path(sha256)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("forgetting the hash of a file: %w", err)
	}
	return nil
}
