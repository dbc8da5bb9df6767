package release_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/profile/profilesim"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// failing lists a predeploy's failing conditions as name(profile): fix.
func failing(r *release.PredeployResult) string {
	var out []string
	for _, img := range r.Images {
		for _, c := range img.Conditions {
			if !c.OK {
				out = append(out, fmt.Sprintf("%s: %s => %s", c.Name, c.Detail, c.Fix))
			}
		}
	}
	return strings.Join(out, "\n")
}

// promoted is a fixture whose site runs demo 1.0.0 with a deploy profile
// selecting it: the consistent state.
func promoted(t *testing.T) (*fixture, *profilesim.Server) {
	t.Helper()
	f := newFixture(t, "1.0.0", "1.1.0")
	ps := f.withProfile(t, "demo")
	if _, err := release.Promote(ctx, "demo", "1.0.0", f.opts); err != nil {
		t.Fatal(err)
	}
	return f, ps
}

func predeploy(t *testing.T, f *fixture, profile string) *release.PredeployResult {
	t.Helper()
	r, err := release.Predeploy(ctx, profile, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The consistent state is ready, and predeploy reads no more than one
// boot-resource lookup (MAAS's list and one resource) and one profile GET.
func TestPredeployReady(t *testing.T) {
	f, ps := promoted(t)
	lists, gets, pgets := f.sim.Count(maassim.OpList), f.sim.Count(maassim.OpGet), ps.Count(profilesim.OpGet)
	for _, name := range []string{"", "bm", "7/bm"} {
		r := predeploy(t, f, name)
		if !r.Ready || len(r.Images) != 1 || r.Images[0].Version != "1.0.0" || r.Images[0].BootResource != "demo-1-0-0" || len(r.Images[0].Conditions) != 5 {
			t.Fatalf("predeploy --profile %q: %+v\n%s", name, r, failing(r))
		}
	}
	if l, g, p := f.sim.Count(maassim.OpList)-lists, f.sim.Count(maassim.OpGet)-gets, ps.Count(profilesim.OpGet)-pgets; l != 3 || g != 3 || p != 3 {
		t.Errorf("three predeploys made %d lists, %d resource GETs and %d profile GETs, want 3 of each", l, g, p)
	}
	if _, err := release.Predeploy(ctx, "nope", f.opts); err == nil || !strings.Contains(err.Error(), `no deploy_profile of the site has profile_id "nope"`) {
		t.Errorf("an unknown profile: %v", err)
	}
}

// Each broken condition fails predeploy, named with its fix.
func TestPredeployBroken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, f *fixture, ps *profilesim.Server)
		want   string
	}{
		{"profile elsewhere", func(t *testing.T, f *fixture, ps *profilesim.Server) { ps.SetProfile("7", "bm", "demo-1-1-0") },
			"profile: deploy profile bm of admin site 7 selects demo-1-1-0, not demo-1-0-0 (demo 1.0.0) => imagectl promote demo 1.0.0 --site sim"},
		{"profile unreadable", func(t *testing.T, f *fixture, ps *profilesim.Server) {
			ps.Inject(profilesim.Fault{On: profilesim.OpGet, Kind: profilesim.Forbidden, Times: -1})
		}, "profile: reading deploy profile bm of admin site 7: "},
		{"MAAS lacks it", func(t *testing.T, f *fixture, ps *profilesim.Server) { deleteResource(t, f, "demo-1-0-0") },
			"maas: site sim's MAAS holds no boot resource demo-1-0-0 (amd64/generic) => imagectl promote demo 1.0.0 --site sim (it uploads it again)"},
		{"MAAS down", func(t *testing.T, f *fixture, ps *profilesim.Server) {
			f.sim.Inject(maassim.Fault{On: maassim.OpList, Kind: maassim.Refuse, Status: 500, Body: "database is locked", Times: -1})
		}, "maas: looking demo-1-0-0 up in site sim's MAAS: "},
		{"MAAS incomplete", func(t *testing.T, f *fixture, ps *profilesim.Server) {
			// The upload of the version stalls before its last chunk; the
			// catalog says the site runs it anyway (recorded elsewhere).
			deleteResource(t, f, "demo-1-0-0")
			f.sim.Inject(maassim.Fault{On: maassim.OpLastChunk, Kind: maassim.Refuse, Status: 400, Body: "disk full", Times: -1})
			if _, err := release.Upload(ctx, "demo", "1.0.0", f.opts); err == nil {
				t.Fatal("the upload did not fail")
			}
			f.sim.ClearFaults()
		}, ") but not complete: its upload did not finish, or not every region has the file yet => wait for MAAS to finish syncing it"},
		{"revoked", func(t *testing.T, f *fixture, ps *profilesim.Server) { revoke(t, f.store, "1.0.0", false) },
			"not-revoked: demo 1.0.0 is revoked (by rita at 2026-11-26T12:00:00Z: NCCL hangs) => imagectl rollback demo --site sim"},
		{"policy unmet", func(t *testing.T, f *fixture, ps *profilesim.Server) {
			record(t, f, &store.Gate{Met: false, Missing: []string{"2 passing hosts at canary"}})
		}, "policy: the promotion of demo 1.1.0 at site sim was recorded with its policy not met and no override: missing 2 passing hosts at canary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ps := promoted(t)
			tc.break_(t, f, ps)
			r := predeploy(t, f, "")
			if got := failing(r); r.Ready || !strings.Contains(got, tc.want) || strings.Count(got, "\n") != 0 {
				t.Errorf("ready %v, failing:\n%s\nwant one, containing\n%s", r.Ready, got, tc.want)
			}
		})
	}
}

// readFails is a store whose reads of a history, of revocations or of a
// version fail with the error set.
type readFails struct {
	store.Store
	history, revocations, version error
	// noSeries drops the distro series of the promotions read, as those
	// recorded before promotions kept it: the store's manifest names it.
	noSeries bool
}

func (r *readFails) History(ctx context.Context, site, image string) ([]store.Promotion, error) {
	if r.history != nil {
		return nil, r.history
	}
	h, err := r.Store.History(ctx, site, image)
	if r.noSeries {
		for i := range h {
			h[i].DistroSeries = ""
		}
	}
	return h, err
}

func (r *readFails) Revocations(ctx context.Context, image string) ([]store.Revocation, error) {
	if r.revocations != nil {
		return nil, r.revocations
	}
	return r.Store.Revocations(ctx, image)
}

func (r *readFails) Version(ctx context.Context, image, version string) (*store.Version, error) {
	if r.version != nil {
		return nil, r.version
	}
	return r.Store.Version(ctx, image, version)
}

// What predeploy cannot read is a failing condition with its fix, never
// an error: the deploy workflow always gets the document.
func TestPredeployReadsFail(t *testing.T) {
	down := errors.New("the catalog's remote is unreachable")
	for _, tc := range []struct {
		name  string
		setup func(f *fixture) release.Options
		want  string
	}{
		{"history", func(f *fixture) release.Options {
			o := f.opts
			o.Store = &readFails{Store: f.store, history: down}
			return o
		}, "promoted: reading site sim's catalog of demo: the catalog's remote is unreachable => check that the catalog"},
		{"revocations", func(f *fixture) release.Options {
			o := f.opts
			o.Store = &readFails{Store: f.store, revocations: down}
			return o
		}, "not-revoked: reading the revocations of demo: the catalog's remote is unreachable => check that the catalog"},
		{"manifest", func(f *fixture) release.Options {
			o := f.opts
			o.Store = &readFails{Store: f.store, noSeries: true, version: errors.New("demo 1.0.0's manifest is not JSON")}
			return o
		}, "maas: which boot resource holds demo 1.0.0 is unknown: demo 1.0.0's manifest is not JSON => check that the store"},
		{"MAAS key", func(f *fixture) release.Options {
			o := f.opts
			o.Env = slices.DeleteFunc(slices.Clone(o.Env), func(kv string) bool { return strings.HasPrefix(kv, "SIM_KEY=") })
			return o
		}, "maas: connecting to site sim's MAAS: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := promoted(t)
			r, err := release.Predeploy(ctx, "", tc.setup(f))
			if err != nil {
				t.Fatalf("an error, not a condition: %v", err)
			}
			if got := failing(r); r.Ready || !strings.Contains(got, tc.want) || strings.Count(got, "\n") != 0 {
				t.Errorf("ready %v, failing:\n%s\nwant one, containing\n%s", r.Ready, got, tc.want)
			}
		})
	}
}

// deleteResource deletes the named boot resource from the fixture's MAAS.
func deleteResource(t *testing.T, f *fixture, name string) {
	t.Helper()
	c, err := maas.New(maas.Config{URL: f.sim.URL, APIKey: f.sim.AdminKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.sim.Resources() {
		if r.Name == name {
			if err := c.Delete(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// record makes the fixture's site run 1.1.0 (uploaded, selected) by a
// promotion recorded with gate, as a policy's promote would.
func record(t *testing.T, f *fixture, gate *store.Gate) {
	t.Helper()
	res, err := release.Promote(ctx, "demo", "1.1.0", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Record(ctx, "sim", store.Promotion{Image: "demo", Version: "1.1.0", Previous: "1.1.0", By: "olga", At: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC),
		SHA256: res.Promotion.SHA256, DistroSeries: res.DistroSeries, Gate: gate}); err != nil {
		t.Fatal(err)
	}
}

// An overridden policy passes, said so; no promotion, no profile fail.
func TestPredeployNotes(t *testing.T) {
	f, _ := promoted(t)
	record(t, f, &store.Gate{Met: false, Missing: []string{"soak ends 2026-11-27T09:00:00Z"}, Override: "hotfix for CVE-2026-1"})
	r := predeploy(t, f, "")
	pol := r.Images[0].Conditions[4]
	if !r.Ready || pol.Name != release.CondPolicy || !pol.OK ||
		pol.Note != "overridden by olga at 2026-11-26T09:00:00Z: hotfix for CVE-2026-1; missing: soak ends 2026-11-27T09:00:00Z" {
		t.Errorf("overridden: %+v\n%s", pol, failing(r))
	}
	f = newFixture(t, "1.0.0")
	f.withProfile(t, "demo")
	if r := predeploy(t, f, ""); r.Ready || failing(r) != "promoted: the catalog records no version of demo at site sim => imagectl promote demo VERSION --site sim" {
		t.Errorf("never promoted: %s", failing(r))
	}
	f = newFixture(t, "1.0.0")
	if r := predeploy(t, f, ""); r.Ready || !strings.Contains(failing(r), "site sim has no deploy_profile in the sites file") {
		t.Errorf("no deploy profile: %s", failing(r))
	}
}

// BenchmarkPredeployVsStatus times predeploy and status for the same
// site, whose MAAS holds 30 versions of the image (the promoted one
// last) and whose deploy profile selects it, and reports both and their
// ratio: predeploy reads one boot resource where status reads them all.
// "local" sims answer at once; "wan" ones delay each request by 10 ms, as
// a remote site would.
func BenchmarkPredeployVsStatus(b *testing.B) {
	for _, bc := range []struct {
		name    string
		latency time.Duration
	}{{"local", 0}, {"wan", 10 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			var versions []string
			for i := range 30 {
				versions = append(versions, fmt.Sprintf("1.%d.0", i))
			}
			f := newFixtureSim(b, maassim.Options{CompleteAfterGets: -1, Latency: bc.latency}, versions...)
			f.withProfile(b, "demo")
			for _, v := range versions[:len(versions)-1] {
				if _, err := release.Upload(ctx, "demo", v, f.opts); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := release.Promote(ctx, "demo", versions[len(versions)-1], f.opts); err != nil {
				b.Fatal(err)
			}
			var tp, ts time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				r, err := release.Predeploy(ctx, "", f.opts)
				tp += time.Since(start)
				if err != nil || !r.Ready {
					b.Fatalf("predeploy: %v %s", err, failing(r))
				}
				start = time.Now()
				st, err := release.Status(ctx, f.opts)
				ts += time.Since(start)
				if err != nil || st.Drift {
					b.Fatalf("status: %v %s", err, kinds(st))
				}
			}
			n := time.Duration(b.N)
			b.ReportMetric(float64((tp/n).Microseconds())/1000, "ms/predeploy")
			b.ReportMetric(float64((ts/n).Microseconds())/1000, "ms/status")
			b.ReportMetric(float64(ts)/float64(tp), "status/predeploy")
		})
	}
}
