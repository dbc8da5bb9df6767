package sites

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/hclkit/hclkittest"
)

func TestPolicyValid(t *testing.T) {
	ss, diags := Load("testdata/policy.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	g := ss.Group("fleet")
	p := g.Policy
	if p == nil || p.Owner != `group "fleet"` || p.Soak != 24*time.Hour || len(p.Evidence) != 2 || len(p.Windows) != 2 || len(p.Freezes) != 0 {
		t.Fatalf("group policy: %+v", p)
	}
	e := p.Evidence[0]
	if !slices.Equal(e.Sites, []string{"canary-a", "canary-b"}) || !slices.Equal(e.Profiles, []string{"slice", "bare-metal"}) ||
		e.Stage != "converged" || e.MinHosts != 2 {
		t.Errorf("evidence: %+v", e)
	}
	if e := p.Evidence[1]; e.Stage != "image" || e.MinHosts != 1 || e.Profiles != nil {
		t.Errorf("evidence with defaults: %+v", e)
	}
	w := p.Windows[0]
	if !slices.Equal(w.Days, []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday}) || w.From != 9*60 || w.To != 17*60 ||
		w.Zone.String() != "Europe/Berlin" || w.Text != "mon,tue,wed,thu 09:00-17:00 Europe/Berlin" {
		t.Errorf("window: %+v", w)
	}
	if w := p.Windows[1]; w.Zone != time.UTC || w.Text != "fri 09:00-12:00 UTC" {
		t.Errorf("window in UTC: %+v", w)
	}
	f1, _ := ss.Site("fleet-1")
	f2, _ := ss.Site("fleet-2")
	ca, _ := ss.Site("canary-a")
	if len(f1.Policies) != 2 || f1.Policies[0] != f1.Policy || f1.Policies[1] != p {
		t.Errorf("fleet-1 is held to its own policy, then its group's: %+v", f1.Policies)
	}
	fr := f1.Policy.Freezes[0]
	if fr.Reason != "year-end freeze" || !fr.From.Equal(time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)) || !fr.To.Equal(time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("freeze: %+v", fr)
	}
	if len(f2.Policies) != 1 || f2.Policies[0] != p || f2.Policy != nil {
		t.Errorf("fleet-2 is held to its group's policy: %+v", f2.Policies)
	}
	if ca.Policies != nil {
		t.Errorf("a site with no policy and no group is not gated: %+v", ca.Policies)
	}
	// A sites file without policies decodes as before.
	old, diags := Load("testdata/valid.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, s := range old.Sites {
		if s.Policy != nil || s.Policies != nil {
			t.Errorf("site %s has a policy", s.Name)
		}
	}
}

func TestPolicyInvalid(t *testing.T) {
	path := filepath.Join("testdata", "invalid-policy.hcl")
	_, diags := Load(path)
	hclkittest.Check(t, path, diags)
}

// TestWindowOpen: a window is read in its zone, across day boundaries and
// a change of summer time; the next opening is the window's next start.
func TestWindowOpen(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	weekdays := &Window{Days: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday}, From: 9 * 60, To: 17 * 60, Zone: berlin}
	late := &Window{From: 22 * 60, To: 24 * 60, Zone: time.UTC}
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		w        *Window
		at       string
		open     bool
		nextOpen string
	}{
		// Thursday 2026-11-26 08:30 UTC is 09:30 in Berlin (CET, +1).
		{weekdays, "2026-11-26T08:30:00Z", true, ""},
		// 07:59 UTC is 08:59 in Berlin: opens at 09:00 CET, 08:00 UTC.
		{weekdays, "2026-11-26T07:59:00Z", false, "2026-11-26T08:00:00Z"},
		// 16:00 UTC Thursday is 17:00 in Berlin: closed; Friday to Sunday
		// are not days of the window, so Monday 09:00 CET.
		{weekdays, "2026-11-26T16:00:00Z", false, "2026-11-30T08:00:00Z"},
		// 23:30 UTC Sunday is 00:30 Monday in Berlin: the window's day is
		// Berlin's, so it opens at 09:00 that Monday.
		{weekdays, "2026-11-29T23:30:00Z", false, "2026-11-30T08:00:00Z"},
		// Summer time (CEST, +2): Thursday 2026-07-02 07:30 UTC is 09:30.
		{weekdays, "2026-07-02T07:30:00Z", true, ""},
		{weekdays, "2026-07-02T06:59:00Z", false, "2026-07-02T07:00:00Z"},
		// Summer time starts Sunday 2026-03-29: Monday 09:00 is CEST.
		{weekdays, "2026-03-27T12:00:00Z", false, "2026-03-30T07:00:00Z"},
		// A window to midnight: open until 24:00, then opens the next day.
		{late, "2026-11-26T23:59:59Z", true, ""},
		{late, "2026-11-27T00:00:00Z", false, "2026-11-27T22:00:00Z"},
	} {
		open, next := c.w.Open(utc(c.at))
		if open != c.open || (c.nextOpen == "" && !next.IsZero()) || (c.nextOpen != "" && !next.Equal(utc(c.nextOpen))) {
			t.Errorf("%s at %s: open %v, next %s; want %v, %s", c.w.Text, c.at, open, next.UTC().Format(time.RFC3339), c.open, c.nextOpen)
		}
	}
	f := &Freeze{From: utc("2026-12-20T00:00:00Z"), To: utc("2027-01-04T00:00:00Z")}
	if f.In(utc("2026-12-19T23:59:59Z")) || !f.In(utc("2026-12-20T00:00:00Z")) || !f.In(utc("2027-01-03T23:59:59Z")) || f.In(utc("2027-01-04T00:00:00Z")) {
		t.Error("a freeze is [from, to)")
	}
}
