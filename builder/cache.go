package builder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/layercache"
	"github.com/gpuaas/imagectl/builder/pack"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/buildinfo"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/manifest"
)

// DefaultCacheMaxAge is how long a cached layer that depends on the outside
// world (apt installs, commands) is reused before it is rebuilt.
const DefaultCacheMaxAge = 7 * 24 * time.Hour

// layerMeta is what a cache entry keeps about its layer beyond the disk:
// what the manifest would otherwise only learn by running it.
type layerMeta struct {
	Steps   []manifest.Step   `json:"steps"`
	Missing []string          `json:"missing_optional_packages,omitempty"`
	AptKeys []manifest.AptKey `json:"apt_keys,omitempty"`
	// Packages and Mounts are kept with the final layer, so that a build
	// whose every layer is cached needs no appliance at all.
	Packages []manifest.Package `json:"packages,omitempty"`
	Mounts   []guest.Mount      `json:"mounts,omitempty"`
}

// layerCache is a build's use of the layer cache.
type layerCache struct {
	c        layercache.Cache
	keys     []string // per plan layer; "" for disabled layers
	volatile []bool
	root     string
	table    *layercache.Table // the disk's current state
	parent   string            // key of the entry the disk is in, "" = base
	unlock   func()
}

// cacheKeys derives each layer's cache key from the plan's chained layer
// keys, rooted in what else decides the disk's state: the builder version
// and the base image with its format and size. The final layer writes the
// build marker and the validation script, made from the manifest, so its
// key also covers the manifest's static part and the per-build facts the
// marker records (extra: the source revision, the parent version). A
// source date from $SOURCE_DATE_EPOCH (sourceDate, "" for none) is in
// every key: the guest's commands run with it; the default one is the base
// image's, which the root already covers. So is whether the plan removes
// apt's lists at the end: apt-get update then fetches less.
func cacheKeys(plan *plan.Plan, sourceDate string, extra ...string) (root string, keys []string, volatile []bool, err error) {
	h := func(parts ...string) string {
		w := digest.NewWriter(nil)
		for _, p := range parts {
			io.WriteString(w, p+"\n")
		}
		return w.Digest().String()
	}
	root = h("imagectl layer cache v1", buildinfo.Version, plan.BaseChecksum(), plan.Manifest.Base.Format, fmt.Sprint(plan.Manifest.Base.Size))
	if sourceDate != "" {
		root = h(root, "SOURCE_DATE_EPOCH="+sourceDate)
	}
	if compile.RemovesAptLists(plan.Layers) {
		// Its snapshots hold apt's lists without the Translation indexes
		// (apply.Applier.NoTranslations): not for a plan that keeps them.
		root = h(root, "apt lists without translations")
	}
	static, err := json.Marshal(plan.Manifest)
	if err != nil {
		return "", nil, nil, err
	}
	keys = make([]string, len(plan.Layers))
	volatile = make([]bool, len(plan.Layers))
	for i, l := range plan.Layers {
		if !l.Enabled {
			continue
		}
		keys[i] = h(root, l.Key)
		if l.Name == compile.FinalizeLayer {
			keys[i] = h(append([]string{root, l.Key, string(static)}, extra...)...)
		}
		for _, st := range l.Steps {
			switch st.(type) {
			case steps.Packages, steps.AptRepository, steps.Run:
				volatile[i] = true
			}
		}
	}
	return root, keys, volatile, nil
}

// openLayerCache restores the deepest run of cached layers onto disk (the
// freshly prepared base) and returns the cache state and the entries it
// restored, one per leading plan layer (nil for disabled ones). A corrupted
// snapshot is reported, removed and rebuilt; prepare makes a fresh base disk
// when a restore has to start again.
func openLayerCache(ctx context.Context, plan *plan.Plan, opts BuildOptions, disk string, rep event.Reporter, prepare func() error) (*layerCache, []*layercache.Entry, error) {
	lc := &layerCache{c: layercache.Cache{Dir: opts.LayerCache}}
	var err error
	var sourceDate string
	if sd, ok, err := pack.FromEnv(opts.Env); err != nil {
		return nil, nil, err
	} else if ok {
		sourceDate = fmt.Sprint(sd.Epoch())
	}
	if lc.root, lc.keys, lc.volatile, err = cacheKeys(plan, sourceDate, sourceRevision(plan.Inputs.Dir), opts.ParentVersion); err != nil {
		return nil, nil, err
	}
	if lc.unlock, err = lc.c.Lock().Wait(false); err != nil {
		return nil, nil, err
	}
	base, err := lc.c.BaseTable(ctx, lc.root, disk)
	if err != nil {
		lc.unlock()
		return nil, nil, fmt.Errorf("hashing the base disk for the layer cache: %w", err)
	}
	maxAge := opts.CacheMaxAge
	if maxAge == 0 {
		maxAge = DefaultCacheMaxAge
	}
	for {
		var chain, restored []*layercache.Entry
		state := base.Digest()
		if !opts.Refresh {
		lookup:
			for i, key := range lc.keys {
				if key == "" {
					restored = append(restored, nil)
					continue
				}
				e, err := lc.c.Get(key, state)
				switch {
				case err != nil:
					rep.Log(fmt.Sprintf("layer cache: reading layer %s: %v; rebuilding it", plan.Layers[i].Name, err))
					break lookup
				case e == nil:
					break lookup
				case lc.volatile[i] && time.Since(e.Created) > maxAge:
					rep.Log(fmt.Sprintf("layer cache: layer %s was cached %s ago, more than the maximum age %s for a layer that installs packages or runs commands; rebuilding it",
						plan.Layers[i].Name, time.Since(e.Created).Round(time.Minute), maxAge))
					break lookup
				}
				chain = append(chain, e)
				restored = append(restored, e)
				state = e.State
			}
		}
		// Trailing disabled layers are not restored: they come with the
		// next enabled one.
		for len(restored) > 0 && restored[len(restored)-1] == nil {
			restored = restored[:len(restored)-1]
		}
		if len(chain) == 0 {
			lc.table = base
			return lc, nil, nil
		}
		end := rep.Phase(PhaseRestore, fmt.Sprintf("%d cached layers up to %s", len(chain), chain[len(chain)-1].Layer))
		t, err := lc.c.Restore(ctx, chain, base, disk)
		end(err)
		var ce *layercache.CorruptError
		if errors.As(err, &ce) {
			rep.Log(fmt.Sprintf("layer cache: %v; removing it and rebuilding from there", err))
			lc.c.Remove(ce.Entry)
			if err := prepare(); err != nil {
				lc.unlock()
				return nil, nil, err
			}
			continue
		}
		if err != nil {
			lc.unlock()
			return nil, nil, err
		}
		lc.table, lc.parent = t, chain[len(chain)-1].Key
		return lc, restored, nil
	}
}

// save snapshots the disk after layer i.
func (lc *layerCache) save(ctx context.Context, plan *plan.Plan, i int, disk string, meta layerMeta) error {
	mb, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	e := layercache.Entry{Key: lc.keys[i], Parent: lc.parent, Root: lc.root, Layer: plan.Layers[i].Name, Image: plan.Manifest.Image.Name,
		Volatile: lc.volatile[i], Created: time.Now().UTC(), Meta: mb}
	t, err := lc.c.Save(ctx, e, disk, lc.table)
	if err != nil {
		return err
	}
	lc.table, lc.parent = t, e.Key
	return nil
}

func (lc *layerCache) close() {
	if lc != nil && lc.unlock != nil {
		lc.unlock()
	}
}
