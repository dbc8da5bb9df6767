package sites

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/hclkit/hclkittest"
)

func TestPolicyValid(t *testing.T) {
	ss := mustLoad(t, "testdata/policy.hcl")
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
	old := mustLoad(t, "testdata/valid.hcl")
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
	// The changes of summer time in Berlin in 2027: Sunday 2027-03-28
	// 02:00 CET becomes 03:00 CEST (02:00-02:59 never happen), Sunday
	// 2027-10-31 03:00 CEST becomes 02:00 CET (02:00-02:59 happen twice).
	// A window is open while Berlin's clock reads a time in it.
	daily := func(from, to int) *Window {
		return &Window{From: from, To: to, Zone: berlin, Text: fmt.Sprintf("%02d:%02d-%02d:%02d Europe/Berlin", from/60, from%60, to/60, to%60)}
	}
	gap := daily(2*60, 3*60)        // never open on 2027-03-28
	intoGap := daily(60, 2*60+30)   // 01:00 CET to the gap
	fromGap := daily(2*60+30, 4*60) // from the gap to 04:00 CEST
	twice := daily(2*60, 3*60)      // twice on 2027-10-31
	after := daily(3*60, 3*60+30)   // once, CET, on 2027-10-31
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
		// 01:30 CET: the 02:00-03:00 window does not happen that day; it
		// opens on Monday at 02:00 CEST.
		{gap, "2027-03-28T00:30:00Z", false, "2027-03-29T00:00:00Z"},
		{gap, "2027-03-28T01:00:00Z", false, "2027-03-29T00:00:00Z"},
		// 01:59 CET is in 01:00-02:30; 03:00 and 03:15 CEST are not.
		{intoGap, "2027-03-28T00:59:00Z", true, ""},
		{intoGap, "2027-03-28T01:00:00Z", false, "2027-03-28T23:00:00Z"},
		{intoGap, "2027-03-28T01:15:00Z", false, "2027-03-28T23:00:00Z"},
		// 02:30-04:00 opens when the clock jumps to 03:00 CEST, and closes
		// at 04:00 CEST.
		{fromGap, "2027-03-28T00:30:00Z", false, "2027-03-28T01:00:00Z"},
		{fromGap, "2027-03-28T01:00:00Z", true, ""},
		{fromGap, "2027-03-28T01:59:00Z", true, ""},
		{fromGap, "2027-03-28T02:00:00Z", false, "2027-03-29T00:30:00Z"},
		// 01:30 CEST: opens at the first 02:00 (CEST, 00:00 UTC); open
		// through both 02:00-03:00, closed at 03:00 CET.
		{twice, "2027-10-30T23:30:00Z", false, "2027-10-31T00:00:00Z"},
		{twice, "2027-10-31T00:30:00Z", true, ""},
		{twice, "2027-10-31T01:00:00Z", true, ""},
		{twice, "2027-10-31T01:59:00Z", true, ""},
		{twice, "2027-10-31T02:00:00Z", false, "2027-11-01T01:00:00Z"},
		// 03:00-03:30 happens once, in CET.
		{after, "2027-10-31T00:30:00Z", false, "2027-10-31T02:00:00Z"},
		{after, "2027-10-31T02:10:00Z", true, ""},
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
