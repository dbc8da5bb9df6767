package profilesim_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/profile/profilesim"
)

// These speak raw HTTP to the fake, to check the rules of the endpoint's
// request that a correct client never breaks; package profile's tests drive
// the rest through the real client.
func TestContract(t *testing.T) {
	s := profilesim.New(profilesim.Options{})
	defer s.Close()
	s.SetProfile("7", "bm", "ubuntu/noble")
	path := "/api/v1/admin/maas-sites/7/profiles/bm"
	for _, tc := range []struct {
		name, method, path, token, ctype, key, body string
		status                                      int
		want                                        string
	}{
		{"no token", "GET", path, "", "", "", "", 401, "invalid bearer token"},
		{"wrong token", "GET", path, "nope", "", "", "", 401, "invalid bearer token"},
		{"get", "GET", path, s.Token, "", "", "", 200, `"distro_series":"ubuntu/noble"`},
		{"unknown profile", "GET", "/api/v1/admin/maas-sites/7/profiles/x", s.Token, "", "", "", 404, `no profile \"x\"`},
		{"unknown endpoint", "GET", "/api/v1/admin/other", s.Token, "", "", "", 404, "no such endpoint"},
		{"method", "PUT", path, s.Token, "application/json", "k", `{}`, 405, "method not allowed"},
		{"content type", "PATCH", path, s.Token, "text/plain", "k", `{"distro_series":"x"}`, 415, "application/json"},
		{"no key", "PATCH", path, s.Token, "application/json", "", `{"distro_series":"x"}`, 400, "X-Idempotency-Key is required"},
		{"not json", "PATCH", path, s.Token, "application/json", "k0", `distro_series=x`, 400, "not a JSON object"},
		{"empty value", "PATCH", path, s.Token, "application/json", "k1", `{"distro_series":""}`, 422, "non-empty string"},
		{"patch", "PATCH", path, s.Token, "application/json; charset=utf-8", "k2", `{"distro_series":"demo-1-0-0"}`, 200, `"distro_series":"demo-1-0-0"`},
		{"replay", "PATCH", path, s.Token, "application/json", "k2", `{"distro_series":"demo-1-0-0"}`, 200, `"revision":2`},
		{"key reuse", "PATCH", path, s.Token, "application/json", "k2", `{"distro_series":"demo-2"}`, 422, "used with another request"},
	} {
		req, _ := http.NewRequest(tc.method, s.URL+tc.path, strings.NewReader(tc.body))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		if tc.key != "" {
			req.Header.Set("X-Idempotency-Key", tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %d %s, want %d %q", tc.name, resp.StatusCode, b, tc.status, tc.want)
		}
	}
	if got, _ := s.DistroSeries("7", "bm"); got != "demo-1-0-0" {
		t.Errorf("profile %q", got)
	}
	if n := s.Count(profilesim.OpPatch); n != 7 {
		t.Errorf("%d PATCHes counted", n)
	}
}
