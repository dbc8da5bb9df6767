package debcache

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/gpuaas/imagectl/internal/environ"
)

// DefaultParallel is how many archives a Fetcher fetches at once by default.
const DefaultParallel = 4

// Fetcher fetches a packages step's archives into a Cache.
type Fetcher struct {
	Cache Cache
	// Client fetches; nil: ProxyClient(nil), no proxy.
	Client *http.Client
	// Parallel bounds the fetches at once (default DefaultParallel).
	Parallel int
}

// ProxyClient is an HTTP client that goes through the proxies env names
// (http_proxy, https_proxy, no_proxy, or their upper-case forms, the
// lower-case first, as curl and apt's http method read them).
func ProxyClient(env []string) *http.Client {
	get := func(name string) string {
		if v := environ.Get(env, name); v != "" {
			return v
		}
		return environ.Get(env, upper(name))
	}
	cfg := httpproxy.Config{HTTPProxy: get("http_proxy"), HTTPSProxy: get("https_proxy"), NoProxy: get("no_proxy")}
	proxy := cfg.ProxyFunc()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
	tr.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: tr}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// Result is one archive's fetch: its Got, or the error; a *NotFetchable
// error is an archive the guest's apt has to fetch itself.
type Result struct {
	Deb Deb
	Got
	Err error
}

// Fetch gets every archive, Parallel at once, holding the cache's lock
// shared, and returns one Result per archive in debs' order. It stops at
// ctx's end; what was under way then stays a partial download, never an
// entry.
func (f *Fetcher) Fetch(ctx context.Context, debs []Deb) ([]Result, error) {
	unlock, err := f.Cache.Lock().Wait(false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	client := f.Client
	if client == nil {
		client = ProxyClient(nil)
	}
	n := f.Parallel
	if n <= 0 {
		n = DefaultParallel
	}
	res := make([]Result, len(debs))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, d := range debs {
		res[i].Deb = d
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			res[i].Err = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			res[i].Got, res[i].Err = f.Cache.Get(ctx, client, d)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// IsNotFetchable says whether err is an archive the host cannot fetch.
func IsNotFetchable(err error) bool {
	var nf *NotFetchable
	return errors.As(err, &nf)
}
