package release

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload/maas"
)

// SiteStatus is what a site runs and what its MAAS holds.
type SiteStatus struct {
	Site   string        `json:"site"`
	Images []ImageStatus `json:"images"`
	// Profiles are the site's deploy profiles (sites.hcl) and what they
	// select; a profile that selects another version than the promoted one
	// is an image's drift of kind profile.
	Profiles []ProfileStatus `json:"deploy_profiles"`
	// Drift is set when any image drifted.
	Drift bool `json:"drift"`
}

// ImageStatus is one image at a site.
type ImageStatus struct {
	Image string `json:"image"`
	// Promoted is the version the catalog says the site runs ("" when none),
	// with its tgz's sha256 and the boot resource it should be.
	Promoted     string    `json:"promoted,omitempty"`
	PromotedAt   time.Time `json:"promoted_at,omitzero"`
	PromotedBy   string    `json:"promoted_by,omitempty"`
	SHA256       string    `json:"sha256,omitempty"`
	Name         string    `json:"name,omitempty"`
	DistroSeries string    `json:"distro_series,omitempty"`
	// Revoked is the revocation of the promoted version, when it is
	// revoked (a drift of kind revoked too).
	Revoked *store.Revocation `json:"revoked,omitempty"`
	// MAAS are the versioned boot resources of the image MAAS holds.
	MAAS  []Held  `json:"maas"`
	Drift []Drift `json:"drift"`

	// Racks is each rack controller's latest recorded check of the
	// promoted version (warm-racks, or a promotion or rollback that
	// checked the racks): when it last proved, or failed to prove, that
	// it serves it.
	Racks []store.RackProof `json:"racks,omitempty"`
}

// Held is a versioned boot resource of one of the store's images in MAAS.
type Held struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	Image string `json:"image"`
	// Version is the store version the name belongs to, "" when the store
	// has none under that name.
	Version  string `json:"version,omitempty"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	Complete bool   `json:"complete"`
	// Matches: the sha256 is the stored version's.
	Matches  bool `json:"matches"`
	Promoted bool `json:"promoted"`
	// Revoked: the version is revoked (imagectl revoke).
	Revoked bool `json:"revoked,omitempty"`
	// published orders versions for gc (the store's publish order).
	published time.Time
}

// Drift is a difference between the catalog, the store and MAAS.
type Drift struct {
	// Kind is missing (the promoted version is not in MAAS), incomplete,
	// sha256-mismatch (MAAS holds other bytes under a version's name),
	// unknown (a versioned resource of the image the store does not know),
	// not-in-store (the promoted version is not in the store), profile
	// (a deploy profile selects something else than the promoted version),
	// or channel (the store's channel for the site, when it has channels,
	// points elsewhere than the promoted version, or is missing), or
	// revoked (the site runs a revoked version, or a deploy profile selects
	// one).
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// known maps boot-resource names to store versions.
type known struct {
	byName map[string]*store.Version
	image  map[string]string // name -> image
	// prefixes are each image's unversioned resource name.
	prefixes map[string]string // image -> prefix
	sha      map[string]string // name -> sha256
	names    map[string]string // image + "\x00" + version -> name
}

func resourceName(image, version string, m *manifest.Manifest) string {
	if m != nil && m.MAAS != nil && m.MAAS.VersionedName != "" {
		return m.MAAS.VersionedName
	}
	name := manifest.DistroSeries(image)
	if m != nil {
		name = m.MAASName()
	}
	return manifest.VersionedName(name, version)
}

func index(ctx context.Context, s store.Store) (*known, error) {
	imgs, err := s.Images(ctx)
	if err != nil {
		return nil, err
	}
	k := &known{byName: map[string]*store.Version{}, image: map[string]string{}, prefixes: map[string]string{}, sha: map[string]string{},
		names: map[string]string{}}
	for _, img := range imgs {
		for _, v := range img.Versions {
			m, err := manifest.Read(v.Manifest)
			if err != nil {
				return nil, err
			}
			n := resourceName(img.Name, v.Version, m)
			k.byName[n], k.image[n], k.sha[n] = v, img.Name, v.SHA256
			k.names[img.Name+"\x00"+v.Version] = n
			k.prefixes[img.Name] = manifest.VersionedName(m.MAASName(), "")
		}
	}
	return k, nil
}

// attribute says which image a resource name belongs to: the store
// version's, else the image with the longest name prefix, else none.
func (k *known) attribute(name string) (image string, v *store.Version) {
	if v := k.byName[name]; v != nil {
		return k.image[name], v
	}
	best := ""
	for img, p := range k.prefixes {
		if strings.HasPrefix(name, p+"-") && len(p) > len(k.prefixes[best]) {
			best = img
		}
	}
	return best, nil
}

// held reads every uploaded resource in MAAS with its sets and keeps the
// versioned ones of the store's images.
func held(ctx context.Context, c *maas.Client, k *known) ([]Held, error) {
	list, err := c.List(ctx, "uploaded")
	if err != nil {
		return nil, err
	}
	var out []Held
	for _, r := range list {
		name := manifest.BareName(r.Name)
		image, v := k.attribute(name)
		if image == "" {
			continue
		}
		res, err := c.Get(ctx, r.ID)
		if maas.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		h := Held{ID: r.ID, Name: name, Image: image}
		if f := res.File(); f != nil {
			h.SHA256, h.Size, h.Complete = strings.ToLower(f.SHA256), f.Size, f.Complete
		}
		if v != nil {
			h.Version, h.published = v.Version, v.Published
			h.Matches = h.SHA256 == strings.ToLower(v.SHA256)
		}
		out = append(out, h)
	}
	return out, nil
}

// view is what status and gc compare: the store's versions, the site's
// catalog, the boot resources the site's MAAS holds, and what the site's
// deploy profiles select.
type view struct {
	k        *known
	cat      map[string][]store.Promotion
	c        *maas.Client
	held     []Held
	profiles []ProfileStatus
	// revoked are the versions revoked now, by image.
	revoked map[string]map[string]store.Revocation
}

// siteView reads the site's view.
func siteView(ctx context.Context, o Options) (*view, error) {
	k, err := index(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	cat, err := o.Store.Catalog(ctx, o.Site.Name)
	if err != nil {
		return nil, err
	}
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	hs, err := held(ctx, c, k)
	if err != nil {
		return nil, fmt.Errorf("reading site %s's boot resources: %w", o.Site.Name, err)
	}
	ps, err := readProfiles(ctx, o, k, cat)
	if err != nil {
		return nil, fmt.Errorf("reading site %s's deploy profiles: %w", o.Site.Name, err)
	}
	all, err := o.Store.Revocations(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("reading the revocations: %w", err)
	}
	revoked := map[string]map[string]store.Revocation{}
	for _, r := range all {
		if revoked[r.Image] == nil {
			revoked[r.Image] = store.Revoked(all, r.Image)
		}
	}
	for i := range hs {
		_, hs[i].Revoked = revoked[hs[i].Image][hs[i].Version]
	}
	return &view{k: k, cat: cat, c: c, held: hs, profiles: ps, revoked: revoked}, nil
}

// Status compares what the store's catalog says the site runs with what
// the site's MAAS holds.
func Status(ctx context.Context, o Options) (*SiteStatus, error) {
	sv, err := siteView(ctx, o)
	if err != nil {
		return nil, err
	}
	k, cat, hs := sv.k, sv.cat, sv.held
	byImage := map[string]*ImageStatus{}
	get := func(image string) *ImageStatus {
		if byImage[image] == nil {
			byImage[image] = &ImageStatus{Image: image, MAAS: []Held{}, Drift: []Drift{}}
		}
		return byImage[image]
	}
	for image, h := range cat {
		cur, _ := store.State(h)
		if cur == "" {
			continue
		}
		st := get(image)
		st.Promoted = cur
		for _, p := range h {
			if p.Version == cur {
				st.PromotedAt, st.PromotedBy = p.At, p.By
			}
		}
		proofs, err := o.Store.RackProofs(ctx, o.Site.Name, image, cur)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", o.Site.Name, err)
		}
		st.Racks = store.LatestRackProofs(proofs)
		v, m, err := stored(ctx, o.Store, image, cur)
		if v == nil {
			st.Drift = append(st.Drift, Drift{Kind: "not-in-store", Message: fmt.Sprintf("%s %s is promoted but not in the store", image, cur)})
			continue
		}
		if err != nil {
			return nil, err
		}
		st.SHA256, st.Name = v.SHA256, resourceName(image, cur, m)
		st.DistroSeries = manifest.DistroSeries(st.Name)
	}
	for image, st := range byImage {
		if r, ok := sv.revoked[image][st.Promoted]; ok {
			st.Revoked = &r
			st.Drift = append(st.Drift, Drift{Kind: "revoked", Message: fmt.Sprintf("site %s runs %s %s, which is revoked (%s): imagectl rollback %s --site %s returns it to the version before",
				o.Site.Name, image, st.Promoted, describeRevocation(r), image, o.Site.Name)})
		}
	}
	for _, h := range hs {
		st := get(h.Image)
		h.Promoted = h.Version != "" && h.Version == st.Promoted
		st.MAAS = append(st.MAAS, h)
		switch {
		case h.Version == "":
			st.Drift = append(st.Drift, Drift{Kind: "unknown", Message: fmt.Sprintf("MAAS holds %s (boot resource %d), which is no version of %s in the store", h.Name, h.ID, h.Image)})
		case !h.Matches:
			st.Drift = append(st.Drift, Drift{Kind: "sha256-mismatch", Message: fmt.Sprintf("MAAS holds %s (boot resource %d) with sha256 %s, but %s %s is %s",
				h.Name, h.ID, h.SHA256, h.Image, h.Version, k.sha[h.Name])})
		case h.Promoted && !h.Complete:
			st.Drift = append(st.Drift, Drift{Kind: "incomplete", Message: fmt.Sprintf("the promoted %s (boot resource %d) is not complete in MAAS", h.Name, h.ID)})
		}
	}
	for _, st := range byImage {
		if st.Promoted == "" || st.Name == "" {
			continue
		}
		found := false
		for _, h := range st.MAAS {
			found = found || h.Promoted
		}
		if !found {
			st.Drift = append(st.Drift, Drift{Kind: "missing", Message: fmt.Sprintf("the promoted %s %s is not in MAAS as %s (imagectl promote uploads it again)", st.Image, st.Promoted, st.Name)})
		}
	}
	if ch, ok := store.ChannelsOf(o.Store); ok {
		for _, st := range byImage {
			if st.Promoted == "" {
				continue
			}
			got, err := ch.Channel(ctx, o.Site.Name, st.Image)
			if err == nil && st.Revoked != nil {
				// The channel never points at a revoked version: revoke
				// pointed it where a rollback will take the site.
				if want := channelWant(cat[st.Image], sv.revoked[st.Image]); got != want {
					st.Drift = append(st.Drift, Drift{Kind: "channel", Message: fmt.Sprintf("the store's channel of %s for site %s points at %s, not %s, the version before the revoked %s: imagectl rollback %s --site %s sets it",
						st.Image, o.Site.Name, dash(got), dash(want), st.Promoted, st.Image, o.Site.Name)})
				}
				continue
			}
			switch {
			case err != nil:
				return nil, fmt.Errorf("reading %s's channel for site %s: %w", st.Image, o.Site.Name, err)
			case got == "":
				st.Drift = append(st.Drift, Drift{Kind: "channel", Message: fmt.Sprintf("the store has no channel of %s for site %s, the catalog says it runs %s: imagectl promote %s %s --site %s sets it",
					st.Image, o.Site.Name, st.Promoted, st.Image, st.Promoted, o.Site.Name)})
			case got != st.Promoted:
				st.Drift = append(st.Drift, Drift{Kind: "channel", Message: fmt.Sprintf("the store's channel of %s for site %s points at %s, but the catalog says it runs %s: imagectl promote %s %s --site %s sets it",
					st.Image, o.Site.Name, got, st.Promoted, st.Image, st.Promoted, o.Site.Name)})
			}
		}
	}
	for _, p := range sv.profiles {
		if r, ok := sv.revoked[p.Image][p.Version]; ok && p.Version != "" {
			st := get(p.Image)
			st.Drift = append(st.Drift, Drift{Kind: "revoked", Message: fmt.Sprintf("deploy profile %s of admin site %s selects %s, the revoked %s %s (%s)",
				p.ProfileID, p.SiteID, p.DistroSeries, p.Image, p.Version, describeRevocation(r))})
		}
		if !p.Drift {
			continue
		}
		sel := p.DistroSeries
		if p.Version != "" {
			sel = fmt.Sprintf("%s (%s %s)", p.DistroSeries, p.Image, p.Version)
		}
		st := get(p.WantImage)
		st.Drift = append(st.Drift, Drift{Kind: "profile", Message: fmt.Sprintf("deploy profile %s of admin site %s selects %s, not %s (the promoted %s %s): imagectl promote %s %s --site %s sets it",
			p.ProfileID, p.SiteID, sel, p.Want, st.Image, st.Promoted, st.Image, st.Promoted, o.Site.Name)})
	}
	out := &SiteStatus{Site: o.Site.Name, Images: []ImageStatus{}, Profiles: sv.profiles}
	for _, st := range byImage {
		sort.Slice(st.MAAS, func(i, j int) bool { return st.MAAS[i].ID < st.MAAS[j].ID })
		out.Images = append(out.Images, *st)
		out.Drift = out.Drift || len(st.Drift) > 0
	}
	sort.Slice(out.Images, func(i, j int) bool { return out.Images[i].Image < out.Images[j].Image })
	return out, nil
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
