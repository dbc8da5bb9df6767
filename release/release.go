package release

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/hashstamp"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/profile"
	"github.com/gpuaas/imagectl/racks"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload"
	"github.com/gpuaas/imagectl/upload/maas"
)

// ErrNoVerifyKey is returned when neither a verifier nor
// InsecureSkipVerify is given: nothing unverified reaches a site by default.
var ErrNoVerifyKey = sites.ErrNoVerifyKey

// Options are what every operation on a site needs.
type Options struct {
	Store store.Store
	Site  *sites.Site
	// Env supplies the site's API key (KEY=value pairs).
	Env []string
	// Verifier checks the tgz's and manifest's signatures before anything
	// is sent or recorded; nil is refused unless InsecureSkipVerify.
	Verifier           *signing.Verifier
	InsecureSkipVerify bool
	// BaseImage overrides the manifest's maas.base_image.
	BaseImage string
	// By and Reason are recorded with a promotion; By is $USER of Env when
	// empty.
	By, Reason string
	// Now is the clock for promotions and their policy; time.Now when nil.
	Now func() time.Time
	// Override promotes although the site's policy is not met, recording
	// Reason (required) and what was missing with the promotion.
	Override bool
	// Events receives upload progress; may be nil.
	Events func(event.Event)
	// Configure adjusts the MAAS client configuration (tests shorten waits).
	Configure func(*maas.Config)
	// ConfigureProfile adjusts each admin API client configuration (tests
	// shorten waits).
	ConfigureProfile func(*profile.Config)
	// WarmRacks has a promotion (or rollback) check that every rack
	// controller of the site serves the version, warming their caches,
	// after MAAS holds it complete and before the deploy profiles are
	// pointed (racks.go); the site's warm_racks does the same, unless
	// NoWarmRacks (an explicit --warm-racks=false). AllowUnknownRacks
	// lets racks this host cannot reach through; a rack that fails stops
	// a promotion unless Override (with Reason, recorded in its Gate). A
	// rollback is never stopped by its racks: it reports them in its
	// Warnings. Racks adjusts the check.
	WarmRacks, NoWarmRacks, AllowUnknownRacks bool
	Racks                                     racks.Options
	// Hashed is where the racks check, and an upload of a directory
	// store's tgz, record the tgzs they hashed (internal/hashstamp), so
	// that a later racks check of an unchanged tgz compares the racks with
	// it without hashing it again; "" records and trusts nothing.
	Hashed hashstamp.Dir
}

// Result is what a promotion, rollback or upload did.
type Result struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	Site    string `json:"site"`
	// Promotion is what was recorded; nil when the version was already
	// the site's (nothing is recorded then) or for an upload.
	Promotion *store.Promotion `json:"promotion,omitempty"`
	// AlreadyCurrent is set when the site already ran the version.
	AlreadyCurrent bool `json:"already_current,omitempty"`
	// Upload is what the upload did (Skipped when MAAS held the image).
	Upload *upload.Result `json:"upload"`
	// DistroSeries is what a MAAS deploy selects the version with
	// (custom/<name>).
	DistroSeries string `json:"distro_series"`
	// ProfileDistroSeries is what a GPUaaS deploy profile selects it with:
	// the boot resource's visible name, without custom/, which the
	// execution client adds (runbook 001).
	ProfileDistroSeries string `json:"profile_distro_series,omitempty"`
	// Profiles is what each deploy profile of the site that follows the
	// image got; ProfilePatch, when none does, the PATCH an operator must
	// make instead.
	Profiles     []ProfileResult  `json:"deploy_profiles,omitempty"`
	ProfilePatch *profile.Request `json:"profile_patch,omitempty"`
	Verified     bool             `json:"verified"`
	// Channel is the version the store's channel for the site points at
	// after the promotion, when the store has channels (an OCI store's
	// IMAGE:site-SITE tag).
	Channel string `json:"channel,omitempty"`
	// Policy is what the site's promotion policy said before the
	// promotion (met, or overridden); nil when the site has none, for a
	// rollback, and when the site already ran the version.
	Policy *Verdict `json:"policy,omitempty"`
	// SkippedRevoked are the revoked versions a rollback skipped, from the
	// newest: it returned to the version before them.
	SkippedRevoked []string `json:"skipped_revoked,omitempty"`
	// Racks is what the site's rack controllers said, when the
	// promotion checked them (WarmRacks).
	Racks *racks.Report `json:"racks,omitempty"`
	// RacksOverride is the reason a promotion went on although not every
	// rack passed (Override); the promotion's Gate records it with the
	// racks that did not pass.
	RacksOverride string `json:"racks_override,omitempty"`
	// Warnings are what went wrong that did not stop it: the channel
	// could not be pointed at the recorded version (the catalog is the
	// source of truth, so the promotion stands), or a rollback's racks did
	// not all pass (a rollback is never gated).
	Warnings []string `json:"warnings,omitempty"`
}

// Promote makes version the image's version at the site: it must be in
// the store, verify, and have no deployability error; it is uploaded to
// the site's MAAS when MAAS lacks it, and MAAS must hold it complete; then
// the site's deploy profiles that follow the image are set to select it
// (see promote), and the promotion is recorded. A revoked version is
// refused (a *RevokedError), even the one the site runs. Before any of
// it, the site's promotion policies (sites.Site.Policies) must be met
// (Evaluate), or o.Override given with o.Reason: a refusal is a
// *PolicyError, and the verdict is recorded with the promotion
// (store.Promotion.Gate).
func Promote(ctx context.Context, image, version string, o Options) (*Result, error) {
	h, err := o.Store.History(ctx, o.Site.Name, image)
	if err != nil {
		return nil, err
	}
	revoked, err := revokedVersions(ctx, o.Store, image)
	if err != nil {
		return nil, fmt.Errorf("promoting %s %s at site %s: %w", image, version, o.Site.Name, err)
	}
	if err := refuseRevoked(revoked, version); err != nil {
		return nil, fmt.Errorf("promoting %s %s at site %s: %w", image, version, o.Site.Name, err)
	}
	return promote(ctx, image, version, h, false, o)
}

// Rollback returns the image at the site to the version before the
// current one (see store.State), skipping revoked versions to the one
// before them, with the same checks as Promote but the policy's (a
// rollback is the safety valve, never gated), and points the deploy
// profiles back at it.
func Rollback(ctx context.Context, image string, o Options) (*Result, error) {
	h, err := o.Store.History(ctx, o.Site.Name, image)
	if err != nil {
		return nil, err
	}
	stack := store.Stack(h)
	if len(stack) == 0 {
		return nil, fmt.Errorf("rolling back %s at site %s: it was never promoted there", image, o.Site.Name)
	}
	cur := stack[len(stack)-1]
	if len(stack) == 1 {
		return nil, fmt.Errorf("rolling back %s at site %s: %s is the first version promoted there, there is nothing before it", image, o.Site.Name, cur)
	}
	revoked, err := revokedVersions(ctx, o.Store, image)
	if err != nil {
		return nil, fmt.Errorf("rolling back %s at site %s: %w", image, o.Site.Name, err)
	}
	back, skipped := rollbackTarget(stack, revoked)
	if back == "" {
		return nil, fmt.Errorf("rolling back %s at site %s: every version it ran before %s is revoked (%s): promote one that is not",
			image, o.Site.Name, cur, strings.Join(skipped, ", "))
	}
	res, err := promote(ctx, image, back, h, true, o)
	if res != nil {
		res.SkippedRevoked = skipped
	}
	return res, err
}

// promote uploads, then sets the deploy profiles, then records. The
// profiles come before the record so that a failure leaves the catalog
// saying what the profiles still select, and the same command run again
// finishes the job: a promote or rollback whose PATCH failed recorded
// nothing, so it is the same promotion again (and sends the same
// idempotency key); one whose record failed finds the profiles already set
// and records. Recording first would leave a failed rollback recorded, and
// running rollback again would go one more version back.
//
// A promotion of the version the site already runs records nothing but
// points profiles that drifted back at it. With no deploy profile for the
// image in sites.hcl, the result carries the PATCH an operator must make.
func promote(ctx context.Context, image, version string, h []store.Promotion, rollback bool, o Options) (*Result, error) {
	doing := "promoting"
	if rollback {
		doing = "rolling back to"
	}
	cur, _ := store.State(h)
	verdict, err := o.checkPolicy(ctx, image, version, rollback || cur == version)
	if err != nil {
		return nil, err
	}
	ps, err := o.profiles(image)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s at site %s: %w", doing, image, version, o.Site.Name, err)
	}
	res, v, err := uploadStored(ctx, image, version, o)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s at site %s: %w", doing, image, version, o.Site.Name, err)
	}
	value := res.Upload.Name
	res.ProfileDistroSeries = value
	res.Policy = verdict
	var racksMissing []string
	res.Racks, racksMissing, err = o.warmRacksAfterUpload(ctx, v, res.Upload, rollback)
	via := "promote"
	if rollback {
		via = "rollback"
	}
	if rerr := o.recordRacks(ctx, image, version, via, res.Racks); rerr != nil {
		res.Warnings = append(res.Warnings, rerr.Error())
	}
	if err != nil {
		return res, fmt.Errorf("%s %s %s at site %s: MAAS holds it complete as %s, but %w\nno deploy profile was pointed and nothing is recorded: run the same command again once that is fixed",
			doing, image, version, o.Site.Name, value, err)
	}
	now := o.now
	// The promotion's place in the history: a new one's, or the one that
	// made the current version current.
	n := len(h)
	key := func(p deployProfile) string { return promotionKey(p.SiteID, p.ProfileID, value, o.Site.Name, image, n) }
	if cur == version {
		res.AlreadyCurrent = true
		n = len(h) - 1
		at := now()
		key = func(p deployProfile) string {
			return repairKey(p.SiteID, p.ProfileID, value, o.Site.Name, image, n, at)
		}
	}
	if len(ps) == 0 {
		// An operator runs the printed request by hand, perhaps for several
		// profiles and perhaps again later: its key is new each time it is
		// printed (the runbook's $(date +%s)), and Manual adds the profile.
		res.ProfilePatch = profile.Manual("", "", "", value, repairKey("", "", value, o.Site.Name, image, n, now()))
	}
	res.Profiles, err = setProfiles(ctx, ps, value, key)
	if err != nil {
		if moved := switchedProfiles(res.Profiles); moved != "" {
			err = fmt.Errorf("%w (already pointed at %s: %s)", err, value, moved)
		}
		if res.AlreadyCurrent {
			return res, fmt.Errorf("site %s already runs %s %s, but its deploy profile does not select it, and %w", o.Site.Name, image, version, err)
		}
		return res, fmt.Errorf("%s %s %s at site %s: MAAS holds it complete as %s, but %w\nnothing is recorded: run the same command again once that is fixed",
			doing, image, version, o.Site.Name, value, err)
	}
	if rollback && len(racksMissing) > 0 {
		res.Warnings = append(res.Warnings, "not every rack controller of site "+o.Site.Name+" serves "+value+
			" (a rollback goes on regardless): "+strings.Join(racksMissing, "; "))
	}
	if res.AlreadyCurrent {
		o.followChannel(ctx, image, version, res)
		return res, nil
	}
	gate := verdict.Gate(o.Reason)
	if !rollback && len(racksMissing) > 0 {
		// Overridden: recorded as a gate that was not met.
		if gate == nil {
			gate = &store.Gate{}
		}
		gate.Met, gate.Override = false, o.Reason
		gate.Missing = append(gate.Missing, racksMissing...)
		res.RacksOverride = o.Reason
	}
	by := cmp.Or(o.By, environ.Get(o.Env, "USER"), "unknown")
	p := store.Promotion{Image: image, Version: version, Previous: cur, By: by, At: now().UTC(), Reason: o.Reason,
		Rollback: rollback, SHA256: res.Upload.SHA256, DistroSeries: res.DistroSeries, Gate: gate}
	if err := o.Store.Record(ctx, o.Site.Name, p); err != nil {
		if errors.Is(err, store.ErrRevoked) && len(ps) > 0 {
			// Revoked while it was uploaded: not to be recorded, however
			// often the command runs.
			back := "a version that is not revoked"
			if cur != "" {
				back = cur + " (what the catalog says it runs)"
			}
			return res, fmt.Errorf("%s %s %s at site %s: the deploy profiles select %s, but %w\nnothing is recorded: promote %s at the site to point them back",
				doing, image, version, o.Site.Name, value, err, back)
		}
		if len(ps) > 0 {
			return res, fmt.Errorf("%s %s %s at site %s: the deploy profiles select %s, but recording the promotion failed: %w\nrun the same command again to record it",
				doing, image, version, o.Site.Name, value, err)
		}
		return res, err
	}
	res.Promotion = &p
	o.followChannel(ctx, image, version, res)
	return res, nil
}

// now is o.Now, else time.Now.
func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// followChannel points the image's channel for the site at version, when
// the store has channels and it points elsewhere; a failure is a warning
// of the result, since the catalog already says what the site runs (the
// same command run again retries it).
func (o Options) followChannel(ctx context.Context, image, version string, res *Result) {
	ch, ok := store.ChannelsOf(o.Store)
	if !ok {
		return
	}
	// A revocation that landed since the promotion was recorded: the
	// channel never points at a revoked version (revoke sets it right).
	if revoked, err := revokedVersions(ctx, o.Store, image); err != nil || revoked[version].Version != "" {
		why := fmt.Sprintf("%s %s was revoked after the promotion was recorded", image, version)
		if err != nil {
			why = fmt.Sprintf("checking that %s %s is not revoked failed: %v", image, version, err)
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("the catalog records %s %s at site %s, but its channel was not pointed at it: %s (imagectl status --site %s shows what to fix)",
			image, version, o.Site.Name, why, o.Site.Name))
		res.Channel, _ = ch.Channel(ctx, o.Site.Name, image)
		return
	}
	cur, err := ch.Channel(ctx, o.Site.Name, image)
	if err == nil && cur == version {
		res.Channel = cur
		return
	}
	if err := ch.SetChannel(ctx, o.Site.Name, image, version); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the catalog records %s %s at site %s, but pointing its channel at it failed: %v (run the same command again to retry)",
			image, version, o.Site.Name, err))
		res.Channel = cur
		return
	}
	res.Channel = version
}

// stored is a version of the store with its manifest; the version is nil
// when the store could not give it.
func stored(ctx context.Context, st store.Versions, image, version string) (*store.Version, *manifest.Manifest, error) {
	v, err := st.Version(ctx, image, version)
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Read(v.Manifest)
	if err != nil {
		return v, nil, fmt.Errorf("reading %s %s's manifest: %w", image, version, err)
	}
	return v, m, nil
}

// Upload checks a stored version (deployability findings, then its size,
// sha256 and signatures) and uploads it to the site's MAAS unless MAAS
// already holds it. Nothing is sent when a check fails.
func Upload(ctx context.Context, image, version string, o Options) (*Result, error) {
	res, _, err := uploadStored(ctx, image, version, o)
	return res, err
}

// uploadStored is Upload, which also returns the stored version.
func uploadStored(ctx context.Context, image, version string, o Options) (*Result, *store.Version, error) {
	v, m, err := stored(ctx, o.Store, image, version)
	if err != nil {
		return nil, nil, err
	}
	// The signatures prove who built the artifact, not which version it
	// is: a validly signed old build filed under another version would
	// otherwise reach MAAS under the old name while the catalog records
	// the new one.
	if m.Image.Name != image || m.Image.Version != version {
		return nil, nil, fmt.Errorf("the store's %s %s holds the manifest of %s %s: refusing it", image, version, m.Image.Name, m.Image.Version)
	}
	if errs := m.DeployErrors(); len(errs) > 0 {
		var msgs []string
		for _, f := range errs {
			msgs = append(msgs, fmt.Sprintf("%s: %s", f.Check, f.Message))
		}
		return nil, nil, fmt.Errorf("%s %s failed its deployability check (imagectl check says why and how to fix it):\n  %s",
			image, version, strings.Join(msgs, "\n  "))
	}
	// The tgz streams from the store, its reads checked against the
	// version's sha256: the signatures are verified against that digest
	// rather than by hashing it first, which a remote tgz could not be.
	if err := o.mayUpload(); err != nil {
		return nil, nil, err
	}
	var content io.ReaderAt
	var checked *digest.CheckedReaderAt
	local := localTarball(v)
	if local != nil {
		// A tgz on this disk only its owner can change: an upload that
		// reads it whole hashes it, which the racks check that follows
		// need not do again (checkRacksWith).
		defer local.Close()
		if checked, err = digest.NewCheckedReaderAt(local.File, v.Size, v.SHA256); err != nil {
			return nil, nil, err
		}
		content = checked
	} else {
		blob, err := v.OpenTarball(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer blob.Close()
		content = blob
	}
	up, err := o.verifyThenUpload(ctx, tarballPath(v), upload.Options{Manifest: v.Manifest,
		Content: &upload.Content{R: content, SHA256: v.SHA256, Size: v.Size}})
	if err != nil {
		return nil, nil, err
	}
	if checked != nil && checked.Verified() && o.Hashed != "" && local.unchanged() == nil {
		// Not recording costs the racks check a hash, nothing else.
		_, _ = o.Hashed.Record(v.SHA256, local.id, local.opened)
	}
	return &Result{Image: image, Version: version, Site: o.Site.Name, Upload: up, DistroSeries: up.DistroSeries,
		Verified: o.Verifier != nil}, v, nil
}

// FileOptions adjust UploadFile.
type FileOptions struct {
	// Manifest is the tgz's build manifest; default the .manifest.json
	// beside it.
	Manifest string
	// Name is the MAAS name the versioned name derives from; default the
	// manifest's maas.name.
	Name string
}

// UploadFile checks a built tgz on the local disk (its size and sha256
// against its manifest, then its signatures) and uploads it to the site's
// MAAS unless MAAS already holds it. Nothing is sent when a check fails.
// The result names no image or version: the manifest does.
func UploadFile(ctx context.Context, tgz string, o Options, fo FileOptions) (*Result, error) {
	up, err := o.verifyThenUpload(ctx, tgz, upload.Options{Manifest: fo.Manifest, Name: fo.Name})
	if err != nil {
		return nil, err
	}
	return &Result{Site: o.Site.Name, Upload: up, DistroSeries: up.DistroSeries, Verified: o.Verifier != nil}, nil
}

// verifyThenUpload is the one rule for what reaches a site: nothing
// without a verifier unless o.InsecureSkipVerify, and with one, the tgz's
// and the manifest's signatures must verify (after the tgz matched its
// manifest, before MAAS is contacted). A tgz streamed from a store
// (uo.Content) is verified against its digest, a local one by its file.
func (o Options) verifyThenUpload(ctx context.Context, tgz string, uo upload.Options) (*upload.Result, error) {
	if err := o.mayUpload(); err != nil {
		return nil, err
	}
	uo.Verify = func(ctx context.Context, tgz, manifestPath string) error {
		if o.Verifier == nil {
			return nil
		}
		var r *signing.Report
		var err error
		if c := uo.Content; c != nil {
			r, err = signing.VerifyArtifactDigest(ctx, o.Verifier, tgz, c.SHA256, c.Size, manifestPath)
		} else {
			r, err = signing.VerifyArtifact(ctx, o.Verifier, tgz, manifestPath)
		}
		if err != nil {
			return err
		}
		return r.Err()
	}
	uo.BaseImage, uo.Events, uo.Configure = o.BaseImage, o.Events, o.Configure
	return upload.Artifact(ctx, o.Site, o.Env, tgz, uo)
}

// mayUpload refuses an upload without a verifier, unless
// o.InsecureSkipVerify: nothing unverified reaches a site by default.
func (o Options) mayUpload() error {
	if o.Verifier == nil && !o.InsecureSkipVerify {
		return ErrNoVerifyKey
	}
	return nil
}

// tarballPath is where the version's tgz is, or would be, on the local
// disk: its signatures are beside it, whether or not it is fetched.
func tarballPath(v *store.Version) string {
	if v.Tarball != "" {
		return v.Tarball
	}
	for _, f := range v.Files {
		if f.Role == store.RoleTarball {
			return filepath.Join(v.Dir, f.Name)
		}
	}
	return filepath.Join(v.Dir, manifest.FilesFor(v.Image, v.Version).Tarball)
}

// client is the site's MAAS client.
func (o Options) client() (*maas.Client, error) {
	cfg, err := maas.ConfigFor(o.Site, o.Env)
	if err != nil {
		return nil, err
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	return maas.New(cfg)
}
