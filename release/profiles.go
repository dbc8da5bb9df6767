package release

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/profile"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
)

// ProfileResult is what a promotion did to one deploy profile.
type ProfileResult struct {
	SiteID    string `json:"site_id"`
	ProfileID string `json:"profile_id"`
	URL       string `json:"url"`
	// Previous is what the profile held before; DistroSeries what it
	// holds now (when Outcome is set).
	Previous     string `json:"previous"`
	DistroSeries string `json:"distro_series"`
	// Outcome is unchanged (it held the value, nothing was sent), patched,
	// or confirmed (a PATCH got no answer and reading the profile back
	// showed the value); empty when setting it failed.
	Outcome        profile.Outcome `json:"outcome,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	Attempts       int             `json:"attempts"`
}

// deployProfile is a deploy profile of the site with its client.
type deployProfile struct {
	*sites.DeployProfile
	c *profile.Client
}

// profiles returns the site's deploy profiles that follow image ("" for
// all of them) with their clients. Tokens are read here, before anything
// is sent anywhere.
func (o Options) profiles(image string) ([]deployProfile, error) {
	var out []deployProfile
	for _, p := range o.Site.Profiles {
		if image != "" && !p.Follows(image) {
			continue
		}
		cfg, err := profile.ConfigFor(p, o.Env)
		if err != nil {
			return nil, err
		}
		if o.ConfigureProfile != nil {
			o.ConfigureProfile(&cfg)
		}
		c, err := profile.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("site %q: %s: %w", o.Site.Name, p, err)
		}
		out = append(out, deployProfile{p, c})
	}
	return out, nil
}

// promotionKey is the X-Idempotency-Key of the PATCH that makes a
// promotion's value a profile's: the admin site and profile, the value,
// and the promotion, which is the imagectl site, the image and the
// promotion's place in the site's history of the image. A re-run of a
// promotion that failed before it was recorded has the same place, so it
// sends the same key and the server can recognise the request; the next
// promotion, even of the same version, has another place and another key.
func promotionKey(site, profileID, value, imagectlSite, image string, n int) string {
	return profile.Key(site, profileID, value, "promotion", imagectlSite, image, strconv.Itoa(n))
}

// repairKey is the key of a PATCH that points a profile back at the
// version the site already runs. Each repair is a new change (someone may
// set the profile to the same wrong value twice), so the key has the time
// of the run in it; a repair sent twice is harmless, as it sets the same
// value, and Set reads the profile before it sends anything.
func repairKey(site, profileID, value, imagectlSite, image string, n int, now time.Time) string {
	return profile.Key(site, profileID, value, "repair", imagectlSite, image, strconv.Itoa(n), now.UTC().Format(time.RFC3339Nano))
}

// setProfiles makes each profile select value, in order, stopping at the
// first failure. key gives each profile's idempotency key.
// switchedProfiles names the profiles a partial setProfiles changed.
func switchedProfiles(rs []ProfileResult) string {
	var moved []string
	for _, r := range rs {
		if r.Outcome == profile.Patched || r.Outcome == profile.Confirmed {
			moved = append(moved, fmt.Sprintf("profile %s of admin site %s", r.ProfileID, r.SiteID))
		}
	}
	return strings.Join(moved, ", ")
}

func setProfiles(ctx context.Context, ps []deployProfile, value string, key func(deployProfile) string) ([]ProfileResult, error) {
	out := []ProfileResult{}
	for _, p := range ps {
		r := ProfileResult{SiteID: p.SiteID, ProfileID: p.ProfileID, URL: p.c.URL(), DistroSeries: value, IdempotencyKey: key(p)}
		sr, err := p.c.Set(ctx, value, r.IdempotencyKey)
		if sr != nil {
			r.Previous, r.Outcome, r.Attempts = sr.Previous, sr.Outcome, sr.Attempts
		}
		if err != nil {
			r.Outcome = ""
			out = append(out, r)
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ProfileStatus is what a deploy profile of the site selects, against
// what the site's catalog says it should.
type ProfileStatus struct {
	SiteID    string `json:"site_id"`
	ProfileID string `json:"profile_id"`
	URL       string `json:"url"`
	// Follows is the image whose promotions the profile follows.
	Follows string `json:"follows,omitempty"`
	// DistroSeries is what the profile holds; Image and Version the store
	// version that selects, when it is one.
	DistroSeries string `json:"distro_series"`
	Image        string `json:"image,omitempty"`
	Version      string `json:"version,omitempty"`
	// Want is what it should hold: the boot-resource name of the version
	// the catalog says the site runs (empty when nothing it follows was
	// promoted), of WantImage.
	Want      string `json:"want,omitempty"`
	WantImage string `json:"want_image,omitempty"`
	Drift     bool   `json:"drift"`
}

// readProfiles reads what every deploy profile of the site holds and
// what it should hold by the catalog.
func readProfiles(ctx context.Context, o Options, k *known, cat map[string][]store.Promotion) ([]ProfileStatus, error) {
	ps, err := o.profiles("")
	if err != nil {
		return nil, err
	}
	out := []ProfileStatus{}
	for _, p := range ps {
		got, err := p.c.Get(ctx)
		if err != nil {
			return nil, err
		}
		st := ProfileStatus{SiteID: p.SiteID, ProfileID: p.ProfileID, URL: p.c.URL(), Follows: p.Image, DistroSeries: got.DistroSeries}
		if img, v := k.attribute(manifest.BareName(got.DistroSeries)); v != nil {
			st.Image, st.Version = img, v.Version
		}
		st.WantImage = p.Image
		if cur, _ := store.State(cat[st.WantImage]); cur != "" {
			st.Want = k.names[st.WantImage+"\x00"+cur]
			if st.Want == "" {
				st.Want = resourceName(st.WantImage, cur, nil)
			}
			st.Drift = !manifest.SameName(st.DistroSeries, st.Want)
		}
		out = append(out, st)
	}
	return out, nil
}
