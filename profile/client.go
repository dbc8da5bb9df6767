package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/backoff"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/sites"
)

// PathPrefix is where the admin API keeps MAAS sites, under its base URL.
const PathPrefix = "/api/v1/admin/maas-sites/"

// Path is a profile's path under the admin API's base URL.
func Path(siteID, profileID string) string {
	return PathPrefix + url.PathEscape(siteID) + "/profiles/" + url.PathEscape(profileID)
}

// Config says which profile to talk to and how.
type Config struct {
	// URL is the admin API's base URL, such as https://admin.example; the
	// profile is at URL + Path(SiteID, ProfileID).
	URL               string
	SiteID, ProfileID string
	// Token is the bearer token. It is never printed, logged or put in an
	// error.
	Token string
	// TokenSource says where the token came from ("environment variable
	// GPUAAS_ADMIN_TOKEN"), for errors.
	TokenSource string
	// Timeout bounds each request (default 30 s).
	Timeout time.Duration
	// Retries is how many times a request is sent again after a 5xx, a 429
	// or no answer (default 3).
	Retries int
	// Backoff is the wait before retry n (from 1); default 1 s, 2 s, 4 s, …
	// up to 30 s. A Retry-After header lengthens it.
	Backoff func(n int) time.Duration
	// Transport carries the requests; default a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// ConfigFor is the configuration for a deploy profile of the sites file,
// with its token read from the environment (KEY=value pairs, as os.Environ)
// or its file.
func ConfigFor(p *sites.DeployProfile, env []string) (Config, error) {
	tok, err := p.Token(env)
	if err != nil {
		return Config{}, err
	}
	return Config{URL: p.APIURL, SiteID: p.SiteID, ProfileID: p.ProfileID, Token: tok, TokenSource: p.TokenSource(),
		Timeout: p.Timeout}, nil
}

// Client talks to one deploy profile.
type Client struct {
	cfg  Config
	url  string
	http *http.Client
}

// New checks the configuration and returns a client; it sends nothing.
func New(cfg Config) (*Client, error) {
	if msg := sites.CheckAdminURL(cfg.URL); msg != "" {
		return nil, errors.New("admin API URL " + msg)
	}
	if cfg.SiteID == "" || cfg.ProfileID == "" {
		return nil, errors.New("a deploy profile needs a site id and a profile id")
	}
	if cfg.TokenSource == "" {
		cfg.TokenSource = "the configuration"
	}
	if msg := sites.CheckToken(cfg.Token); msg != "" {
		return nil, fmt.Errorf("the admin API token in %s %s", cfg.TokenSource, msg)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 3
	}
	if cfg.Backoff == nil {
		cfg.Backoff = backoff.Default
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	// A redirect would carry the token somewhere sites.hcl does not name.
	hc := &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Client{cfg: cfg, url: strings.TrimSuffix(cfg.URL, "/") + Path(cfg.SiteID, cfg.ProfileID), http: hc}, nil
}

// URL is the profile's URL.
func (c *Client) URL() string { return c.url }

// Key is an X-Idempotency-Key: "imagectl-" and 32 hex digits of a sha256
// over parts. The same parts always give the same key, so a request sent
// again for the same operation is one the server can recognise.
func Key(parts ...string) string {
	h := digest.NewWriter(nil)
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return "imagectl-" + h.Digest().Hex()[:32]
}

// APIError is an answer the admin API gave with a failure status.
type APIError struct {
	// Doing says what the request was for.
	Doing  string
	Status int
	// Message is the server's, bounded, with the token starred out.
	Message string
	// TokenSource is where the token came from.
	TokenSource string
}

func (e *APIError) Error() string {
	msg := ""
	if e.Message != "" {
		msg = ": " + e.Message
	}
	st := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("%s: the admin API refused the token from %s (%s%s)", e.Doing, e.TokenSource, st, msg)
	case http.StatusConflict:
		return fmt.Sprintf("%s: the admin API refused the change as a conflict (%s%s)", e.Doing, st, msg)
	case http.StatusNotFound:
		return fmt.Sprintf("%s: the admin API has no such site or profile (%s%s)", e.Doing, st, msg)
	}
	return fmt.Sprintf("%s: the admin API answered %s%s", e.Doing, st, msg)
}

func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// IsUnauthorized reports whether the admin API refused the token (401 or 403).
func IsUnauthorized(err error) bool {
	s := statusOf(err)
	return s == http.StatusUnauthorized || s == http.StatusForbidden
}

// IsConflict reports whether the admin API answered 409.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

func transient(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests
}

// Profile is what imagectl reads of a deploy profile; the API's other
// fields are ignored.
type Profile struct {
	DistroSeries string `json:"distro_series"`
}

// answer is one response, or why there was none.
type answer struct {
	status     int
	body       []byte
	retryAfter time.Duration
	// noAnswer is set when the request got no response (a timeout, a
	// dropped connection): it may or may not have been applied.
	noAnswer error
	// noConnection is set when it could not even connect (refused, an
	// unknown host): it was not applied.
	noConnection bool
}

const maxBody = 1 << 20

// do sends one request with its own timeout; an error is the caller's
// context ending.
func (c *Client) do(ctx context.Context, method string, body []byte, key string) (answer, error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, c.url, rd)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-Idempotency-Key", key)
	}
	resp, err := c.http.Do(req)
	var b []byte
	if err == nil {
		b, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
	}
	if err != nil && ctx.Err() != nil {
		return answer{}, ctx.Err()
	}
	if err != nil {
		why := "the connection failed"
		if rctx.Err() != nil {
			why = fmt.Sprintf("no answer within %v", c.cfg.Timeout)
		} else if ue := (*url.Error)(nil); errors.As(err, &ue) {
			why = ue.Err.Error()
		}
		return answer{noAnswer: errors.New(why), noConnection: backoff.NoConnection(err)}, nil
	}
	a := answer{status: resp.StatusCode, body: b}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		a.retryAfter = min(time.Duration(s)*time.Second, time.Minute)
	}
	return a, nil
}

func (c *Client) apiError(doing string, a answer) *APIError {
	return &APIError{Doing: doing, Status: a.status, Message: c.message(a.body), TokenSource: c.cfg.TokenSource}
}

// message is what the server said, at most 300 characters on one line:
// a JSON error's usual fields, each that is there (an "error" and the
// "message" that explains it, a problem's "title" and "detail"), else the
// raw body; without the token, and escaped (textsafe.Terminal).
func (c *Client) message(b []byte) string {
	var obj map[string]any
	msg := string(b)
	if json.Unmarshal(b, &obj) == nil {
		var parts []string
		for _, k := range []string{"error", "title", "message", "detail"} {
			if s, ok := obj[k].(string); ok && strings.TrimSpace(s) != "" && !slices.Contains(parts, s) {
				parts = append(parts, s)
			}
		}
		if len(parts) > 0 {
			msg = strings.Join(parts, ": ")
		}
	}
	if c.cfg.Token != "" {
		msg = strings.ReplaceAll(msg, c.cfg.Token, "[token]")
	}
	msg = strings.Join(strings.Fields(msg), " ") // one line
	return textsafe.Terminal(textsafe.Cut(msg, 300))
}

// sleep waits for retry n (at least after), or until ctx ends.
func (c *Client) sleep(ctx context.Context, n int, after time.Duration) error {
	return backoff.Sleep(ctx, max(c.cfg.Backoff(n), after))
}

func (c *Client) what() string {
	return fmt.Sprintf("deploy profile %s of admin site %s at %s", c.cfg.ProfileID, c.cfg.SiteID, c.cfg.URL)
}

// Get reads the profile, retrying 5xx, 429 and requests without an answer.
func (c *Client) Get(ctx context.Context) (*Profile, error) {
	doing := "reading " + c.what()
	start := time.Now()
	for n := 1; ; n++ {
		a, err := c.do(ctx, http.MethodGet, nil, "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", doing, err)
		}
		var last error
		switch {
		case a.noAnswer != nil:
			last = fmt.Errorf("%s: %w", doing, a.noAnswer)
		case transient(a.status):
			last = c.apiError(doing, a)
		case a.status/100 != 2:
			return nil, c.apiError(doing, a)
		default:
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(a.body, &raw); err != nil {
				return nil, fmt.Errorf("%s: the answer is not a JSON object: %v", doing, err)
			}
			var p Profile
			ds, ok := raw["distro_series"]
			if !ok || json.Unmarshal(ds, &p.DistroSeries) != nil {
				return nil, fmt.Errorf("%s: the answer has no distro_series string", doing)
			}
			return &p, nil
		}
		if n > c.cfg.Retries {
			return nil, fmt.Errorf("gave up after %d attempts: %w", n, last)
		}
		// An admin API that is not there is reported in about the
		// timeout, not after every backoff (backoff.Within).
		if a.noConnection && !backoff.Within(start, c.cfg.Timeout, max(c.cfg.Backoff(n), a.retryAfter)) {
			return nil, fmt.Errorf("gave up after %d attempts within the timeout of %v: %w", n, c.cfg.Timeout, last)
		}
		if err := c.sleep(ctx, n, a.retryAfter); err != nil {
			return nil, fmt.Errorf("%s: %w", doing, err)
		}
	}
}

// Outcome is how a profile came to hold a value.
type Outcome string

// Outcomes.
const (
	// Unchanged: it already held the value; nothing was sent.
	Unchanged Outcome = "unchanged"
	// Patched: the admin API answered the PATCH with success.
	Patched Outcome = "patched"
	// Confirmed: a PATCH got no answer, and reading the profile back showed
	// the value.
	Confirmed Outcome = "confirmed"
)

// SetResult is what Set did.
type SetResult struct {
	// Previous is what the profile held before.
	Previous     string  `json:"previous"`
	DistroSeries string  `json:"distro_series"`
	Outcome      Outcome `json:"outcome"`
	// IdempotencyKey is the key the PATCH carried (every attempt the same).
	IdempotencyKey string `json:"idempotency_key"`
	// Attempts is how many PATCH requests were sent.
	Attempts int `json:"attempts"`
}

// Set makes the profile's distro_series distroSeries. It reads the profile
// first and sends nothing when it holds the value already; every PATCH
// attempt carries key. A PATCH without an answer is an unknown outcome:
// the profile is read back and Set succeeds when it holds the value, else
// the PATCH is sent again (the key lets the server tell it is the same).
// 5xx and 429 are retried with backoff; 401/403 (the token refused), 409
// (a conflict, with the server's message) and other statuses are not.
func (c *Client) Set(ctx context.Context, distroSeries, key string) (*SetResult, error) {
	cur, err := c.Get(ctx)
	if err != nil {
		return nil, err
	}
	res := &SetResult{Previous: cur.DistroSeries, DistroSeries: distroSeries, IdempotencyKey: key}
	if manifest.SameName(cur.DistroSeries, distroSeries) {
		res.Outcome = Unchanged
		return res, nil
	}
	body, _ := json.Marshal(map[string]string{"distro_series": distroSeries})
	doing := fmt.Sprintf("setting %s to distro_series %q", c.what(), distroSeries)
	for n := 1; ; n++ {
		res.Attempts = n
		a, err := c.do(ctx, http.MethodPatch, body, key)
		if err != nil {
			return res, fmt.Errorf("%s: %w", doing, err)
		}
		var last error
		switch {
		case a.noAnswer != nil:
			// Maybe applied: what the profile holds now decides.
			p, gerr := c.Get(ctx)
			switch {
			case gerr == nil && manifest.SameName(p.DistroSeries, distroSeries):
				res.Outcome = Confirmed
				return res, nil
			case ctx.Err() != nil:
				return res, fmt.Errorf("%s: %w", doing, ctx.Err())
			case gerr != nil && !transient(statusOf(gerr)) && statusOf(gerr) != 0:
				return res, fmt.Errorf("%s: %v, and then %w", doing, a.noAnswer, gerr)
			case gerr != nil:
				last = fmt.Errorf("%s: %v, and reading it back failed: %w", doing, a.noAnswer, gerr)
			default:
				last = fmt.Errorf("%s: %v, and it still holds %q", doing, a.noAnswer, p.DistroSeries)
			}
		case transient(a.status):
			last = c.apiError(doing, a)
		case a.status/100 != 2:
			return res, c.apiError(doing, a)
		default:
			// An answer that names another value is an earlier request's
			// answer replayed for the key, not this change.
			var p struct {
				DistroSeries *string `json:"distro_series"`
			}
			if json.Unmarshal(a.body, &p) == nil && p.DistroSeries != nil && !manifest.SameName(*p.DistroSeries, distroSeries) {
				return res, fmt.Errorf("%s: the admin API accepted the request (X-Idempotency-Key %s) but answered distro_series %q", doing, key, *p.DistroSeries)
			}
			// Even an answer naming the value can be a replay (the key's
			// first use set it; someone set it back since): what the
			// profile holds now decides.
			now, gerr := c.Get(ctx)
			switch {
			case gerr != nil:
				return res, fmt.Errorf("%s: the admin API accepted the request, but reading the profile back failed: %w", doing, gerr)
			case !manifest.SameName(now.DistroSeries, distroSeries):
				return res, fmt.Errorf("%s: the admin API accepted the request (X-Idempotency-Key %s), but the profile still holds %q: the server replayed an earlier answer for that key", doing, key, now.DistroSeries)
			}
			res.Outcome = Patched
			return res, nil
		}
		if n > c.cfg.Retries {
			return res, fmt.Errorf("gave up after %d attempts: %w", n, last)
		}
		if err := c.sleep(ctx, n, a.retryAfter); err != nil {
			return res, fmt.Errorf("%s: %w", doing, err)
		}
	}
}
