package layercache

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/filelock"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// Cache is a directory of layer snapshots:
//
//	<dir>/bases/<root>/table                 the cluster table of a prepared base disk
//	<dir>/entries/<key>/<state>/entry.json   what the snapshot is
//	<dir>/entries/<key>/<state>/table        the cluster table after the layer
//	<dir>/entries/<key>/<state>/delta        the clusters that differ from the parent
//	<dir>/lock                               shared while building, exclusive to prune
//
// A key can hold several states: two builds of the same layer on the same
// parent key need not give the same bytes (times, allocation), and each
// delta applies only onto the exact state it was made from. A state's
// directory appears by rename, complete, and never changes after.
type Cache struct {
	Dir string
}

// Entry describes one snapshot.
type Entry struct {
	Key string `json:"key"`
	// Parent is the key of the snapshot this one is a delta against, or ""
	// when it is the prepared base disk (Root).
	Parent string `json:"parent"`
	// ParentState and State are the digests of the cluster tables before
	// and after the layer: a delta applies only onto the exact state it was
	// made from, which two builds of the same parent key need not share.
	ParentState string `json:"parent_state"`
	State       string `json:"state"`
	Root        string `json:"root"`
	Layer       string `json:"layer"`
	Image       string `json:"image"`
	// Volatile is set for layers whose result depends on the outside world
	// (apt installs from a moving archive, commands that may fetch): they
	// are reused only up to a maximum age.
	Volatile bool      `json:"volatile"`
	Created  time.Time `json:"created"`
	DiskSize int64     `json:"disk_size"`
	Changed  int       `json:"changed_clusters"`
	// Meta is what the builder records about the layer (steps and their
	// timings, missing optional packages, apt keys), restored on a hit.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Bytes is the space the entry takes on disk (set by List).
	Bytes int64 `json:"bytes,omitempty"`
}

// CorruptError is a snapshot that cannot be used: missing or unreadable
// files, or a cluster whose bytes do not match its table.
type CorruptError struct {
	Entry  *Entry
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("layer cache entry %s (layer %s) is unusable: %s", short(e.Entry.Key), e.Entry.Layer, e.Reason)
}

func short(key string) string {
	key = strings.TrimPrefix(key, digest.Prefix)
	if len(key) > 12 {
		return key[:12]
	}
	return key
}

func dirName(key string) string { return strings.TrimPrefix(key, digest.Prefix) }

func (c Cache) keyDir(key string) string { return filepath.Join(c.Dir, "entries", dirName(key)) }

// dir is where an entry's files are.
func (c Cache) dir(e *Entry) string { return filepath.Join(c.keyDir(e.Key), short(e.State)) }

// Lock is the cache's lock: shared while building, exclusive to prune.
func (c Cache) Lock() filelock.Dir { return filelock.Dir{Path: c.Dir, What: "the layer cache"} }

// BaseTable returns the cluster table of a prepared base disk, hashing the
// disk the first time that root is seen.
func (c Cache) BaseTable(ctx context.Context, root, disk string) (*Table, error) {
	p := filepath.Join(c.Dir, "bases", dirName(root), "table")
	if t, err := readTable(p); err == nil {
		if st, err := os.Stat(disk); err == nil && st.Size() == t.Size {
			return t, nil
		}
	}
	t, err := hashDisk(ctx, disk)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(p, t.marshal()); err != nil {
		return nil, err
	}
	return t, nil
}

// Get returns the newest entry for key made on top of parentState, nil
// when there is none. Entries whose description cannot be read are removed.
func (c Cache) Get(key, parentState string) (*Entry, error) {
	all, err := c.versions(key)
	if err != nil {
		return nil, err
	}
	var best *Entry
	for i := range all {
		if e := &all[i]; e.ParentState == parentState && (best == nil || e.Created.After(best.Created)) {
			best = e
		}
	}
	return best, nil
}

// maxEntryFile is the largest entry.json read: one is a few hundred bytes,
// and one that is larger, or no regular file, is no snapshot of this cache.
const maxEntryFile = 1 << 20

// readDir is dir's entries, none when dir does not exist (nothing was
// stored there yet).
func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return entries, err
}

// versions reads every state stored under key.
func (c Cache) versions(key string) ([]Entry, error) {
	dirs, err := readDir(c.keyDir(key))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, d := range dirs {
		p := filepath.Join(c.keyDir(key), d.Name())
		b, err := readlimit.File(filepath.Join(p, "entry.json"), maxEntryFile)
		var e Entry
		if err == nil {
			err = json.Unmarshal(b, &e)
		}
		if err != nil || e.Key != key || short(e.State) != d.Name() {
			os.RemoveAll(p) // not a snapshot this cache can use
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// Save snapshots disk as entry e, a delta against parent (the table of the
// disk's state before the layer), and returns the disk's new table. When
// another build saved the same key first, that entry is kept.
func (c Cache) Save(ctx context.Context, e Entry, disk string, parent *Table) (*Table, error) {
	if err := os.MkdirAll(filepath.Join(c.Dir, "entries"), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(c.Dir, "entries"), ".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	delta, err := os.Create(filepath.Join(tmp, "delta"))
	if err != nil {
		return nil, err
	}
	t, changed, err := scan(ctx, disk, parent, delta)
	if cerr := delta.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("snapshotting layer %s: %w", e.Layer, err)
	}
	e.DiskSize, e.Changed = t.Size, changed
	e.ParentState, e.State = parent.Digest(), t.Digest()
	if err := os.WriteFile(filepath.Join(tmp, "table"), t.marshal(), 0o644); err != nil {
		return nil, err
	}
	eb, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "entry.json"), eb, 0o644); err != nil {
		return nil, err
	}
	for _, name := range []string{"delta", "table", "entry.json"} {
		if err := atomicfile.Sync(filepath.Join(tmp, name)); err != nil {
			return nil, err
		}
	}
	final := c.dir(&e)
	var rerr error
	for range 2 { // Remove may take away the key's directory in between
		if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
			return nil, err
		}
		if rerr = os.Rename(tmp, final); !errors.Is(rerr, fs.ErrNotExist) {
			break
		}
	}
	if err := rerr; err != nil {
		if _, serr := os.Stat(filepath.Join(final, "entry.json")); serr == nil {
			return t, nil // another build stored this very state first
		}
		return nil, fmt.Errorf("storing layer %s in the cache: %w", e.Layer, err)
	}
	return t, nil
}

// scan hashes disk's clusters and writes those that differ from parent
// into delta, at their offsets.
func scan(ctx context.Context, disk string, parent *Table, delta *os.File) (*Table, int, error) {
	t, err := hashDisk(ctx, disk)
	if err != nil {
		return nil, 0, err
	}
	if err := delta.Truncate(t.Size); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(disk)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	buf := make([]byte, ClusterSize)
	changed := 0
	for i, h := range t.Hashes {
		if parent != nil && i < len(parent.Hashes) && parent.Hashes[i] == h {
			continue
		}
		if h == zeroHash && (parent == nil || i >= len(parent.Hashes)) {
			continue // new space that is still zeros: the delta's hole
		}
		off := int64(i) * ClusterSize
		n, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, err
		}
		clear(buf[n:])
		if sha256.Sum256(buf) != h {
			return nil, 0, fmt.Errorf("the disk changed while it was being snapshotted (cluster %d)", i)
		}
		if _, err := delta.WriteAt(buf[:n], off); err != nil {
			return nil, 0, err
		}
		changed++
	}
	return t, changed, nil
}

// Restore applies the chain of snapshots, oldest first, onto disk (the
// prepared base, whose table is base) and returns the resulting table.
// Every cluster copied is checked against its table; a mismatch or a
// missing file is a *CorruptError naming the entry.
func (c Cache) Restore(ctx context.Context, chain []*Entry, base *Table, disk string) (*Table, error) {
	out, err := os.OpenFile(disk, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	prev := base
	buf := make([]byte, ClusterSize)
	for _, e := range chain {
		t, err := readTable(filepath.Join(c.dir(e), "table"))
		if err != nil {
			return nil, &CorruptError{Entry: e, Reason: "table: " + err.Error()}
		}
		if t.Size != prev.Size {
			return nil, &CorruptError{Entry: e, Reason: fmt.Sprintf("made for a %d-byte disk, this one has %d", t.Size, prev.Size)}
		}
		if t.Digest() != e.State {
			return nil, &CorruptError{Entry: e, Reason: "its table does not match its description"}
		}
		delta, err := os.Open(filepath.Join(c.dir(e), "delta"))
		if err != nil {
			return nil, &CorruptError{Entry: e, Reason: err.Error()}
		}
		for i, h := range t.Hashes {
			if h == prev.Hashes[i] {
				continue
			}
			if i%64 == 0 {
				if err := ctx.Err(); err != nil {
					delta.Close()
					return nil, err
				}
			}
			off := int64(i) * ClusterSize
			n, err := delta.ReadAt(buf, off)
			if err != nil && !errors.Is(err, io.EOF) {
				delta.Close()
				return nil, &CorruptError{Entry: e, Reason: err.Error()}
			}
			clear(buf[n:])
			if sha256.Sum256(buf) != h {
				delta.Close()
				return nil, &CorruptError{Entry: e, Reason: fmt.Sprintf("cluster %d does not match its hash", i)}
			}
			if _, err := out.WriteAt(buf[:min(int64(ClusterSize), t.Size-off)], off); err != nil {
				delta.Close()
				return nil, fmt.Errorf("restoring layer %s: %w", e.Layer, err)
			}
		}
		delta.Close()
		now := time.Now()
		os.Chtimes(filepath.Join(c.dir(e), "entry.json"), now, now) // last use, for prune
		prev = t
	}
	return prev, nil
}

// Remove deletes an entry.
func (c Cache) Remove(e *Entry) error {
	err := os.RemoveAll(c.dir(e))
	os.Remove(c.keyDir(e.Key)) // when it was the key's last state
	return err
}

// List returns the entries, oldest first, with their sizes.
func (c Cache) List() ([]Entry, error) {
	keys, err := readDir(filepath.Join(c.Dir, "entries"))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, k := range keys {
		if !k.IsDir() || strings.HasPrefix(k.Name(), ".") {
			continue
		}
		vs, err := c.versions(digest.Prefix + k.Name())
		if err != nil {
			return nil, err
		}
		for _, e := range vs {
			e.Bytes = diskUsage(c.dir(&e))
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// LastUsed is when an entry was last restored or written.
func (c Cache) LastUsed(e *Entry) time.Time {
	st, err := os.Stat(filepath.Join(c.dir(e), "entry.json"))
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// Sweep removes what a build that died left half-written. The caller holds
// the exclusive lock. Which entries go when the cache is bounded is the
// cache package's call: it weighs them with the rest of the cache directory.
func (c Cache) Sweep() error {
	tmps, err := filepath.Glob(filepath.Join(c.Dir, "entries", ".tmp-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tmps {
		errs = append(errs, os.RemoveAll(t))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sweeping the layer cache %s: %w", c.Dir, err)
	}
	return nil
}

func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return n
}

func writeAtomic(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, data, 0o644)
}
