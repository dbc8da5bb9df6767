package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/validate"
)

// RecordFile names a records file of a catalog: a site, image and
// version's evidence, (Site and Version empty) an image's revocations, or
// (Site empty) an image version's boot comparisons.
type RecordFile struct {
	Site, Image, Version string
}

// Records is a catalog under the records conformance tests.
type Records struct {
	// Open makes a fresh, empty catalog.
	Open func(t *testing.T) store.Promotions
	// Rewrite replaces a records file of p's catalog, as the catalog
	// keeps it, with what edit makes of its content.
	Rewrite func(t *testing.T, p store.Promotions, f RecordFile, edit func([]byte) []byte)
}

// Result is a whole validation result of image version on host, passing
// or with one failing check, finished at t0.
func Result(image, version, host string, pass bool, t0 time.Time) validate.Result {
	r := validate.Result{Schema: validate.ResultSchema, Image: image, Version: version, Profile: "h200", Stage: "converged",
		Host: host, Live: true, Started: t0.Add(-time.Minute), Finished: t0, ScriptSHA256: strings.Repeat("ab", 32),
		Checks: []validate.Check{{Status: validate.StatusPass, Name: "kernel"}}}
	if !pass {
		r.Checks = append(r.Checks, validate.Check{Status: validate.StatusFail, Name: "bridge", Detail: "br0 is down", Remediation: "bring br0 up"})
	}
	for _, c := range r.Checks {
		r.Counts.Checks++
		if c.Status == validate.StatusFail {
			r.Counts.Failures++
		}
	}
	return r
}

// Comparison is a boot comparison of image version measured at t0 under
// accel: both paths passed (baked in 40 s, first boot in 160 s), or, with
// failed, the first-boot path failed.
func Comparison(image, version, accel string, failed bool, t0 time.Time) store.BootComparison {
	secs := func(s float64) *float64 { return &s }
	c := store.BootComparison{Image: image, Version: version, Profile: "slice", Stage: "converged", Accelerator: accel, MemoryMB: 4096,
		MeasuredAt: t0, RecordedAt: t0.Add(time.Minute), RecordedBy: "alice",
		Baked:     store.BootPath{Passed: true, ValidatedSeconds: secs(40), DownloadBytes: 1 << 10},
		FirstBoot: store.BootPath{Passed: true, ValidatedSeconds: secs(160), DownloadBytes: 300 << 20}}
	if failed {
		c.FirstBoot = store.BootPath{Failure: "apt-get install: could not reach deb.example.com", DownloadBytes: 12 << 10}
	}
	return c
}

// TestRecords runs the behaviour every store.Promotions keeps for
// evidence, rack proofs, boot comparisons and revocations: round trips and ordering, keys checked, a
// bad result refused whole, a host's latest results kept, results and
// files within their bounds, revocation and its undo, a revoked version's
// promotion refused, and files that are not what the catalog writes
// refused on read.
func TestRecords(t *testing.T, r Records) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	ev := func(site, image, version, host string, pass bool, at time.Time) store.Evidence {
		return store.Evidence{Site: site, RecordedAt: at, RecordedBy: "alice", Via: "hostcheck", Result: Result(image, version, host, pass, at)}
	}
	hosts := func(evs []store.Evidence) string {
		var h []string
		for _, e := range evs {
			h = append(h, e.Result.Version+"/"+e.Result.Host)
		}
		return strings.Join(h, " ")
	}

	t.Run("evidence", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		if evs, err := p.Evidence(ctx, "lab", "img", ""); err != nil || evs == nil || len(evs) != 0 {
			t.Fatalf("empty catalog: %v %v", evs, err)
		}
		if err := p.AddEvidence(ctx, nil); err != nil {
			t.Fatalf("no results: %v", err)
		}
		// Many hosts, sites and versions in one call; recorded out of
		// order in time.
		if err := p.AddEvidence(ctx, []store.Evidence{
			ev("lab", "img", "2", "h2", true, t0.Add(2*time.Minute)),
			ev("lab", "img", "1", "h1", false, t0),
			ev("lab", "img", "2", "h3", true, t0.Add(time.Minute)),
			ev("edge", "img", "2", "e1", true, t0),
			ev("lab", "other", "2", "o1", true, t0),
		}); err != nil {
			t.Fatal(err)
		}
		if err := p.AddEvidence(ctx, []store.Evidence{ev("lab", "img", "2", "h4", false, t0.Add(3*time.Minute))}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ site, image, version, want string }{
			{"lab", "img", "2", "2/h3 2/h2 2/h4"},
			{"lab", "img", "1", "1/h1"},
			{"lab", "img", "", "1/h1 2/h3 2/h2 2/h4"},
			{"edge", "img", "", "2/e1"},
			{"lab", "other", "2", "2/o1"},
			{"edge", "img", "1", ""},
			{"nowhere", "img", "", ""},
		} {
			evs, err := p.Evidence(ctx, tc.site, tc.image, tc.version)
			if err != nil || hosts(evs) != tc.want {
				t.Errorf("Evidence(%s, %s, %q) = %s, %v; want %s", tc.site, tc.image, tc.version, hosts(evs), err, tc.want)
			}
		}
		evs, err := p.Evidence(ctx, "lab", "img", "1")
		if err != nil || len(evs) != 1 {
			t.Fatalf("lab img 1: %v %v", evs, err)
		}
		want := ev("lab", "img", "1", "h1", false, t0)
		if !reflect.DeepEqual(evs[0], want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", evs[0], want)
		}
		// The evidence is not a promotion.
		if cat, err := p.Catalog(ctx, "lab"); err != nil || len(cat) != 0 {
			t.Errorf("the site's catalog after evidence only: %v %v", cat, err)
		}
		if err := p.Record(ctx, "lab", store.Promotion{Image: "img", Version: "2", By: "alice"}); err != nil {
			t.Fatal(err)
		}
		if cat, err := p.Catalog(ctx, "lab"); err != nil || len(cat) != 1 || len(cat["img"]) != 1 {
			t.Errorf("the site's catalog: %v %v", cat, err)
		}
	})

	t.Run("rack proofs", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		rp := func(version, rack, verdict string, at time.Time) store.RackProof {
			return store.RackProof{Site: "lab", Image: "img", Version: version, Rack: rack, SystemID: "id-" + rack, Verdict: verdict,
				Detail: "rack " + rack + " " + verdict, At: at, By: "alice", Via: "warm-racks"}
		}
		if ps, err := p.RackProofs(ctx, "lab", "img", "1"); err != nil || len(ps) != 0 {
			t.Fatalf("empty catalog: %v %v", ps, err)
		}
		if err := p.AddRackProofs(ctx, nil); err != nil {
			t.Fatalf("no proofs: %v", err)
		}
		if err := p.AddRackProofs(ctx, []store.RackProof{rp("1", "r2", "unknown", t0.Add(time.Minute)), rp("1", "r1", "passed", t0)}); err != nil {
			t.Fatal(err)
		}
		if err := p.AddRackProofs(ctx, []store.RackProof{rp("1", "r2", "passed", t0.Add(2*time.Minute))}); err != nil {
			t.Fatal(err)
		}
		ps, err := p.RackProofs(ctx, "lab", "img", "1")
		if err != nil || len(ps) != 3 || !reflect.DeepEqual(ps[0], rp("1", "r1", "passed", t0)) || ps[2].Verdict != "passed" {
			t.Fatalf("round trip, oldest first: %+v %v", ps, err)
		}
		latest := store.LatestRackProofs(ps)
		if len(latest) != 2 || latest[0].Rack != "r1" || latest[1].Rack != "r2" || latest[1].Verdict != "passed" {
			t.Errorf("latest: %+v", latest)
		}
		if ps, err := p.RackProofs(ctx, "lab", "img", "2"); err != nil || len(ps) != 0 {
			t.Errorf("another version: %+v %v", ps, err)
		}
		// Rack proofs are not promotions.
		if cat, err := p.Catalog(ctx, "lab"); err != nil || len(cat) != 0 {
			t.Errorf("the site's catalog after rack proofs only: %v %v", cat, err)
		}
		for _, tc := range []struct {
			name string
			ps   []store.RackProof
			want string
		}{
			{"two versions at once", []store.RackProof{rp("1", "r1", "passed", t0), rp("2", "r1", "passed", t0)}, "one check at a time"},
			{"a verdict that is none", []store.RackProof{rp("1", "r1", "fine", t0)}, "is not passed, failed or unknown"},
			{"a bad version", []store.RackProof{rp("1/../2", "r1", "passed", t0)}, "version"},
		} {
			if err := p.AddRackProofs(ctx, tc.ps); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
		}
		if _, err := p.RackProofs(ctx, "../lab", "img", "1"); err == nil {
			t.Errorf("a bad site read")
		}
		// A rack keeps its latest KeepPerRack verdicts.
		var many []store.RackProof
		for i := range store.KeepPerRack + 3 {
			many = append(many, rp("3", "r9", "passed", t0.Add(time.Duration(i)*time.Second)))
		}
		if err := p.AddRackProofs(ctx, many); err != nil {
			t.Fatal(err)
		}
		if ps, err := p.RackProofs(ctx, "lab", "img", "3"); err != nil || len(ps) != store.KeepPerRack || !ps[0].At.Equal(t0.Add(3*time.Second)) {
			t.Errorf("kept per rack: %d, %v", len(ps), err)
		}
	})

	t.Run("boot comparisons", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		if cs, err := p.BootComparisons(ctx, "img", "1"); err != nil || cs == nil || len(cs) != 0 {
			t.Fatalf("empty catalog: %v %v", cs, err)
		}
		// A ratio given is never kept: the store computes it.
		given := Comparison("img", "1", "tcg", false, t0.Add(time.Hour))
		wrong := 0.9
		given.Ratio = &wrong
		for _, c := range []store.BootComparison{given, Comparison("img", "1", "kvm", true, t0), Comparison("img", "2", "tcg", false, t0)} {
			if err := p.AddBootComparison(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		cs, err := p.BootComparisons(ctx, "img", "1")
		if err != nil || len(cs) != 2 {
			t.Fatalf("img 1: %+v %v", cs, err)
		}
		want := Comparison("img", "1", "kvm", true, t0)
		if !reflect.DeepEqual(cs[0], want) {
			t.Errorf("round trip, oldest measured first:\n got %+v\nwant %+v", cs[0], want)
		}
		if cs[0].Ratio != nil || cs[1].Ratio == nil || *cs[1].Ratio != 0.25 {
			t.Errorf("ratios: a failed path's %v, both passed %v (want 0.25)", cs[0].Ratio, cs[1].Ratio)
		}
		if cs, err := p.BootComparisons(ctx, "img", "3"); err != nil || len(cs) != 0 {
			t.Errorf("another version: %+v %v", cs, err)
		}
		// Comparisons are of no site: no site's catalog holds them.
		if cat, err := p.Catalog(ctx, "lab"); err != nil || len(cat) != 0 {
			t.Errorf("a site's catalog after comparisons only: %v %v", cat, err)
		}
		// The same measurement recorded again, later, by another, is one
		// comparison, as first recorded; one that says otherwise replaces
		// it. A key keeps its KeepPerComparison latest measured.
		again := Comparison("img", "1", "kvm", true, t0)
		again.RecordedAt, again.RecordedBy = t0.Add(time.Hour), "bob"
		if err := p.AddBootComparison(ctx, again); err != nil {
			t.Fatal(err)
		}
		if cs, err := p.BootComparisons(ctx, "img", "1"); err != nil || len(cs) != 2 || !reflect.DeepEqual(cs[0], want) {
			t.Errorf("recorded twice: %+v %v", cs, err)
		}
		again.FirstBoot.Failure = "a corrected failure"
		if err := p.AddBootComparison(ctx, again); err != nil {
			t.Fatal(err)
		}
		if cs, err := p.BootComparisons(ctx, "img", "1"); err != nil || len(cs) != 2 || cs[0].FirstBoot.Failure != "a corrected failure" || cs[0].RecordedBy != "bob" {
			t.Errorf("recorded corrected: %+v %v", cs, err)
		}
		for i := range store.KeepPerComparison + 2 {
			if err := p.AddBootComparison(ctx, Comparison("img", "1", "kvm", false, t0.Add(time.Duration(store.KeepPerComparison+1-i)*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		cs, err = p.BootComparisons(ctx, "img", "1")
		if err != nil || len(cs) != store.KeepPerComparison+1 || !cs[0].MeasuredAt.Equal(t0.Add(2*time.Second)) {
			t.Errorf("kept per key: %d, from %v, %v", len(cs), cs[0].MeasuredAt, err)
		}
		latest := store.LatestBootComparisons(cs)
		if len(latest) != 2 || latest[0].Accelerator != "kvm" || !latest[0].MeasuredAt.Equal(t0.Add(time.Duration(store.KeepPerComparison+1)*time.Second)) ||
			latest[1].Accelerator != "tcg" || latest[1].Ratio == nil {
			t.Errorf("latest: %+v", latest)
		}
	})

	t.Run("boot comparisons refused", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		edit := func(f func(c *store.BootComparison)) store.BootComparison {
			c := Comparison("img", "1", "tcg", false, t0)
			f(&c)
			return c
		}
		one := 1.0
		for _, tc := range []struct {
			name string
			c    store.BootComparison
			want string
		}{
			{"passed without seconds", edit(func(c *store.BootComparison) { c.Baked.ValidatedSeconds = nil }), "the baked path passed, and says not in how many seconds"},
			{"a ratio with a failed path", func() store.BootComparison { c := Comparison("img", "1", "tcg", true, t0); c.Ratio = &one; return c }(), "a ratio, and a path that failed"},
			{"passed with a failure", edit(func(c *store.BootComparison) { c.FirstBoot.Failure = "x" }), "passed, and has a failure"},
			{"no time", edit(func(c *store.BootComparison) { zero := 0.0; c.FirstBoot.ValidatedSeconds = &zero }), "is not a duration"},
			{"another accelerator", edit(func(c *store.BootComparison) { c.Accelerator = "hvf" }), `accelerator "hvf" is not one of kvm, tcg`},
			{"another profile", edit(func(c *store.BootComparison) { c.Profile = "gpu" }), `profile "gpu"`},
			{"another stage", edit(func(c *store.BootComparison) { c.Stage = "" }), `stage ""`},
			{"no memory", edit(func(c *store.BootComparison) { c.MemoryMB = 0 }), "memory_mb 0"},
			{"never measured", edit(func(c *store.BootComparison) { c.MeasuredAt = time.Time{} }), "measured_at"},
			{"negative bytes", edit(func(c *store.BootComparison) { c.Baked.DownloadBytes = -1 }), "negative"},
			{"a bad image", edit(func(c *store.BootComparison) { c.Image = "../img" }), "image name"},
			{"a bad version", edit(func(c *store.BootComparison) { c.Version = "1/../2" }), "version name"},
			{"too big", func() store.BootComparison {
				c := Comparison("img", "1", "tcg", true, t0)
				c.RecordedBy = strings.Repeat("x", store.MaxBootComparison)
				return c
			}(),
				fmt.Sprintf("more than the %d one kept with a version may be", store.MaxBootComparison)},
			{"measured after it was recorded", edit(func(c *store.BootComparison) { c.MeasuredAt = c.RecordedAt.Add(store.MeasuredSkew + time.Second) }),
				"after it was recorded"},
		} {
			if err := p.AddBootComparison(ctx, tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			}
		}
		if cs, err := p.BootComparisons(ctx, "img", "1"); err != nil || len(cs) != 0 {
			t.Errorf("recorded after refusals: %+v %v", cs, err)
		}
		// A long failure is recorded, cut: a failure is never refused for
		// its length.
		long := Comparison("img", "2", "tcg", true, t0)
		long.FirstBoot.Failure = strings.Repeat("E: could not reach the archive ", 4<<10)
		if err := p.AddBootComparison(ctx, long); err != nil {
			t.Errorf("a long failure: %v", err)
		} else if cs, err := p.BootComparisons(ctx, "img", "2"); err != nil || len(cs) != 1 || len([]rune(cs[0].FirstBoot.Failure)) != store.MaxFailureLen+1 {
			t.Errorf("a long failure read back: %v", err)
		}
		for _, k := range [][2]string{{"../img", "1"}, {"img", ""}, {"img", "../1"}} {
			if _, err := p.BootComparisons(ctx, k[0], k[1]); err == nil {
				t.Errorf("BootComparisons%q: no error", k)
			}
		}
	})

	t.Run("evidence refused", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		bad := ev("lab", "img", "1", "h2", true, t0)
		bad.Result.Counts.Failures = 3
		for _, tc := range []struct {
			name string
			e    store.Evidence
			want string
		}{
			{"a result that is not whole", bad, "counts"},
			{"a bad site", ev("../lab", "img", "1", "h2", true, t0), "site"},
			{"a bad version", ev("lab", "img", "1/../2", "h2", true, t0), "version"},
		} {
			// One bad result refuses the call: nothing of it is recorded.
			err := p.AddEvidence(ctx, []store.Evidence{ev("lab", "img", "1", "h1", true, t0), tc.e})
			if err == nil || !strings.Contains(err.Error(), "result 2") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
		if evs, err := p.Evidence(ctx, "lab", "img", ""); err != nil || len(evs) != 0 {
			t.Errorf("recorded after refusals: %s %v", hosts(evs), err)
		}
		for _, k := range [][3]string{{"../lab", "img", "1"}, {"lab", "im g", ""}, {"lab", "img", "../1"}} {
			if _, err := p.Evidence(ctx, k[0], k[1], k[2]); err == nil {
				t.Errorf("Evidence%q: no error", k)
			}
		}
	})

	t.Run("evidence kept per host", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		// More results of h1 than a file keeps, newest first; one of h2; and
		// one host renamed, known by its machine id.
		var evs []store.Evidence
		n := store.KeepPerHost + 3
		for i := range n {
			evs = append(evs, ev("lab", "img", "1", "h1", true, t0.Add(time.Duration(n-i)*time.Minute)))
		}
		evs = append(evs, ev("lab", "img", "1", "h2", true, t0))
		for i := range n {
			e := ev("lab", "img", "1", fmt.Sprintf("m%d", i), true, t0.Add(time.Duration(i)*time.Minute))
			e.Result.MachineID = strings.Repeat("0f", 16)
			evs = append(evs, e)
		}
		if err := p.AddEvidence(ctx, evs); err != nil {
			t.Fatal(err)
		}
		count := func(want string) {
			t.Helper()
			got, err := p.Evidence(ctx, "lab", "img", "1")
			if err != nil {
				t.Fatal(err)
			}
			h1, machine := map[time.Duration]bool{}, map[string]bool{}
			for _, e := range got {
				switch {
				case e.Result.MachineID != "":
					machine[e.Result.Host] = true
				case e.Result.Host == "h1":
					h1[e.RecordedAt.Sub(t0)/time.Minute] = true
				}
			}
			var oldestH1 time.Duration = 1 << 40
			for m := range h1 {
				oldestH1 = min(oldestH1, m)
			}
			if s := fmt.Sprintf("%d results, h1 %d from minute %d, the machine %d, m2 %v m3 %v", len(got), len(h1), oldestH1, len(machine), machine["m2"], machine["m3"]); s != want {
				t.Errorf("kept %s, want %s", s, want)
			}
		}
		k := store.KeepPerHost
		count(fmt.Sprintf("%d results, h1 %d from minute 4, the machine %d, m2 false m3 true", 2*k+1, k, k))
		// One more of h1, the latest: its oldest kept goes.
		if err := p.AddEvidence(ctx, []store.Evidence{ev("lab", "img", "1", "h1", false, t0.Add(time.Hour))}); err != nil {
			t.Fatal(err)
		}
		count(fmt.Sprintf("%d results, h1 %d from minute 5, the machine %d, m2 false m3 true", 2*k+1, k, k))
	})

	t.Run("evidence within bounds", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		if err := p.AddEvidence(ctx, []store.Evidence{ev("lab", "img", "1", "h0", true, t0)}); err != nil {
			t.Fatal(err)
		}
		big := func(host string, size int) store.Evidence {
			e := ev("lab", "img", "1", host, true, t0)
			e.Result.Checks[0].Detail = strings.Repeat("x", size)
			return e
		}
		if err := p.AddEvidence(ctx, []store.Evidence{big("h1", store.MaxEvidenceResult)}); err == nil ||
			!strings.Contains(err.Error(), fmt.Sprintf("more than the %d a result kept as evidence may be", store.MaxEvidenceResult)) {
			t.Errorf("a result over the bound: %v", err)
		}
		// Results each within the bound, together over a file's: refused
		// whole, as every later read would refuse the file. (Encoding
		// 64 MiB takes seconds under the race detector: not with -short.)
		if !testing.Short() {
			var evs []store.Evidence
			for i := range store.MaxRecords/store.MaxEvidenceResult + 2 {
				evs = append(evs, big(fmt.Sprintf("h%d", i+1), store.MaxEvidenceResult-2048))
			}
			if err := p.AddEvidence(ctx, evs); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than the %d a records file may be", store.MaxRecords)) {
				t.Errorf("a file over the bound: %v", err)
			}
		}
		if got, err := p.Evidence(ctx, "lab", "img", "1"); err != nil || hosts(got) != "1/h0" {
			t.Errorf("after the refusals: %s %v", hosts(got), err)
		}
	})

	t.Run("a revoked version is not recorded", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		history := func() string {
			h, err := p.History(ctx, "lab", "img")
			if err != nil {
				t.Fatal(err)
			}
			var vs []string
			for _, pr := range h {
				vs = append(vs, pr.Version)
			}
			return strings.Join(vs, " ")
		}
		revoke := func(version string, undo bool) {
			t.Helper()
			if err := p.Revoke(ctx, store.Revocation{Image: "img", Version: version, Reason: "bad NIC firmware", By: "bob", At: t0, Undo: undo}); err != nil {
				t.Fatal(err)
			}
		}
		revoke("2", false)
		err := p.Record(ctx, "lab", store.Promotion{Image: "img", Version: "2", By: "alice"})
		if !errors.Is(err, store.ErrRevoked) || !strings.Contains(err.Error(), "bad NIC firmware") {
			t.Errorf("promoting a revoked version: %v", err)
		}
		for _, pr := range []store.Promotion{{Image: "img", Version: "1", By: "alice"}, {Image: "img", Version: "3", Previous: "1", By: "alice"}} {
			if err := p.Record(ctx, "lab", pr); err != nil {
				t.Fatal(err)
			}
		}
		revoke("1", false)
		if err := p.Record(ctx, "lab", store.Promotion{Image: "img", Version: "1", Previous: "3", Rollback: true, By: "alice"}); !errors.Is(err, store.ErrRevoked) {
			t.Errorf("rolling back to a revoked version: %v", err)
		}
		if h := history(); h != "1 3" {
			t.Errorf("history %s", h)
		}
		// Undone, it may be promoted.
		revoke("2", true)
		if err := p.Record(ctx, "lab", store.Promotion{Image: "img", Version: "2", Previous: "3", By: "alice"}); err != nil {
			t.Errorf("promoting a version whose revocation was undone: %v", err)
		}
		if h := history(); h != "1 3 2" {
			t.Errorf("history %s", h)
		}
	})

	t.Run("revocations", func(t *testing.T) {
		t.Parallel()
		p := r.Open(t)
		if rs, err := p.Revocations(ctx, ""); err != nil || rs == nil || len(rs) != 0 {
			t.Fatalf("empty catalog: %v %v", rs, err)
		}
		if err := p.Revoke(ctx, store.Revocation{Image: "img", Version: "1", By: "alice"}); err == nil || !strings.Contains(err.Error(), "reason") {
			t.Errorf("no reason: %v", err)
		}
		if err := p.Revoke(ctx, store.Revocation{Image: "im g", Version: "1", Reason: "r", By: "alice"}); err == nil {
			t.Error("a bad image: no error")
		}
		steps := []store.Revocation{
			{Image: "img", Version: "1", Reason: "kernel panic on h200", By: "alice", At: t0},
			{Image: "img", Version: "2", Reason: "bridge down", By: "bob <bob@example.com>", At: t0.Add(time.Minute)},
			{Image: "zeta", Version: "7", Reason: "bad firmware", By: "alice", At: t0.Add(2 * time.Minute)},
			{Image: "img", Version: "1", Reason: "a false alarm", By: "alice", At: t0.Add(3 * time.Minute), Undo: true},
			{Image: "alpha", Version: "3", Reason: "cves", By: "carol", At: t0.Add(4 * time.Minute)},
		}
		for _, s := range steps {
			if err := p.Revoke(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := p.Revocations(ctx, "img")
		if err != nil || !reflect.DeepEqual(rs, []store.Revocation{steps[0], steps[1], steps[3]}) {
			t.Fatalf("img's revocations: %+v %v", rs, err)
		}
		if now := store.Revoked(rs, "img"); len(now) != 1 || now["2"].Reason != "bridge down" {
			t.Errorf("revoked now: %+v", now)
		}
		all, err := p.Revocations(ctx, "")
		var order []string
		for _, r := range all {
			order = append(order, fmt.Sprintf("%s/%s", r.Image, r.Version))
		}
		if err != nil || strings.Join(order, " ") != "alpha/3 img/1 img/2 img/1 zeta/7" {
			t.Errorf("every image's revocations: %s %v", order, err)
		}
		if rs, err := p.Revocations(ctx, "never"); err != nil || len(rs) != 0 {
			t.Errorf("an image never revoked: %v %v", rs, err)
		}
	})

	t.Run("decoded strictly", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			edit func(doc map[string]any) []byte
			want string
		}{
			{"an unknown field", func(doc map[string]any) []byte { doc["extra"] = 1; return marshal(doc) }, "extra"},
			{"another schema", func(doc map[string]any) []byte { doc["schema_version"] = 2; return marshal(doc) }, "schema version 2"},
			{"two values", func(doc map[string]any) []byte { return append(marshal(doc), marshal(doc)...) }, "more than one JSON value"},
			{"a record of another key", func(doc map[string]any) []byte {
				for _, list := range []string{"evidence", "revocations", "boot_comparisons"} {
					if l, ok := doc[list].([]any); ok {
						rec := l[0].(map[string]any)
						if res, ok := rec["result"].(map[string]any); ok {
							res["version"] = "9"
						} else {
							rec["image"] = "zzz"
						}
					}
				}
				return marshal(doc)
			}, "is of"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				p := r.Open(t)
				if err := p.AddEvidence(ctx, []store.Evidence{ev("lab", "img", "1", "h1", true, t0)}); err != nil {
					t.Fatal(err)
				}
				if err := p.Revoke(ctx, store.Revocation{Image: "img", Version: "1", Reason: "r", By: "alice", At: t0}); err != nil {
					t.Fatal(err)
				}
				edit := func(b []byte) []byte {
					var doc map[string]any
					if err := json.Unmarshal(b, &doc); err != nil {
						t.Fatal(err)
					}
					return tc.edit(doc)
				}
				if err := p.AddBootComparison(ctx, Comparison("img", "1", "tcg", false, t0)); err != nil {
					t.Fatal(err)
				}
				r.Rewrite(t, p, RecordFile{Site: "lab", Image: "img", Version: "1"}, edit)
				r.Rewrite(t, p, RecordFile{Image: "img"}, edit)
				r.Rewrite(t, p, RecordFile{Image: "img", Version: "1"}, edit)
				for what, err := range map[string]error{
					"Evidence":          second(p.Evidence(ctx, "lab", "img", "1")),
					"every Evidence":    second(p.Evidence(ctx, "lab", "img", "")),
					"AddEvidence":       p.AddEvidence(ctx, []store.Evidence{ev("lab", "img", "1", "h2", true, t0)}),
					"Revocations":       second(p.Revocations(ctx, "img")),
					"all Revocations":   second(p.Revocations(ctx, "")),
					"Revoke":            p.Revoke(ctx, store.Revocation{Image: "img", Version: "1", Reason: "r", By: "alice", Undo: true}),
					"BootComparisons":   second(p.BootComparisons(ctx, "img", "1")),
					"AddBootComparison": p.AddBootComparison(ctx, Comparison("img", "1", "kvm", false, t0)),
				} {
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("%s: %v, want an error saying %q", what, err, tc.want)
					}
				}
				if err := errors.Join(p.AddEvidence(ctx, []store.Evidence{ev("lab", "img", "2", "h1", true, t0)}),
					p.AddBootComparison(ctx, Comparison("img", "2", "kvm", false, t0)),
					p.Revoke(ctx, store.Revocation{Image: "other", Version: "1", Reason: "r", By: "alice"})); err != nil {
					t.Errorf("another file is unaffected: %v", err)
				}
			})
		}
	})
}

func marshal(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

func second[T any](_ T, err error) error { return err }
