package profile_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/profile"
	"github.com/gpuaas/imagectl/profile/profilesim"
	"github.com/gpuaas/imagectl/sites"
)

var ctx = context.Background()

func quick(c *profile.Config) {
	c.Backoff = func(int) time.Duration { return time.Millisecond }
}

// setup starts the fake with profile p of site s selecting ubuntu/noble
// and returns a client of it.
func setup(t *testing.T, adjust ...func(*profile.Config)) (*profilesim.Server, *profile.Client) {
	t.Helper()
	sim := profilesim.New(profilesim.Options{})
	t.Cleanup(sim.Close)
	sim.SetProfile("s", "p", "ubuntu/noble")
	cfg := profile.Config{URL: sim.URL, SiteID: "s", ProfileID: "p", Token: sim.Token, TokenSource: "environment variable ADMIN_T",
		Timeout: 5 * time.Second}
	quick(&cfg)
	for _, a := range adjust {
		a(&cfg)
	}
	c, err := profile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

func noToken(t *testing.T, sim *profilesim.Server, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), sim.Token) {
		t.Errorf("the token is in the error: %v", err)
	}
}

func TestGetAndSet(t *testing.T) {
	sim, c := setup(t)
	p, err := c.Get(ctx)
	if err != nil || p.DistroSeries != "ubuntu/noble" {
		t.Fatalf("get %+v %v", p, err)
	}
	key := profile.Key("s", "p", "demo-1-0-0", "demo#0")
	res, err := c.Set(ctx, "demo-1-0-0", key)
	if err != nil || res.Outcome != profile.Patched || res.Previous != "ubuntu/noble" || res.Attempts != 1 || res.IdempotencyKey != key {
		t.Fatalf("set %+v %v", res, err)
	}
	if got, _ := sim.DistroSeries("s", "p"); got != "demo-1-0-0" {
		t.Errorf("the profile holds %q", got)
	}
	var patch profilesim.Request
	for _, r := range sim.Requests() {
		if r.Method == http.MethodPatch {
			patch = r
		}
	}
	if patch.Path != "/api/v1/admin/maas-sites/s/profiles/p" || patch.IdempotencyKey != key || patch.Body != `{"distro_series":"demo-1-0-0"}` || !patch.Authorized {
		t.Errorf("PATCH %+v", patch)
	}
	// Already there, with or without custom/: nothing sent.
	for _, v := range []string{"demo-1-0-0", "custom/demo-1-0-0"} {
		res, err = c.Set(ctx, v, key)
		if err != nil || res.Outcome != profile.Unchanged || res.Attempts != 0 {
			t.Errorf("set %s again: %+v %v", v, res, err)
		}
	}
	if n := sim.Count(profilesim.OpPatch); n != 1 {
		t.Errorf("%d PATCHes", n)
	}
}

func TestRefusedToken(t *testing.T) {
	for _, kind := range []profilesim.FaultKind{profilesim.Unauthorized, profilesim.Forbidden} {
		t.Run(string(kind), func(t *testing.T) {
			sim, c := setup(t)
			sim.Inject(profilesim.Fault{On: profilesim.OpGet, Kind: kind})
			_, err := c.Set(ctx, "demo-1-0-0", "k")
			if !profile.IsUnauthorized(err) || !strings.Contains(err.Error(), "refused the token from environment variable ADMIN_T") {
				t.Fatalf("err %v", err)
			}
			noToken(t, sim, err)
			sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: kind})
			_, err = c.Set(ctx, "demo-1-0-0", "k")
			if !profile.IsUnauthorized(err) || sim.Count(profilesim.OpPatch) != 1 {
				t.Fatalf("on PATCH: %v, %d PATCHes (a refused token is not retried)", err, sim.Count(profilesim.OpPatch))
			}
		})
	}
	// A wrong token: the fake's own 401.
	sim, c := setup(t, func(c *profile.Config) { c.Token = "wrong-SECRET" })
	_, err := c.Get(ctx)
	if !profile.IsUnauthorized(err) || strings.Contains(err.Error(), "wrong-SECRET") {
		t.Fatalf("wrong token: %v", err)
	}
	noToken(t, sim, err)
}

func TestConflict(t *testing.T) {
	sim, c := setup(t)
	long := "profile h200 is locked by deployment 42: " + strings.Repeat("x", 1000) + sim.Token
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Conflict, Message: long})
	_, err := c.Set(ctx, "demo-1-0-0", "k")
	if !profile.IsConflict(err) || !strings.Contains(err.Error(), "refused the change as a conflict (409 Conflict: profile h200 is locked by deployment 42") ||
		len(err.Error()) > 600 || sim.Count(profilesim.OpPatch) != 1 {
		t.Fatalf("err (%d chars) %v", len(err.Error()), err)
	}
	noToken(t, sim, err)
	// A server that echoes the token is starred out.
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Conflict, Message: "token " + sim.Token + " holds a lock"})
	_, err = c.Set(ctx, "demo-1-0-0", "k")
	if !strings.Contains(err.Error(), "token [token] holds a lock") {
		t.Errorf("err %v", err)
	}
	if got, _ := sim.DistroSeries("s", "p"); got != "ubuntu/noble" {
		t.Errorf("a conflict changed the profile to %q", got)
	}
}

// A 409 that names the conflict in "error" and explains it in "message"
// shows both; what the server wrote is escaped, on one line.
func TestConflictShowsErrorAndMessage(t *testing.T) {
	sim, c := setup(t)
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Conflict, Error: "profile_locked",
		Message: "profile h200 is locked by deployment 42 \x1b]0;owned\x07\u009b2J\u202e until it ends\nerror: fake"})
	_, err := c.Set(ctx, "demo-1-0-0", "k")
	want := `refused the change as a conflict (409 Conflict: profile_locked: profile h200 is locked by deployment 42 \x1b]0;owned\a\u009b2J\u202e until it ends error: fake)`
	if !profile.IsConflict(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v\nwant it to hold %s", err, want)
	}
}

func TestServerErrorsRetried(t *testing.T) {
	sim, c := setup(t)
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Unavailable, Times: 2},
		profilesim.Fault{On: profilesim.OpGet, Kind: profilesim.Unavailable})
	res, err := c.Set(ctx, "demo-1-0-0", "k")
	// GETs: the read before, one that failed with the injected 503 (the
	// first read retried), the read-back after the PATCH.
	if err != nil || res.Outcome != profile.Patched || res.Attempts != 3 || sim.Count(profilesim.OpGet) != 3 {
		t.Fatalf("set %+v %v, %d GETs", res, err, sim.Count(profilesim.OpGet))
	}
	// For good: it gives up after Retries.
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Unavailable, Times: -1})
	res, err = c.Set(ctx, "demo-2-0-0", "k2")
	if err == nil || !strings.Contains(err.Error(), "gave up after 4 attempts") || !strings.Contains(err.Error(), "503 Service Unavailable") || res.Attempts != 4 {
		t.Fatalf("503s for good: %+v %v", res, err)
	}
}

func TestTimeoutAfterAccept(t *testing.T) {
	sim, c := setup(t, func(c *profile.Config) { c.Timeout = time.Second })
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.TimeoutAfterAccept})
	res, err := c.Set(ctx, "demo-1-0-0", "k")
	if err != nil || res.Outcome != profile.Confirmed || res.Attempts != 1 {
		t.Fatalf("set %+v %v", res, err)
	}
	// The read-back itself fails once, then shows it applied.
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.TimeoutAfterAccept},
		profilesim.Fault{On: profilesim.OpGet, Kind: profilesim.Unavailable, After: 1})
	res, err = c.Set(ctx, "demo-2-0-0", "k2")
	if err != nil || res.Outcome != profile.Confirmed || sim.Count(profilesim.OpPatch) != 2 {
		t.Fatalf("set with a failing read-back %+v %v", res, err)
	}
}

// A request without an answer that was not applied is sent again with
// the same key. (Go's transport itself resends a request with an
// idempotency key once when a reused connection drops it; the second drop
// is imagectl's to retry.)
func TestNoAnswerNotApplied(t *testing.T) {
	// A front that drops the first two PATCHes without passing them on.
	sim := profilesim.New(profilesim.Options{})
	t.Cleanup(sim.Close)
	sim.SetProfile("s", "p", "ubuntu/noble")
	var dropped atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && dropped.Add(1) <= 2 {
			if r.Header.Get("X-Idempotency-Key") != "k" {
				t.Errorf("key %q", r.Header.Get("X-Idempotency-Key"))
			}
			panic(http.ErrAbortHandler)
		}
		req, _ := http.NewRequest(r.Method, sim.URL+r.URL.Path, r.Body)
		req.Header = r.Header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		var v any
		json.NewDecoder(resp.Body).Decode(&v)
		json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(front.Close)
	cfg := profile.Config{URL: front.URL, SiteID: "s", ProfileID: "p", Token: sim.Token}
	quick(&cfg)
	c, _ := profile.New(cfg)
	res, err := c.Set(ctx, "demo-1-0-0", "k")
	if err != nil || res.Outcome != profile.Patched || res.Attempts != 2 || dropped.Load() != 3 {
		t.Fatalf("set %+v %v, %d PATCHes", res, err, dropped.Load())
	}
	keys := map[string]bool{}
	for _, r := range sim.Requests() {
		if r.Method == http.MethodPatch {
			keys[r.IdempotencyKey] = true
		}
	}
	if len(keys) != 1 || !keys["k"] {
		t.Errorf("keys %v", keys)
	}
}

func TestReplayedAnswerDetected(t *testing.T) {
	sim, c := setup(t)
	if _, err := c.Set(ctx, "demo-1-0-0", "k"); err != nil {
		t.Fatal(err)
	}
	// Someone sets it back by hand; the same key again gets the first
	// answer replayed without being applied.
	// The answer names the value, but the read-back shows it was not
	// applied: Set fails rather than report a change that did not happen.
	sim.SetProfile("s", "p", "ubuntu/noble")
	if _, err := c.Set(ctx, "demo-1-0-0", "k"); err == nil || !strings.Contains(err.Error(), `still holds "ubuntu/noble": the server replayed an earlier answer`) {
		t.Fatalf("a replay of the same answer: %v", err)
	}
	if got, _ := sim.DistroSeries("s", "p"); got != "ubuntu/noble" {
		t.Fatalf("the fake applied a replayed key: %q", got)
	}
	// The same key with another body: 422.
	_, err := c.Set(ctx, "demo-2-0-0", "k")
	if err == nil || !strings.Contains(err.Error(), "422") {
		t.Fatalf("key reused for another body: %v", err)
	}
}

func TestCancel(t *testing.T) {
	// Held after accept, with a long client timeout: the caller's cancel
	// ends it.
	sim, c := setup(t, func(c *profile.Config) { c.Timeout = time.Minute })
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.TimeoutAfterAccept})
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Set(cctx, "demo-1-0-0", "k")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancel during a request: %v after %v", err, time.Since(start))
	}
	// During the backoff.
	sim, c = setup(t, func(c *profile.Config) { c.Backoff = func(int) time.Duration { return time.Hour } })
	sim.Inject(profilesim.Fault{On: profilesim.OpPatch, Kind: profilesim.Unavailable})
	cctx, cancel = context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	_, err = c.Set(cctx, "demo-1-0-0", "k")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancel during the backoff: %v after %v", err, time.Since(start))
	}
}

func TestGetTolerance(t *testing.T) {
	for body, want := range map[string]string{
		`{"distro_series":"x","deploy_user":"hpcadmin","nested":{"a":[1,2]},"n":null}`: "",
		`{"name":"p"}`:                 "has no distro_series string",
		`{"distro_series":7}`:          "has no distro_series string",
		`<html>bad gateway</html>`:     "is not a JSON object",
		`["distro_series","x"]`:        "is not a JSON object",
		`{"distro_series":"custom/x"}`: "",
	} {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
		c, _ := profile.New(profile.Config{URL: hs.URL, SiteID: "s", ProfileID: "p", Token: "t"})
		p, err := c.Get(ctx)
		hs.Close()
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %+v %v, want %q", body, p, err, want)
		}
	}
}

func TestNoRedirects(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
	}))
	defer other.Close()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer hs.Close()
	c, _ := profile.New(profile.Config{URL: hs.URL, SiteID: "s", ProfileID: "p", Token: "t"})
	if _, err := c.Get(ctx); err == nil || !strings.Contains(err.Error(), "307") || leaked.Load() {
		t.Errorf("redirect: %v, token sent on: %v", err, leaked.Load())
	}
}

func TestNewChecks(t *testing.T) {
	for _, tc := range []struct {
		cfg  profile.Config
		want string
	}{
		{profile.Config{URL: "http://admin.example", SiteID: "s", ProfileID: "p", Token: "t"}, "only over https"},
		{profile.Config{URL: "https://admin.example", ProfileID: "p", Token: "t"}, "needs a site id"},
		{profile.Config{URL: "https://admin.example", SiteID: "s", ProfileID: "p", Token: "two SECRET", TokenSource: "file f"},
			"the admin API token in file f holds a space"},
		{profile.Config{URL: "https://admin.example", SiteID: "s", ProfileID: "p", TokenSource: "file f"}, "in file f is empty"},
	} {
		_, err := profile.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	c, err := profile.New(profile.Config{URL: "https://admin.example/gw/", SiteID: "site 7", ProfileID: "p", Token: "t"})
	if err != nil || c.URL() != "https://admin.example/gw/api/v1/admin/maas-sites/site%207/profiles/p" {
		t.Errorf("URL %v %v", c, err)
	}
}

func TestKey(t *testing.T) {
	a := profile.Key("s", "p", "demo-1-0-0", "demo#3")
	// Pinned: a key must not change between imagectl versions, or a retried
	// PATCH would be a new request to the server.
	if a != "imagectl-44bcd24220455c777acba6d7799c8bee" {
		t.Errorf("key %q", a)
	}
	for _, b := range []string{profile.Key("s", "p", "demo-1-0-0", "demo#4"), profile.Key("s", "p2", "demo-1-0-0", "demo#3"),
		profile.Key("s", "pdemo-1-0-0", "", "demo#3")} {
		if a == b {
			t.Errorf("%q twice", a)
		}
	}
}

func TestManual(t *testing.T) {
	r := profile.Manual("", "", "", "demo-1-0-0", "imagectl-0123")
	want := `curl -fsS -X PATCH \
  "${API_BASE_URL}/api/v1/admin/maas-sites/${SITE_ID}/profiles/${PROFILE_ID}" \
  -H "Authorization: Bearer ${ADMIN_TOKEN}" \
  -H "Content-Type: application/json" \
  -H "X-Idempotency-Key: imagectl-0123-${PROFILE_ID}" \
  --data '{"distro_series":"demo-1-0-0"}'`
	if r.Curl != want {
		t.Errorf("curl:\n%s\nwant:\n%s", r.Curl, want)
	}
	if r.URL != "${API_BASE_URL}/api/v1/admin/maas-sites/${SITE_ID}/profiles/${PROFILE_ID}" || r.Body != `{"distro_series":"demo-1-0-0"}` ||
		r.Headers["Authorization"] != "Bearer ${ADMIN_TOKEN}" || r.Method != "PATCH" {
		t.Errorf("request %+v", r)
	}
	// What the shell makes of it: known values literally, placeholders
	// expanded.
	sh := testenv.Tool(t, "sh", "dash or bash has it")
	for _, tc := range []struct{ api, site, prof, wantURL string }{
		{"", "", "", "https://a.example/api/v1/admin/maas-sites/S1/profiles/P1"},
		{"https://admin.example/$HOME`x`", "s$x\"", "p 1", "https://admin.example/$HOME`x`/api/v1/admin/maas-sites/s$x%22/profiles/p%201"},
	} {
		r := profile.Manual(tc.api, tc.site, tc.prof, "it's-1", "k")
		script := `curl() { for a in "$@"; do printf '%s\n' "$a"; done; }
API_BASE_URL=https://a.example SITE_ID=S1 PROFILE_ID=P1 ADMIN_TOKEN=T0K
` + r.Curl
		out, err := exec.Command(sh, "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		want := strings.Join([]string{"-fsS", "-X", "PATCH", tc.wantURL, "-H", "Authorization: Bearer T0K", "-H", "Content-Type: application/json",
			"-H", "X-Idempotency-Key: k" + keySuffix(tc.prof), "--data", `{"distro_series":"it's-1"}`}, "\n") + "\n"
		if string(out) != want {
			t.Errorf("the shell ran:\n%s\nwant:\n%s", out, want)
		}
	}
}

// keySuffix is what a manual request adds to its key: the profile, when
// the request leaves it to the shell.
func keySuffix(profileID string) string {
	if profileID == "" {
		return "-P1"
	}
	return ""
}

// TestConfigFor: a deploy profile of the sites file configures the client,
// its token read where the sites file says.
func TestConfigFor(t *testing.T) {
	good := "tok-SECRET-0123.abc_DEF"
	p := &sites.DeployProfile{Site: "s", SiteID: "7", ProfileID: "p", TokenEnv: "T", APIURL: "https://admin.example", Timeout: time.Second}
	cfg, err := profile.ConfigFor(p, []string{"T=" + good})
	if err != nil || cfg.Token != good || cfg.TokenSource != "environment variable T" || cfg.URL != "https://admin.example" ||
		cfg.SiteID != "7" || cfg.ProfileID != "p" || cfg.Timeout != time.Second {
		t.Errorf("config %+v %v", cfg, err)
	}
	if _, err := profile.ConfigFor(p, nil); err == nil || !strings.Contains(err.Error(), "is not set") {
		t.Errorf("unset token: %v", err)
	}
}
