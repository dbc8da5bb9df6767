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

	"github.com/gpuaas/imagectl/profile"
	"github.com/gpuaas/imagectl/profile/profilesim"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

func TestPromoteRollbackStatusHistoryGC(t *testing.T) {
	sim, sites, _, env := uploadFixture(t)
	dir, pub := stored(t, "1.0.0", "1.1.0", "1.2.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites, "USER=alice")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return imagectl(t, env, args...)
	}

	// No key: refused before MAAS is asked anything.
	_, errs, code := run("promote", "demo", "1.0.0", "--site", "sim")
	if code == 0 || !strings.Contains(errs, "--insecure-skip-verify sends it unverified") || sim.Count(maassim.OpList) != 0 {
		t.Fatalf("without a key: exit %d\n%s", code, errs)
	}
	out, errs, code := run("promote", "demo", "1.0.0", "--site", "sim", "--key", pub)
	if code != 0 || !strings.Contains(out, "promoted demo 1.0.0 to site sim (uploaded as demo-1-0-0)\ndistro_series: custom/demo-1-0-0\n") {
		t.Fatalf("promote: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = run("promote", "demo", "1.1.0", "--site", "sim", "--key", pub, "--reason", "new driver", "--by", "bob", "-o", "json")
	var res release.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Promotion.Previous != "1.0.0" || res.Promotion.By != "bob" || res.DistroSeries != "custom/demo-1-1-0" {
		t.Fatalf("promote json: exit %d %v %+v\n%s", code, err, res, errs)
	}
	out, _, code = run("status", "--site", "sim")
	if code != 0 || !strings.Contains(out, "demo: 1.1.0 promoted by bob") || !strings.Contains(out, "* demo-1-1-0") || strings.Contains(out, "drift") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}

	// Someone deletes the promoted version in MAAS.
	c, _ := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey})
	for _, r := range sim.Resources() {
		if r.Name == "demo-1-1-0" {
			c.Delete(context.Background(), r.ID)
		}
	}
	out, _, code = run("status", "--site", "sim")
	if code != 1 || !strings.Contains(out, "drift: missing: the promoted demo 1.1.0 is not in MAAS as demo-1-1-0") {
		t.Fatalf("status with drift: exit %d\n%s", code, out)
	}
	out, _, code = run("status", "--site", "sim", "-o", "json")
	var st release.SiteStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 1 || !st.Drift || st.Images[0].Drift[0].Kind != "missing" {
		t.Fatalf("status json: exit %d %v\n%s", code, err, out)
	}

	out, errs, code = run("rollback", "demo", "--site", "sim", "--key", pub, "--reason", "driver hangs")
	if code != 0 || !strings.Contains(out, "rolled demo at site sim back from 1.1.0 to 1.0.0 (MAAS already held it as demo-1-0-0)") {
		t.Fatalf("rollback: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = run("history", "demo", "--site", "sim")
	if code != 0 || !strings.Contains(out, "1.0.0 (rollback)  1.1.0     alice  driver hangs") || !strings.Contains(out, "site sim runs demo 1.0.0") {
		t.Fatalf("history: exit %d\n%s", code, out)
	}
	out, _, _ = run("history", "demo", "--site", "sim", "-o", "json")
	var h []store.Promotion
	if err := json.Unmarshal([]byte(out), &h); err != nil || len(h) != 3 || !h[2].Rollback {
		t.Fatalf("history json: %v %+v", err, h)
	}

	// 1.2.0 promoted then rolled back: MAAS holds 1.0.0 (promoted) and 1.2.0.
	if _, errs, code := run("promote", "demo", "1.2.0", "--site", "sim", "--key", pub); code != 0 {
		t.Fatal(errs)
	}
	if _, errs, code := run("rollback", "demo", "--site", "sim", "--key", pub); code != 0 {
		t.Fatal(errs)
	}
	out, _, code = run("gc", "--site", "sim", "--keep", "0")
	if code != 0 || !strings.Contains(out, "would delete demo-1-2-0") || !strings.Contains(out, "kept demo-1-0-0") || !strings.Contains(out, "dry run: --yes deletes them") ||
		sim.Count(maassim.OpDelete) != 1 { // the one delete above
		t.Fatalf("gc dry run: exit %d, %d deletes\n%s", code, sim.Count(maassim.OpDelete), out)
	}
	out, errs, code = run("gc", "--site", "sim", "--keep", "0", "--yes", "-o", "json")
	var gc release.GCResult
	if err := json.Unmarshal([]byte(out), &gc); err != nil || code != 0 || len(gc.Delete) != 1 || gc.DryRun {
		t.Fatalf("gc: exit %d %v\n%s%s", code, err, out, errs)
	}
	var left []string
	for _, r := range sim.Resources() {
		if r.Type == "Uploaded" {
			left = append(left, r.Name)
		}
	}
	if strings.Join(left, " ") != "demo-1-0-0" {
		t.Errorf("after gc MAAS holds %v", left)
	}
	if strings.Contains(out+errs, secret(sim.AdminKey)) {
		t.Error("the API key was printed")
	}
}

// profileSites writes a sites file whose site sim has a deploy profile on
// a fake admin API, its token in ADMIN_TOKEN.
func profileSites(t *testing.T, sim *maassim.Server) (sites string, ps *profilesim.Server) {
	t.Helper()
	ps = profilesim.New(profilesim.Options{})
	t.Cleanup(ps.Close)
	ps.SetProfile("7", "h200-bare-metal", "ubuntu/noble")
	sites = filepath.Join(t.TempDir(), "sites.hcl")
	src := fmt.Sprintf(`site "sim" {
  maas_url    = %q
  api_key_env = "SIM_MAAS_KEY"

  deploy_profile {
    api_url    = %q
    site_id    = "7"
    profile_id = "h200-bare-metal"
    token_env  = "ADMIN_TOKEN"
    image      = "demo"
    timeout    = "1s"
  }
}
`, sim.URL, ps.URL)
	if err := os.WriteFile(sites, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return sites, ps
}

func TestPromoteDeployProfile(t *testing.T) {
	sim, _, _, env := uploadFixture(t)
	sites, ps := profileSites(t, sim)
	dir, pub := stored(t, "1.0.0", "1.1.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites, "USER=alice", "ADMIN_TOKEN="+ps.Token)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		out, errs, code := imagectl(t, env, args...)
		if strings.Contains(out+errs, ps.Token) {
			t.Errorf("the admin token was printed:\n%s%s", out, errs)
		}
		return out, errs, code
	}
	profileOf := func() string { v, _ := ps.DistroSeries("7", "h200-bare-metal"); return v }

	out, errs, code := run("promote", "demo", "1.0.0", "--site", "sim", "--key", pub)
	want := "promoted demo 1.0.0 to site sim (uploaded as demo-1-0-0)\ndistro_series: custom/demo-1-0-0\n" +
		"deploy profile h200-bare-metal of admin site 7: ubuntu/noble -> demo-1-0-0\n"
	if code != 0 || out != want || profileOf() != "demo-1-0-0" {
		t.Fatalf("promote: exit %d\n%s%s", code, out, errs)
	}

	// 401: the token is refused, nothing is recorded; the re-run finishes.
	ps.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Unauthorized})
	out, errs, code = run("promote", "demo", "1.1.0", "--site", "sim", "--key", pub)
	if code != 1 || out != "" || !strings.Contains(errs, "refused the token from environment variable ADMIN_TOKEN (401 Unauthorized") ||
		!strings.Contains(errs, "nothing is recorded: run the same command again once that is fixed") {
		t.Fatalf("401: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = run("status", "--site", "sim")
	if code != 0 || !strings.Contains(out, "demo: 1.0.0 promoted by alice") || !strings.Contains(out, "deploy profile h200-bare-metal of admin site 7 selects demo-1-0-0 (demo 1.0.0)\n") {
		t.Fatalf("status after the 401: exit %d\n%s", code, out)
	}
	// Accepted, then no answer within the 1s timeout: read back, done.
	ps.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.TimeoutAfterAccept})
	out, errs, code = run("promote", "demo", "1.1.0", "--site", "sim", "--key", pub, "-o", "json")
	var res release.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.ProfileDistroSeries != "demo-1-1-0" || len(res.Profiles) != 1 ||
		res.Profiles[0].Outcome != profile.Confirmed || res.Profiles[0].Previous != "demo-1-0-0" || res.ProfilePatch != nil || res.Promotion == nil {
		t.Fatalf("promote json: exit %d %v\n%s%s", code, err, out, errs)
	}
	for _, field := range []string{`"deploy_profiles": [`, `"profile_distro_series": "demo-1-1-0"`, `"outcome": "confirmed"`, `"idempotency_key": "imagectl-`} {
		if !strings.Contains(out, field) {
			t.Errorf("promote json lacks %s:\n%s", field, out)
		}
	}

	// Drift: someone switches the profile back to the stock image.
	ps.SetProfile("7", "h200-bare-metal", "ubuntu/noble")
	out, _, code = run("status", "--site", "sim")
	if code != 1 || !strings.Contains(out, "drift: profile: deploy profile h200-bare-metal of admin site 7 selects ubuntu/noble, not demo-1-1-0 (the promoted demo 1.1.0)") ||
		!strings.Contains(out, "deploy profile h200-bare-metal of admin site 7 selects ubuntu/noble, NOT demo-1-1-0\n") {
		t.Fatalf("status with profile drift: exit %d\n%s", code, out)
	}
	out, _, code = run("status", "--site", "sim", "-o", "json")
	var st release.SiteStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 1 || !st.Drift || len(st.Profiles) != 1 || !st.Profiles[0].Drift ||
		st.Profiles[0].DistroSeries != "ubuntu/noble" || st.Profiles[0].Want != "demo-1-1-0" {
		t.Fatalf("status json: exit %d %v\n%s", code, err, out)
	}

	// 409 on the rollback: nothing recorded, and the server's word shown.
	ps.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Conflict, Message: "profile h200-bare-metal is being deployed"})
	_, errs, code = run("rollback", "demo", "--site", "sim", "--key", pub)
	if code != 1 || !strings.Contains(errs, "conflict (409 Conflict: profile h200-bare-metal is being deployed)") {
		t.Fatalf("rollback 409: exit %d\n%s", code, errs)
	}
	out, errs, code = run("rollback", "demo", "--site", "sim", "--key", pub)
	if code != 0 || !strings.Contains(out, "rolled demo at site sim back from 1.1.0 to 1.0.0") ||
		!strings.Contains(out, "deploy profile h200-bare-metal of admin site 7: ubuntu/noble -> demo-1-0-0\n") || profileOf() != "demo-1-0-0" {
		t.Fatalf("rollback: exit %d\n%s%s", code, out, errs)
	}
	if out, _, code = run("status", "--site", "sim"); code != 0 {
		t.Errorf("status after the rollback: exit %d\n%s", code, out)
	}

	// Without the token: refused before MAAS is asked anything.
	lists := sim.Count(maassim.OpList)
	_, errs, code = imagectl(t, env[:len(env)-1], "promote", "demo", "1.1.0", "--site", "sim", "--key", pub)
	if code != 1 || !strings.Contains(errs, "environment variable ADMIN_TOKEN (the token_env of its deploy profile h200-bare-metal of admin site 7) is not set") ||
		sim.Count(maassim.OpList) != lists {
		t.Errorf("without the token: exit %d\n%s", code, errs)
	}
}

func TestPromoteWithoutDeployProfile(t *testing.T) {
	_, sites, _, env := uploadFixture(t)
	dir, pub := stored(t, "1.0.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites)
	out, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub)
	// The manual request's key is new each time it is printed, one per profile.
	keyRE := regexp.MustCompile(`imagectl-[0-9a-f]{32}-\$\{PROFILE_ID\}`)
	key := "KEY"
	out = keyRE.ReplaceAllString(out, key)
	want := `promoted demo 1.0.0 to site sim (uploaded as demo-1-0-0)
distro_series: custom/demo-1-0-0
no deploy_profile for demo at site sim in the sites file: point the site's deploy profile at demo-1-0-0 with
curl -fsS -X PATCH \
  "${API_BASE_URL}/api/v1/admin/maas-sites/${SITE_ID}/profiles/${PROFILE_ID}" \
  -H "Authorization: Bearer ${ADMIN_TOKEN}" \
  -H "Content-Type: application/json" \
  -H "X-Idempotency-Key: ` + key + `" \
  --data '{"distro_series":"demo-1-0-0"}'
`
	if code != 0 || out != want {
		t.Fatalf("exit %d\n%s%s\nwant:\n%s", code, out, errs, want)
	}
	out, errs, code = imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub, "-o", "json")
	out = keyRE.ReplaceAllString(out, key)
	var res struct {
		AlreadyCurrent bool `json:"already_current"`
		ProfilePatch   struct {
			Method, URL, Body, Curl string
			Headers                 map[string]string
		} `json:"profile_patch"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.AlreadyCurrent || res.ProfilePatch.Method != "PATCH" ||
		res.ProfilePatch.Headers["X-Idempotency-Key"] != key || !strings.HasSuffix(want, res.ProfilePatch.Curl+"\n") ||
		res.ProfilePatch.Body != `{"distro_series":"demo-1-0-0"}` {
		t.Fatalf("json: exit %d %v\n%s%s", code, err, out, errs)
	}
}

// rolloutSites writes a sites file of three simulated sites and the group
// "all"; site c's key is in $C_KEY, which the caller may leave unset.
func rolloutSites(t *testing.T) (sims map[string]*maassim.Server, sites string, env []string) {
	t.Helper()
	sims, sites, env = groupSites(t, "_KEY", "a", "b", "c")
	return sims, sites, env[:2] // not C_KEY
}

func TestPromoteRollout(t *testing.T) {
	sims, sites, env := rolloutSites(t)
	dir, pub := stored(t, "1.0.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites, "USER=alice")

	// Site c's key is missing: it fails, a and b go through.
	out, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "all", "--canary", "a", "--parallel", "2", "--key", pub)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	for _, re := range []string{`(?m)^SITE +RESULT +VERSION +PREVIOUS +DETAIL$`, `(?m)^a +ok +1\.0\.0 +- +uploaded as demo-1-0-0.*canary checked$`,
		`(?m)^b +ok +1\.0\.0 +- +uploaded as demo-1-0-0`, `(?m)^c +failed +- +- +.*C_KEY`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("table lacks %s:\n%s", re, out)
		}
	}
	if strings.Index(out, "\na ") > strings.Index(out, "\nb ") {
		t.Errorf("the canary is not first:\n%s", out)
	}
	if !strings.Contains(errs, "1 of 3 sites do not run demo 1.0.0") || !regexp.MustCompile(`(?m)^b: `).MatchString(errs) {
		t.Errorf("stderr:\n%s", errs)
	}

	// Again with c's key, as JSON: only c is promoted.
	env = append(env, "C_KEY="+sims["c"].AdminKey)
	out, errs, code = imagectl(t, env, "promote", "demo", "1.0.0", "--site", "a", "--site", "b,c", "--key", pub, "-o", "json")
	var rs []release.SiteRollout
	if err := json.Unmarshal([]byte(out), &rs); err != nil || code != 0 || len(rs) != 3 {
		t.Fatalf("json: exit %d %v\n%s%s", code, err, out, errs)
	}
	for _, r := range rs {
		want := release.RolloutAlready
		if r.Site == "c" {
			want = release.RolloutOK
		}
		if r.Result != want || r.Version != "1.0.0" {
			t.Errorf("%s: %+v, want %s", r.Site, r, want)
		}
	}
	for n, sim := range sims {
		if c := sim.Count(maassim.OpCreate); c != 1 {
			t.Errorf("site %s: %d creates", n, c)
		}
		h, _ := store.NewDir(dir).History(context.Background(), n, "demo")
		if len(h) != 1 {
			t.Errorf("site %s: history %+v", n, h)
		}
	}

	// A canary that fails stops the rollout.
	out, _, code = imagectl(t, append(env, "B_KEY="), "promote", "demo", "1.0.0", "--site", "all", "--canary", "b", "--key", pub)
	if code != 1 || !regexp.MustCompile(`(?m)^b +failed`).MatchString(out) || !regexp.MustCompile(`(?m)^a +skipped +1\.0\.0 +1\.0\.0 +canary failed$`).MatchString(out) {
		t.Errorf("failed canary: exit %d\n%s", code, out)
	}
	// Unknown names and groups are refused before anything is sent.
	if _, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "a", "--site", "nowhere", "--key", pub); code != 1 || !strings.Contains(errs, `no site "nowhere"`) {
		t.Errorf("unknown site: exit %d\n%s", code, errs)
	}
	if _, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "all", "--canary", "all", "--key", pub); code != 1 || !strings.Contains(errs, "is a group") {
		t.Errorf("group canary: exit %d\n%s", code, errs)
	}
}
