package release_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/hashstamp"
	"github.com/gpuaas/imagectl/racks"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// racksFixture is a fixture whose MAAS (version v) has racks, with a
// deploy profile, and whose promotions check the racks.
func racksFixture(t *testing.T, v string, specs ...maassim.RackSpec) (*fixture, func() string) {
	t.Helper()
	f := newFixtureSim(t, maassim.Options{Version: v, CompleteAfterGets: -1, Racks: specs}, "1.0.0")
	ps := f.withProfile(t, "demo")
	f.opts.WarmRacks = true
	f.opts.Racks = racks.Options{Port: f.sim.RackPort(), PollInterval: time.Millisecond, ImportTimeout: time.Second}
	return f, func() string { return selects(t, ps) }
}

func TestPromoteWarmsRacksBeforeTheProfileIsPointed(t *testing.T) {
	for _, v := range []string{"3.4", "3.7"} {
		t.Run(v, func(t *testing.T) {
			f, selected := racksFixture(t, v, maassim.RackSpec{}, maassim.RackSpec{})
			res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
			if err != nil {
				t.Fatal(err)
			}
			// The store is a directory: each rack's bytes are compared
			// with its tgz.
			if res.Racks == nil || res.Racks.Verdict != racks.Passed || len(res.Racks.Racks) != 2 || selected() != "demo-1-0-0" || !res.Racks.ComparedWithLocalCopy {
				t.Fatalf("racks %+v, profile selects %s", res.Racks, selected())
			}
			for _, rk := range f.sim.Racks() {
				rk.Idle()
				served := rk.Imported("demo-1-0-0", "amd64/generic")
				if v != "3.4" {
					served = rk.Cached(res.Upload.SHA256[:7])
				}
				if !served {
					t.Errorf("rack %s does not hold it after the promotion", rk.Hostname)
				}
			}
			// The same check alone says the same.
			w, err := release.WarmRacks(ctx, "demo", "1.0.0", f.opts)
			if err != nil || w.Verdict != racks.Passed || w.Site != "sim" || !w.ComparedWithLocalCopy {
				t.Fatalf("WarmRacks: %v %+v", err, w)
			}
		})
	}
}

func TestUnknownRackBlocksPromotionUnlessAllowed(t *testing.T) {
	f, selected := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "near"}, maassim.RackSpec{Hostname: "far", State: maassim.RackUnreachable})
	_, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	var re *release.RacksError
	if !errors.As(err, &re) || !re.NotYet || !strings.Contains(err.Error(), "rack far cannot be reached") {
		t.Fatalf("want a not-yet RacksError naming rack far, got %v", err)
	}
	if selected() != "ubuntu/noble" {
		t.Fatalf("the profile was pointed at %s", selected())
	}
	if h, _ := f.store.History(ctx, "sim", "demo"); len(h) != 0 {
		t.Fatalf("recorded: %+v", h)
	}
	f.opts.AllowUnknownRacks = true
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || res.Racks.Verdict != racks.Unknown || selected() != "demo-1-0-0" || res.Promotion == nil {
		t.Fatalf("allowed: %v, %+v, profile %s", err, res, selected())
	}
}

func TestRackServingOtherBytesStopsPromotion(t *testing.T) {
	f, selected := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "stale", State: maassim.RackOtherBytes})
	// The site's setting asks for the check as --warm-racks does; an
	// allowance for unknown racks lets no failed one through.
	f.opts.WarmRacks, f.opts.Site.WarmRacks, f.opts.AllowUnknownRacks = false, true, true
	_, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	var re *release.RacksError
	if !errors.As(err, &re) || re.NotYet || !strings.Contains(err.Error(), "rack stale serves other bytes") ||
		!strings.Contains(err.Error(), "no deploy profile was pointed and nothing is recorded") {
		t.Fatalf("want a RacksError naming rack stale, got %v", err)
	}
	if selected() != "ubuntu/noble" {
		t.Fatalf("the profile was pointed at %s", selected())
	}
}

func TestRolloutReportsASiteWhoseRacksFail(t *testing.T) {
	f, _ := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "lost", State: maassim.RackNoRegion})
	res, err := release.Rollout(ctx, "demo", "1.0.0", release.RolloutOptions{Options: f.opts, Sites: []*sites.Site{f.opts.Site}, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Sites[0].Result != release.RolloutFailed || !strings.Contains(res.Sites[0].Detail, "rack lost answered 502") {
		t.Fatalf("%+v", res.Sites)
	}
}

func TestStatusAndPredeployReportWhenRacksLastProvedIt(t *testing.T) {
	f, _ := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "r1"}, maassim.RackSpec{Hostname: "r2"})
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.opts.Now = func() time.Time { return at }
	// Promoted without the check, at a site that wants it: predeploy says so.
	f.opts.WarmRacks = false
	f.promote(t, "1.0.0")
	f.opts.Site.WarmRacks = true
	pd, err := release.Predeploy(ctx, "", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(pd, release.CondRacks); pd.Ready || c == nil || c.OK || !strings.Contains(c.Fix, "imagectl warm-racks demo 1.0.0 --site sim") {
		t.Fatalf("unchecked promotion: ready %v, %+v", pd.Ready, c)
	}
	// The fix it names is what makes it ready: warm-racks records its
	// verdicts for the version the site runs.
	at = at.Add(time.Hour)
	if w, err := release.WarmRacks(ctx, "demo", "1.0.0", f.opts); err != nil || w.Verdict != racks.Passed {
		t.Fatalf("warm-racks: %v %+v", err, w)
	}
	pd, err = release.Predeploy(ctx, "", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(pd, release.CondRacks); !pd.Ready || c == nil || !c.OK || !strings.Contains(c.Detail, "r2 at 2026-03-01T13:00:00Z") {
		t.Fatalf("after warm-racks: ready %v, %+v", pd.Ready, c)
	}
	// A rack that fails later, in a promotion of the version the site
	// already runs, is recorded too: its latest verdict counts.
	if err := f.sim.Racks()[1].SetState(maassim.RackOtherBytes); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Hour)
	f.opts.WarmRacks, f.opts.Override, f.opts.Reason = true, true, "r2 is being replaced"
	if res, err := release.Promote(ctx, "demo", "1.0.0", f.opts); err != nil || !res.AlreadyCurrent {
		t.Fatalf("already-current promote --warm-racks: %v %+v", err, res)
	}
	pd, err = release.Predeploy(ctx, "", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(pd, release.CondRacks); pd.Ready || c == nil || c.OK || !strings.Contains(c.Detail, "failed: r2 at 2026-03-01T14:00:00Z") {
		t.Fatalf("after the failed check: ready %v, %+v", pd.Ready, c)
	}
	if err := f.sim.Racks()[1].SetState(maassim.RackHealthy); err != nil {
		t.Fatal(err)
	}
	f.opts.WarmRacks, f.opts.Override, f.opts.Reason = false, false, ""
	at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	f.publish(t, "demo", "1.1.0", storetest.Options{Signer: f.signer}, at)
	f.promote(t, "1.1.0")
	st, err := release.Status(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Images) != 1 || len(st.Images[0].Racks) != 2 || st.Images[0].Racks[0].Rack != "r1" ||
		st.Images[0].Racks[0].Verdict != "passed" || !st.Images[0].Racks[1].At.Equal(at) {
		t.Fatalf("status: %+v", st.Images)
	}
	pd, err = release.Predeploy(ctx, "", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(pd, release.CondRacks); !pd.Ready || c == nil || !c.OK || !strings.Contains(c.Detail, "proved they serve it: r1 at 2026-03-01T12:00:00Z, r2 at 2026-03-01T12:00:00Z") {
		t.Fatalf("checked promotion: ready %v, %+v", pd.Ready, c)
	}
}

func condition(pd *release.PredeployResult, name string) *release.Condition {
	for _, img := range pd.Images {
		for _, c := range img.Conditions {
			if c.Name == name {
				return &c
			}
		}
	}
	return nil
}

func TestRollbackIsNeverStoppedByItsRacks(t *testing.T) {
	f, selected := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "near"}, maassim.RackSpec{Hostname: "stale"})
	f.publish(t, "demo", "1.1.0", storetest.Options{Signer: f.signer}, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	f.promote(t, "1.0.0", "1.1.0")
	if err := f.sim.Racks()[1].SetState(maassim.RackOtherBytes); err != nil {
		t.Fatal(err)
	}
	// The site asks for the check; the rollback goes on and warns.
	f.opts.WarmRacks, f.opts.Site.WarmRacks = false, true
	res, err := release.Rollback(ctx, "demo", f.opts)
	if err != nil {
		t.Fatalf("a failed rack stopped the rollback: %v", err)
	}
	if res.Promotion == nil || !res.Promotion.Rollback || selected() != "demo-1-0-0" || res.Racks == nil || res.Racks.Verdict != racks.Failed ||
		len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "rack stale serves other bytes") {
		t.Fatalf("rollback: %+v, warnings %q, profile %s", res.Promotion, res.Warnings, selected())
	}
}

func TestExplicitNoWarmRacksTurnsTheSiteSettingOff(t *testing.T) {
	f, selected := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "far", State: maassim.RackUnreachable})
	f.opts.WarmRacks, f.opts.Site.WarmRacks, f.opts.NoWarmRacks = false, true, true
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || res.Racks != nil || selected() != "demo-1-0-0" {
		t.Fatalf("--warm-racks=false: %v, racks %+v, profile %s", err, res, selected())
	}
}

func TestOverridePromotesPastAFailedRackAndRecordsIt(t *testing.T) {
	f, selected := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "stale", State: maassim.RackOtherBytes})
	f.opts.Override = true
	if _, err := release.Promote(ctx, "demo", "1.0.0", f.opts); !errors.Is(err, release.ErrOverrideReason) {
		t.Fatalf("an override without a reason: %v", err)
	}
	f.opts.Reason = "rack stale is being replaced"
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || selected() != "demo-1-0-0" || res.RacksOverride != f.opts.Reason {
		t.Fatalf("override: %v, %+v, profile %s", err, res, selected())
	}
	h, err := f.store.History(ctx, "sim", "demo")
	if err != nil || len(h) != 1 {
		t.Fatalf("history: %v %+v", err, h)
	}
	g := h[0].Gate
	if g == nil || g.Met || g.Override != f.opts.Reason || len(g.Missing) != 1 || !strings.Contains(g.Missing[0], "rack stale serves other bytes") {
		t.Fatalf("recorded gate: %+v", g)
	}
}

func TestPredeployDoesNotCountUnknownRacksAsProof(t *testing.T) {
	f, _ := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "far", State: maassim.RackUnreachable})
	f.opts.Site.WarmRacks, f.opts.AllowUnknownRacks = true, true
	f.promote(t, "1.0.0")
	f.opts.AllowUnknownRacks = false
	pd, err := release.Predeploy(ctx, "", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	c := condition(pd, release.CondRacks)
	if pd.Ready || c == nil || c.OK || strings.Contains(c.Detail, "proved") || !strings.Contains(c.Detail, "unknown, no proof): far at") ||
		!strings.Contains(c.Fix, "--allow-unknown-racks") {
		t.Fatalf("every rack unknown: ready %v, %+v", pd.Ready, c)
	}
	f.opts.AllowUnknownRacks = true
	pd, err = release.Predeploy(ctx, "", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := condition(pd, release.CondRacks); !pd.Ready || c == nil || !c.OK || !strings.Contains(c.Note, "allowed") {
		t.Fatalf("allowed: ready %v, %+v", pd.Ready, c)
	}
}

func TestRolloutSaysNotYetForUnknownRacks(t *testing.T) {
	f, _ := racksFixture(t, "3.7", maassim.RackSpec{Hostname: "far", State: maassim.RackUnreachable})
	res, err := release.Rollout(ctx, "demo", "1.0.0", release.RolloutOptions{Options: f.opts, Sites: []*sites.Site{f.opts.Site}, Canary: "sim", Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Sites[0]; res.OK() || !res.NotYet() || s.Result != release.RolloutRefused || !strings.Contains(s.Detail, "not yet: ") ||
		!strings.Contains(s.Detail, "rack far cannot be reached") {
		t.Fatalf("%+v", res.Sites)
	}
}

// A racks check that hashed the store's tgz records it (Options.Hashed),
// and the next check of the unchanged tgz compares the racks with it
// without hashing it again; a change to the tgz, or a record that was
// wrong, has the check hash it again.
func TestRacksCheckHashesAnUnchangedTgzOnce(t *testing.T) {
	f, _ := racksFixture(t, "3.7", maassim.RackSpec{}, maassim.RackSpec{})
	f.opts.Hashed = hashstamp.Dir(t.TempDir())
	if _, err := release.Promote(ctx, "demo", "1.0.0", f.opts); err != nil {
		t.Fatal(err)
	}
	v, err := f.store.Version(ctx, "demo", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, before bool) {
		t.Helper()
		w, err := release.WarmRacks(ctx, "demo", "1.0.0", f.opts)
		if err != nil || w.Verdict != racks.Passed || !w.ComparedWithLocalCopy || w.LocalCopyHashedBefore != before {
			t.Fatalf("%s: want hashed before %v: %v %+v", what, before, err, w)
		}
	}
	// A tgz changed less than hashstamp.Settle ago is not recorded: its
	// times may not move at a write in the same tick. (A change of its
	// status alone moves its change time: it is fresh now, however long
	// the promotion took.)
	if err := os.Chmod(v.Tarball, 0o640); err != nil {
		t.Fatal(err)
	}
	check("fresh tgz", false)
	check("fresh tgz, again", false)
	time.Sleep(hashstamp.Settle)
	check("settled tgz", false)
	check("unchanged since", true)
	if err := os.Chmod(v.Tarball, 0o600); err != nil {
		t.Fatal(err)
	}
	check("changed", false)
	time.Sleep(hashstamp.Settle)
	check("changed, settled", false)
	check("unchanged since the change", true)

	// A record that says the tgz is the version when it is not is found
	// out by the racks, which serve the version: an error, the record
	// forgotten, and the next check hashes (and refuses) the tgz.
	b, err := os.ReadFile(v.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(v.Tarball, b, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hashstamp.Settle)
	tgz, err := os.Open(v.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	id, err := hashstamp.Of(tgz)
	tgz.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.opts.Hashed.Record(v.SHA256, id, time.Now()); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	if _, err := release.WarmRacks(ctx, "demo", "1.0.0", f.opts); err == nil || !strings.Contains(err.Error(), "hashed before") {
		t.Fatalf("wrong record: %v", err)
	}
	if f.opts.Hashed.Holds(v.SHA256, id) {
		t.Error("the wrong record was kept")
	}
	if _, err := release.WarmRacks(ctx, "demo", "1.0.0", f.opts); err == nil || !strings.Contains(err.Error(), "cannot stand for the version") {
		t.Fatalf("after the wrong record: %v", err)
	}
}

// A promotion that uploads a settled tgz from a directory store hashes it
// as it reads it, and records so: the racks check that follows compares
// the racks with it without hashing it again.
func TestUploadHashesTheTgzForTheRacksCheck(t *testing.T) {
	f, _ := racksFixture(t, "3.7", maassim.RackSpec{})
	f.opts.Hashed = hashstamp.Dir(t.TempDir())
	v, err := f.store.Version(ctx, "demo", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(v.Tarball, 0o600); err != nil { // its change time: now
		t.Fatal(err)
	}
	time.Sleep(hashstamp.Settle)
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || res.Upload == nil || res.Racks == nil || res.Racks.Verdict != racks.Passed || !res.Racks.LocalCopyHashedBefore {
		t.Fatalf("%v %+v", err, res)
	}
}

// A tgz the check cannot take as the version's local copy (others may
// write it, or it is an OCI store's blob) leaves the racks to be checked
// by their own bytes: compared with each other and hashed once, or each
// hashed (racks.Options.EachHashed).
func TestRacksWithoutALocalCopyAreComparedWithEachOther(t *testing.T) {
	f, _ := racksFixture(t, "3.7", maassim.RackSpec{}, maassim.RackSpec{}, maassim.RackSpec{})
	if _, err := release.Promote(ctx, "demo", "1.0.0", f.opts); err != nil {
		t.Fatal(err)
	}
	v, err := f.store.Version(ctx, "demo", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(v.Tarball, 0o664); err != nil {
		t.Fatal(err)
	}
	for _, each := range []bool{false, true} {
		f.opts.Racks.EachHashed = each
		w, err := release.WarmRacks(ctx, "demo", "1.0.0", f.opts)
		if err != nil || w.Verdict != racks.Passed || w.ComparedWithLocalCopy || w.ComparedWithEachOther == each {
			t.Fatalf("each hashed %v: %v %+v", each, err, w)
		}
		for _, r := range w.Racks {
			if r.SHA256 != v.SHA256 || r.Bytes != v.Size {
				t.Errorf("each hashed %v: rack %s: %+v", each, r.Hostname, r)
			}
		}
	}
}
