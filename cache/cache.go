// Package cache owns imagectl's cache directory as a whole
// ($IMAGECTL_CACHE_DIR, else $XDG_CACHE_HOME/imagectl): listing what it
// holds and bounding it. Two parts of it grow with use: the layer cache's
// snapshots (layers/, builder/layercache), and the versions the registry
// store fetched (oci/, store/oci: small files of every version read, tgzs
// fetched whole for check and smoke). Prune weighs both together, least
// recently used first, under one size bound, so that a CI builder's disk
// stays bounded whichever part grows.
package cache

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/store/oci"
)

// The parts of the cache directory this package bounds.
const (
	LayersDir   = "layers"
	RegistryDir = "oci"
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
	return layercache.Cache{Dir: filepath.Join(dir, LayersDir)}
}

// Registry is the registry store's cache of a cache directory.
func Registry(dir string) oci.Cache { return oci.Cache{Dir: filepath.Join(dir, RegistryDir)} }

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

// Pruned is what Prune removed.
type Pruned struct {
	Layers     []layercache.Entry  `json:"removed"`
	Registry   []oci.CachedVersion `json:"registry_removed"`
	FreedBytes int64               `json:"freed_bytes"`
}

// item is one thing Prune may remove, of either kind.
type item struct {
	lastUsed time.Time
	layer    *layercache.Entry
	version  *oci.CachedVersion
}

// Prune removes what was not used for olderThan (0: no age limit), then the
// least recently used layer snapshots and registry versions, of either
// kind, until the two together take at most maxBytes (0: no size limit;
// negative: remove everything), and what crashed builds and downloads
// left half-written. It holds both parts' locks exclusive: builds and
// registry reads wait for it, and it waits for them.
func Prune(dir string, maxBytes int64, olderThan time.Duration) (*Pruned, error) {
	layers, reg := Layers(dir), Registry(dir)
	unlockLayers, err := layers.Lock(true)
	if err != nil {
		return nil, err
	}
	defer unlockLayers()
	unlockReg, err := reg.Lock(true)
	if err != nil {
		return nil, err
	}
	defer unlockReg()

	p := &Pruned{Layers: []layercache.Entry{}, Registry: []oci.CachedVersion{}}
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
		old := olderThan > 0 && time.Since(it.lastUsed) > olderThan
		big := maxBytes < 0 || (maxBytes > 0 && total > maxBytes)
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
