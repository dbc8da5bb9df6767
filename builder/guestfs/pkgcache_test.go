//go:build guestfs

package guestfs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/debcache"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/recipes"
)

// forwardProxy is an HTTP proxy for the host's package fetches that counts
// the .deb archives it forwards.
type forwardProxy struct {
	debs atomic.Int64
	rp   *httputil.ReverseProxy
}

func newForwardProxy() *forwardProxy {
	p := &forwardProxy{}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	p.rp = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL = r.In.URL }, Transport: tr}
	return p
}

func (p *forwardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() {
		http.Error(w, "a proxy request needs an absolute URL", http.StatusBadRequest)
		return
	}
	if strings.HasSuffix(r.URL.Path, ".deb") {
		p.debs.Add(1)
	}
	p.rp.ServeHTTP(w, r)
}

// TestPackageCache builds one recipe three times without the layer cache
// (every layer applied): with an empty package cache (every archive
// fetched on the host, through the environment's proxy), with the cache
// warm and one entry corrupted (found out, fetched again, the rest served
// by the cache), and with the host unable to reach the repository (a
// proxy on a refused port: every archive falls back to the guest's own
// download, saying so; this one with dpkg syncing every file it writes,
// the others without). The same inputs give the same tgz bytes: the three
// artifacts' sha256s are equal (no file excused: the marker holds the
// source date, not the build's times; the times the build wrote are
// clamped to the source date); when they are not, the first differing
// entries are shown with their header fields.
func TestPackageCache(t *testing.T) {
	if testing.Short() {
		t.Skip("builds in an appliance")
	}
	base, checksum := baseImage(t)
	dir := t.TempDir()
	recipe := filepath.Join(dir, "pkgcache.hcl")
	src := fmt.Sprintf(`image "pkgcache" {
  title   = "pkgcache"
  version = "1"
  base {
    source   = %q
    checksum = %q
  }
  layer "tools" {
    packages          = ["jq", "less"]
    optional_packages = ["tree", "no-such-package-imagectl-pkgcache"]
  }
  waive "os-release" {
    reason = "the test base image is Debian"
  }
}
`, base, checksum)
	if err := os.WriteFile(recipe, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p := loadPlan(t, recipe, recipes.Options{})
	proxy := newForwardProxy()
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	baseCache := t.TempDir()
	pkgs := debcache.Cache{Dir: filepath.Join(t.TempDir(), "packages")}

	type result struct {
		res  *builder.Result
		logs []string
		tgz  map[string]string
	}
	build := func(name string, cache string, env []string, keepDpkgSyncs bool) result {
		t.Helper()
		var r result
		var events []event.Event
		opts := buildOptions(t, t.TempDir(), &events)
		opts.CacheDir, opts.PackageCache, opts.Env, opts.KeepDpkgSyncs = baseCache, cache, env, keepDpkgSyncs
		res, err := builder.Build(context.Background(), p, opts)
		if err != nil {
			t.Fatalf("%s build: %v", name, err)
		}
		r.res = res
		for _, e := range events {
			if e.Type == event.TypeLog {
				r.logs = append(r.logs, e.Message)
			}
		}
		r.tgz = tgzEntries(t, res.Files.Tarball)
		return r
	}
	logged := func(r result, s string) []string {
		var ls []string
		for _, l := range r.logs {
			if strings.Contains(l, s) {
				ls = append(ls, l)
			}
		}
		return ls
	}
	proxyEnv := []string{"http_proxy=" + srv.URL, "https_proxy=" + srv.URL}

	cold := build("cold", pkgs.Dir, proxyEnv, false)
	entries, err := pkgs.List()
	if err != nil {
		t.Fatal(err)
	}
	coldFetches := proxy.debs.Load()
	if len(entries) < 3 || coldFetches != int64(len(entries)) {
		t.Fatalf("cold build: %d cache entries, %d archives fetched through the proxy", len(entries), coldFetches)
	}
	if l := logged(cold, "fetched by the guest"); len(l) > 0 {
		t.Errorf("cold build fell back to the guest: %q", l)
	}
	prov := provenanceDebs(t, cold.res.Files.Provenance)
	for _, e := range entries {
		if !prov[e.SHA256] {
			t.Errorf("the provenance does not list the archive %s", e.SHA256)
		}
	}
	for _, want := range []string{"jq", "tree"} { // less is in the base image: nothing to fetch
		if !prov["deb:"+want] {
			t.Errorf("the provenance does not list deb:%s", want)
		}
	}

	// Where the cold build's time went: apt's update and resolution, the
	// host's fetch and hand-over, and dpkg, each its own part; every
	// archive's bytes downloaded, none served by the cache.
	if tm := cold.res.Manifest.Build.Timings; tm == nil || tm.Resolve <= 0 || tm.Download <= 0 || tm.Install <= 0 ||
		tm.DownloadBytes <= 0 || tm.CachedBytes != 0 {
		t.Errorf("cold build's timings %+v: want resolve, download and install time, bytes downloaded and none cached", tm)
	}

	// Corrupt one entry: same size, other bytes.
	bad := pkgs.Path(entries[0].SHA256)
	b, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 3; i < len(b)/3+64 && i < len(b); i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	warm := build("warm", pkgs.Dir, proxyEnv, false)
	if got := proxy.debs.Load() - coldFetches; got != 1 {
		t.Errorf("warm build fetched %d archives, want only the corrupted one", got)
	}
	if l := logged(warm, "fetched again"); len(l) != 1 {
		t.Errorf("warm build: want one archive said fetched again, logged %q", l)
	}
	if tm := warm.res.Manifest.Build.Timings; tm == nil || tm.CachedBytes <= 0 || tm.DownloadBytes != entries[0].Bytes {
		t.Errorf("warm build's timings %+v: want the cache's bytes, and the corrupted archive's %d downloaded again", tm, entries[0].Bytes)
	}
	if sum, _ := fileSHA256(t, bad); sum != entries[0].SHA256 {
		t.Errorf("the corrupted entry was not replaced by the good archive: %s", sum)
	}

	// The host cannot reach the repository: every archive is the guest's.
	// This build also keeps dpkg's per-file syncs: the other setting.
	unreachable := build("unreachable", filepath.Join(t.TempDir(), "packages"), []string{"http_proxy=http://" + testenv.RefusedAddr(t)}, true)
	if l := logged(unreachable, "fetched by the guest, not the host"); len(l) != len(entries) {
		t.Errorf("with the repository out of the host's reach, %d archives said to fall back, want %d: %q", len(l), len(entries), l)
	}

	sd := cold.res.Manifest.Build.SourceDate
	if sd == nil || sd.From != "base image" || sd.Epoch <= 0 || sd.Epoch >= cold.res.Manifest.Build.Started.Unix() {
		t.Fatalf("cold build's source date %+v: want one from the base image, before the build's start", sd)
	}
	for name, h := range cold.tgz {
		if mt := mtimeOf(h); mt > sd.Epoch*1e9 {
			t.Errorf("%s: mtime %d is after the source date %d", name, mt, sd.Epoch)
		}
	}
	for _, other := range []struct {
		name string
		r    result
	}{{"warm", warm}, {"guest-fetched", unreachable}} {
		if got := other.r.res.Manifest.Build.SourceDate; got == nil || *got != *sd {
			t.Errorf("the %s build's source date %+v, the cold build's %+v", other.name, got, sd)
		}
		t.Logf("tgz sha256: cold %s, %s %s", cold.res.Manifest.Artifact.SHA256, other.name, other.r.res.Manifest.Artifact.SHA256)
		if other.r.res.Manifest.Artifact.SHA256 == cold.res.Manifest.Artifact.SHA256 {
			continue
		}
		t.Errorf("the %s build's tgz (sha256 %s) is not the cold build's (%s)", other.name, other.r.res.Manifest.Artifact.SHA256, cold.res.Manifest.Artifact.SHA256)
		for _, d := range entryDiffs(cold.tgz, other.r.tgz, "cold", other.name, 20) {
			t.Errorf("the %s build's tgz differs from the cold build's: %s", other.name, d)
		}
	}
}

// entryDiffs are the entries two tarDigests maps disagree on, sorted, at
// most n of them and then a count of the rest.
func entryDiffs(a, b map[string]string, nameA, nameB string, n int) []string {
	var diffs []string
	for name, want := range a {
		got, ok := b[name]
		if !ok {
			diffs = append(diffs, name+": only in the "+nameA+" build")
			continue
		}
		if got != want {
			diffs = append(diffs, fmt.Sprintf("%s:\n    %s %s\n    %s %s", name, nameA, want, nameB, got))
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			diffs = append(diffs, name+": only in the "+nameB+" build")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > n {
		diffs = append(diffs[:n], fmt.Sprintf("... %d more", len(diffs)-n))
	}
	return diffs
}

var mtimeField = regexp.MustCompile(` mtime=(-?\d+)`)

// mtimeOf is the mtime (ns) of a tarDigests description.
func mtimeOf(desc string) int64 {
	m := mtimeField.FindStringSubmatch(desc)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// provenanceDebs are the names and sha256s of the package archives the
// provenance lists.
func provenanceDebs(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Predicate struct {
			BuildDefinition struct {
				ResolvedDependencies []struct {
					Name   string            `json:"name"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
		if strings.HasPrefix(d.Name, "deb:") {
			got[d.Name] = true
			got[d.Digest["sha256"]] = true
		}
	}
	return got
}
