package release_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/upload/maassim"
	"github.com/gpuaas/imagectl/validate"
)

// thursday is 2026-11-26 10:00 UTC, 11:00 in Berlin: inside a window of
// Monday to Thursday, 09:00 to 17:00 Berlin time.
var thursday = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

// hostResult is a real validation result of demo VERSION on a host, at
// profile and stage, finished at; failing names its failed checks.
func hostResult(host, machineID, profile, stage, version string, at time.Time, failing ...string) validate.Result {
	r := validate.Result{Schema: validate.ResultSchema, Image: "demo", Version: version, Profile: profile, Stage: stage,
		Host: host, MachineID: machineID, Live: true, Started: at.Add(-time.Minute), Finished: at,
		ScriptSHA256: strings.Repeat("ab", 32)}
	for _, name := range []string{"nvidia-smi", "ib-link", "kubelet"} {
		c := validate.Check{Status: validate.StatusPass, Name: name, Detail: "ok"}
		for _, f := range failing {
			if f == name {
				c = validate.Check{Status: validate.StatusFail, Name: name, Detail: "down", Remediation: "reseat the cable"}
				r.Counts.Failures++
			}
		}
		r.Checks = append(r.Checks, c)
		r.Counts.Checks++
	}
	return r
}

// addEvidence records results at a site, as hostcheck would.
func addEvidence(t testing.TB, st store.Promotions, site string, rs ...validate.Result) {
	t.Helper()
	var evs []store.Evidence
	for _, r := range rs {
		if err := r.Check(); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, store.Evidence{Site: site, RecordedAt: r.Finished, RecordedBy: "ci", Via: "evidence add", Result: r})
	}
	if err := st.AddEvidence(ctx, evs); err != nil {
		t.Fatal(err)
	}
}

// policySites parses a sites file of the sites canary-a, canary-b and
// fleet-1, fleet-2 (group fleet), the group's policy body given, at the
// URLs given (a placeholder for those not).
func policySites(t testing.TB, groupPolicy, sitePolicy string, urls map[string]string) *sites.File {
	t.Helper()
	var b strings.Builder
	for _, n := range []string{"canary-a", "canary-b", "fleet-1", "fleet-2"} {
		url := urls[n]
		if url == "" {
			url = "http://" + n + ".example/MAAS"
		}
		pol := ""
		if n == "fleet-1" && sitePolicy != "" {
			pol = "  policy {\n" + sitePolicy + "\n  }\n"
		}
		fmt.Fprintf(&b, "site %q {\n  maas_url = %q\n  api_key_env = \"KEY_%s\"\n  timeout = \"5s\"\n  last_chunk_timeout = \"5s\"\n  complete_timeout = \"5s\"\n%s}\n",
			n, url, strings.ToUpper(strings.ReplaceAll(n, "-", "_")), pol)
	}
	b.WriteString("group \"fleet\" {\n  sites = [\"fleet-1\", \"fleet-2\"]\n")
	if groupPolicy != "" {
		b.WriteString("  policy {\n" + groupPolicy + "\n  }\n")
	}
	b.WriteString("}\n")
	path := filepath.Join(t.TempDir(), "sites.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ss, diags := sites.Load(path)
	if diags.HasErrors() {
		t.Fatalf("%s\n%s", diags, b.String())
	}
	return ss
}

func site(t testing.TB, ss *sites.File, name string) *sites.Site {
	t.Helper()
	s, err := ss.Site(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func evaluate(t *testing.T, s *sites.Site, st store.Promotions, now time.Time) *release.Verdict {
	t.Helper()
	v, err := release.Evaluate(ctx, s, "demo", "1.0.0", st, now)
	if err != nil {
		t.Fatal(err)
	}
	if v.Met != (len(v.Missing) == 0) {
		t.Fatalf("met %v with missing %v", v.Met, v.Lines())
	}
	return v
}

// missingKinds is each missing condition as "kind profile passing/want".
func missingKinds(v *release.Verdict) string {
	var out []string
	for _, m := range v.Missing {
		switch m.Kind {
		case release.MissingEvidence:
			out = append(out, fmt.Sprintf("%s %d/%d", strings.TrimSpace(m.Kind+" "+m.Evidence.Profile), m.Evidence.Passing, m.Evidence.Want))
		case release.MissingHostFailing:
			out = append(out, fmt.Sprintf("%s %s@%s %s", m.Kind, m.Host.Host, m.Host.Site, strings.Join(m.Host.Failing, ",")))
		default:
			out = append(out, m.Kind)
		}
	}
	return strings.Join(out, "; ")
}

// TestEvaluateEvidence: only passing results of the version, profile and
// stage at the named sites count, once per distinct host (its machine id,
// else its site and name), by its latest result; a host whose latest
// result failed blocks, naming its failed checks.
func TestEvaluateEvidence(t *testing.T) {
	ss := policySites(t, `evidence {
      sites     = ["canary-a", "canary-b"]
      profiles  = ["slice", "bare-metal"]
      min_hosts = 2
    }`, "", nil)
	st := store.NewDir(t.TempDir())
	f1 := site(t, ss, "fleet-1")
	t0 := thursday.Add(-48 * time.Hour)

	v := evaluate(t, f1, st, thursday)
	if got := missingKinds(v); got != "evidence slice 0/2; evidence bare-metal 0/2" {
		t.Fatalf("no evidence: %s", got)
	}
	if !strings.Contains(v.Missing[0].Line, `evidence (group "fleet"): 0 of 2 distinct hosts passed stage converged for profile slice at canary-a, canary-b: 2 more needed`) {
		t.Errorf("line: %s", v.Missing[0].Line)
	}
	addEvidence(t, st, "canary-a",
		hostResult("a1", "", "slice", "converged", "1.0.0", t0),
		hostResult("a1", "", "slice", "converged", "1.0.0", t0.Add(time.Hour)), // the same host again
		hostResult("a2", "", "slice", "converged", "1.1.0", t0),                // another version
		hostResult("a3", "", "slice", "image", "1.0.0", t0),                    // another stage
	)
	addEvidence(t, st, "fleet-2", hostResult("x1", "", "slice", "converged", "1.0.0", t0)) // not a named site
	if got := missingKinds(evaluate(t, f1, st, thursday)); got != "evidence slice 1/2; evidence bare-metal 0/2" {
		t.Fatalf("one host: %s", got)
	}
	// The same name at another site is another host; the same machine id
	// is one host wherever it reports.
	addEvidence(t, st, "canary-b",
		hostResult("a1", "", "slice", "converged", "1.0.0", t0),
		hostResult("m1", "0123abcd", "bare-metal", "converged", "1.0.0", t0))
	addEvidence(t, st, "canary-a", hostResult("m1-renamed", "0123abcd", "bare-metal", "converged", "1.0.0", t0.Add(time.Minute)))
	if got := missingKinds(evaluate(t, f1, st, thursday)); got != "evidence bare-metal 1/2" {
		t.Fatalf("distinct hosts: %s", got)
	}
	addEvidence(t, st, "canary-b", hostResult("m2", "4567cdef", "bare-metal", "converged", "1.0.0", t0))
	if v := evaluate(t, f1, st, thursday); !v.Met {
		t.Fatalf("enough evidence: %v", v.Lines())
	}
	// A host's later failure: it no longer counts and blocks.
	addEvidence(t, st, "canary-b", hostResult("a1", "", "slice", "converged", "1.0.0", t0.Add(2*time.Hour), "ib-link", "kubelet"))
	v = evaluate(t, f1, st, thursday)
	if got := missingKinds(v); got != "failing-host a1@canary-b ib-link,kubelet; evidence slice 1/2" {
		t.Fatalf("a failing host: %s", got)
	}
	if line := v.Missing[0].Line; !strings.Contains(line, "host a1 at canary-b failed ib-link, kubelet (profile slice, stage converged, 2026-11-24T12:00:00Z)") {
		t.Errorf("line: %s", line)
	}
	// Fixed: its latest result passes again.
	addEvidence(t, st, "canary-b", hostResult("a1", "", "slice", "converged", "1.0.0", t0.Add(3*time.Hour)))
	if v := evaluate(t, f1, st, thursday); !v.Met {
		t.Fatalf("fixed: %v", v.Lines())
	}
	// A site with no policy is met without reading anything.
	if v := evaluate(t, site(t, ss, "canary-a"), st, thursday); !v.Met || v.Missing != nil {
		t.Errorf("no policy: %+v", v)
	}
}

// TestEvaluateSoak: the soak runs from the first passing result; a
// failing result restarts it from the next pass.
func TestEvaluateSoak(t *testing.T) {
	ss := policySites(t, `evidence {
      sites = ["canary-a"]
    }
    soak = "24h"`, "", nil)
	st := store.NewDir(t.TempDir())
	f2 := site(t, ss, "fleet-2")
	t0 := thursday.Add(-time.Hour)
	if got := missingKinds(evaluate(t, f2, st, thursday)); got != "evidence 0/1; soak" {
		t.Fatalf("nothing yet: %s", got)
	}
	addEvidence(t, st, "canary-a", hostResult("a1", "", "slice", "converged", "1.0.0", t0))
	v := evaluate(t, f2, st, thursday)
	if got := missingKinds(v); got != "soak" || !v.Missing[0].Until.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("soaking: %s %v", got, v.Missing)
	}
	if line := v.Missing[0].Line; line != `soak (group "fleet"): 24h since host a1 at canary-a passed at 2026-11-26T09:00:00Z ends at 2026-11-27T09:00:00Z (in 23h)` {
		t.Errorf("line: %s", line)
	}
	if v := evaluate(t, f2, st, t0.Add(24*time.Hour)); !v.Met {
		t.Fatalf("soaked: %v", v.Lines())
	}
	// Another host fails after the first pass, then passes: the soak runs
	// from that pass.
	addEvidence(t, st, "canary-a", hostResult("a2", "", "slice", "converged", "1.0.0", t0.Add(2*time.Hour), "nvidia-smi"))
	v = evaluate(t, f2, st, t0.Add(25*time.Hour))
	if got := missingKinds(v); got != "failing-host a2@canary-a nvidia-smi; soak" || v.Missing[1].Until != nil ||
		!strings.Contains(v.Missing[1].Line, "starts at the next passing result; host a2 at canary-a failed at 2026-11-26T11:00:00Z") {
		t.Fatalf("a failure after the pass: %s %v", got, v.Lines())
	}
	addEvidence(t, st, "canary-a", hostResult("a2", "", "slice", "converged", "1.0.0", t0.Add(3*time.Hour)))
	v = evaluate(t, f2, st, t0.Add(25*time.Hour))
	if got := missingKinds(v); got != "soak" || !v.Missing[0].Until.Equal(t0.Add(27*time.Hour)) {
		t.Fatalf("restarted: %s %v", got, v.Lines())
	}
	if v := evaluate(t, f2, st, t0.Add(27*time.Hour)); !v.Met {
		t.Fatalf("soaked again: %v", v.Lines())
	}
}

// TestEvaluateWindowsAndFreezes: a window is read in its zone and says
// when it opens next; a freeze names its reason; a site is held to its own
// policy and its group's.
func TestEvaluateWindowsAndFreezes(t *testing.T) {
	ss := policySites(t, `window {
      days      = ["mon", "tue", "wed", "thu"]
      hours     = "09:00-17:00"
      time_zone = "Europe/Berlin"
    }`, `freeze {
      from   = "2026-12-20T00:00:00Z"
      to     = "2027-01-04T00:00:00Z"
      reason = "year-end freeze"
    }
    window {
      hours = "00:00-24:00"
    }`, nil)
	st := store.NewDir(t.TempDir())
	f1, f2 := site(t, ss, "fleet-1"), site(t, ss, "fleet-2")
	if v := evaluate(t, f1, st, thursday); !v.Met {
		t.Fatalf("inside the window: %v", v.Lines())
	}
	friday := thursday.Add(24 * time.Hour)
	v := evaluate(t, f2, st, friday)
	if got := missingKinds(v); got != "window" || !v.Missing[0].Until.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("friday: %s %v", got, v.Missing)
	}
	if line := v.Missing[0].Line; line != `window (group "fleet"): outside the promotion windows (mon,tue,wed,thu 09:00-17:00 Europe/Berlin); the next opens at Mon 2026-11-30 09:00 CET (2026-11-30T08:00:00Z, in 70h)` {
		t.Errorf("line: %s", line)
	}
	// Monday 2026-12-21, 10:00 Berlin: the group's window is open, the
	// site's own freeze is not; fleet-2 has no freeze.
	monday := time.Date(2026, 12, 21, 9, 0, 0, 0, time.UTC)
	v = evaluate(t, f1, st, monday)
	if got := missingKinds(v); got != "freeze" || v.Missing[0].Reason != "year-end freeze" || !v.Missing[0].Until.Equal(time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("in the freeze: %s %v", got, v.Missing)
	}
	if line := v.Missing[0].Line; line != `freeze (site "fleet-1"): "year-end freeze" from 2026-12-20T00:00:00Z to 2027-01-04T00:00:00Z` {
		t.Errorf("line: %s", line)
	}
	if v := evaluate(t, f2, st, monday); !v.Met {
		t.Errorf("fleet-2 has no freeze: %v", v.Lines())
	}
	// Saturday in the freeze: both policies say no.
	if got := missingKinds(evaluate(t, f1, st, monday.Add(5*24*time.Hour))); got != "freeze; window" {
		t.Errorf("saturday in the freeze: %s", got)
	}
}

// policyFixture is the sites of policySites, fleet-1 and fleet-2 and
// canary-a on simulated MAAS, and a store holding demo 1.0.0 and 1.1.0.
type policyFixture struct {
	ss    *sites.File
	sims  map[string]*maassim.Server
	store *store.Dir
	opts  release.Options
}

func newPolicyFixture(t *testing.T, groupPolicy, sitePolicy string) *policyFixture {
	t.Helper()
	f := &policyFixture{sims: map[string]*maassim.Server{}, store: store.NewDir(t.TempDir())}
	urls := map[string]string{}
	var env []string
	for _, n := range []string{"canary-a", "fleet-1", "fleet-2"} {
		sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
		t.Cleanup(sim.Close)
		f.sims[n], urls[n] = sim, sim.URL
		env = append(env, "KEY_"+strings.ToUpper(strings.ReplaceAll(n, "-", "_"))+"="+sim.AdminKey)
	}
	f.ss = policySites(t, groupPolicy, sitePolicy, urls)
	signer, pub := storetest.Keys(t, t.TempDir())
	v, err := signing.LoadPublicKeyFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	for _, ver := range []string{"1.0.0", "1.1.0"} {
		tgz, man := storetest.Artifact(t, t.TempDir(), "demo", ver, storetest.Options{Signer: signer})
		if _, err := f.store.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.opts = release.Options{Store: f.store, Env: env, Verifier: v, By: "alice", Configure: quick, Now: func() time.Time { return thursday }}
	return f
}

func (f *policyFixture) at(t testing.TB, name string) release.Options {
	o := f.opts
	o.Site = site(t, f.ss, name)
	return o
}

const canaryPolicy = `evidence {
      sites     = ["canary-a"]
      profiles  = ["slice"]
      min_hosts = 2
    }`

const yearEnd = `freeze {
      from   = "2026-12-20T00:00:00Z"
      to     = "2027-01-04T00:00:00Z"
      reason = "year-end freeze"
    }`

// TestPromotePolicy: a promotion the policy refuses sends nothing and
// records nothing; with the evidence it goes through and records the
// verdict; inside a freeze it is refused naming it; --override promotes
// anyway and the history shows what was missing and why; a rollback is
// never gated.
func TestPromotePolicy(t *testing.T) {
	f := newPolicyFixture(t, canaryPolicy, yearEnd)
	o := f.at(t, "fleet-1")
	_, err := release.Promote(ctx, "demo", "1.0.0", o)
	var pe *release.PolicyError
	if !errors.As(err, &pe) || pe.Verdict.Met || missingKinds(pe.Verdict) != "evidence slice 0/2" {
		t.Fatalf("before evidence: %v", err)
	}
	if !strings.Contains(err.Error(), "the promotion policy of site fleet-1 refuses demo 1.0.0 (not yet):\n  evidence (group \"fleet\"): 0 of 2 distinct hosts passed stage converged for profile slice at canary-a") {
		t.Errorf("error: %v", err)
	}
	if got := names(f.sims["fleet-1"]); len(got) != 0 {
		t.Errorf("a refused promotion uploaded %v", got)
	}
	if h, _ := f.store.History(ctx, "fleet-1", "demo"); len(h) != 0 {
		t.Errorf("a refused promotion recorded %+v", h)
	}
	addEvidence(t, f.store, "canary-a",
		hostResult("a1", "", "slice", "converged", "1.0.0", thursday.Add(-time.Hour)),
		hostResult("a2", "", "slice", "converged", "1.0.0", thursday.Add(-time.Hour)))
	res, err := release.Promote(ctx, "demo", "1.0.0", o)
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Promotion.Gate; g == nil || !g.Met || g.Missing != nil || g.Override != "" || res.Policy == nil || !res.Policy.Met {
		t.Fatalf("met: gate %+v, policy %+v", g, res.Policy)
	}

	// 1.1.0 in the freeze, with its evidence: refused naming the freeze.
	addEvidence(t, f.store, "canary-a",
		hostResult("a1", "", "slice", "converged", "1.1.0", thursday.Add(-time.Hour)),
		hostResult("a2", "", "slice", "converged", "1.1.0", thursday.Add(-time.Hour)))
	inFreeze := time.Date(2026, 12, 22, 10, 0, 0, 0, time.UTC)
	o.Now = func() time.Time { return inFreeze }
	_, err = release.Promote(ctx, "demo", "1.1.0", o)
	if !errors.As(err, &pe) || missingKinds(pe.Verdict) != "freeze" || !strings.Contains(err.Error(), `"year-end freeze" from 2026-12-20T00:00:00Z to 2027-01-04T00:00:00Z`) {
		t.Fatalf("in the freeze: %v", err)
	}
	o.Override = true
	if _, err := release.Promote(ctx, "demo", "1.1.0", o); !errors.Is(err, release.ErrOverrideReason) {
		t.Fatalf("an override without a reason: %v", err)
	}
	o.Reason = "CVE-2026-1234 fix cannot wait"
	o.By = "carol"
	res, err = release.Promote(ctx, "demo", "1.1.0", o)
	if err != nil || res.Policy == nil || res.Policy.Met || res.Promotion.Gate.Override != o.Reason {
		t.Fatalf("override: %+v %v", res, err)
	}
	h, err := f.store.History(ctx, "fleet-1", "demo")
	if err != nil || len(h) != 2 {
		t.Fatalf("history %+v %v", h, err)
	}
	g := h[1].Gate
	if g == nil || g.Met || g.Override != "CVE-2026-1234 fix cannot wait" || len(g.Missing) != 1 || !strings.Contains(g.Missing[0], "year-end freeze") ||
		h[1].By != "carol" || h[1].Version != "1.1.0" || h[0].Gate == nil || !h[0].Gate.Met {
		t.Fatalf("the catalog's override: %+v %+v", h[1], g)
	}

	// A rollback in the freeze: always allowed, no gate.
	o.Override, o.Reason = false, "1.1.0 breaks NCCL"
	res, err = release.Rollback(ctx, "demo", o)
	if err != nil || res.Version != "1.0.0" || res.Promotion.Gate != nil || res.Policy != nil {
		t.Fatalf("rollback in the freeze: %+v %v", res, err)
	}
	// Promoting what the site runs repairs, ungated.
	if res, err := release.Promote(ctx, "demo", "1.0.0", o); err != nil || !res.AlreadyCurrent {
		t.Fatalf("the current version in the freeze: %+v %v", res, err)
	}
	// A site with no policy: no gate recorded.
	res, err = release.Promote(ctx, "demo", "1.0.0", f.at(t, "canary-a"))
	if err != nil || res.Promotion.Gate != nil || res.Policy != nil {
		t.Fatalf("no policy: %+v %v", res, err)
	}
}

// TestRolloutPolicy: a rollout to a group reports each site's policy; the
// canary (no policy) goes first, the refused sites are "refused", not
// failed, and the rollout is "not yet"; with the canary's evidence the
// same rollout finishes; a site's own freeze refuses it alone.
func TestRolloutPolicy(t *testing.T) {
	f := newPolicyFixture(t, canaryPolicy, yearEnd)
	sitesOf, err := f.ss.Resolve([]string{"canary-a", "fleet"})
	if err != nil {
		t.Fatal(err)
	}
	ro := release.RolloutOptions{Options: f.opts, Sites: sitesOf, Canary: "canary-a", Parallel: 2}
	res, err := release.Rollout(ctx, "demo", "1.0.0", ro)
	if err != nil {
		t.Fatal(err)
	}
	got := func(res *release.RolloutResult) string {
		var out []string
		for _, s := range res.Sites {
			out = append(out, s.Site+"="+s.Result)
		}
		return strings.Join(out, " ")
	}
	if g := got(res); g != "canary-a=ok fleet-1=refused fleet-2=refused" || !res.NotYet() || res.OK() {
		t.Fatalf("before evidence: %s, not yet %v", g, res.NotYet())
	}
	for _, s := range res.Sites[1:] {
		if s.Policy == nil || s.Policy.Met || !strings.HasPrefix(s.Detail, `not yet: evidence (group "fleet"): 0 of 2 distinct hosts`) || len(names(f.sims[s.Site])) != 0 {
			t.Errorf("%s: %+v", s.Site, s)
		}
	}
	addEvidence(t, f.store, "canary-a",
		hostResult("a1", "", "slice", "converged", "1.0.0", thursday.Add(-time.Hour)),
		hostResult("a2", "", "slice", "converged", "1.0.0", thursday.Add(-time.Hour)))
	res, err = release.Rollout(ctx, "demo", "1.0.0", ro)
	if err != nil {
		t.Fatal(err)
	}
	if g := got(res); g != "canary-a=already fleet-1=ok fleet-2=ok" || !res.OK() || res.NotYet() {
		t.Fatalf("after evidence: %s", g)
	}
	for _, s := range res.Sites[1:] {
		if s.Policy == nil || !s.Policy.Met || !strings.Contains(s.Detail, "policy met") {
			t.Errorf("%s: %+v", s.Site, s)
		}
	}

	// 1.1.0 in the year-end freeze: fleet-1's own policy refuses it, the
	// others go on.
	addEvidence(t, f.store, "canary-a",
		hostResult("a1", "", "slice", "converged", "1.1.0", thursday.Add(-time.Hour)),
		hostResult("a2", "", "slice", "converged", "1.1.0", thursday.Add(-time.Hour)))
	ro.Now = func() time.Time { return time.Date(2026, 12, 22, 10, 0, 0, 0, time.UTC) }
	res, err = release.Rollout(ctx, "demo", "1.1.0", ro)
	if err != nil {
		t.Fatal(err)
	}
	if g := got(res); g != "canary-a=ok fleet-1=refused fleet-2=ok" || !res.NotYet() || !strings.Contains(res.Sites[1].Detail, "year-end freeze") {
		t.Fatalf("in the freeze: %s %+v", g, res.Sites[1])
	}
}

// TestRolloutCanaryRefused: a canary its own policy refuses stops the
// rollout as a failed one does, but it is not yet, not broken.
func TestRolloutCanaryRefused(t *testing.T) {
	f := newPolicyFixture(t, "", yearEnd)
	sitesOf, err := f.ss.Resolve([]string{"fleet"})
	if err != nil {
		t.Fatal(err)
	}
	ro := release.RolloutOptions{Options: f.opts, Sites: sitesOf, Canary: "fleet-1"}
	ro.Now = func() time.Time { return time.Date(2026, 12, 22, 10, 0, 0, 0, time.UTC) }
	res, err := release.Rollout(ctx, "demo", "1.0.0", ro)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sites[0].Result != release.RolloutRefused || res.Sites[1].Result != release.RolloutSkipped ||
		res.Sites[1].Detail != "the canary's policy refused it" || !res.NotYet() {
		t.Fatalf("%+v", res.Sites)
	}
	if len(names(f.sims["fleet-2"])) != 0 {
		t.Error("a site after a refused canary was uploaded to")
	}
}

// TestEvaluateFailingHostOnce: a failing host two rules see is one
// missing condition.
func TestEvaluateFailingHostOnce(t *testing.T) {
	ss := policySites(t, `evidence {
      sites    = ["canary-a"]
      profiles = ["slice"]
    }
    evidence {
      sites = ["canary-a", "canary-b"]
    }`, "", nil)
	st := store.NewDir(t.TempDir())
	addEvidence(t, st, "canary-a",
		hostResult("a1", "", "slice", "converged", "1.0.0", thursday.Add(-time.Hour), "ib-link"),
		hostResult("a2", "", "slice", "converged", "1.0.0", thursday.Add(-time.Hour)))
	if got := missingKinds(evaluate(t, site(t, ss, "fleet-1"), st, thursday)); got != "failing-host a1@canary-a ib-link" {
		t.Errorf("got %s", got)
	}
}
