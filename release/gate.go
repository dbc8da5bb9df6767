package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
)

// Kinds of a missing condition.
const (
	// MissingEvidence: too few distinct hosts passed.
	MissingEvidence = "evidence"
	// MissingHostFailing: a host's latest result failed.
	MissingHostFailing = "failing-host"
	// MissingSoak: the soak has not ended (or not started).
	MissingSoak = "soak"
	// MissingWindow: now is outside every promotion window.
	MissingWindow = "window"
	// MissingFreeze: now is inside a freeze.
	MissingFreeze = "freeze"
)

// Verdict is what a site's promotion policies say of a version at one
// moment: met, or every condition that is not, each as data and as one
// line for people.
type Verdict struct {
	Site    string    `json:"site"`
	Image   string    `json:"image"`
	Version string    `json:"version"`
	At      time.Time `json:"at"`
	Met     bool      `json:"met"`
	Missing []Missing `json:"missing,omitempty"`
}

// Missing is one condition a policy lacks.
type Missing struct {
	// Kind is MissingEvidence, MissingHostFailing, MissingSoak,
	// MissingWindow or MissingFreeze.
	Kind string `json:"kind"`
	// Policy is whose policy it is: `site "a"`, `group "g"`.
	Policy string `json:"policy"`
	// Line says it on one line.
	Line string `json:"line"`
	// Evidence is the count an evidence rule lacks (MissingEvidence).
	Evidence *EvidenceCount `json:"evidence,omitempty"`
	// Host is a failing host (MissingHostFailing).
	Host *HostResult `json:"host,omitempty"`
	// Until is when the soak ends, the window next opens or the freeze
	// ends; nil when unknown (no soak started yet).
	Until *time.Time `json:"until,omitempty"`
	// Reason is a freeze's.
	Reason string `json:"reason,omitempty"`
}

// EvidenceCount is how many distinct hosts passed an evidence rule for a
// profile ("" for any) and stage at its sites, and how many are wanted.
type EvidenceCount struct {
	Sites   []string `json:"sites"`
	Profile string   `json:"profile,omitempty"`
	Stage   string   `json:"stage"`
	Passing int      `json:"passing"`
	Want    int      `json:"want"`
}

// HostResult is a host's latest result of an evidence rule.
type HostResult struct {
	Site      string    `json:"site"`
	Host      string    `json:"host"`
	MachineID string    `json:"machine_id,omitempty"`
	Profile   string    `json:"profile"`
	Stage     string    `json:"stage"`
	At        time.Time `json:"at"`
	Passed    bool      `json:"passed"`
	// Failing are the names of the checks that failed.
	Failing []string `json:"failing,omitempty"`
}

// Lines are the missing conditions' lines.
func (v *Verdict) Lines() []string {
	var out []string
	for _, m := range v.Missing {
		out = append(out, m.Line)
	}
	return out
}

// Gate is the verdict as the catalog records it with a promotion;
// override is the reason given to promote anyway (kept only when the
// verdict is not met). A nil verdict (no policy) is a nil gate.
func (v *Verdict) Gate(override string) *store.Gate {
	if v == nil {
		return nil
	}
	if v.Met {
		return &store.Gate{Met: true}
	}
	return &store.Gate{Met: false, Missing: v.Lines(), Override: override}
}

// PolicyError is a promotion a site's policy refuses: not yet, rather
// than broken (the CLI's exit status 3).
type PolicyError struct {
	Verdict *Verdict
}

func (e *PolicyError) Error() string {
	v := e.Verdict
	return fmt.Sprintf("the promotion policy of site %s refuses %s %s (not yet):\n  %s\n--override --reason WHY promotes anyway, and the catalog records it",
		v.Site, v.Image, v.Version, strings.Join(v.Lines(), "\n  "))
}

// ErrOverrideReason is an override without a reason: the catalog records
// why a policy was overridden.
var ErrOverrideReason = errors.New("overriding the promotion policy needs a reason (--reason), which the catalog records")

// checkPolicy evaluates the site's policies before a promotion of version
// (skip: a rollback, or the version the site runs already, which are
// never gated) and refuses it with a PolicyError unless they are met or
// o.Override. The verdict is nil when there is nothing to evaluate.
func (o Options) checkPolicy(ctx context.Context, image, version string, skip bool) (*Verdict, error) {
	if o.Override && strings.TrimSpace(o.Reason) == "" {
		return nil, ErrOverrideReason
	}
	if skip || len(o.Site.Policies) == 0 {
		return nil, nil
	}
	v, err := Evaluate(ctx, o.Site, image, version, o.Store, o.now())
	if err != nil {
		return nil, err
	}
	if !v.Met && !o.Override {
		return v, &PolicyError{Verdict: v}
	}
	return v, nil
}

// Evaluate says whether version of image meets every policy site is held
// to (site.Policies) at now: the evidence the store holds at the sites the
// policies name (st.Evidence), the soak, the windows and the freezes. A
// site with no policy is met. Only the results of this image and version
// count; a host is its machine id, else its site and host name, and its
// latest result (by when it finished) of a rule's profile and stage is
// the one that counts: a host whose latest result failed blocks the
// promotion, whatever the others say.
func Evaluate(ctx context.Context, site *sites.Site, image, version string, st store.Promotions, now time.Time) (*Verdict, error) {
	v := &Verdict{Site: site.Name, Image: image, Version: version, At: now.UTC(), Met: true}
	evidence := map[string][]store.Evidence{}
	read := func(s string) ([]store.Evidence, error) {
		if evs, ok := evidence[s]; ok {
			return evs, nil
		}
		evs, err := st.Evidence(ctx, s, image, version)
		if err != nil {
			return nil, fmt.Errorf("evaluating the promotion policy of site %s for %s %s: %w", site.Name, image, version, err)
		}
		evidence[s] = evs
		return evs, nil
	}
	for _, p := range site.Policies {
		var soakResults []HostResult
		for _, r := range p.Evidence {
			var results []HostResult
			for _, s := range r.Sites {
				evs, err := read(s)
				if err != nil {
					return nil, err
				}
				for _, e := range evs {
					res := e.Result
					if res.Image != image || res.Version != version || res.Stage != r.Stage ||
						(len(r.Profiles) > 0 && !slices.Contains(r.Profiles, res.Profile)) {
						continue
					}
					hr := HostResult{Site: s, Host: res.Host, MachineID: res.MachineID, Profile: res.Profile, Stage: res.Stage,
						At: res.Finished.UTC(), Passed: res.Passed()}
					for _, c := range res.Failing() {
						hr.Failing = append(hr.Failing, c.Name)
					}
					results = append(results, hr)
				}
			}
			soakResults = append(soakResults, results...)
			v.Missing = append(v.Missing, evidenceMissing(p.Owner, r, results)...)
		}
		if p.Soak > 0 {
			if m := soakMissing(p.Owner, p.Soak, soakResults, now); m != nil {
				v.Missing = append(v.Missing, *m)
			}
		}
		if m := windowMissing(p.Owner, p.Windows, now); m != nil {
			v.Missing = append(v.Missing, *m)
		}
		for _, f := range p.Freezes {
			if f.In(now) {
				until := f.To.UTC()
				v.Missing = append(v.Missing, Missing{Kind: MissingFreeze, Policy: p.Owner, Until: &until, Reason: f.Reason,
					Line: fmt.Sprintf("freeze (%s): %q from %s to %s", p.Owner, f.Reason, stamp(f.From), stamp(f.To))})
			}
		}
	}
	// Two rules may see the same failing host: say it once.
	seen := map[string]bool{}
	v.Missing = slices.DeleteFunc(v.Missing, func(m Missing) bool {
		dup := seen[m.Line]
		seen[m.Line] = true
		return dup
	})
	v.Met = len(v.Missing) == 0
	return v, nil
}

// hostKey is who a host is: its machine id, else its site and name.
func hostKey(r HostResult) string {
	if r.MachineID != "" {
		return "id " + r.MachineID
	}
	return "host " + r.Site + "/" + r.Host
}

// latest is each host's latest result of results (by when it finished),
// in the order of hostKey.
func latest(results []HostResult) []HostResult {
	by := map[string]HostResult{}
	for _, r := range results {
		if prev, ok := by[hostKey(r)]; !ok || !r.At.Before(prev.At) {
			by[hostKey(r)] = r
		}
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]HostResult, len(keys))
	for i, k := range keys {
		out[i] = by[k]
	}
	return out
}

// evidenceMissing is what an evidence rule lacks: for each profile (one
// count for any profile when it names none), the passing hosts short of
// MinHosts, and each host whose latest result failed.
func evidenceMissing(owner string, r *sites.EvidenceRule, results []HostResult) []Missing {
	profiles := r.Profiles
	if len(profiles) == 0 {
		profiles = []string{""}
	}
	var out []Missing
	for _, prof := range profiles {
		var mine []HostResult
		for _, h := range results {
			if prof == "" || h.Profile == prof {
				mine = append(mine, h)
			}
		}
		passing := 0
		for _, h := range latest(mine) {
			if h.Passed {
				passing++
				continue
			}
			h := h
			out = append(out, Missing{Kind: MissingHostFailing, Policy: owner, Host: &h,
				Line: fmt.Sprintf("host %s at %s failed %s (profile %s, stage %s, %s) (%s)", hostName(h), h.Site, strings.Join(h.Failing, ", "),
					h.Profile, h.Stage, stamp(h.At), owner)})
		}
		if passing < r.MinHosts {
			what := "any profile"
			if prof != "" {
				what = "profile " + prof
			}
			out = append(out, Missing{Kind: MissingEvidence, Policy: owner,
				Evidence: &EvidenceCount{Sites: r.Sites, Profile: prof, Stage: r.Stage, Passing: passing, Want: r.MinHosts},
				Line: fmt.Sprintf("evidence (%s): %d of %d distinct hosts passed stage %s for %s at %s: %d more needed",
					owner, passing, r.MinHosts, r.Stage, what, strings.Join(r.Sites, ", "), r.MinHosts-passing)})
		}
	}
	return out
}

// soakMissing is an unfinished soak: it runs from the first passing
// result after the latest failing one (a failure restarts it), over every
// evidence rule of the policy.
func soakMissing(owner string, soak time.Duration, results []HostResult, now time.Time) *Missing {
	sort.SliceStable(results, func(i, j int) bool { return results[i].At.Before(results[j].At) })
	var start *HostResult
	var lastFail *HostResult
	for i := range results {
		r := &results[i]
		switch {
		case !r.Passed:
			start, lastFail = nil, r
		case start == nil:
			start = r
		}
	}
	m := &Missing{Kind: MissingSoak, Policy: owner}
	switch {
	case start == nil && lastFail != nil:
		m.Line = fmt.Sprintf("soak (%s): %s starts at the next passing result; host %s at %s failed at %s, which restarts it",
			owner, span(soak), hostName(*lastFail), lastFail.Site, stamp(lastFail.At))
	case start == nil:
		m.Line = fmt.Sprintf("soak (%s): %s starts at the first passing result; there is none yet", owner, span(soak))
	default:
		end := start.At.Add(soak)
		if !now.Before(end) {
			return nil
		}
		m.Until = &end
		since := fmt.Sprintf("host %s at %s passed at %s", hostName(*start), start.Site, stamp(start.At))
		if lastFail != nil {
			since += fmt.Sprintf(", after host %s failed at %s", hostName(*lastFail), stamp(lastFail.At))
		}
		m.Line = fmt.Sprintf("soak (%s): %s since %s ends at %s (in %s)", owner, span(soak), since, stamp(end), span(end.Sub(now)))
	}
	return m
}

// windowMissing says when the first of the windows opens, when now is in
// none of them; nil when there are none or now is in one.
func windowMissing(owner string, ws []*sites.Window, now time.Time) *Missing {
	if len(ws) == 0 {
		return nil
	}
	var next time.Time
	var which *sites.Window
	var texts []string
	for _, w := range ws {
		open, n := w.Open(now)
		if open {
			return nil
		}
		texts = append(texts, w.Text)
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next, which = n, w
		}
	}
	m := &Missing{Kind: MissingWindow, Policy: owner}
	m.Line = fmt.Sprintf("window (%s): outside the promotion windows (%s)", owner, strings.Join(texts, "; "))
	if which != nil {
		until := next.UTC()
		m.Until = &until
		m.Line += fmt.Sprintf("; the next opens at %s (%s, in %s)", next.In(which.Zone).Format("Mon 2006-01-02 15:04 MST"), stamp(next), span(next.Sub(now)))
	}
	return m
}

func hostName(h HostResult) string {
	if h.MachineID != "" {
		return fmt.Sprintf("%s (machine id %s)", h.Host, h.MachineID)
	}
	return h.Host
}

// span is a duration to the minute, without zero minutes and seconds:
// "24h", "1h30m", "5m".
func span(d time.Duration) string {
	d = d.Round(time.Minute)
	if d < time.Minute {
		return "under a minute"
	}
	out := strings.TrimSuffix(d.String(), "0s")
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
