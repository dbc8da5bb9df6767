// Package cache owns the listing and bounding of the parts of imagectl's
// cache directory (internal/cachedir: where it is and its folders) that
// grow with every build and read: the layer cache's snapshots
// (layers/, builder/layercache), the versions the registry store fetched
// (oci/, store/oci: small files of every version read, tgzs fetched whole
// for check and smoke) and the package cache's .deb archives (packages/,
// builder/debcache). Prune weighs the three together, least recently used
// first, under one size bound. It also lists the records of the tgzs racks
// checks hashed (hashed/, internal/hashstamp), a few hundred bytes each,
// which prune removes once their tgz is gone or changed, or all when it
// empties the cache. The downloaded base images (base/, one per recipe
// base) and the git catalogs' clones are not its.
package cache

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/gpuaas/imagectl/builder/debcache"
	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/filelock"
	"github.com/gpuaas/imagectl/internal/hashstamp"
	"github.com/gpuaas/imagectl/store/oci"
)

// Contents is what the cache directory holds.
type Contents struct {
	Dir         string `json:"cache_directory"`
	LayersDir   string `json:"directory"`
	RegistryDir string `json:"registry_directory"`
	// Layers are the layer snapshots, oldest first.
	Layers     []layercache.Entry `json:"entries"`
	LayerBytes int64              `json:"layer_bytes"`
	// Registry are the fetched registry versions, least recently used
	// first; RegistryBytes counts each blob once.
	Registry      []oci.CachedVersion `json:"registry_versions"`
	RegistryBytes int64               `json:"registry_bytes"`
	// Packages are the package cache's archives, least recently used
	// first; PackageBytes counts them and interrupted downloads.
	PackagesDir  string           `json:"packages_directory"`
	Packages     []debcache.Entry `json:"packages"`
	PackageBytes int64            `json:"package_bytes"`
	// Hashed are the records of the tgzs racks checks and uploads hashed,
	// by sha256; HashedBytes counts them.
	HashedDir   string            `json:"hash_records_directory"`
	Hashed      []hashstamp.Entry `json:"hash_records"`
	HashedBytes int64             `json:"hash_record_bytes"`
}

// Layers is the layer cache of a cache directory.
func Layers(dir string) layercache.Cache {
	return layercache.Cache{Dir: filepath.Join(dir, cachedir.Layers)}
}

// Registry is the registry store's cache of a cache directory.
func Registry(dir string) oci.Cache { return oci.Cache{Dir: filepath.Join(dir, cachedir.Registry)} }

// Packages is the package cache of a cache directory.
func Packages(dir string) debcache.Cache {
	return debcache.Cache{Dir: filepath.Join(dir, cachedir.Packages)}
}

// Hashed is the folder of hash records of a cache directory.
func Hashed(dir string) hashstamp.Dir { return hashstamp.Dir(filepath.Join(dir, cachedir.Hashed)) }

// List reads what the cache directory holds.
func List(dir string) (*Contents, error) {
	layers, reg, pkgs, hashed := Layers(dir), Registry(dir), Packages(dir), Hashed(dir)
	c := &Contents{Dir: dir, LayersDir: layers.Dir, RegistryDir: reg.Dir, PackagesDir: pkgs.Dir, HashedDir: string(hashed),
		Layers: []layercache.Entry{}, Registry: []oci.CachedVersion{}, Packages: []debcache.Entry{}, Hashed: []hashstamp.Entry{}}
	if ls, err := layers.List(); err != nil {
		return nil, fmt.Errorf("listing the layer cache %s: %w", layers.Dir, err)
	} else if ls != nil {
		c.Layers = ls
	}
	for i := range c.Layers {
		c.LayerBytes += c.Layers[i].Bytes
	}
	vs, err := reg.List()
	if err != nil {
		return nil, err
	}
	if vs != nil {
		c.Registry = vs
	}
	if c.RegistryBytes, err = reg.Usage(); err != nil {
		return nil, err
	}
	ps, err := pkgs.List()
	if err != nil {
		return nil, err
	}
	if ps != nil {
		c.Packages = ps
	}
	if c.PackageBytes, err = pkgs.Usage(); err != nil {
		return nil, err
	}
	hs, err := hashed.List()
	if err != nil {
		return nil, err
	}
	if hs != nil {
		c.Hashed = hs
	}
	for _, h := range c.Hashed {
		c.HashedBytes += h.Bytes
	}
	return c, nil
}

// Pruned is what Prune removed, and the registry versions it left
// because they were read within oci.InUse.
type Pruned struct {
	Layers     []layercache.Entry  `json:"removed"`
	Registry   []oci.CachedVersion `json:"registry_removed"`
	InUse      []oci.CachedVersion `json:"registry_in_use"`
	Packages   []debcache.Entry    `json:"packages_removed"`
	Hashed     []hashstamp.Entry   `json:"hash_records_removed"`
	FreedBytes int64               `json:"freed_bytes"`
}

// PruneOptions bound the cache.
type PruneOptions struct {
	// MaxBytes is the most the three parts may take together (0: no
	// size limit; negative: remove everything not in use, hash records
	// too).
	MaxBytes int64
	// OlderThan removes what was not used for this long (0: no age limit).
	OlderThan time.Duration
	// Waiting, when set, is called once if Prune has to wait for builds or
	// registry reads to finish.
	Waiting func()
}

// item is one thing Prune may remove, of either kind.
type item struct {
	lastUsed time.Time
	layer    *layercache.Entry
	version  *oci.CachedVersion
	pkg      *debcache.Entry
}

// lockRetry is how often Prune tries the locks again while builds or
// registry reads hold one of them.
const lockRetry = 500 * time.Millisecond

// Prune removes what was not used for OlderThan, then the least recently
// used layer snapshots, registry versions and package archives, of any
// kind, until the three together take at most MaxBytes, and what crashed
// builds and downloads left half-written (interrupted package downloads
// included), and the hash records whose tgz is gone or changed (all of
// them when MaxBytes is negative). The records are not weighed: they take
// a few hundred bytes a version, and each saves a read of a whole tgz. It
// leaves the registry versions read within oci.InUse, whose
// readers may not have opened their files yet. It holds the parts' locks
// exclusive, taking them only together: while a build or a registry read
// holds one, it waits (until ctx ends) holding none, so that no kind of
// work waits on another through it.
func Prune(ctx context.Context, dir string, opts PruneOptions) (*Pruned, error) {
	layers, reg, pkgs := Layers(dir), Registry(dir), Packages(dir)
	unlock, err := lockAll(ctx, []filelock.Dir{layers.Lock(), reg.Lock(), pkgs.Lock()}, opts.Waiting)
	if err != nil {
		return nil, err
	}
	defer unlock()

	p := &Pruned{Layers: []layercache.Entry{}, Registry: []oci.CachedVersion{}, InUse: []oci.CachedVersion{}, Packages: []debcache.Entry{},
		Hashed: []hashstamp.Entry{}}
	if err := layers.Sweep(); err != nil {
		return p, err
	}
	hashed := Hashed(dir)
	stale, swept, err := hashed.Sweep()
	p.Hashed = append(p.Hashed, stale...)
	p.FreedBytes += swept
	if err != nil {
		return p, err
	}
	swept, err = reg.Sweep()
	p.FreedBytes += swept
	if err != nil {
		return p, err
	}
	swept, err = pkgs.Sweep()
	p.FreedBytes += swept
	if err != nil {
		return p, err
	}
	c, err := List(dir)
	if err != nil {
		return p, err
	}
	if opts.MaxBytes < 0 {
		for _, h := range c.Hashed {
			if err := hashed.Forget(h.SHA256); err != nil {
				return p, err
			}
			p.Hashed = append(p.Hashed, h)
			p.FreedBytes += h.Bytes
		}
	}
	now := time.Now()
	var items []item
	for i := range c.Layers {
		items = append(items, item{lastUsed: layers.LastUsed(&c.Layers[i]), layer: &c.Layers[i]})
	}
	for i := range c.Registry {
		items = append(items, item{lastUsed: c.Registry[i].LastUsed, version: &c.Registry[i]})
	}
	for i := range c.Packages {
		items = append(items, item{lastUsed: c.Packages[i].LastUsed, pkg: &c.Packages[i]})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].lastUsed.Before(items[j].lastUsed) })
	total := c.LayerBytes + c.RegistryBytes + c.PackageBytes
	for _, it := range items {
		old := opts.OlderThan > 0 && now.Sub(it.lastUsed) > opts.OlderThan
		big := opts.MaxBytes < 0 || (opts.MaxBytes > 0 && total > opts.MaxBytes)
		if !old && !big {
			continue
		}
		var freed int64
		if it.pkg != nil {
			if err := pkgs.Remove(*it.pkg); err != nil {
				return p, err
			}
			freed = it.pkg.Bytes
			p.Packages = append(p.Packages, *it.pkg)
		} else if it.layer != nil {
			if err := layers.Remove(it.layer); err != nil {
				return p, fmt.Errorf("removing layer snapshot %s of %s: %w", it.layer.Layer, it.layer.Image, err)
			}
			freed = it.layer.Bytes
			p.Layers = append(p.Layers, *it.layer)
		} else {
			if now.Sub(it.lastUsed) < oci.InUse {
				p.InUse = append(p.InUse, *it.version)
				continue
			}
			if freed, err = reg.Remove(*it.version); err != nil {
				return p, err
			}
			p.Registry = append(p.Registry, *it.version)
		}
		total -= freed
		p.FreedBytes += freed
	}
	return p, nil
}

// lockAll takes every lock exclusive, or none.
func lockAll(ctx context.Context, locks []filelock.Dir, waiting func()) (func(), error) {
	for {
		var unlocks []func()
		release := func() {
			for i := len(unlocks) - 1; i >= 0; i-- {
				unlocks[i]()
			}
		}
		all := true
		for _, l := range locks {
			unlock, ok, err := l.Try(true)
			if err != nil {
				release()
				return nil, err
			}
			if !ok {
				all = false
				break
			}
			unlocks = append(unlocks, unlock)
		}
		if all {
			return release, nil
		}
		release()
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for builds and registry reads to finish before pruning %s: %w", filepath.Dir(locks[0].Path), ctx.Err())
		case <-time.After(lockRetry):
		}
	}
}
