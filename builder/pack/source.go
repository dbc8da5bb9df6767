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
	parts, err := ext4tar.Partitions(path)
	if err != nil {
		return SourceDate{}, err
	}
	if len(parts) == 0 {
		parts = []int{0}
	}
	var newest time.Time
	read := false
	for _, part := range parts {
		t, err := newestBefore(ctx, path, part, before)
		if err != nil {
			if ctx.Err() != nil {
				return SourceDate{}, ctx.Err()
			}
			continue // not ext4, or not one the host reads: another partition may be
		}
		read = true
		if t.After(newest) {
			newest = t
		}
	}
	if !read {
		return SourceDate{}, ErrNoSourceDate
	}
	return SourceDate{Time: time.Unix(newest.Unix(), 0).UTC(), From: "base image"}, nil
}

// newestBefore is the newest modification time older than before on one
// partition's ext4 filesystem.
func newestBefore(ctx context.Context, path string, part int, before time.Time) (time.Time, error) {
	fsys, err := ext4tar.Open(path, part)
	if err != nil {
		return time.Time{}, err
	}
	defer fsys.Close()
	var newest time.Time
	err = fsys.WalkHeaders(ctx, func(h *tar.Header) error {
		if h.ModTime.Before(before) && h.ModTime.After(newest) {
			newest = h.ModTime
		}
		return nil
	})
	return newest, err
}
