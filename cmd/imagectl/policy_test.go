package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload/maassim"
	"github.com/gpuaas/imagectl/validate"
)

// policySitesFile writes a sites file of the simulated sites canary, f1
// and f2, the group fleet of f1 and f2 with the policy body given.
func policySitesFile(t *testing.T, path string, sims map[string]*maassim.Server, policy string) {
	t.Helper()
	var src strings.Builder
	for _, n := range []string{"canary", "f1", "f2"} {
		fmt.Fprintf(&src, "site %q {\n  maas_url    = %q\n  api_key_env = \"%s_KEY\"\n}\n", n, sims[n].URL, strings.ToUpper(n))
	}
	fmt.Fprintf(&src, "group \"fleet\" {\n  sites = [\"f1\", \"f2\"]\n  policy {\n%s\n  }\n}\n", policy)
	if err := os.WriteFile(path, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// passing is a real, passing converged slice result of demo version on
// host, finished an hour ago.
func passing(host, version string) validate.Result {
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	return validate.Result{Schema: validate.ResultSchema, Image: "demo", Version: version, Profile: "slice", Stage: "converged",
		Host: host, MachineID: "mid-" + host, Live: true, Started: at.Add(-time.Minute), Finished: at, ScriptSHA256: strings.Repeat("0f", 32),
		Checks: []validate.Check{{Status: validate.StatusPass, Name: "nvidia-smi"}, {Status: validate.StatusPass, Name: "ib-link"}},
		Counts: validate.Counts{Checks: 2}}
}

// TestPromotePolicyCommand is the promote story: to a group before
// evidence, refused naming the missing evidence with exit 3; with the
// canary's passing evidence, promoted; inside a freeze, refused naming the
// freeze; --override --reason promotes and the history shows it; rollback
// is not gated.
func TestPromotePolicyCommand(t *testing.T) {
	sims := map[string]*maassim.Server{}
	var env []string
	for _, n := range []string{"canary", "f1", "f2"} {
		sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
		t.Cleanup(sim.Close)
		sims[n] = sim
		env = append(env, strings.ToUpper(n)+"_KEY="+sim.AdminKey)
	}
	sites := filepath.Join(t.TempDir(), "sites.hcl")
	evidence := `    evidence {
      sites     = ["canary"]
      profiles  = ["slice"]
      min_hosts = 2
    }`
	policySitesFile(t, sites, sims, evidence)
	dir, pub := stored(t, "1.0.0", "1.1.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites, "USER=alice")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return imagectl(t, env, args...)
	}

	out, errs, code := run("promote", "demo", "1.0.0", "--site", "fleet", "--canary", "canary", "--key", pub)
	if code != exitNotYet {
		t.Fatalf("before evidence: exit %d, want %d\n%s%s", code, exitNotYet, out, errs)
	}
	for _, re := range []string{`(?m)^canary +ok +1\.0\.0`,
		`(?m)^f1 +refused +- +- +not yet: evidence \(group "fleet"\): 0 of 2 distinct hosts passed stage converged for profile slice at canary: 2 more needed$`,
		`(?m)^f2 +refused +- +- +not yet: evidence`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("table lacks %s:\n%s", re, out)
		}
	}
	if !strings.Contains(errs, "2 of 3 sites do not run demo 1.0.0 yet: their promotion policy refuses it") {
		t.Errorf("stderr:\n%s", errs)
	}
	if n := sims["f1"].Count(maassim.OpCreate) + sims["f2"].Count(maassim.OpCreate); n != 0 {
		t.Errorf("refused sites were asked for %d boot resources", n)
	}

	st := store.NewDir(dir)
	var evs []store.Evidence
	for _, h := range []string{"gpu-01", "gpu-02"} {
		for _, v := range []string{"1.0.0", "1.1.0"} {
			evs = append(evs, store.Evidence{Site: "canary", RecordedBy: "ci", Via: "evidence add", Result: passing(h, v)})
		}
	}
	if err := st.AddEvidence(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	out, errs, code = run("promote", "demo", "1.0.0", "--site", "fleet", "--key", pub)
	if code != 0 || !regexp.MustCompile(`(?m)^f1 +ok +1\.0\.0 +- +uploaded as demo-1-0-0; .*; policy met$`).MatchString(out) {
		t.Fatalf("after evidence: exit %d\n%s%s", code, out, errs)
	}

	// A freeze around now: 1.1.0 is refused naming it, as JSON too.
	now := time.Now().UTC()
	policySitesFile(t, sites, sims, evidence+fmt.Sprintf(`
    freeze {
      from   = %q
      to     = %q
      reason = "year-end freeze"
    }`, now.Add(-time.Hour).Format(time.RFC3339), now.Add(24*time.Hour).Format(time.RFC3339)))
	out, errs, code = run("promote", "demo", "1.1.0", "--site", "f1", "--key", pub)
	if code != exitNotYet || !strings.Contains(errs, "the promotion policy of site f1 refuses demo 1.1.0 (not yet):") ||
		!strings.Contains(errs, `freeze (group "fleet"): "year-end freeze" from `) || out != "" {
		t.Fatalf("in the freeze: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = run("promote", "demo", "1.1.0", "--site", "f1", "--key", pub, "-o", "json")
	var v release.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitNotYet || v.Met || len(v.Missing) != 1 ||
		v.Missing[0].Kind != release.MissingFreeze || v.Missing[0].Reason != "year-end freeze" {
		t.Fatalf("in the freeze, json: exit %d %v\n%s", code, err, out)
	}
	if _, errs, code := run("promote", "demo", "1.1.0", "--site", "f1", "--key", pub, "--override"); code != 1 || !strings.Contains(errs, "--override needs --reason") {
		t.Fatalf("--override alone: exit %d\n%s", code, errs)
	}
	out, errs, code = run("promote", "demo", "1.1.0", "--site", "f1", "--key", pub, "--override", "--reason", "CVE fix, approved by ops", "--by", "carol")
	if code != 0 || !strings.Contains(out, "promotion policy: NOT met, overridden (recorded): CVE fix, approved by ops\n  missing: freeze") {
		t.Fatalf("override: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = run("history", "demo", "--site", "f1")
	if code != 0 || !regexp.MustCompile(`(?m)^\S+ +1\.1\.0 +1\.0\.0 +carol +CVE fix, approved by ops +overridden$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\S+ +1\.0\.0 +- +alice +met$`).MatchString(out) ||
		!strings.Contains(out, "1.1.0: the promotion policy was overridden by carol (CVE fix, approved by ops); it lacked:\n  freeze (group \"fleet\"): \"year-end freeze\"") {
		t.Fatalf("history: exit %d\n%s", code, out)
	}
	h, err := st.History(context.Background(), "f1", "demo")
	if err != nil || len(h) != 2 || h[1].Gate == nil || h[1].Gate.Met || h[1].Gate.Override != "CVE fix, approved by ops" || len(h[1].Gate.Missing) != 1 {
		t.Fatalf("catalog: %+v %v", h, err)
	}
	// Rollback in the freeze: the safety valve is never gated.
	if out, errs, code := run("rollback", "demo", "--site", "f1", "--key", pub, "--reason", "1.1.0 hangs"); code != 0 || strings.Contains(out, "promotion policy") {
		t.Fatalf("rollback: exit %d\n%s%s", code, out, errs)
	}
}
