// Package cache owns the listing and bounding of the parts of imagectl's
// cache directory (internal/cachedir: where it is and its folders) that
// grow with every build and read: the layer cache's snapshots
// (layers/, builder/layercache) and the versions the registry store
// fetched (oci/, store/oci: small files of every version read, tgzs
// fetched whole for check and smoke). Prune weighs both together, least
// recently used first, under one size bound. The downloaded base images
// (base/, one per recipe base) and the git catalogs' clones are not its.
package cache

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/internal/cachedir"
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
}

// Layers is the layer cache of a cache directory.
func Layers(dir string) layercache.Cache {
	return layercache.Cache{Dir: filepath.Join(dir, cachedir.Layers)}
}

// Registry is the registry store's cache of a cache directory.
func Registry(dir string) oci.Cache { return oci.Cache{Dir: filepath.Join(dir, cachedir.Registry)} }

// List reads what the cache directory holds.
func List(dir string) (*Contents, error) {
	layers, reg := Layers(dir), Registry(dir)
	c := &Contents{Dir: dir, LayersDir: layers.Dir, RegistryDir: reg.Dir, Layers: []layercache.Entry{}, Registry: []oci.CachedVersion{}}
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
	return c, nil
}

// Pruned is what Prune removed, and the registry versions it left
// because they were read within oci.InUse.
type Pruned struct {
	Layers     []layercache.Entry  `json:"removed"`
	Registry   []oci.CachedVersion `json:"registry_removed"`
	InUse      []oci.CachedVersion `json:"registry_in_use"`
	FreedBytes int64               `json:"freed_bytes"`
}

// PruneOptions bound the cache.
type PruneOptions struct {
	// MaxBytes is the most the two parts may take together (0: no size
	// limit; negative: remove everything not in use).
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
}

// lockRetry is how often Prune tries the two locks again while builds or
// registry reads hold one of them.
const lockRetry = 500 * time.Millisecond

// Prune removes what was not used for OlderThan, then the least recently
// used layer snapshots and registry versions, of either kind, until the two
// together take at most MaxBytes, and what crashed builds and downloads
// left half-written. It leaves the registry versions read within
// oci.InUse, whose readers may not have opened their files yet. It holds
// both parts' locks exclusive, taking them only together: while a build or
// a registry read holds one, it waits (until ctx ends) holding neither, so
// that neither kind of work waits on the other through it.
func Prune(ctx context.Context, dir string, opts PruneOptions) (*Pruned, error) {
	layers, reg := Layers(dir), Registry(dir)
	unlock, err := lockBoth(ctx, layers, reg, opts.Waiting)
	if err != nil {
		return nil, err
	}
	defer unlock()

	p := &Pruned{Layers: []layercache.Entry{}, Registry: []oci.CachedVersion{}, InUse: []oci.CachedVersion{}}
	if err := layers.Sweep(); err != nil {
		return p, err
	}
	swept, err := reg.Sweep()
	p.FreedBytes += swept
	if err != nil {
		return p, err
	}
	c, err := List(dir)
	if err != nil {
		return p, err
	}
	now := time.Now()
	var items []item
	for i := range c.Layers {
		items = append(items, item{lastUsed: layers.LastUsed(&c.Layers[i]), layer: &c.Layers[i]})
	}
	for i := range c.Registry {
		items = append(items, item{lastUsed: c.Registry[i].LastUsed, version: &c.Registry[i]})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].lastUsed.Before(items[j].lastUsed) })
	total := c.LayerBytes + c.RegistryBytes
	for _, it := range items {
		old := opts.OlderThan > 0 && now.Sub(it.lastUsed) > opts.OlderThan
		big := opts.MaxBytes < 0 || (opts.MaxBytes > 0 && total > opts.MaxBytes)
		if !old && !big {
			continue
		}
		var freed int64
		if it.layer != nil {
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

// lockBoth takes both parts' locks exclusive, or neither.
func lockBoth(ctx context.Context, layers layercache.Cache, reg oci.Cache, waiting func()) (func(), error) {
	for {
		unlockLayers, ok, err := layers.Lock().Try(true)
		if err != nil {
			return nil, err
		}
		if ok {
			unlockReg, ok, err := reg.Lock().Try(true)
			if err != nil {
				unlockLayers()
				return nil, err
			}
			if ok {
				return func() { unlockReg(); unlockLayers() }, nil
			}
			unlockLayers()
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for builds and registry reads to finish before pruning %s: %w", filepath.Dir(layers.Dir), ctx.Err())
		case <-time.After(lockRetry):
		}
	}
}
