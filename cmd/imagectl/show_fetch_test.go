package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// TestShowFetchesTheCatalogOnce: show of a version with a revocation and
// a boot comparison in a git catalog fetches the catalog once (git's
// upload-pack advertisements, counted in front of the real http-backend),
// and still prints both.
func TestShowFetchesTheCatalogOnce(t *testing.T) {
	catalog, _ := httpCatalog(t)
	backend, err := url.Parse(catalog)
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: backend.Scheme, Host: backend.Host})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-upload-pack" {
			fetches.Add(1)
		}
		r.SetBasicAuth("rita", "s3cret") // httpCatalog's: the front asks for none
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	remote := front.URL + backend.Path

	dir, _ := stored(t, "1.0.0")
	env := machine(t, "IMAGECTL_STORE="+dir, "IMAGECTL_CATALOG="+remote, "USER=carol")
	if out, errs, code := imagectl(t, env, "revoke", "demo", "1.0.0", "--reason", "bad kernel"); code != 0 {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errs)
	}
	passed := `{"passed": true, "validated_seconds": 41.2, "deploy_seconds": 61, "download_bytes": 1024}`
	slow := `{"passed": true, "validated_seconds": 152.6, "deploy_seconds": 12.5, "download_bytes": 314572800}`
	if out, errs, code := imagectl(t, env, "evidence", "add-comparison", smokeCompareFile(t, dir, "1.0.0", "tcg", passed, slow)); code != 0 {
		t.Fatalf("add-comparison: exit %d\n%s%s", code, out, errs)
	}
	for _, args := range [][]string{{"show", "demo", "1.0.0"}, {"show", "demo", "1.0.0", "-o", "json"}} {
		fetches.Store(0)
		out, errs, code := imagectl(t, env, args...)
		if code != 0 || !strings.Contains(out, "bad kernel") || !strings.Contains(out, "152.6") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
		if n := fetches.Load(); n != 1 {
			t.Errorf("%v fetched the catalog %d times, want once", args, n)
		}
	}
}
