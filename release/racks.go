package release

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/hashstamp"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/racks"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload"
)

// RacksResult is what the racks of a site said of a stored version.
type RacksResult struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	Site    string `json:"site"`
	*racks.Report
}

// RacksError is a racks check that did not pass: a promotion with
// WarmRacks stops before the deploy profiles are pointed. NotYet is set
// when no rack failed but some could not be reached (unknown): not
// proven, rather than broken.
type RacksError struct {
	Site   string
	Report *racks.Report
	NotYet bool
}

func (e *RacksError) Error() string {
	var lines []string
	for _, r := range e.Report.Racks {
		if r.Verdict != racks.Passed {
			lines = append(lines, fmt.Sprintf("%s: %s", r.Verdict, r.Detail))
		}
	}
	what := "not every rack controller of site " + e.Site + " serves " + e.Report.Name
	how := "--override --reason WHY promotes anyway, and the catalog records it"
	if e.NotYet {
		what += " (some could not be reached: unknown, never passed)"
		how = "--allow-unknown-racks, or " + how
	}
	return what + ":\n  " + strings.Join(lines, "\n  ") + "\n" + how
}

// WarmRacks checks that every rack controller of the site serves the
// stored version as MAAS holds it (racks.Check, under o.Racks), and so
// warms their caches. The version must be in the store; its bytes at
// MAAS must be those of its manifest. A report that did not pass is a
// result, not an error: the caller says what its verdict means.
func WarmRacks(ctx context.Context, image, version string, o Options) (*RacksResult, error) {
	v, m, err := stored(ctx, o.Store, image, version)
	if err != nil {
		return nil, err
	}
	if m.Artifact == nil {
		return nil, fmt.Errorf("the store's %s %s has a manifest without its artifact's sha256 and size", image, version)
	}
	t := racks.Target{Name: manifest.VersionedName(m.MAASName(), m.Image.Version), Architecture: o.Site.Architecture,
		SHA256: strings.ToLower(strings.TrimPrefix(m.Artifact.SHA256, digest.Prefix)), Size: m.Artifact.Size}
	rep, err := o.checkRacksWith(ctx, t, localTarball(v))
	if err != nil {
		return nil, err
	}
	res := &RacksResult{Image: image, Version: version, Site: o.Site.Name, Report: rep}
	if err := o.recordRacks(ctx, image, version, "warm-racks", rep); err != nil {
		return res, err
	}
	return res, nil
}

// recordRacks records a racks check's verdicts as the site's rack proofs
// of image version (store.RackProof), what status and predeploy read.
func (o Options) recordRacks(ctx context.Context, image, version, via string, rep *racks.Report) error {
	if rep == nil || len(rep.Racks) == 0 {
		return nil
	}
	by := cmp.Or(o.By, environ.Get(o.Env, "USER"), "unknown")
	ps := make([]store.RackProof, 0, len(rep.Racks))
	for _, r := range rep.Racks {
		ps = append(ps, store.RackProof{Site: o.Site.Name, Image: image, Version: version, Rack: r.Hostname, SystemID: r.SystemID,
			Verdict: string(r.Verdict), Detail: r.Detail, At: r.At, By: by, Via: via})
	}
	if err := o.Store.AddRackProofs(ctx, ps); err != nil {
		return fmt.Errorf("the racks of site %s were checked (%s), but recording it failed: %w", o.Site.Name, rep.Verdict, err)
	}
	return nil
}

// localTgz is a stored version's tgz on this host's disk, open for the
// racks check to compare each rack's stream with (racks.Target.Local:
// hashed once instead of once a rack, or not at all when a check or an
// upload hashed it before and it has not changed since), and for an
// upload to read.
type localTgz struct {
	*os.File
	id     hashstamp.Identity
	opened time.Time
}

// localTarball opens v's tgz when it is on this host's disk and no one
// but its owner (root or this user) can change it: one file, one link,
// written by no group or other. Else nil (an OCI store's blob, a file
// others may write, one that cannot be opened): then each rack's stream
// is hashed instead.
func localTarball(v *store.Version) *localTgz {
	if v == nil || v.Tarball == "" {
		return nil
	}
	opened := time.Now()
	f, err := readlimit.Open(v.Tarball)
	if err != nil {
		return nil
	}
	var st *syscall.Stat_t
	fi, err := f.Stat()
	if err == nil {
		st, _ = fi.Sys().(*syscall.Stat_t)
	}
	if st == nil || st.Nlink != 1 || !hashstamp.OwnerOnly(fi) {
		f.Close()
		return nil
	}
	id, err := hashstamp.Of(f)
	if err != nil {
		f.Close()
		return nil
	}
	return &localTgz{File: f, id: id, opened: opened}
}

// unchanged says whether the tgz is as it was opened: the same file, size,
// modification and change times. A write while the racks were compared
// with it would change them, and the comparison would prove nothing.
func (l *localTgz) unchanged() error {
	id, err := hashstamp.Of(l.File)
	if err == nil && id != l.id {
		err = errors.New("it changed meanwhile")
	}
	if err != nil {
		return fmt.Errorf("the racks were compared with the store's tgz %s, but %w: check them again", l.Name(), err)
	}
	return nil
}

// checkRacksWith runs the racks check of t at the site, its streams
// compared with local when there is one. A check that hashed local and
// found it the version records so in o.Hashed, and a later one that finds
// the record and local unchanged does not hash it again.
func (o Options) checkRacksWith(ctx context.Context, t racks.Target, local *localTgz) (*racks.Report, error) {
	if local == nil {
		return o.checkRacks(ctx, t)
	}
	defer local.Close()
	t.Local = local
	t.LocalHashed = o.Hashed.Holds(t.SHA256, local.id)
	rep, err := o.checkRacks(ctx, t)
	if err == nil {
		err = local.unchanged()
	}
	if err != nil {
		if t.LocalHashed {
			// The record may be what was wrong: the next check hashes.
			err = errors.Join(err, o.Hashed.Forget(t.SHA256))
		}
		return nil, err
	}
	if !t.LocalHashed && o.Hashed != "" {
		// Not recording costs the next check a hash, nothing else.
		_, _ = o.Hashed.Record(t.SHA256, local.id, local.opened)
	}
	return rep, nil
}

// checkRacks runs the racks check at the site.
func (o Options) checkRacks(ctx context.Context, t racks.Target) (*racks.Report, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	ro := o.Racks
	if ro.Now == nil {
		ro.Now = o.Now
	}
	if ro.Port == 0 {
		ro.Port = o.Site.RackPort
	}
	rep, err := racks.Check(ctx, c, t, ro)
	if err != nil {
		return nil, fmt.Errorf("site %s: %w", o.Site.Name, err)
	}
	return rep, nil
}

// wantRacks says whether a promotion checks the racks: WarmRacks, or
// the site's warm_racks unless NoWarmRacks turned it off explicitly.
func (o Options) wantRacks() bool {
	return o.WarmRacks || (o.Site.WarmRacks && !o.NoWarmRacks)
}

// warmRacksAfterUpload is promote's racks step (wantRacks): every rack
// must serve what was uploaded before a deploy profile is pointed at it.
// A failed rack, or an unknown one without AllowUnknownRacks, stops a
// promotion with a RacksError unless Override; then missing says what
// did not pass, for the record. A rollback is never stopped: what did not
// pass (or the check's own error) is in missing, for its warnings.
func (o Options) warmRacksAfterUpload(ctx context.Context, v *store.Version, up *upload.Result, rollback bool) (rep *racks.Report, missing []string, err error) {
	if !o.wantRacks() {
		return nil, nil, nil
	}
	t := racks.Target{Name: up.Name, Architecture: o.Site.Architecture, SHA256: up.SHA256, Size: up.Size}
	rep, err = o.checkRacksWith(ctx, t, localTarball(v))
	if err != nil {
		if rollback {
			return nil, []string{"checking the racks failed: " + err.Error()}, nil
		}
		return nil, nil, err
	}
	for _, r := range rep.Racks {
		if r.Verdict == racks.Failed || (r.Verdict != racks.Passed && (rollback || !o.AllowUnknownRacks)) {
			missing = append(missing, fmt.Sprintf("racks: %s: %s", r.Verdict, r.Detail))
		}
	}
	if rollback || len(missing) == 0 {
		return rep, missing, nil
	}
	if o.Override {
		return rep, missing, nil
	}
	return rep, nil, &RacksError{Site: o.Site.Name, Report: rep, NotYet: rep.Verdict != racks.Failed}
}

// racksCondition is predeploy's racks condition, for a site with
// warm_racks: each rack's latest recorded check (proofs: warm-racks, or a
// promotion or rollback that checked the racks) of the version the site
// runs says it served it. Only a pass is proof: a rack that
// failed never passes, one that was unknown fails it unless
// allowUnknown, and is never called proved.
func racksCondition(proofs []store.RackProof, image, version, site string, allowUnknown bool) Condition {
	cond := Condition{Name: CondRacks}
	warm := fmt.Sprintf("imagectl warm-racks %s %s --site %s", image, version, site)
	if len(proofs) == 0 {
		cond.Detail = fmt.Sprintf("no check of site %s's rack controllers serving %s %s is recorded (site %s has warm_racks = true)", site, image, version, site)
		cond.Fix = warm + " (it records each rack's verdict)"
		return cond
	}
	by := map[string][]string{}
	for _, r := range store.LatestRackProofs(proofs) {
		v := r.Verdict
		if v != string(racks.Passed) && v != string(racks.Unknown) {
			v = string(racks.Failed)
		}
		by[v] = append(by[v], fmt.Sprintf("%s at %s", r.Rack, r.At.UTC().Format(time.RFC3339)))
	}
	var parts []string
	if l := by[string(racks.Passed)]; len(l) > 0 {
		parts = append(parts, "proved they serve it: "+strings.Join(l, ", "))
	}
	if l := by[string(racks.Unknown)]; len(l) > 0 {
		parts = append(parts, "could not be reached (unknown, no proof): "+strings.Join(l, ", "))
	}
	if l := by[string(racks.Failed)]; len(l) > 0 {
		parts = append(parts, "failed: "+strings.Join(l, ", "))
	}
	cond.Detail = "racks " + strings.Join(parts, "; ")
	switch {
	case len(by[string(racks.Failed)]) > 0:
		cond.Fix = warm
	case len(by[string(racks.Unknown)]) > 0 && !allowUnknown:
		cond.Fix = warm + " from a host on the deploy network, or predeploy --allow-unknown-racks to accept them"
	default:
		cond.OK = true
		if len(by[string(racks.Unknown)]) > 0 {
			cond.Note = "some racks are unknown, no proof (allowed by --allow-unknown-racks): " + warm + " from the deploy network proves them"
		}
	}
	return cond
}
