package sites

import (
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	// A policy's time_zone names an IANA zone: the zones come with
	// imagectl, so a window means the same on every machine.
	_ "time/tzdata"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/manifest"
)

// Policy is a policy block of a site or a group: what a version needs
// before promote may point a site at it. A site is held to every policy
// that applies to it, its own and each of its groups' (Site.Policies): a
// site's own policy adds conditions, it never loosens a group's.
type Policy struct {
	// Owner says whose policy it is, for messages: `site "a"`, `group "g"`.
	Owner string
	// Evidence are the host results the version needs, each rule on its
	// own.
	Evidence []*EvidenceRule
	// Soak is how long after the first passing result of the evidence
	// rules, with no failing result since, the version must wait; 0 for
	// none.
	Soak time.Duration
	// Windows are when a promotion may happen (any of them); none: always.
	Windows []*Window
	// Freezes are when no promotion may happen.
	Freezes []*Freeze
	// DeclRange is the block's header, for diagnostics.
	DeclRange hcl.Range
}

// EvidenceRule is an evidence block: passing results of the version from
// at least MinHosts distinct hosts at any of Sites, for each of Profiles
// (any profile when none), at Stage.
type EvidenceRule struct {
	Sites    []string
	Profiles []string
	Stage    string
	MinHosts int
	// sitesRange is the sites attribute's, for the check that each is a
	// site of the file.
	sitesRange hcl.Range
}

// Window is a window block: the days (none: every day) and the hours
// [From, To) of a day, in minutes since midnight, in Zone.
type Window struct {
	Days     []time.Weekday
	From, To int
	Zone     *time.Location
	// Text is how the window reads in messages: "mon,tue 09:00-17:00 Europe/Berlin".
	Text string
}

// Freeze is a freeze block: no promotion in [From, To).
type Freeze struct {
	From, To time.Time
	Reason   string
}

// DefaultEvidenceStage is the stage an evidence block counts when it names
// none: a host converged by the site bootstrap, the runbooks' "ready".
const DefaultEvidenceStage = manifest.StageConverged

var policyBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "soak"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "evidence"}, {Type: "window"}, {Type: "freeze"}},
}

var evidenceBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "sites", Required: true}, {Name: "profiles"}, {Name: "stage"}, {Name: "min_hosts"}},
}

var windowBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "days"}, {Name: "hours"}, {Name: "time_zone"}},
}

var freezeBodySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "from", Required: true}, {Name: "to", Required: true}, {Name: "reason", Required: true}},
}

// dayNames are a window's days, Sunday first as time.Weekday.
var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// reHours is a window's hours: HH:MM-HH:MM.
var reHours = regexp.MustCompile(`^([01][0-9]|2[0-4]):([0-5][0-9])-([01][0-9]|2[0-4]):([0-5][0-9])$`)

// decodePolicies decodes the policy blocks of a site's or group's body
// content (at most one); owner names it for messages, and its evidence
// blocks may name the sites declared (sorted).
func decodePolicies(owner string, blocks hcl.Blocks, declared []string) (*Policy, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var out *Policy
	for _, b := range blocks.OfType("policy") {
		p, d := decodePolicy(owner, b)
		diags = append(diags, d...)
		diags = append(diags, checkPolicySites(p, declared)...)
		if out != nil {
			diags = append(diags, hclkit.ErrorAt(b.DefRange, "Duplicate policy",
				fmt.Sprintf("%s already has a policy block at %s: write its conditions in one.", owner, out.DeclRange)))
			continue
		}
		out = p
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return out, diags
}

func decodePolicy(owner string, b *hcl.Block) (*Policy, hcl.Diagnostics) {
	p := &Policy{Owner: owner, DeclRange: b.DefRange}
	content, diags := b.Body.Content(policyBodySchema)
	at := &attrs{content: content}
	at.dur("soak", &p.Soak)
	diags = append(diags, at.diags...)
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "evidence":
			r, d := decodeEvidenceRule(blk)
			diags = append(diags, d...)
			if r != nil {
				p.Evidence = append(p.Evidence, r)
			}
		case "window":
			w, d := decodeWindow(blk)
			diags = append(diags, d...)
			if w != nil {
				p.Windows = append(p.Windows, w)
			}
		case "freeze":
			f, d := decodeFreeze(blk)
			diags = append(diags, d...)
			if f != nil {
				p.Freezes = append(p.Freezes, f)
			}
		}
	}
	if a := content.Attributes["soak"]; a != nil && len(content.Blocks.OfType("evidence")) == 0 {
		diags = append(diags, hclkit.ErrorAt(a.Range, "Soak without evidence",
			"A soak runs from the first passing result of the policy's evidence blocks: add an evidence block, or remove soak."))
	}
	if len(content.Attributes) == 0 && len(content.Blocks) == 0 {
		diags = append(diags, hclkit.ErrorAt(b.DefRange, "Empty policy",
			fmt.Sprintf("The policy of %s sets no condition: give it an evidence, window or freeze block or a soak, or remove it.", owner)))
	}
	// Returned with its errors too: its evidence sites are still checked,
	// so that every problem shows at once.
	return p, diags
}

func decodeEvidenceRule(b *hcl.Block) (*EvidenceRule, hcl.Diagnostics) {
	r := &EvidenceRule{Stage: DefaultEvidenceStage, MinHosts: 1}
	content, diags := b.Body.Content(evidenceBodySchema)
	at := &attrs{content: content}
	if a := content.Attributes["sites"]; a != nil {
		r.sitesRange = a.Expr.Range()
		r.Sites = at.names("sites", `["canary-a"]`, nil)
		if len(r.Sites) == 0 && !at.diags.HasErrors() {
			at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid sites", "An evidence block names at least one site whose hosts' results count."))
		}
	}
	r.Profiles = at.names("profiles", `["slice"]`, manifest.Profiles)
	at.str("stage", &r.Stage, func(v string) string {
		if !slices.Contains(manifest.Stages, v) {
			return fmt.Sprintf("%q is not a validation stage (%s).%s", v, strings.Join(manifest.Stages, ", "), closest(v, manifest.Stages))
		}
		return ""
	})
	if a, v, evaluated := at.value("min_hosts"); a != nil {
		n, ok := 0, false
		if evaluated && v.IsKnown() && !v.IsNull() && v.Type() == cty.Number {
			if bf := v.AsBigFloat(); bf.IsInt() {
				i, _ := bf.Int(new(big.Int))
				if i.IsInt64() && i.Int64() >= 1 && i.Int64() <= 10000 {
					n, ok = int(i.Int64()), true
				}
			}
		}
		if !ok && evaluated {
			at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid min_hosts", "min_hosts is a whole number of hosts, 1 to 10000."))
		}
		r.MinHosts = max(n, 1)
	}
	// Returned with its errors too, for the check of its sites.
	return r, append(diags, at.diags...)
}

func decodeWindow(b *hcl.Block) (*Window, hcl.Diagnostics) {
	w := &Window{From: 0, To: 24 * 60, Zone: time.UTC}
	content, diags := b.Body.Content(windowBodySchema)
	at := &attrs{content: content}
	days := at.names("days", `["mon", "tue"]`, dayNames)
	for _, d := range days {
		w.Days = append(w.Days, time.Weekday(slices.Index(dayNames, d)))
	}
	hours := "00:00-24:00"
	at.str("hours", &hours, func(v string) string {
		m := reHours.FindStringSubmatch(v)
		if m == nil {
			return fmt.Sprintf("%q is not hours such as \"09:00-17:00\" (HH:MM-HH:MM, to at most 24:00).", v)
		}
		from, to := clock(m[1], m[2]), clock(m[3], m[4])
		if from > 24*60 || to > 24*60 || from >= to {
			return fmt.Sprintf("%q: the window must start before it ends, within one day (at most 24:00); a window past midnight is two windows.", v)
		}
		return ""
	})
	if m := reHours.FindStringSubmatch(hours); m != nil {
		w.From, w.To = clock(m[1], m[2]), clock(m[3], m[4])
	}
	zone := "UTC"
	at.str("time_zone", &zone, func(v string) string {
		if v == "" || v == "Local" {
			return fmt.Sprintf("%q: name an IANA time zone such as \"Europe/Berlin\" or \"UTC\" (a window means the same on every machine).", v)
		}
		if _, err := time.LoadLocation(v); err != nil {
			return fmt.Sprintf("%q is not a time zone imagectl knows (IANA names such as \"Europe/Berlin\" or \"UTC\").", v)
		}
		return ""
	})
	w.Zone, _ = time.LoadLocation(zone)
	diags = append(diags, at.diags...)
	if diags.HasErrors() {
		return nil, diags
	}
	text := "every day"
	if len(days) > 0 {
		text = strings.Join(days, ",")
	}
	w.Text = fmt.Sprintf("%s %s %s", text, hours, zone)
	return w, diags
}

// clock is HH and MM as minutes since midnight.
func clock(hh, mm string) int {
	h, _ := strconv.Atoi(hh)
	m, _ := strconv.Atoi(mm)
	return h*60 + m
}

func decodeFreeze(b *hcl.Block) (*Freeze, hcl.Diagnostics) {
	f := &Freeze{}
	content, diags := b.Body.Content(freezeBodySchema)
	at := &attrs{content: content}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		var raw string
		at.str(t.name, &raw, func(v string) string {
			if _, err := time.Parse(time.RFC3339, v); err != nil {
				return fmt.Sprintf("%q is not an RFC 3339 time such as \"2026-12-20T00:00:00Z\".", v)
			}
			return ""
		})
		if raw != "" {
			*t.dst, _ = time.Parse(time.RFC3339, raw)
		}
	}
	at.str("reason", &f.Reason, func(v string) string {
		if strings.TrimSpace(v) == "" {
			return "A freeze says why: promote names it when it refuses."
		}
		return ""
	})
	diags = append(diags, at.diags...)
	if a := content.Attributes["to"]; a != nil && !diags.HasErrors() && !f.From.Before(f.To) {
		diags = append(diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid to", "A freeze ends (to) after it starts (from)."))
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return f, diags
}

// names decodes a list attribute of names; when allowed is not nil, each
// must be one of them (with a did-you-mean). example is for the message.
func (at *attrs) names(name, example string, allowed []string) []string {
	a, v, ok := at.value(name)
	if !ok {
		return nil
	}
	if v.IsNull() || !v.IsKnown() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid "+name, name+" is a list of names, such as "+example+"."))
		return nil
	}
	var out []string
	for _, e := range v.AsValueSlice() {
		if e.IsNull() || !e.IsKnown() || e.Type() != cty.String {
			at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid "+name, "Every one of "+name+" is a name in quotes."))
			continue
		}
		n := e.AsString()
		switch {
		case allowed != nil && !slices.Contains(allowed, n):
			at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid "+name,
				fmt.Sprintf("%q is not one of %s.%s", n, strings.Join(allowed, ", "), closest(n, allowed))))
		case slices.Contains(out, n):
			at.diags = append(at.diags, hclkit.ErrorAt(a.Expr.Range(), "Invalid "+name, fmt.Sprintf("%q is named twice.", n)))
		default:
			out = append(out, n)
		}
	}
	return out
}

// checkPolicySites checks that every evidence block of p names sites
// declared in the file (declared, sorted).
func checkPolicySites(p *Policy, declared []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if p == nil {
		return nil
	}
	for _, r := range p.Evidence {
		for _, s := range r.Sites {
			if !slices.Contains(declared, s) {
				diags = append(diags, hclkit.ErrorAt(r.sitesRange, "Unknown evidence site",
					fmt.Sprintf("The policy of %s counts evidence at site %q, which the sites file does not declare (sites: %s).%s",
						p.Owner, s, strings.Join(declared, ", "), closest(s, declared))))
			}
		}
	}
	return diags
}

// Open reports whether t falls in the window, and otherwise when the
// window next opens after t (always within a week: a window has at least
// one day). The window is open while the clock of its zone reads one of
// its days and a time from From to To: on the day summer time starts, a
// window in the hour that never happens does not open, and one that
// starts in it opens when the clock jumps past it; on the day it ends,
// a window in the hour that happens twice is open both times.
func (w *Window) Open(t time.Time) (open bool, next time.Time) {
	if w.openAt(t) {
		return true, time.Time{}
	}
	lt := t.In(w.Zone)
	for d := 0; d <= 8; d++ {
		day := time.Date(lt.Year(), lt.Month(), lt.Day()+d, 0, 0, 0, 0, w.Zone)
		if len(w.Days) > 0 && !slices.Contains(w.Days, day.Weekday()) {
			continue
		}
		for _, c := range w.starts(day) {
			if c.After(t) && w.openAt(c) && (next.IsZero() || c.Before(next)) {
				next = c
			}
		}
		if !next.IsZero() {
			return false, next
		}
	}
	return false, time.Time{}
}

// openAt is whether the zone's clock at t reads a day and time of the
// window.
func (w *Window) openAt(t time.Time) bool {
	lt := t.In(w.Zone)
	if len(w.Days) > 0 && !slices.Contains(w.Days, lt.Weekday()) {
		return false
	}
	m := lt.Hour()*60 + lt.Minute()
	return m >= w.From && m < w.To
}

// starts are the instants the window may open on day: when the clock
// reads From (time.Date's, and the earlier one when From happens twice),
// and when the zone's offset last changed (the clock jumping past From).
func (w *Window) starts(day time.Time) []time.Time {
	s := time.Date(day.Year(), day.Month(), day.Day(), w.From/60, w.From%60, 0, 0, w.Zone)
	out := []time.Time{s}
	if zs, _ := s.ZoneBounds(); !zs.IsZero() {
		out = append(out, zs)
		_, before := zs.Add(-time.Second).Zone()
		if _, off := s.Zone(); before > off {
			out = append(out, s.Add(-time.Duration(before-off)*time.Second))
		}
	}
	return out
}

// In reports whether t falls in the freeze.
func (f *Freeze) In(t time.Time) bool { return !t.Before(f.From) && t.Before(f.To) }
