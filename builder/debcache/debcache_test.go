package debcache_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/debcache"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// realDeb builds a real .deb (dpkg-deb) holding size bytes of a file.
func realDeb(t *testing.T, name string, size int) []byte {
	t.Helper()
	dpkgDeb := testenv.Tool(t, "dpkg-deb", "apt-get install dpkg")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755); err != nil {
		t.Fatal(err)
	}
	control := "Package: " + name + "\nVersion: 1:1.0-1\nArchitecture: all\nMaintainer: t <t@example.invalid>\nDescription: test\n"
	if err := os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte(control), 0o644); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i/251) // not compressible to nothing
	}
	if err := os.MkdirAll(filepath.Join(root, "usr", "share", name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr", "share", name, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), name+".deb")
	if b, err := exec.Command(dpkgDeb, "-Zgzip", "-z0", "--root-owner-group", "--build", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func debOf(url string, b []byte) debcache.Deb {
	s := sha256.Sum256(b)
	return debcache.Deb{Name: "demo", Version: "1:1.0-1", Architecture: "all", URL: url, Filename: "demo_1%3a1.0-1_all.deb", Size: int64(len(b)), SHA256: hex.EncodeToString(s[:])}
}

// archive is a repository serving one archive, counting the requests and
// the bytes it sent.
type archive struct {
	body     []byte
	gets     atomic.Int64
	sent     atomic.Int64
	noRanges bool
	// handler, when set, replaces serving body.
	handler http.HandlerFunc
}

func (a *archive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.gets.Add(1)
	if a.handler != nil {
		a.handler(w, r)
		return
	}
	if a.noRanges {
		r.Header.Del("Range")
	}
	cw := &countingWriter{ResponseWriter: w, n: &a.sent}
	http.ServeContent(cw, r, "demo.deb", time.Unix(1700000000, 0), strings.NewReader(string(a.body)))
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func TestParseURIs(t *testing.T) {
	// apt 2.6 (Debian 12): the MD5Sum when the index has one, else nothing.
	out := "'http://deb.debian.org/debian-security/pool/updates/main/j/jq/jq_1.6-2.1%2bdeb12u3_amd64.deb' jq_1.6-2.1+deb12u3_amd64.deb 64432 \n" +
		"'http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb' hello_2.10-3_amd64.deb 53080 MD5Sum:d04c2e9639dee67aa836d8232b1ca658\n" +
		"'http://deb.debian.org/debian/pool/main/s/systemd/systemd_252.38-1~deb12u1_amd64.deb' libsystemd0_1%3a252.38-1~deb12u1_amd64.deb 100 \n"
	us, err := debcache.ParseURIs(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 3 || us[0].Filename != "jq_1.6-2.1+deb12u3_amd64.deb" || us[0].Size != 64432 || us[0].Hash != "" ||
		us[1].Hash != "MD5Sum:d04c2e9639dee67aa836d8232b1ca658" || us[1].URL != "http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb" {
		t.Fatalf("parsed %+v", us)
	}
	name, version, arch, err := us[2].NameVersion()
	if err != nil || name != "libsystemd0" || version != "1:252.38-1~deb12u1" || arch != "amd64" {
		t.Fatalf("NameVersion = %q %q %q %v", name, version, arch, err)
	}
	for _, bad := range []string{"'http://x/a.deb a.deb", "'http://x/a.deb' ../a.deb 1", "'http://x/a.deb' a.deb -1", "'http://x/a.deb a.deb 1"} {
		if _, err := debcache.ParseURIs(bad); err == nil {
			t.Errorf("ParseURIs(%q) took it", bad)
		}
	}
}

func TestResolve(t *testing.T) {
	us, err := debcache.ParseURIs("'http://deb.debian.org/debian/pool/main/h/hello/hello_2.10-3_amd64.deb' hello_2.10-3_amd64.deb 53080 MD5Sum:d04c\n" +
		"'http://deb.debian.org/debian/pool/main/j/jq/jq_1.6_amd64.deb' jq_1.6_amd64.deb 10 \n")
	if err != nil {
		t.Fatal(err)
	}
	rs := debcache.ParseRecords("Package: hello\nVersion: 2.10-3\nArchitecture: amd64\nDescription: x\n more\nFilename: pool/main/h/hello/hello_2.10-3_i386.deb\nSize: 53080\nSHA256: 11\n\n" +
		"Package: hello\nVersion: 2.10-3\nArchitecture: amd64\nFilename: pool/main/h/hello/hello_2.10-3_amd64.deb\nSize: 53080\nMD5sum: d04c\nSHA256: 2E6E2F1A0007DC43BC91C273FD36E91E40A4F1C2765A03ECA68B70A42103878A\n")
	debs, unresolved := debcache.Resolve(us, rs)
	if len(debs) != 1 || debs[0].Name != "hello" || debs[0].SHA256 != "2e6e2f1a0007dc43bc91c273fd36e91e40a4f1c2765a03eca68b70a42103878a" {
		t.Fatalf("resolved %+v", debs)
	}
	if !strings.Contains(unresolved["jq_1.6_amd64.deb"], "no sha256") {
		t.Fatalf("unresolved %v", unresolved)
	}
}

func TestFetchColdWarmAndCorrupted(t *testing.T) {
	body := realDeb(t, "demo", 300<<10)
	a := &archive{body: body}
	srv := httptest.NewServer(a)
	defer srv.Close()
	f := &debcache.Fetcher{Cache: debcache.Cache{Dir: t.TempDir()}}
	d := debOf(srv.URL+"/pool/demo.deb", body)
	res, err := f.Fetch(context.Background(), []debcache.Deb{d})
	if err != nil || res[0].Err != nil || res[0].Cached || res[0].Fetched != d.Size {
		t.Fatalf("cold fetch: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(res[0].Path); string(b) != string(body) {
		t.Fatal("the entry is not the archive")
	}
	res, err = f.Fetch(context.Background(), []debcache.Deb{d})
	if err != nil || res[0].Err != nil || !res[0].Cached || res[0].Fetched != 0 || a.gets.Load() != 1 {
		t.Fatalf("warm fetch: %+v %v (%d requests)", res, err, a.gets.Load())
	}
	// A corrupted entry is found out, deleted and fetched again.
	bad := append([]byte{}, body...)
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(f.Cache.Path(d.SHA256), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = f.Fetch(context.Background(), []debcache.Deb{d})
	if err != nil || res[0].Err != nil || res[0].Cached || res[0].Replaced == "" || res[0].Fetched != d.Size {
		t.Fatalf("corrupted entry: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(res[0].Path); string(b) != string(body) {
		t.Fatal("the corrupted entry was not replaced")
	}
	es, err := f.Cache.List()
	if err != nil || len(es) != 1 || es[0].SHA256 != d.SHA256 || es[0].Bytes != d.Size {
		t.Fatalf("List = %+v, %v", es, err)
	}
}

func TestServerSendsOtherBytes(t *testing.T) {
	body := realDeb(t, "demo", 64<<10)
	a := &archive{body: append(append([]byte{}, body[:len(body)-1]...), body[len(body)-1]^1)}
	srv := httptest.NewServer(a)
	defer srv.Close()
	c := debcache.Cache{Dir: t.TempDir()}
	d := debOf(srv.URL+"/demo.deb", body)
	_, err := c.Get(context.Background(), srv.Client(), d)
	if err == nil || !strings.Contains(err.Error(), "do not match the sha256") {
		t.Fatalf("Get = %v, want a sha256 mismatch", err)
	}
	assertNoEntry(t, c, d)
	if _, err := os.Stat(filepath.Join(c.Dir, "partial", d.SHA256+".partial")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a bad download was kept: %v", err)
	}
}

func assertNoEntry(t *testing.T, c debcache.Cache, d debcache.Deb) {
	t.Helper()
	if _, err := os.Stat(c.Path(d.SHA256)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the cache has an entry for %s: %v", d.Filename, err)
	}
}

// TestCancelThenResume cancels a fetch half-way (Ctrl-C): no entry, a
// partial download; the next fetch asks for the rest only (Range), or the
// whole when the server ignores ranges.
func TestCancelThenResume(t *testing.T) {
	body := realDeb(t, "demo", 512<<10)
	for _, noRanges := range []bool{false, true} {
		t.Run(fmt.Sprintf("noRanges=%v", noRanges), func(t *testing.T) {
			half := len(body) / 2
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stalled := make(chan struct{})
			a := &archive{body: body, noRanges: noRanges}
			a.handler = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				w.Write(body[:half])
				w.(http.Flusher).Flush()
				close(stalled)
				<-r.Context().Done()
			}
			srv := httptest.NewServer(a)
			defer srv.Close()
			c := debcache.Cache{Dir: t.TempDir()}
			d := debOf(srv.URL+"/demo.deb", body)
			go func() { <-stalled; time.Sleep(50 * time.Millisecond); cancel() }()
			if _, err := c.Get(ctx, srv.Client(), d); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Get = %v", err)
			}
			assertNoEntry(t, c, d)
			fi, err := os.Stat(filepath.Join(c.Dir, "partial", d.SHA256+".partial"))
			if err != nil || fi.Size() == 0 || fi.Size() > int64(half) {
				t.Fatalf("partial download: %v, %v", fi, err)
			}
			a.handler = nil
			a.sent.Store(0)
			got, err := c.Get(context.Background(), srv.Client(), d)
			if err != nil {
				t.Fatal(err)
			}
			want := d.Size - fi.Size()
			if noRanges {
				want = d.Size
			}
			if got.Fetched != want || a.sent.Load() != want {
				t.Fatalf("resumed fetch read %d bytes (server sent %d), want %d", got.Fetched, a.sent.Load(), want)
			}
			if b, _ := os.ReadFile(got.Path); string(b) != string(body) {
				t.Fatal("the resumed entry is not the archive")
			}
		})
	}
}

// TestHelperProcess is the other process of TestTwoProcessesFetchOnce.
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv("DEBCACHE_HELPER")
	if spec == "" {
		t.Skip("only run by TestTwoProcessesFetchOnce")
	}
	f := strings.Split(spec, "|")
	size, _ := strconv.ParseInt(f[3], 10, 64)
	d := debcache.Deb{Name: "demo", Version: "1", URL: f[1], Filename: "demo_1_all.deb", SHA256: f[2], Size: size}
	fe := &debcache.Fetcher{Cache: debcache.Cache{Dir: f[0]}}
	res, err := fe.Fetch(context.Background(), []debcache.Deb{d})
	if err != nil || res[0].Err != nil {
		t.Fatalf("%v %v", err, res[0].Err)
	}
	fmt.Printf("fetched=%d cached=%v\n", res[0].Fetched, res[0].Cached)
}

func TestTwoProcessesFetchOnce(t *testing.T) {
	body := realDeb(t, "demo", 256<<10)
	a := &archive{body: body}
	var once sync.Once
	started := make(chan struct{})
	a.handler = func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		time.Sleep(300 * time.Millisecond) // both processes are waiting by now
		http.ServeContent(w, r, "demo.deb", time.Unix(1700000000, 0), strings.NewReader(string(body)))
	}
	srv := httptest.NewServer(a)
	defer srv.Close()
	dir := t.TempDir()
	d := debOf(srv.URL+"/demo.deb", body)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
			cmd.Env = append(os.Environ(), "DEBCACHE_HELPER="+strings.Join([]string{dir, d.URL, d.SHA256, strconv.FormatInt(d.Size, 10)}, "|"))
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("helper: %v\n%s", err, b)
			}
			outs[i] = string(b)
		}()
	}
	wg.Wait()
	if a.gets.Load() != 1 {
		t.Fatalf("%d requests for one archive by two processes:\n%s", a.gets.Load(), strings.Join(outs, "\n"))
	}
	joined := strings.Join(outs, "")
	if !strings.Contains(joined, fmt.Sprintf("fetched=%d cached=false", d.Size)) || !strings.Contains(joined, "fetched=0 cached=true") {
		t.Fatalf("outputs:\n%s", joined)
	}
}

func TestNotFetchable(t *testing.T) {
	body := realDeb(t, "demo", 1<<10)
	c := debcache.Cache{Dir: t.TempDir()}
	// A proxy the environment names that refuses connections: the host
	// cannot reach the repository.
	refused := debcache.ProxyClient([]string{"http_proxy=http://" + testenv.RefusedAddr(t)})
	for _, tc := range []struct {
		url    string
		client *http.Client
	}{
		{"file:///var/cache/demo.deb", nil},
		{"cdrom:[Debian]/pool/demo.deb", nil},
		{"http://deb.example.invalid/pool/demo.deb", refused},
	} {
		d := debOf(tc.url, body)
		_, err := c.Get(context.Background(), tc.client, d)
		if !debcache.IsNotFetchable(err) {
			t.Errorf("Get(%s) = %v, want NotFetchable", tc.url, err)
		}
		assertNoEntry(t, c, d)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := c.Get(context.Background(), srv.Client(), debOf(srv.URL+"/x.deb", body)); !debcache.IsNotFetchable(err) || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404: %v", err)
	}
}

// TestProxyFromEnv fetches through the proxy the environment names.
func TestProxyFromEnv(t *testing.T) {
	body := realDeb(t, "demo", 8<<10)
	var proxied atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.String())
		http.ServeContent(w, r, "demo.deb", time.Unix(1700000000, 0), strings.NewReader(string(body)))
	}))
	defer proxy.Close()
	d := debOf("http://deb.example.invalid/pool/demo.deb", body)
	c := debcache.Cache{Dir: t.TempDir()}
	env := []string{"HTTP_PROXY=http://127.0.0.1:1", "http_proxy=" + proxy.URL, "no_proxy=other.example.invalid"}
	if _, err := c.Get(context.Background(), debcache.ProxyClient(env), d); err != nil {
		t.Fatal(err)
	}
	if proxied.Load() != d.URL {
		t.Fatalf("the proxy was asked for %v", proxied.Load())
	}
	// no_proxy names the host: the proxy is not used (and the host does not resolve).
	d2 := debOf("http://other.example.invalid/pool/demo.deb", append(body, 0))
	if _, err := c.Get(context.Background(), debcache.ProxyClient(env), d2); !debcache.IsNotFetchable(err) || proxied.Load() != d.URL {
		t.Fatalf("no_proxy: %v, proxy asked for %v", err, proxied.Load())
	}
}
