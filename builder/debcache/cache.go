package debcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/filelock"
)

// Cache is the package cache in a directory: entries/<sha256> are the
// complete, checked archives (their modification time is when a build last
// used them), partial/<sha256>.partial the downloads under way or
// interrupted, resumed by the next fetch of the same archive.
type Cache struct {
	Dir string
}

// Lock is the cache's lock: fetches hold it shared, pruning exclusive.
func (c Cache) Lock() filelock.Dir { return filelock.Dir{Path: c.Dir, What: "the package cache"} }

// Path is where the entry of an archive with this sha256 is.
func (c Cache) Path(sha string) string { return filepath.Join(c.Dir, "entries", sha) }

func (c Cache) partial(sha string) string {
	return filepath.Join(c.Dir, "partial", sha+".partial")
}

// Entry is one archive the cache holds.
type Entry struct {
	SHA256   string    `json:"sha256"`
	Bytes    int64     `json:"bytes"`
	LastUsed time.Time `json:"last_used"`
}

// List returns the cache's entries, least recently used first (none when
// the cache does not exist yet).
func (c Cache) List() ([]Entry, error) {
	des, err := os.ReadDir(filepath.Join(c.Dir, "entries"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the package cache %s: %w", c.Dir, err)
	}
	var es []Entry
	for _, de := range des {
		if !validSHA(de.Name()) || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		es = append(es, Entry{SHA256: de.Name(), Bytes: fi.Size(), LastUsed: fi.ModTime().UTC()})
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].LastUsed.Before(es[j].LastUsed) })
	return es, nil
}

// Remove removes an entry; its caller holds the cache's lock exclusive.
func (c Cache) Remove(e Entry) error {
	if !validSHA(e.SHA256) {
		return fmt.Errorf("%q is not a package cache entry", e.SHA256)
	}
	if err := os.Remove(c.Path(e.SHA256)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing package %s from the package cache: %w", e.SHA256, err)
	}
	return nil
}

// Sweep removes the interrupted downloads and temporary files; its caller
// holds the cache's lock exclusive. It returns the bytes freed.
func (c Cache) Sweep() (int64, error) {
	var freed int64
	err := c.eachFile(func(dir string, de fs.DirEntry) error {
		if validSHA(de.Name()) {
			return nil
		}
		if fi, err := de.Info(); err == nil {
			freed += fi.Size()
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		return freed, fmt.Errorf("sweeping the package cache %s: %w", c.Dir, err)
	}
	return freed, nil
}

// Usage is the bytes the cache's entries and partial downloads take.
func (c Cache) Usage() (int64, error) {
	var n int64
	err := c.eachFile(func(_ string, de fs.DirEntry) error {
		if fi, err := de.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring the package cache %s: %w", c.Dir, err)
	}
	return n, nil
}

// eachFile calls fn with each name in the cache's two folders, partial
// then entries, and the folder it is in, until fn fails; a folder not made
// yet holds none.
func (c Cache) eachFile(fn func(dir string, de fs.DirEntry) error) error {
	for _, dir := range []string{filepath.Join(c.Dir, "partial"), filepath.Join(c.Dir, "entries")} {
		des, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, de := range des {
			if err := fn(dir, de); err != nil {
				return err
			}
		}
	}
	return nil
}

func validSHA(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// Got is how an archive came into the cache.
type Got struct {
	// Path is the entry.
	Path string
	// Fetched are the bytes read from the network (0 when the cache
	// held it; less than the size when a partial download was resumed).
	Fetched int64
	// Cached is true when the cache held a good entry already.
	Cached bool
	// Replaced says why an entry the cache held was deleted and fetched
	// again ("" when none was).
	Replaced string
}

// NotFetchable is an archive the host cannot fetch (an URL that is not
// http or https, a server that refuses it, no route to it): the guest's
// apt fetches it itself.
type NotFetchable struct {
	Deb    Deb
	Reason error
}

func (e *NotFetchable) Error() string {
	return fmt.Sprintf("fetching %s %s from %s on the host: %v", e.Deb.Name, e.Deb.Version, e.Deb.URL, e.Reason)
}

func (e *NotFetchable) Unwrap() error { return e.Reason }

// Get returns the entry of d: the cache's, after checking its sha256 (a
// bad entry is deleted and fetched again), else fetched with client. Two
// fetches of the same archive, in one process or two, fetch it once: the
// second waits for the first's lock, then finds its entry. The caller holds
// the cache's lock shared.
func (c Cache) Get(ctx context.Context, client *http.Client, d Deb) (Got, error) {
	if !validSHA(d.SHA256) {
		return Got{}, fmt.Errorf("package %s %s has no valid sha256 (%q)", d.Name, d.Version, d.SHA256)
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "entries"), 0o755); err != nil {
		return Got{}, fmt.Errorf("creating the package cache: %w", err)
	}
	unlock, err := filelock.WaitContext(ctx, c.partial(d.SHA256)+".lock", "the package cache's entry "+d.SHA256)
	if err != nil {
		return Got{}, err
	}
	defer unlock()
	got := Got{Path: c.Path(d.SHA256)}
	switch err := c.check(ctx, d); {
	case err == nil:
		now := time.Now()
		_ = os.Chtimes(got.Path, now, now)
		got.Cached = true
		return got, nil
	case errors.Is(err, fs.ErrNotExist):
	case ctx.Err() != nil:
		return Got{}, ctx.Err()
	default:
		got.Replaced = err.Error()
		if err := os.Remove(got.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Got{}, fmt.Errorf("removing the bad package cache entry of %s: %w", d.Filename, err)
		}
	}
	n, err := c.download(ctx, client, d)
	got.Fetched = n
	return got, err
}

// check verifies the entry of d against its size and sha256.
func (c Cache) check(ctx context.Context, d Deb) error {
	f, err := os.Open(c.Path(d.SHA256))
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := copyCtx(ctx, h, f)
	if err != nil {
		return err
	}
	if n != d.Size || hex.EncodeToString(h.Sum(nil)) != d.SHA256 {
		return fmt.Errorf("the cached %s did not match its sha256 (%d bytes, %d expected)", d.Filename, n, d.Size)
	}
	return nil
}

// download fetches d into its partial file, continuing what an earlier
// fetch left when the server allows a Range request, checks the whole
// against d's size and sha256, and renames it into place. It returns the
// bytes read from the network.
func (c Cache) download(ctx context.Context, client *http.Client, d Deb) (int64, error) {
	if !strings.HasPrefix(d.URL, "http://") && !strings.HasPrefix(d.URL, "https://") {
		return 0, &NotFetchable{Deb: d, Reason: errors.New("not an http or https URL")}
	}
	part := c.partial(d.SHA256)
	f, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return 0, fmt.Errorf("creating the partial download of %s: %w", d.Filename, err)
	}
	defer f.Close()
	h := sha256.New()
	have, err := copyCtx(ctx, h, f)
	if err != nil {
		return 0, fmt.Errorf("reading the partial download of %s: %w", d.Filename, err)
	}
	resumed := have > 0
	if have > d.Size {
		if have, err = restart(f, h); err != nil {
			return 0, err
		}
	}
	var fetched int64
	if have < d.Size {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
		if err != nil {
			return 0, &NotFetchable{Deb: d, Reason: err}
		}
		if have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		}
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, &NotFetchable{Deb: d, Reason: err}
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0 && strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)):
		case resp.StatusCode == http.StatusOK:
			if have, err = restart(f, h); err != nil {
				return 0, err
			}
		default:
			return 0, &NotFetchable{Deb: d, Reason: fmt.Errorf("HTTP %s", resp.Status)}
		}
		n, err := copyCtx(ctx, io.MultiWriter(f, h), io.LimitReader(resp.Body, d.Size-have+1))
		fetched = n
		if err != nil {
			if ctx.Err() != nil {
				return fetched, ctx.Err()
			}
			return fetched, &NotFetchable{Deb: d, Reason: err}
		}
		have += n
	}
	if have != d.Size || hex.EncodeToString(h.Sum(nil)) != d.SHA256 {
		// A bad download is not kept for resuming; one that was resumed
		// is fetched again whole, once.
		f.Close()
		os.Remove(part)
		if resumed {
			n, err := c.download(ctx, client, d)
			return fetched + n, err
		}
		return fetched, fmt.Errorf("fetching %s from %s: %d bytes that do not match the sha256 the apt index gives (%d bytes expected)", d.Filename, d.URL, have, d.Size)
	}
	if err := f.Sync(); err != nil {
		return fetched, fmt.Errorf("writing %s to the package cache: %w", d.Filename, err)
	}
	if err := os.Rename(part, c.Path(d.SHA256)); err != nil {
		return fetched, fmt.Errorf("adding %s to the package cache: %w", d.Filename, err)
	}
	return fetched, nil
}

// restart empties a partial download and its hash.
func restart(f *os.File, h hash.Hash) (int64, error) {
	h.Reset()
	if err := f.Truncate(0); err != nil {
		return 0, err
	}
	_, err := f.Seek(0, io.SeekStart)
	return 0, err
}

// copyCtx copies until src ends or ctx is cancelled.
func copyCtx(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		r, rerr := src.Read(buf)
		if r > 0 {
			w, err := dst.Write(buf[:r])
			n += int64(w)
			if err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
