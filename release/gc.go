package release

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
)

// GCResult is what gc deleted, or would delete on a dry run.
type GCResult struct {
	Site   string `json:"site"`
	Keep   int    `json:"keep"`
	DryRun bool   `json:"dry_run"`
	// Delete are the boot resources deleted (or to delete); Kept the
	// others, each with why.
	Delete []Held `json:"delete"`
	Kept   []Kept `json:"kept"`
}

// Kept is a boot resource gc leaves, and why.
type Kept struct {
	Held
	Why string `json:"why"`
}

// GC deletes the versioned boot resources of the store's images from the
// site's MAAS that are neither the promoted version, nor the version a
// rollback would promote, nor selected by one of the site's deploy
// profiles, nor among the keep newest versions MAAS holds of the image
// (newest by publish order in the store, not counting revoked versions:
// those go first, unless promoted, the rollback's or selected). A deploy
// profile it cannot read
// fails it before anything is deleted. Resources the store knows no
// version for are left alone: gc cannot tell whose they are. Unless
// apply, nothing is deleted.
func GC(ctx context.Context, keep int, apply bool, o Options) (*GCResult, error) {
	if keep < 0 {
		return nil, fmt.Errorf("gc: --keep must be 0 or more, not %d", keep)
	}
	sv, err := siteView(ctx, o)
	if err != nil {
		return nil, err
	}
	cat, c, hs := sv.cat, sv.c, sv.held
	// What a deploy profile selects is what the site deploys, whatever
	// the catalog says.
	selected := map[string]string{}
	for _, p := range sv.profiles {
		n := manifest.BareName(p.DistroSeries)
		if selected[n] == "" {
			selected[n] = fmt.Sprintf("selected by deploy profile %s of admin site %s", p.ProfileID, p.SiteID)
		}
	}
	out := &GCResult{Site: o.Site.Name, Keep: keep, DryRun: !apply, Delete: []Held{}, Kept: []Kept{}}
	byImage := map[string][]Held{}
	for _, h := range hs {
		if h.Version == "" {
			out.Kept = append(out.Kept, Kept{h, "not a version in the store"})
			continue
		}
		byImage[h.Image] = append(byImage[h.Image], h)
	}
	for _, img := range slices.Sorted(maps.Keys(byImage)) {
		list := byImage[img]
		sort.SliceStable(list, func(i, j int) bool { return list[i].published.After(list[j].published) }) // newest first
		stack := store.Stack(cat[img])
		cur, back := "", ""
		if len(stack) > 0 {
			cur = stack[len(stack)-1]
			back, _ = rollbackTarget(stack, sv.revoked[img])
		}
		newest := 0 // the versions not revoked seen so far
		for _, h := range list {
			if !h.Revoked {
				newest++
			}
			switch {
			case h.Version == cur:
				h.Promoted = true
				out.Kept = append(out.Kept, Kept{h, "promoted"})
			case h.Version == back && back != "":
				out.Kept = append(out.Kept, Kept{h, "what a rollback would promote"})
			case selected[h.Name] != "":
				out.Kept = append(out.Kept, Kept{h, selected[h.Name]})
			case h.Revoked:
				out.Delete = append(out.Delete, h)
			case newest <= keep:
				out.Kept = append(out.Kept, Kept{h, fmt.Sprintf("among the %d newest", keep)})
			default:
				out.Delete = append(out.Delete, h)
			}
		}
	}
	if !apply {
		return out, nil
	}
	// A promotion may have been recorded since the catalog was read: read
	// it again and spare what it now needs.
	if cat, err = o.Store.Catalog(ctx, o.Site.Name); err != nil {
		return nil, err
	}
	var errs []error
	deleted := out.Delete[:0]
	for _, h := range out.Delete {
		stack := store.Stack(cat[h.Image])
		back, _ := rollbackTarget(stack, sv.revoked[h.Image])
		if len(stack) > 0 && h.Version == stack[len(stack)-1] || h.Version == back && back != "" {
			out.Kept = append(out.Kept, Kept{h, "promoted while gc ran"})
			continue
		}
		deleted = append(deleted, h)
	}
	out.Delete = deleted
	for _, h := range out.Delete {
		if err := c.Delete(ctx, h.ID); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s (boot resource %d): %w", h.Name, h.ID, err))
		}
	}
	return out, errors.Join(errs...)
}
