package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gpuaas/imagectl/internal/filelock"
	"github.com/gpuaas/imagectl/manifest"
)

// Cache is the registry store's local cache directory (Options.CacheDir):
// the blobs it downloaded and the version directories they are linked
// into. Readers hold its lock shared while they place files and mark the
// version used; pruning holds it exclusive, so that it never takes a blob
// from under a reader about to link it, and leaves the versions read in
// the last InUse, whose readers may not have opened their files yet. A
// reader with a file already open keeps reading it when it is removed.
type Cache struct{ Dir string }

// CachedVersion is one version in the cache: the small files every read
// of it fetched, and its tgz when one was fetched whole (check, smoke).
type CachedVersion struct {
	// Ref is REGISTRY/REPOSITORY:VERSION.
	Ref string `json:"ref"`
	// Dir is the version's directory in the cache.
	Dir string `json:"dir"`
	// Bytes is the disk space its files take, blobs shared with other
	// versions included.
	Bytes int64 `json:"bytes"`
	// Tarball is whether its tgz is in the cache.
	Tarball bool `json:"tarball"`
	// LastUsed is when the version was last read through the store.
	LastUsed time.Time `json:"last_used"`
}

// Lock is the cache's lock: shared while reading, exclusive to prune.
func (c Cache) Lock() filelock.Dir { return filelock.Dir{Path: c.Dir, What: "the registry cache"} }

// InUse is how long after a read a version counts as in use: its reader
// may still be opening the files it was given (check, smoke, verify), so
// pruning leaves it.
const InUse = 15 * time.Minute

// List returns the cached versions, least recently used first.
func (c Cache) List() ([]CachedVersion, error) {
	root := filepath.Join(c.Dir, "versions")
	var out []CachedVersion
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // absent, or removed meanwhile by a prune
		}
		if err != nil || !d.IsDir() {
			return err
		}
		v, ok, err := readVersionDir(root, p)
		if err != nil {
			return err
		}
		if ok {
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the registry cache %s: %w", c.Dir, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, nil
}

// readVersionDir reads a directory of the versions tree: a version's when
// it holds files (REGISTRY/REPOSITORY.../VERSION), else a step on the way.
func readVersionDir(root, dir string) (CachedVersion, bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return CachedVersion{}, false, nil
	}
	if err != nil {
		return CachedVersion{}, false, err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return CachedVersion{}, false, err
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	v := CachedVersion{Dir: dir}
	files := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return CachedVersion{}, false, err
		}
		files++
		if strings.HasSuffix(e.Name(), manifest.TarballExt) {
			v.Tarball = true
		}
		v.Bytes += diskBytes(info)
	}
	if files == 0 || len(parts) < 3 {
		return CachedVersion{}, false, nil
	}
	v.Ref = parts[0] + "/" + strings.Join(parts[1:len(parts)-1], "/") + ":" + parts[len(parts)-1]
	if st, err := os.Stat(dir); err == nil {
		v.LastUsed = st.ModTime()
	}
	return v, true, nil
}

// Usage is the disk space the cache's files take, each blob once.
func (c Cache) Usage() (int64, error) {
	var n int64
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(c.Dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			k := [2]uint64{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil // another link of a blob counted
			}
			seen[k] = true
		}
		n += diskBytes(info)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring the registry cache %s: %w", c.Dir, err)
	}
	return n, nil
}

// Remove removes a version from the cache, with the blobs no other
// version links, and returns the space that freed. The caller holds the
// exclusive lock.
func (c Cache) Remove(v CachedVersion) (int64, error) {
	root := filepath.Join(c.Dir, "versions")
	rel, err := filepath.Rel(root, v.Dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return 0, fmt.Errorf("removing %s from the registry cache: %s is not a version directory of %s", v.Ref, v.Dir, root)
	}
	// Only the version's own files go: a directory below it is another
	// repository's (a prefix that nests under this one). Copies (where a
	// link failed) are freed with the file; links with the blob's last
	// link, by the sweep.
	entries, err := os.ReadDir(v.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("removing %s from the registry cache: %w", v.Ref, err)
	}
	var freed int64
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		if err := os.Remove(filepath.Join(v.Dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return freed, fmt.Errorf("removing %s from the registry cache: %w", v.Ref, err)
		}
		if info.Mode().IsRegular() && links(info) <= 1 {
			freed += diskBytes(info)
		}
	}
	os.Remove(v.Dir) // unless another repository's directories are below it
	// The repository's directories it leaves empty go too.
	for d := filepath.Dir(v.Dir); d != root && strings.HasPrefix(d, root); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	swept, err := c.Sweep()
	return freed + swept, err
}

// Sweep removes what no version holds, and returns the space that freed:
// blobs of removed versions (a blob is hard linked into each version that
// has it, so one with no other link is no version's), downloads and links
// a crash left half-made, and version directories a failed read left
// empty. The caller holds the exclusive lock.
func (c Cache) Sweep() (int64, error) {
	if err := c.sweepVersions(); err != nil {
		return 0, err
	}
	dir := filepath.Join(c.Dir, "blobs", "sha256")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sweeping the registry cache %s: %w", c.Dir, err)
	}
	var freed int64
	var errs []error
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		if strings.HasPrefix(e.Name(), ".fetch-") || links(info) <= 1 {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			freed += diskBytes(info)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return freed, fmt.Errorf("sweeping the registry cache %s: %w", c.Dir, err)
	}
	return freed, nil
}

// sweepVersions removes linkInto's staged links (.NAME.tmp-*) and the
// empty directories under versions/.
func (c Cache) sweepVersions() error {
	root := filepath.Join(c.Dir, "versions")
	var dirs []string
	var errs []error
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir():
			if p != root {
				dirs = append(dirs, p)
			}
		case strings.HasPrefix(d.Name(), ".") && strings.Contains(d.Name(), ".tmp-"):
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first
		os.Remove(dirs[i]) // only when empty
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sweeping the registry cache %s: %w", c.Dir, err)
	}
	return nil
}

// links is a file's hard link count (1 where the system does not say).
func links(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// diskBytes is the space a file takes on disk (its size where the system
// does not say).
func diskBytes(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// touch marks a version used now.
func touch(dir string) {
	now := time.Now()
	os.Chtimes(dir, now, now)
}
