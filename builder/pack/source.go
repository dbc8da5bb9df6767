package pack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/builder/ext4tar"
	"github.com/gpuaas/imagectl/internal/environ"
)

// SourceDateEnv is the reproducible-builds convention's variable: an
// integer count of seconds since the Unix epoch that overrides the source
// date a build chooses.
const SourceDateEnv = "SOURCE_DATE_EPOCH"

// SourceDate is a build's source date E: the tgz clamps every
// modification time newer than E to E, the appliance's package steps and
// commands run with SOURCE_DATE_EPOCH=E, and the build marker records E
// instead of the build's times.
type SourceDate struct {
	Time time.Time
	// From says where E came from: "SOURCE_DATE_EPOCH" or "base image".
	From string
}

// Epoch is E in whole seconds since the Unix epoch.
func (s SourceDate) Epoch() int64 { return s.Time.Unix() }

// FromEnv reads SOURCE_DATE_EPOCH from env: ok is false when it is unset
// or empty; a value that is not a non-negative integer count of seconds is
// an error (the convention says to refuse it).
func FromEnv(env []string) (sd SourceDate, ok bool, err error) {
	v, _ := environ.Lookup(env, SourceDateEnv)
	if v == "" {
		return SourceDate{}, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > 253402300799 { // up to 9999-12-31
		return SourceDate{}, false, fmt.Errorf("%s=%q is not a count of seconds since 1970-01-01", SourceDateEnv, v)
	}
	return SourceDate{Time: time.Unix(n, 0).UTC(), From: SourceDateEnv}, true, nil
}

// ErrNoSourceDate says that the base image holds no ext4 filesystem the
// host can read, so no source date could be chosen from it.
var ErrNoSourceDate = errors.New("no ext4 filesystem of the base image could be read on the host")

// BaseSourceDate chooses E from the base image, a raw disk (or a bare
// filesystem) at path: the newest modification time, in whole seconds,
// among the entries of its ext4 filesystems that is older than before (the
// build's start, on the host's clock). It depends on the base image alone:
// the same base gives the same E, whenever and wherever it is built, and
// no configuration is needed. It is not newer than any file the build
// writes: those get times of the build's, after before; files that the
// base dates in the future (a clock that was wrong when it was made) do
// not count, since a later build would count them. Only headers are read,
// no file's contents. ErrNoSourceDate: no filesystem could be read.
func BaseSourceDate(ctx context.Context, path string, before time.Time) (SourceDate, error) {
	var newest time.Time
	read := false
	err := EachExt4(ctx, path, func(_ int, fsys *ext4tar.FS) error {
		t, err := newestBefore(ctx, fsys, before)
		if err != nil {
			return ctx.Err() // a filesystem the host cannot read: another may be
		}
		read = true
		if t.After(newest) {
			newest = t
		}
		return nil
	})
	if err != nil {
		return SourceDate{}, err
	}
	if !read {
		return SourceDate{}, ErrNoSourceDate
	}
	return SourceDate{Time: time.Unix(newest.Unix(), 0).UTC(), From: "base image"}, nil
}

// ErrStop, returned by EachExt4's function, ends the walk without an
// error.
var ErrStop = errors.New("stop the walk")

// EachExt4 calls fn with each ext4 filesystem of the raw disk (or bare
// filesystem) at path that the host reads: each partition's, by number,
// or the whole disk's (0) when it has no partition table. A partition
// that is not ext4 (an ESP, a BIOS boot partition) is skipped. An error of
// fn ends the walk and is returned, but ErrStop, which ends it with none.
// The base image's source date and the smoke comparison's root filesystem
// are found this way.
func EachExt4(ctx context.Context, path string, fn func(part int, fsys *ext4tar.FS) error) error {
	parts, err := ext4tar.Partitions(path)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		parts = []int{0}
	}
	for _, part := range parts {
		if err := ctx.Err(); err != nil {
			return err
		}
		fsys, err := ext4tar.Open(path, part)
		if err != nil {
			continue // not ext4: another partition may be
		}
		err = fn(part, fsys)
		fsys.Close()
		if errors.Is(err, ErrStop) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// newestBefore is the newest modification time older than before on one
// ext4 filesystem.
func newestBefore(ctx context.Context, fsys *ext4tar.FS, before time.Time) (time.Time, error) {
	var newest time.Time
	err := fsys.WalkHeaders(ctx, func(h *tar.Header) error {
		if h.ModTime.Before(before) && h.ModTime.After(newest) {
			newest = h.ModTime
		}
		return nil
	})
	return newest, err
}
