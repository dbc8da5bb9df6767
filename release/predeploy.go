package release

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload/maas"
)

// Predeploy conditions, in the order checked.
const (
	// CondPromoted: the catalog says which version the site runs.
	CondPromoted = "promoted"
	// CondProfile: the deploy profile selects that version's boot resource.
	CondProfile = "profile"
	// CondMAAS: MAAS holds the boot resource complete, with the version's
	// sha256.
	CondMAAS = "maas"
	// CondNotRevoked: the version is not revoked.
	CondNotRevoked = "not-revoked"
	// CondPolicy: the site's promotion policy was met when the version was
	// promoted, or overridden (a note says so).
	CondPolicy = "policy"
	// CondRacks, for a site with warm_racks: each rack controller's
	// latest recorded check (store.RackProof) proved it serves the
	// version (racks.go); a rack that
	// could not be reached fails it unless Options.AllowUnknownRacks.
	CondRacks = "racks"
)

// PredeployResult says whether a site may deploy now: Ready only when
// every condition of every image holds.
type PredeployResult struct {
	Site   string           `json:"site"`
	Ready  bool             `json:"ready"`
	Images []PredeployImage `json:"images"`
}

// PredeployImage is the conditions of one image the checked deploy
// profiles follow.
type PredeployImage struct {
	Image string `json:"image"`
	// Version is what the catalog says the site runs ("" when nothing),
	// BootResource the name MAAS holds it under.
	Version      string      `json:"version,omitempty"`
	BootResource string      `json:"boot_resource,omitempty"`
	Conditions   []Condition `json:"conditions"`
}

// Condition is one check of predeploy: OK, or why not and the fix.
type Condition struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Profile names the deploy profile, for the profile condition.
	Profile string `json:"profile,omitempty"`
	Detail  string `json:"detail"`
	// Fix is a command that repairs it (or what to do), when not OK.
	Fix string `json:"fix,omitempty"`
	// Note is what an OK condition still wants said (a policy overridden).
	Note string `json:"note,omitempty"`
}

// Predeploy answers, for the deploy workflow, whether the site may deploy
// now: for the deploy profile named by profileName (its profile_id, or
// SITE_ID/PROFILE_ID; "" for every deploy profile of the site), the
// version the catalog says the site runs of the image it follows is
// selected by the profile, held complete by MAAS with its sha256, not
// revoked, and was promoted with the site's policy met or overridden. It
// reads what that needs and no more: per image one catalog history, one
// boot-resource lookup and the image's revocations, and per profile one
// GET. A read that fails is a failing condition, not an error: the
// answer is "not ready", with why.
func Predeploy(ctx context.Context, profileName string, o Options) (*PredeployResult, error) {
	ps, err := o.profiles("")
	if err != nil {
		return nil, fmt.Errorf("predeploy at site %s: %w", o.Site.Name, err)
	}
	if profileName != "" {
		ps = slices.DeleteFunc(ps, func(p deployProfile) bool {
			return p.ProfileID != profileName && p.SiteID+"/"+p.ProfileID != profileName
		})
		if len(ps) == 0 {
			return nil, fmt.Errorf("predeploy at site %s: no deploy_profile of the site has profile_id %q (or is SITE_ID/PROFILE_ID %q)", o.Site.Name, profileName, profileName)
		}
		if len(ps) > 1 {
			return nil, fmt.Errorf("predeploy at site %s: several deploy profiles have profile_id %q: name one as SITE_ID/PROFILE_ID", o.Site.Name, profileName)
		}
	}
	out := &PredeployResult{Site: o.Site.Name, Images: []PredeployImage{}}
	if len(ps) == 0 {
		out.Images = append(out.Images, PredeployImage{Conditions: []Condition{{Name: CondProfile,
			Detail: fmt.Sprintf("site %s has no deploy_profile in the sites file: nothing says what a deploy selects", o.Site.Name),
			Fix:    "add a deploy_profile block (api_url, site_id, profile_id, token_env, image) to the site in the sites file"}}})
		return out, nil
	}
	var images []string
	byImage := map[string][]deployProfile{}
	for _, p := range ps {
		if byImage[p.Image] == nil {
			images = append(images, p.Image)
		}
		byImage[p.Image] = append(byImage[p.Image], p)
	}
	var c *maas.Client
	for _, image := range images {
		out.Images = append(out.Images, *o.predeployImage(ctx, image, byImage[image], &c))
	}
	out.Ready = true
	for _, img := range out.Images {
		for _, c := range img.Conditions {
			out.Ready = out.Ready && c.OK
		}
	}
	return out, nil
}

// predeployImage checks one image and the profiles that follow it; c is
// the MAAS client, made on first use. What it cannot read is a failing
// condition, with what to do.
func (o Options) predeployImage(ctx context.Context, image string, ps []deployProfile, c **maas.Client) *PredeployImage {
	site := o.Site.Name
	out := &PredeployImage{Image: image}
	add := func(c Condition) { out.Conditions = append(out.Conditions, c) }
	again := fmt.Sprintf("check that the catalog %s answers, then run predeploy again", o.Store.Location())
	h, err := o.Store.History(ctx, site, image)
	if err != nil {
		add(Condition{Name: CondPromoted, Detail: fmt.Sprintf("reading site %s's catalog of %s: %v", site, image, err), Fix: again})
		return out
	}
	cur, _ := store.State(h)
	if cur == "" {
		add(Condition{Name: CondPromoted, Detail: fmt.Sprintf("the catalog records no version of %s at site %s", image, site),
			Fix: fmt.Sprintf("imagectl promote %s VERSION --site %s", image, site)})
		return out
	}
	// The promotion that made cur current: the last one of it.
	var p store.Promotion
	for _, q := range h {
		if q.Version == cur {
			p = q
		}
	}
	out.Version = cur
	promote := fmt.Sprintf("imagectl promote %s %s --site %s", image, cur, site)
	add(Condition{Name: CondPromoted, OK: true, Detail: fmt.Sprintf("the catalog says site %s runs %s %s, promoted by %s", site, image, cur, p.By)})
	name := manifest.BareName(p.DistroSeries)
	if name == "" {
		// Recorded before promotions kept their distro_series: the store's
		// manifest names it.
		var err error
		if name, err = o.storedResourceName(ctx, image, cur); err != nil {
			add(Condition{Name: CondMAAS, Detail: fmt.Sprintf("which boot resource holds %s %s is unknown: %v", image, cur, err),
				Fix: fmt.Sprintf("check that the store %s holds %s %s whole (imagectl check %s %s), then run predeploy again", o.Store.Location(), image, cur, image, cur)})
		}
	}
	if name != "" {
		out.BootResource = name
		for _, dp := range ps {
			add(profileCondition(ctx, dp, name, image, cur, promote))
		}
		add(o.maasCondition(ctx, c, name, image, p, promote))
	}
	revoked, err := revokedVersions(ctx, o.Store, image)
	if err != nil {
		add(Condition{Name: CondNotRevoked, Detail: err.Error(), Fix: again})
	} else if r, ok := revoked[cur]; ok {
		add(Condition{Name: CondNotRevoked, Detail: fmt.Sprintf("%s %s is revoked (%s)", image, cur, describeRevocation(r)),
			Fix: fmt.Sprintf("imagectl rollback %s --site %s", image, site)})
	} else {
		add(Condition{Name: CondNotRevoked, OK: true, Detail: fmt.Sprintf("%s %s is not revoked", image, cur)})
	}
	add(policyCondition(p, image, site))
	if o.Site.WarmRacks {
		proofs, err := o.Store.RackProofs(ctx, site, image, cur)
		if err != nil {
			add(Condition{Name: CondRacks, Detail: fmt.Sprintf("reading the rack proofs of %s %s at site %s: %v", image, cur, site, err), Fix: again})
		} else {
			add(racksCondition(proofs, image, cur, site, o.AllowUnknownRacks))
		}
	}
	return out
}

// storedResourceName is the boot resource name of image version, as the
// store's manifest gives it.
func (o Options) storedResourceName(ctx context.Context, image, version string) (string, error) {
	_, m, err := stored(ctx, o.Store, image, version)
	if err != nil {
		return "", err
	}
	return resourceName(image, version, m), nil
}

// profileCondition is whether the deploy profile selects the boot
// resource name.
func profileCondition(ctx context.Context, dp deployProfile, name, image, cur, promote string) Condition {
	cond := Condition{Name: CondProfile, Profile: dp.SiteID + "/" + dp.ProfileID}
	got, err := dp.c.Get(ctx)
	switch {
	case err != nil:
		cond.Detail = fmt.Sprintf("reading %s: %v", dp, err)
		cond.Fix = fmt.Sprintf("check the admin API and the token in %s, then run predeploy again", dp.TokenSource())
	case manifest.SameName(got.DistroSeries, name):
		cond.OK, cond.Detail = true, fmt.Sprintf("%s selects %s", dp, got.DistroSeries)
	default:
		cond.Detail = fmt.Sprintf("%s selects %s, not %s (%s %s)", dp, got.DistroSeries, name, image, cur)
		cond.Fix = promote
	}
	return cond
}

// maasCondition is whether the site's MAAS holds the boot resource name
// complete with the promotion's sha256; c is the MAAS client, made on
// first use.
func (o Options) maasCondition(ctx context.Context, c **maas.Client, name, image string, p store.Promotion, promote string) Condition {
	site, cur := o.Site.Name, p.Version
	cond := Condition{Name: CondMAAS}
	if *c == nil {
		cl, err := o.client()
		if err != nil {
			cond.Detail = fmt.Sprintf("connecting to site %s's MAAS: %v", site, err)
			cond.Fix = "check the site's maas_url and its API key (api_key_env) in the sites file and the environment, then run predeploy again"
			return cond
		}
		*c = cl
	}
	res, err := (*c).Find(ctx, name, o.Site.Architecture)
	var f *maas.File
	if res != nil {
		f = res.File()
	}
	switch {
	case err != nil:
		cond.Detail = fmt.Sprintf("looking %s up in site %s's MAAS: %v", name, site, err)
		cond.Fix = "check that MAAS answers (imagectl status --site " + site + "), then run predeploy again"
	case f == nil:
		cond.Detail = fmt.Sprintf("site %s's MAAS holds no boot resource %s (%s)", site, name, o.Site.Architecture)
		cond.Fix = promote + " (it uploads it again)"
	case p.SHA256 != "" && !strings.EqualFold(f.SHA256, p.SHA256):
		cond.Detail = fmt.Sprintf("site %s's MAAS holds %s (boot resource %d) with sha256 %s, but the promoted %s %s is %s", site, name, res.ID, f.SHA256, image, cur, p.SHA256)
		cond.Fix = fmt.Sprintf("delete boot resource %d in MAAS, then %s", res.ID, promote)
	case !f.Complete:
		cond.Detail = fmt.Sprintf("site %s's MAAS holds %s (boot resource %d) but not complete: its upload did not finish, or not every region has the file yet", site, name, res.ID)
		cond.Fix = "wait for MAAS to finish syncing it (imagectl status --site " + site + " shows it), or " + promote + " to upload it again"
	default:
		cond.OK, cond.Detail = true, fmt.Sprintf("site %s's MAAS holds %s complete (boot resource %d)", site, name, res.ID)
	}
	return cond
}

// policyCondition reads the promotion's gate.
func policyCondition(p store.Promotion, image, site string) Condition {
	cond := Condition{Name: CondPolicy}
	g := p.Gate
	switch {
	case g == nil && p.Rollback:
		cond.OK, cond.Detail = true, fmt.Sprintf("%s %s came back by a rollback, which the policy always allows", image, p.Version)
	case g == nil:
		cond.OK, cond.Detail = true, fmt.Sprintf("site %s had no promotion policy when %s %s was promoted", site, image, p.Version)
	case g.Met:
		cond.OK, cond.Detail = true, fmt.Sprintf("the policy of site %s was met when %s %s was promoted", site, image, p.Version)
	case g.Override != "":
		cond.OK, cond.Detail = true, fmt.Sprintf("the policy of site %s was not met when %s %s was promoted, and was overridden", site, image, p.Version)
		cond.Note = fmt.Sprintf("overridden by %s at %s: %s; missing: %s", p.By, p.At.UTC().Format("2006-01-02T15:04:05Z07:00"), g.Override, strings.Join(g.Missing, "; "))
	default:
		cond.Detail = fmt.Sprintf("the promotion of %s %s at site %s was recorded with its policy not met and no override: missing %s", image, p.Version, site, strings.Join(g.Missing, "; "))
		cond.Fix = fmt.Sprintf("imagectl promote %s %s --site %s once the policy is met", image, p.Version, site)
	}
	return cond
}
