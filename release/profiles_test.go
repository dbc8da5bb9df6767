package release_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/profile"
	"github.com/gpuaas/imagectl/profile/profilesim"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// withProfile gives the fixture's site a deploy profile (admin site 7,
// profile bm) on a fake admin API, selecting ubuntu/noble, following image
// (all when "").
func (f *fixture) withProfile(t testing.TB, image string) *profilesim.Server {
	t.Helper()
	ps := profilesim.New(profilesim.Options{})
	t.Cleanup(ps.Close)
	ps.SetProfile("7", "bm", "ubuntu/noble")
	f.opts.Site.Profiles = append(f.opts.Site.Profiles, &sites.DeployProfile{Site: "sim", APIURL: ps.URL, SiteID: "7", ProfileID: "bm",
		TokenEnv: "ADMIN_TOKEN", Image: image, Timeout: 5 * time.Second})
	f.opts.Env = append(f.opts.Env, "ADMIN_TOKEN="+ps.Token)
	f.opts.ConfigureProfile = func(c *profile.Config) { c.Backoff = func(int) time.Duration { return time.Millisecond } }
	return ps
}

func selects(t *testing.T, ps *profilesim.Server) string {
	t.Helper()
	v, _ := ps.DistroSeries("7", "bm")
	return v
}

func patchKeys(ps *profilesim.Server) []string {
	var out []string
	for _, r := range ps.Requests() {
		if r.Method == http.MethodPatch {
			out = append(out, r.IdempotencyKey)
		}
	}
	return out
}

func noSecret(t *testing.T, ps *profilesim.Server, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), ps.Token) {
		t.Errorf("the token is in the error: %v", err)
	}
}

func TestPromoteSetsProfile(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	ps := f.withProfile(t, "demo")
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.ProfileDistroSeries != "demo-1-0-0" || res.DistroSeries != "custom/demo-1-0-0" || res.ProfilePatch != nil || len(res.Profiles) != 1 {
		t.Fatalf("result %+v", res)
	}
	if p := res.Profiles[0]; p.Outcome != profile.Patched || p.Previous != "ubuntu/noble" || p.DistroSeries != "demo-1-0-0" || p.Attempts != 1 ||
		p.SiteID != "7" || p.ProfileID != "bm" || p.URL != ps.URL+"/api/v1/admin/maas-sites/7/profiles/bm" || !strings.HasPrefix(p.IdempotencyKey, "imagectl-") {
		t.Errorf("profile %+v", p)
	}
	if got := selects(t, ps); got != "demo-1-0-0" {
		t.Errorf("the profile selects %q", got)
	}
	if _, err := release.Promote(ctx, "demo", "1.1.0", f.opts); err != nil || selects(t, ps) != "demo-1-1-0" {
		t.Fatalf("second promotion: %v, profile %q", err, selects(t, ps))
	}
	res, err = release.Rollback(ctx, "demo", f.opts)
	if err != nil || selects(t, ps) != "demo-1-0-0" || res.Profiles[0].Previous != "demo-1-1-0" {
		t.Fatalf("rollback: %v, profile %q", err, selects(t, ps))
	}
	// Three promotions, three keys, though two set the same value.
	if keys := patchKeys(ps); len(keys) != 3 || keys[0] == keys[2] || keys[0] == keys[1] {
		t.Errorf("keys %v", keys)
	}
	// The current version again: nothing sent, nothing recorded.
	res, err = release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || !res.AlreadyCurrent || res.Profiles[0].Outcome != profile.Unchanged || len(patchKeys(ps)) != 3 {
		t.Fatalf("promoting the current version: %+v %v", res, err)
	}
	st, err := release.Status(ctx, f.opts)
	if err != nil || st.Drift || len(st.Profiles) != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
	if p := st.Profiles[0]; p.DistroSeries != "demo-1-0-0" || p.Image != "demo" || p.Version != "1.0.0" || p.Want != "demo-1-0-0" || p.WantImage != "demo" || p.Drift {
		t.Errorf("profile status %+v", p)
	}

	// Someone switches the profile back to the stock image, twice.
	for i := 0; i < 2; i++ {
		ps.SetProfile("7", "bm", "ubuntu/noble")
		st, err = release.Status(ctx, f.opts)
		if err != nil || !st.Drift || kinds(st) != "demo:profile" ||
			!strings.Contains(st.Images[0].Drift[0].Message, "deploy profile bm of admin site 7 selects ubuntu/noble, not demo-1-0-0 (the promoted demo 1.0.0): imagectl promote demo 1.0.0 --site sim sets it") {
			t.Fatalf("status with the profile changed: %v\n%+v", err, st)
		}
		// Promoting the current version points it back.
		res, err = release.Promote(ctx, "demo", "1.0.0", f.opts)
		if err != nil || !res.AlreadyCurrent || res.Profiles[0].Outcome != profile.Patched || selects(t, ps) != "demo-1-0-0" {
			t.Fatalf("repair %d: %+v %v, profile %q", i, res, err, selects(t, ps))
		}
	}
	if h, _ := f.store.History(ctx, "sim", "demo"); len(h) != 3 {
		t.Errorf("repairs recorded: %+v", h)
	}
	// A profile that selects another stored version.
	ps.SetProfile("7", "bm", "custom/demo-1-1-0")
	st, _ = release.Status(ctx, f.opts)
	if !st.Drift || !strings.Contains(st.Images[0].Drift[0].Message, "selects custom/demo-1-1-0 (demo 1.1.0), not demo-1-0-0") || st.Profiles[0].Version != "1.1.0" {
		t.Errorf("status %+v", st)
	}
}

// The PATCH goes out only once MAAS holds the version complete.
func TestProfileAfterMAASComplete(t *testing.T) {
	f := newFixture(t, "1.0.0")
	lag := maassim.New(maassim.Options{}) // 3.5+: complete only after the sync
	t.Cleanup(lag.Close)
	f.sim = lag
	f.opts.Site.URL = lag.URL
	f.opts.Env = []string{"SIM_KEY=" + lag.AdminKey}
	f.withProfile(t, "demo")
	mc, _ := maas.New(maas.Config{URL: lag.URL, APIKey: lag.AdminKey})
	var checked atomic.Int32
	f.opts.ConfigureProfile = func(c *profile.Config) {
		c.Transport = roundTrip(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPatch {
				res, err := mc.Find(context.Background(), "demo-1-0-0", "amd64/generic")
				if err != nil || res == nil || res.File() == nil || !res.File().Complete {
					t.Errorf("PATCH before MAAS holds the image complete: %+v %v", res, err)
				}
				checked.Add(1)
			}
			return http.DefaultTransport.RoundTrip(r)
		})
	}
	if _, err := release.Promote(ctx, "demo", "1.0.0", f.opts); err != nil || checked.Load() != 1 {
		t.Fatalf("%v, %d PATCHes checked", err, checked.Load())
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestPromoteProfileFailures(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		fault                  profilesim.Fault
		want                   string
		unauthorized, conflict bool
	}{
		{name: "401", fault: profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Unauthorized},
			want: "refused the token from environment variable ADMIN_TOKEN (401 Unauthorized: token expired)", unauthorized: true},
		{name: "403 on read", fault: profilesim.Fault{On: profilesim.OpGet, Kind: profilesim.Forbidden},
			want: "refused the token from environment variable ADMIN_TOKEN (403 Forbidden", unauthorized: true},
		{name: "409", fault: profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Conflict, Message: "profile bm has a deployment in progress"},
			want: "refused the change as a conflict (409 Conflict: profile bm has a deployment in progress)", conflict: true},
		{name: "503 for good", fault: profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Unavailable, Times: -1},
			want: "gave up after 4 attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "1.0.0")
			ps := f.withProfile(t, "demo")
			ps.Inject(tc.fault)
			res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "MAAS holds it complete as demo-1-0-0") ||
				!strings.Contains(err.Error(), "nothing is recorded: run the same command again") ||
				profile.IsUnauthorized(err) != tc.unauthorized || profile.IsConflict(err) != tc.conflict {
				t.Fatalf("err %v", err)
			}
			noSecret(t, ps, err)
			if res == nil || res.Upload == nil || res.Promotion != nil || len(res.Profiles) != 1 || res.Profiles[0].Outcome != "" {
				t.Errorf("result %+v", res)
			}
			if h, _ := f.store.History(ctx, "sim", "demo"); len(h) != 0 {
				t.Errorf("recorded %+v", h)
			}
			if got := names(f.sim); len(got) != 1 {
				t.Errorf("MAAS holds %v", got)
			}
			// Fixed: the same command finishes, with the same key, without
			// uploading again.
			ps.ClearFaults()
			before := patchKeys(ps)
			res, err = release.Promote(ctx, "demo", "1.0.0", f.opts)
			if err != nil || res.Promotion == nil || !res.Upload.Skipped || selects(t, ps) != "demo-1-0-0" {
				t.Fatalf("again: %+v %v", res, err)
			}
			keys := patchKeys(ps)
			for _, k := range before {
				if k != keys[len(keys)-1] {
					t.Errorf("the re-run sent key %s, the failed run %s", keys[len(keys)-1], k)
				}
			}
		})
	}
}

func TestPromoteProfileTransient(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	ps := f.withProfile(t, "demo")
	f.opts.ConfigureProfile = func(c *profile.Config) {
		c.Backoff = func(int) time.Duration { return time.Millisecond }
		c.Timeout = time.Second
	}
	ps.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Unavailable, Times: 2})
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || res.Profiles[0].Outcome != profile.Patched || res.Profiles[0].Attempts != 3 || res.Promotion == nil {
		t.Fatalf("through 503s: %+v %v", res, err)
	}
	// Applied, then no answer: read back, and it is there.
	ps.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.TimeoutAfterAccept})
	res, err = release.Promote(ctx, "demo", "1.1.0", f.opts)
	if err != nil || res.Profiles[0].Outcome != profile.Confirmed || res.Promotion == nil || selects(t, ps) != "demo-1-1-0" {
		t.Fatalf("timeout after accept: %+v %v", res, err)
	}
}

func TestRollbackProfileFailureIsNotRecorded(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0", "1.2.0")
	ps := f.withProfile(t, "demo")
	f.promote(t, "1.0.0", "1.1.0", "1.2.0")
	ps.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Conflict, Message: "locked"})
	if _, err := release.Rollback(ctx, "demo", f.opts); err == nil || !profile.IsConflict(err) {
		t.Fatalf("rollback: %v", err)
	}
	// Run again, it rolls back to 1.1.0 still, not to 1.0.0.
	res, err := release.Rollback(ctx, "demo", f.opts)
	if err != nil || res.Version != "1.1.0" || selects(t, ps) != "demo-1-1-0" {
		t.Fatalf("rollback again: %+v %v", res, err)
	}
}

// failRecord is a store whose next Record fails.
type failRecord struct {
	store.Store
	fail atomic.Bool
}

func (s *failRecord) Record(ctx context.Context, site string, p store.Promotion) error {
	if s.fail.Swap(false) {
		return errors.New("disk full")
	}
	return s.Store.Record(ctx, site, p)
}

func TestRecordFailsAfterProfile(t *testing.T) {
	f := newFixture(t, "1.0.0")
	ps := f.withProfile(t, "demo")
	fr := &failRecord{Store: f.store}
	fr.fail.Store(true)
	f.opts.Store = fr
	_, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err == nil || !strings.Contains(err.Error(), "the deploy profiles select demo-1-0-0, but recording the promotion failed: disk full") ||
		!strings.Contains(err.Error(), "run the same command again to record it") {
		t.Fatalf("err %v", err)
	}
	st, _ := release.Status(ctx, f.opts)
	if st.Drift || len(st.Profiles) != 1 || st.Profiles[0].Want != "" || st.Profiles[0].Version != "1.0.0" {
		t.Errorf("status after a failed record %+v", st)
	}
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || res.Promotion == nil || res.Profiles[0].Outcome != profile.Unchanged || len(patchKeys(ps)) != 1 {
		t.Fatalf("again: %+v %v", res, err)
	}
}

func TestPromoteWithoutProfile(t *testing.T) {
	f := newFixture(t, "1.0.0")
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || res.ProfilePatch == nil || len(res.Profiles) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	p := res.ProfilePatch
	if p.URL != "${API_BASE_URL}/api/v1/admin/maas-sites/${SITE_ID}/profiles/${PROFILE_ID}" || p.Body != `{"distro_series":"demo-1-0-0"}` ||
		!strings.Contains(p.Curl, `-H "Authorization: Bearer ${ADMIN_TOKEN}"`) || !strings.HasPrefix(p.Headers["X-Idempotency-Key"], "imagectl-") {
		t.Errorf("manual PATCH %+v", p)
	}
	// A request run by hand is run once per profile, and perhaps again
	// later: each printing has its own key, each profile its own suffix.
	if !strings.HasSuffix(p.Headers["X-Idempotency-Key"], "-${PROFILE_ID}") || !strings.Contains(p.Curl, "-${PROFILE_ID}\"") {
		t.Errorf("the manual key is not per profile: %q", p.Headers["X-Idempotency-Key"])
	}
	again, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || again.ProfilePatch.URL != p.URL || again.ProfilePatch.Body != p.Body ||
		again.ProfilePatch.Headers["X-Idempotency-Key"] == p.Headers["X-Idempotency-Key"] {
		t.Errorf("again: %v\n%s", err, again.ProfilePatch.Curl)
	}
	// A profile that follows another image does not take this one.
	ps := f.withProfile(t, "other")
	res, err = release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil || res.ProfilePatch == nil || len(res.Profiles) != 0 || len(ps.Requests()) != 0 {
		t.Errorf("a profile of another image: %+v %v, %d requests", res, err, len(ps.Requests()))
	}
	st, err := release.Status(ctx, f.opts)
	if err != nil || st.Drift || st.Profiles[0].Want != "" || st.Profiles[0].Follows != "other" {
		t.Errorf("status %+v %v", st, err)
	}
}

func TestPromoteTokenMissing(t *testing.T) {
	f := newFixture(t, "1.0.0")
	f.withProfile(t, "demo")
	f.opts.Env = f.opts.Env[:1]
	_, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err == nil || !strings.Contains(err.Error(), "environment variable ADMIN_TOKEN (the token_env of its deploy profile bm of admin site 7) is not set") {
		t.Fatalf("err %v", err)
	}
	if n := f.sim.Count(maassim.OpList); n != 0 {
		t.Errorf("MAAS was asked %d times", n)
	}
	if _, err := release.Status(ctx, f.opts); err == nil || !strings.Contains(err.Error(), "ADMIN_TOKEN") {
		t.Errorf("status: %v", err)
	}
}

func TestStatusProfileRefused(t *testing.T) {
	f := newFixture(t, "1.0.0")
	ps := f.withProfile(t, "demo")
	ps.Inject(profilesim.Fault{On: profilesim.OpGet, Kind: profilesim.Unauthorized})
	_, err := release.Status(ctx, f.opts)
	if !profile.IsUnauthorized(err) || !strings.Contains(err.Error(), "reading site sim's deploy profiles") {
		t.Fatalf("err %v", err)
	}
	noSecret(t, ps, err)
}

func TestPromoteCancelDuringPatch(t *testing.T) {
	f := newFixture(t, "1.0.0")
	ps := f.withProfile(t, "demo")
	f.opts.ConfigureProfile = func(c *profile.Config) { c.Timeout = time.Minute }
	ps.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.TimeoutAfterAccept})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Cancel once the PATCH reached the admin API: within a deadline, so
	// that a PATCH that never comes fails the test instead of hanging it.
	done := make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		defer cancel()
		deadline := time.NewTimer(10 * time.Second)
		defer deadline.Stop()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for len(patchKeys(ps)) == 0 {
			select {
			case <-deadline.C:
				waited <- errors.New("no PATCH reached the admin API within 10s")
				return
			case <-done:
				waited <- errors.New("Promote returned before its PATCH reached the admin API")
				return
			case <-tick.C:
			}
		}
		waited <- nil
	}()
	start := time.Now()
	_, err := release.Promote(cctx, "demo", "1.0.0", f.opts)
	close(done)
	if werr := <-waited; werr != nil {
		t.Fatalf("%v (Promote: %v)", werr, err)
	}
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
	if h, _ := f.store.History(ctx, "sim", "demo"); len(h) != 0 {
		t.Errorf("recorded %+v", h)
	}
}

func TestGCKeepsWhatAProfileSelects(t *testing.T) {
	f := newFixture(t, "1", "2", "3", "4")
	ps := f.withProfile(t, "demo")
	f.promote(t, "1", "2", "3", "4")
	ps.SetProfile("7", "bm", "demo-1") // by hand
	res, err := release.GC(ctx, 0, true, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	_, kept := gcLists(res, func(k release.Kept) string { return k.Name + "=" + k.Why })
	if strings.Join(names(f.sim), " ") != "demo-1 demo-3 demo-4" || !strings.Contains(strings.Join(kept, ", "), "demo-1=selected by deploy profile bm of admin site 7") {
		t.Errorf("MAAS holds %v; kept %v", names(f.sim), kept)
	}
	ps.Inject(profilesim.Fault{On: profilesim.OpGet, Kind: profilesim.Unavailable, Times: -1})
	if _, err := release.GC(ctx, 0, true, f.opts); err == nil || f.sim.Count(maassim.OpDelete) != 1 {
		t.Errorf("gc without the profile: %v, %d deletes", err, f.sim.Count(maassim.OpDelete))
	}
}
