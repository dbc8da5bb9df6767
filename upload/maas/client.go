package maas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/canonical/gomaasclient/client"
	gomaasapi "github.com/juju/gomaasapi/v2"

	"github.com/gpuaas/imagectl/internal/backoff"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/sites"
)

// Config says how to reach one MAAS.
type Config struct {
	// URL is the MAAS root, such as http://maas.example:5240/MAAS.
	URL string
	// APIKey is consumer_key:token_key:token_secret. It is never printed,
	// logged or put in an error.
	APIKey string
	// Timeout bounds each API request and each chunk but the last
	// (default 60 s).
	Timeout time.Duration
	// LastChunkTimeout bounds the last chunk, during which MAAS hashes the
	// whole file (default 15 min).
	LastChunkTimeout time.Duration
	// CompleteTimeout bounds the wait for MAAS to report an uploaded file
	// complete: from 3.5 it first syncs it to every region (default 10 min).
	CompleteTimeout time.Duration
	// SettleTimeout bounds the wait for an incomplete file of the image
	// that has all its bytes: MAAS may be hashing it in another uploader's
	// last chunk, then syncing it to the regions, or it may be stuck (a
	// sha256 mismatch). Default LastChunkTimeout + CompleteTimeout, what an
	// upload of our own gives MAAS for the same, so that a file another
	// uploader finished is never deleted under it; then it is deleted.
	SettleTimeout time.Duration
	// StallTimeout bounds how long an incomplete file of the image that
	// makes no progress is waited for before it counts as abandoned and
	// is deleted: one another uploader is sending grows with each of its
	// chunks. Default the longest a live uploader of this configuration
	// goes without progress: a chunk's Retries+1 tries of Timeout each and
	// the backoffs between them (6 min 31 s with the defaults). A file
	// with only its last chunk missing gets at least LastChunkTimeout and
	// a backoff (MAAS hashes the file inside that request).
	StallTimeout time.Duration
	// PollInterval is how often those waits look (default 2 s).
	PollInterval time.Duration
	// ChunkSize is the size of each PUT (default 4 MiB, as the MAAS CLI).
	ChunkSize int64
	// Retries is how many times a request is retried after a 503 or a
	// connection error before the upload fails (default 5).
	Retries int
	// Restarts is how many times an upload deletes a stuck file and starts
	// again before it fails (default 3).
	Restarts int
	// Backoff is the wait before retry n (from 1); default exponential from
	// 1 s, at most 30 s. Tests pass a short one.
	Backoff func(n int) time.Duration
	// Transport carries the requests; default a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// ConfigFor is the configuration for a site of the sites file, with its
// API key read from the environment (KEY=value pairs, as os.Environ) or
// its file.
func ConfigFor(s *sites.Site, env []string) (Config, error) {
	key, err := s.APIKey(env)
	if err != nil {
		return Config{}, err
	}
	return Config{URL: s.URL, APIKey: key, Timeout: s.Timeout, LastChunkTimeout: s.LastChunkTimeout,
		CompleteTimeout: s.CompleteTimeout}, nil
}

// Client talks to one MAAS.
type Client struct {
	cfg    Config
	api    *url.URL // …/MAAS/api/2.0/
	signer gomaasapi.OAuthSigner
	http   *http.Client
}

// DefaultChunkSize is the MAAS CLI's chunk size.
const DefaultChunkSize = 4 << 20

// New checks the configuration and returns a client; it sends nothing.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("MAAS URL %q: want http(s)://host[:port]/MAAS", cfg.URL)
	}
	// gomaasapi puts a malformed key in its error: check it here first.
	parts := strings.Split(cfg.APIKey, ":")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("MAAS API key for %s is not of the form consumer_key:token_key:token_secret", cfg.URL)
	}
	versioned := gomaasapi.AddAPIVersionToURL(cfg.URL, "2.0")
	auth, err := gomaasapi.NewAuthenticatedClient(versioned, cfg.APIKey)
	if err != nil {
		return nil, fmt.Errorf("MAAS client for %s: invalid API key", cfg.URL)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Timeout, 60*time.Second)
	def(&cfg.LastChunkTimeout, 15*time.Minute)
	def(&cfg.CompleteTimeout, 10*time.Minute)
	def(&cfg.PollInterval, 2*time.Second)
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 5
	}
	if cfg.Restarts <= 0 {
		cfg.Restarts = 3
	}
	if cfg.Backoff == nil {
		cfg.Backoff = backoff.Default
	}
	def(&cfg.SettleTimeout, cfg.LastChunkTimeout+cfg.CompleteTimeout)
	def(&cfg.StallTimeout, stallBound(cfg))
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	api, _ := url.Parse(versioned)
	return &Client{cfg: cfg, api: api, signer: auth.Signer, http: &http.Client{Transport: cfg.Transport}}, nil
}

// stallBound is the longest a live uploader configured as cfg goes
// without progress: one chunk tried Retries+1 times, each up to Timeout,
// with the backoffs between the tries.
func stallBound(cfg Config) time.Duration {
	d := time.Duration(cfg.Retries+1) * cfg.Timeout
	for n := 1; n <= cfg.Retries; n++ {
		d += cfg.Backoff(n)
	}
	return d
}

// APIError is a response MAAS gave with a failure status.
type APIError struct {
	// Doing says what the request was for.
	Doing  string
	Status int
	// Message is MAAS's body: a text message or the JSON of a form's errors.
	Message string
}

// Error says what MAAS answered: its body cut to 500 characters and escaped
// (textsafe.Terminal), so that it can neither drive the terminal nor start
// a line of its own.
func (e *APIError) Error() string {
	// Redacted before it is cut: a secret across the cut would lose the
	// tail that redaction matches, and show the rest.
	msg := textsafe.Terminal(textsafe.Cut(redact.Text(strings.TrimSpace(e.Message)), 500))
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized:
		hint = " (check the site's API key and this machine's clock: MAAS refuses timestamps more than 300 s off)"
	case http.StatusForbidden:
		if strings.Contains(msg, "admin") {
			hint = " (uploading boot resources needs an admin's API key)"
		}
	case http.StatusRequestEntityTooLarge:
		msg = "request body larger than the MAAS web server accepts"
	}
	return fmt.Sprintf("%s: MAAS answered %d %s: %s%s", e.Doing, e.Status, http.StatusText(e.Status), msg, hint)
}

// IsNotFound reports whether err is MAAS's 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// retryable reports whether a failed request may be sent again as is: a
// 503, or a connection error that is not the caller's cancellation.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusServiceUnavailable
	}
	return true
}

// sleep waits for retry n, or until ctx ends.
func (c *Client) sleep(ctx context.Context, n int) error {
	return backoff.Sleep(ctx, c.cfg.Backoff(n))
}

// withRetries runs f until it succeeds, fails for good, or runs out of
// retries; event reports each retry. A request that could not connect (a
// refused connection, an unknown host) is sent again only within the
// Timeout of the first try (backoff.Within), so that a MAAS that is not
// there is reported in about the site's timeout, not after every backoff.
func (c *Client) withRetries(ctx context.Context, event func(string), f func() error) error {
	start := time.Now()
	for n := 1; ; n++ {
		err := f()
		if err == nil || !retryable(ctx, err) || n > c.cfg.Retries {
			return err
		}
		if backoff.NoConnection(err) && !backoff.Within(start, c.cfg.Timeout, c.cfg.Backoff(n)) {
			return fmt.Errorf("%w (tried %d times within the timeout of %v)", err, n, c.cfg.Timeout)
		}
		if event != nil {
			event(fmt.Sprintf("retry %d/%d after %v", n, c.cfg.Retries, err))
		}
		if err := c.sleep(ctx, n); err != nil {
			return err
		}
	}
}

// ctxTransport gives the requests gomaasapi builds (which take no context)
// the caller's context, so they stop with it and time out.
type ctxTransport struct {
	ctx  context.Context
	base http.RoundTripper
}

func (t ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.base.RoundTrip(r.WithContext(t.ctx))
}

// apiAt returns gomaasclient's API object for path under api/2.0/, bound to
// ctx with the request timeout, each answer's body bounded by limit
// (limitTransport).
func (c *Client) apiAt(ctx context.Context, path string, limit int64) (client.APIClient, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	rt := limitTransport{ctxTransport{ctx, c.cfg.Transport}, limit}
	mc, err := client.GetClientWithTransport(c.cfg.URL, c.cfg.APIKey, "2.0", rt)
	if err != nil {
		cancel()
		return client.APIClient{}, nil, fmt.Errorf("MAAS client for %s: invalid URL or API key", c.cfg.URL)
	}
	br, ok := mc.BootResources.(*client.BootResources)
	if !ok {
		cancel()
		return client.APIClient{}, nil, fmt.Errorf("MAAS client for %s: unexpected gomaasclient", c.cfg.URL)
	}
	root := br.APIClient
	// BootResources' client is rooted at api/2.0/; step to path.
	for _, p := range strings.Split(strings.Trim(path, "/"), "/") {
		root = root.GetSubObject(p)
	}
	return root, cancel, nil
}

// apiErr turns gomaasapi's error into an APIError or a connection error.
func apiErr(doing string, err error) error {
	if err == nil {
		return nil
	}
	if se, ok := gomaasapi.GetServerError(err); ok {
		return &APIError{Doing: doing, Status: se.StatusCode, Message: se.BodyMessage}
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// call sends a request on path under api/2.0/ (f, on the API object
// bound to ctx with the request timeout, its answers bounded by limit),
// with retries; doing names it in errors.
func (c *Client) call(ctx context.Context, doing, path string, limit int64, f func(api client.APIClient) error) error {
	return c.withRetries(ctx, nil, func() error {
		api, cancel, err := c.apiAt(ctx, path, limit)
		if err != nil {
			return err
		}
		defer cancel()
		return apiErr(doing, f(api))
	})
}

// bootResources is where the calls on boot resources go. gomaasclient
// reads each answer whole: maxBootResources bounds it, far above what a
// region with every synced and uploaded image answers (a few MiB).
const (
	bootResources    = "boot-resources"
	maxBootResources = 64 << 20
)

// List returns the boot resources of a type: "all", "synced" or "uploaded"
// (MAAS's list has no sets; Get a resource for them).
func (c *Client) List(ctx context.Context, typ string) ([]Resource, error) {
	doing := fmt.Sprintf("listing %s boot resources on %s", typ, c.cfg.URL)
	var out []Resource
	err := c.call(ctx, doing, bootResources, maxBootResources, func(api client.APIClient) error {
		// gomaasclient's BootResourcesReadParams sends "Type", which MAAS
		// ignores: send the filter ourselves.
		return api.Get("", url.Values{"type": {typ}}, func(b []byte) error {
			out = nil
			return json.Unmarshal(b, &out)
		})
	})
	return out, err
}

// Get returns one boot resource with its sets.
func (c *Client) Get(ctx context.Context, id int) (*Resource, error) {
	doing := fmt.Sprintf("reading boot resource %d on %s", id, c.cfg.URL)
	var out *Resource
	err := c.call(ctx, doing, bootResources, maxBootResources, func(api client.APIClient) error {
		return api.GetSubObject(strconv.Itoa(id)).Get("", url.Values{}, func(b []byte) error {
			out = new(Resource)
			return json.Unmarshal(b, out)
		})
	})
	return out, err
}

// Delete deletes a boot resource; one already gone is not an error.
func (c *Client) Delete(ctx context.Context, id int) error {
	doing := fmt.Sprintf("deleting boot resource %d on %s", id, c.cfg.URL)
	err := c.call(ctx, doing, bootResources, maxBootResources, func(api client.APIClient) error {
		return api.GetSubObject(strconv.Itoa(id)).Delete()
	})
	if IsNotFound(err) {
		return nil
	}
	return err
}

// Find returns the uploaded resource with that name (a "custom/" prefix
// is ignored, as MAAS strips it up to 3.7) and architecture, with its sets,
// or nil when MAAS has none.
func (c *Client) Find(ctx context.Context, name, arch string) (*Resource, error) {
	list, err := c.List(ctx, "uploaded")
	if err != nil {
		return nil, err
	}
	for _, r := range list {
		if manifest.SameName(r.Name, name) && r.Architecture == arch {
			res, err := c.Get(ctx, r.ID)
			if IsNotFound(err) {
				return nil, nil
			}
			return res, err
		}
	}
	return nil, nil
}

// countingReader counts what the transport read of a body, and keeps
// the body's own read error apart from the network's.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// response is the outcome of one request of ours.
type response struct {
	status int
	body   string
	// sent is true when the transport read the whole request body: after
	// a connection error, only then may MAAS have applied the request.
	sent bool
}

// send signs and sends one request with a body of exactly n bytes.
func (c *Client) send(ctx context.Context, method, uri string, body io.Reader, n int64, contentType string, timeout time.Duration) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, err := c.api.Parse(uri)
	if err != nil {
		return response{}, fmt.Errorf("bad MAAS URI %q: %w", uri, err)
	}
	cr := &countingReader{r: body}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), io.NopCloser(cr))
	if err != nil {
		return response{}, err
	}
	req.ContentLength = n
	req.Header.Set("Content-Type", contentType)
	// Signed now, not earlier: MAAS refuses stale timestamps and reused nonces.
	if err := c.signer.OAuthSign(req); err != nil {
		return response{}, fmt.Errorf("signing request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if cr.err != nil {
			return response{}, &readError{cr.err}
		}
		return response{sent: cr.n == n}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return response{sent: true}, fmt.Errorf("reading MAAS's answer: %w", err)
	}
	return response{status: resp.StatusCode, body: string(b), sent: true}, nil
}
