package maas_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

const chunk = 64 << 10

// artifact writes size random bytes and returns the image to upload.
func artifact(t testing.TB, size int64) maas.Image {
	t.Helper()
	p := filepath.Join(t.TempDir(), "img.tgz")
	b := make([]byte, size)
	_, _ = rand.Read(b)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return maas.Image{Path: p, SHA256: digest.Bytes(b).Hex(), Size: size, Name: "demo-1-0-0",
		Title: "Demo 1.0.0", Architecture: "amd64/generic", BaseImage: "ubuntu/noble"}
}

// newClient is a client of sim with short waits, so faults cost little.
func newClient(t testing.TB, sim *maassim.Server, key string, tweak ...func(*maas.Config)) *maas.Client {
	t.Helper()
	cfg := maas.Config{URL: sim.URL, APIKey: key, ChunkSize: chunk, Timeout: 2 * time.Second, LastChunkTimeout: 3 * time.Second,
		PollInterval: time.Millisecond, SettleTimeout: 50 * time.Millisecond, StallTimeout: 100 * time.Millisecond, CompleteTimeout: 5 * time.Second,
		Backoff: func(int) time.Duration { return time.Millisecond }}
	for _, f := range tweak {
		f(&cfg)
	}
	c, err := maas.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type recorder struct {
	mu     sync.Mutex
	events []event.Event
}

func (r *recorder) add(e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, e := range r.events {
		if e.Type == "log" {
			b.WriteString(e.Message + "\n")
		}
	}
	return b.String()
}

// holds asserts that sim ends with exactly one resource named like img,
// its newest set's single file verified with img's sha256 and size.
func holds(t *testing.T, sim *maassim.Server, img maas.Image) maassim.Resource {
	t.Helper()
	var found []maassim.Resource
	for _, r := range sim.Resources() {
		if r.Type == "Uploaded" {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("MAAS holds %d uploaded resources, want 1: %+v", len(found), found)
	}
	r := found[0]
	newest := r.Sets[len(r.Sets)-1]
	if strings.TrimPrefix(r.Name, "custom/") != strings.TrimPrefix(img.Name, "custom/") || len(newest.Files) != 1 {
		t.Fatalf("resource %+v", r)
	}
	f := newest.Files[0]
	if !f.Verified || f.Stuck || f.SHA256 != img.SHA256 || f.Size != img.Size || f.Received != img.Size {
		t.Fatalf("file %+v, want verified sha256 %s size %d", f, img.SHA256, img.Size)
	}
	return r
}

func upload(t *testing.T, c *maas.Client, img maas.Image) (*maas.Result, *recorder, error) {
	t.Helper()
	rec := &recorder{}
	res, err := c.Upload(context.Background(), img, rec.add)
	if err == nil {
		f := res.Resource.File()
		if f == nil || !f.Complete || f.SHA256 != img.SHA256 {
			t.Fatalf("Upload succeeded but returned %+v", res.Resource)
		}
	}
	return res, rec, err
}

func TestUploadPlain(t *testing.T) {
	for _, v := range []string{"2.9", "3.4", "3.5", "3.7", "3.8"} {
		t.Run(v, func(t *testing.T) {
			sim := maassim.New(maassim.Options{Version: v})
			defer sim.Close()
			img := artifact(t, 5*chunk+123)
			img.Name = "custom/" + img.Name
			res, rec, err := upload(t, newClient(t, sim, sim.AdminKey), img)
			if err != nil {
				t.Fatal(err)
			}
			if res.Skipped || res.Restarts != 0 || res.Sent != img.Size {
				t.Errorf("result %+v", res)
			}
			r := holds(t, sim, img)
			if want := map[bool]string{true: "custom/demo-1-0-0", false: "demo-1-0-0"}[v == "3.8"]; r.Name != want || res.Resource.Name != want {
				t.Errorf("name %q / %q, want %q", r.Name, res.Resource.Name, want)
			}
			if r.Title != "Demo 1.0.0" || r.BaseImage != "ubuntu/noble" {
				t.Errorf("title %q base %q", r.Title, r.BaseImage)
			}
			if got := sim.Count(maassim.OpChunk) + sim.Count(maassim.OpLastChunk); got != 6 {
				t.Errorf("%d chunks, want 6", got)
			}
			var last event.Event
			for _, e := range rec.events {
				if e.Type == "progress" {
					last = e
				}
			}
			if last.Done != img.Size || last.Total != img.Size {
				t.Errorf("last progress event %+v", last)
			}
		})
	}
}

func TestUploadSkipsWhatMAASHolds(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	img := artifact(t, 3*chunk)
	c := newClient(t, sim, sim.AdminKey)
	if _, _, err := upload(t, c, img); err != nil {
		t.Fatal(err)
	}
	chunks := sim.Count(maassim.OpChunk) + sim.Count(maassim.OpLastChunk)
	res, _, err := upload(t, c, img)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Skipped || res.Sent != 0 || sim.Count(maassim.OpCreate) != 1 || sim.Count(maassim.OpChunk)+sim.Count(maassim.OpLastChunk) != chunks {
		t.Errorf("second upload: %+v, creates %d", res, sim.Count(maassim.OpCreate))
	}
	holds(t, sim, img)

	// The same bytes under another name: MAAS stores files by sha256, so
	// the create comes back complete and nothing is sent.
	img2 := img
	img2.Name = "demo-1-0-1"
	res, _, err = upload(t, c, img2)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Skipped || res.Sent != 0 {
		t.Errorf("same sha256 under a new name: %+v", res)
	}
}

func TestUploadRefusesOtherBytesUnderTheName(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	c := newClient(t, sim, sim.AdminKey)
	a, b := artifact(t, chunk), artifact(t, chunk)
	if _, _, err := upload(t, c, a); err != nil {
		t.Fatal(err)
	}
	_, _, err := upload(t, c, b)
	if err == nil || !strings.Contains(err.Error(), "immutable") || !strings.Contains(err.Error(), a.SHA256) {
		t.Fatalf("err = %v", err)
	}
	holds(t, sim, a)
}

func TestUploadReplacesAPartialUpload(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	img := artifact(t, 4*chunk)
	// A first attempt dies after two chunks (the client gives up on 503s).
	sim.Inject(maassim.Fault{On: maassim.OpChunk, Kind: maassim.Unavailable, After: 2, Times: -1})
	c := newClient(t, sim, sim.AdminKey, func(c *maas.Config) { c.Retries = 1 })
	if _, _, err := upload(t, c, img); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v", err)
	}
	rs := sim.Resources()
	if f := rs[len(rs)-1].Sets[0].Files[0]; f.Received != 2*chunk {
		t.Fatalf("partial file %+v", f)
	}
	sim.ClearFaults()
	res, rec, err := upload(t, c, img)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped || sim.Count(maassim.OpDelete) != 1 || !strings.Contains(rec.logs(), "incomplete") {
		t.Errorf("result %+v, deletes %d, log %s", res, sim.Count(maassim.OpDelete), rec.logs())
	}
	holds(t, sim, img)
}

// fast is for faults that hold a request: the client gives up quickly.
func fast(c *maas.Config) {
	c.Timeout, c.LastChunkTimeout = time.Second, 1500*time.Millisecond
}

func TestUploadFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		faults  []maassim.Fault
		// restarts is the number of fresh starts the fault must cost
		// (-1: at most one).
		restarts int
		// log is a part of what the client must have said.
		log string
	}{
		{name: "create timeout, applied", faults: []maassim.Fault{{On: maassim.OpCreate, Kind: maassim.Timeout}}, log: "no answer to the create"},
		{name: "create 503s", faults: []maassim.Fault{{On: maassim.OpCreate, Kind: maassim.Unavailable, Times: 2}}, log: "create: retry 2/5"},
		{name: "create dropped", faults: []maassim.Fault{{On: maassim.OpCreate, Kind: maassim.Drop}}},
		{name: "chunk 503s", faults: []maassim.Fault{{On: maassim.OpChunk, Kind: maassim.Unavailable, After: 1, Times: 3}}, log: "retry 3/5"},
		// Whether the transport had handed MAAS the whole body decides
		// between a retry and a fresh start: either ends complete.
		{name: "chunk dropped mid-body", faults: []maassim.Fault{{On: maassim.OpChunk, Kind: maassim.Drop, After: 2}}, restarts: -1},
		{name: "chunk timeout, applied", faults: []maassim.Fault{{On: maassim.OpChunk, Kind: maassim.Timeout, After: 1}}, restarts: 1, log: "offset is unknown"},
		{name: "last chunk timeout, applied, complete lags", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Timeout}}, log: "no answer to the last chunk"},
		{name: "last chunk timeout on 3.4", version: "3.4", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Timeout}}, log: "no answer to the last chunk"},
		{name: "last chunk 503", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Unavailable, Times: 2}}},
		{name: "last chunk dropped", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Drop}}},
		{name: "corrupted chunk", faults: []maassim.Fault{{On: maassim.OpChunk, Kind: maassim.Corrupt, After: 2}}, restarts: 1, log: "another sha256"},
		{name: "corrupted last chunk", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Corrupt}}, restarts: 1, log: "another sha256"},
		{name: "corrupted twice", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Corrupt, Times: 2}}, restarts: 2},
		{name: "get 503 and timeout", faults: []maassim.Fault{{On: maassim.OpGet, Kind: maassim.Unavailable}, {On: maassim.OpGet, Kind: maassim.Timeout}}},
		{name: "list 503", faults: []maassim.Fault{{On: maassim.OpList, Kind: maassim.Unavailable, Times: 2}}},
		{name: "delete 503 during a restart", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Corrupt},
			{On: maassim.OpDelete, Kind: maassim.Unavailable}}, restarts: 1},
		{name: "timeout and corruption", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Corrupt}, {On: maassim.OpLastChunk, Kind: maassim.Timeout}}, restarts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := maassim.New(maassim.Options{Version: tc.version})
			defer sim.Close()
			sim.Inject(tc.faults...)
			img := artifact(t, 6*chunk+7)
			res, rec, err := upload(t, newClient(t, sim, sim.AdminKey, fast), img)
			if err != nil {
				t.Fatalf("%v\nlog:\n%s", err, rec.logs())
			}
			if res.Restarts != tc.restarts && !(tc.restarts == -1 && res.Restarts <= 1) {
				t.Errorf("%d restarts, want %d; log:\n%s", res.Restarts, tc.restarts, rec.logs())
			}
			if !strings.Contains(rec.logs(), tc.log) {
				t.Errorf("log lacks %q:\n%s", tc.log, rec.logs())
			}
			holds(t, sim, img)
		})
	}
}

func TestUploadFailsClearly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   maassim.Options
		faults []maassim.Fault
		key    func(*maassim.Server) string
		img    func(*maas.Image)
		tweak  func(*maas.Config)
		want   []string
	}{
		{name: "always corrupted", faults: []maassim.Fault{{On: maassim.OpLastChunk, Kind: maassim.Corrupt, Times: -1}},
			want: []string{"gave up after 3 fresh starts", "another sha256"}},
		{name: "503 forever", faults: []maassim.Fault{{On: maassim.OpChunk, Kind: maassim.Unavailable, Times: -1}},
			want: []string{"giving up after 5 retries", "503"}},
		{name: "non-admin key", key: func(s *maassim.Server) string { return s.UserKey },
			want: []string{"403", "reserved for admin users", "needs an admin"}},
		{name: "unknown key", key: func(s *maassim.Server) string { return "a:b:cafebabe0secret" },
			want: []string{"401", "Invalid access token"}},
		{name: "clock off", opts: maassim.Options{Now: func() time.Time { return time.Now().Add(6 * time.Minute) }},
			want: []string{"401", "Expired timestamp", "clock"}},
		{name: "bad architecture", img: func(i *maas.Image) { i.Architecture = "sparc/generic" },
			want: []string{"400", `'sparc/generic' is not a valid architecture`}},
		{name: "no base image", img: func(i *maas.Image) { i.BaseImage = "" },
			want: []string{"400", "custom images require a valid base image name"}},
		{name: "reserved name", img: func(i *maas.Image) { i.Name = "ubuntu/noble" },
			want: []string{"ubuntu/noble is a reserved name"}},
		{name: "never complete", opts: maassim.Options{CompleteAfterGets: 1 << 30}, tweak: func(c *maas.Config) { c.CompleteTimeout = 50 * time.Millisecond },
			want: []string{"not reported the file complete within 50ms"}},
		{name: "wrong size", img: func(i *maas.Image) { i.Size++ }, want: []string{"expected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := maassim.New(tc.opts)
			defer sim.Close()
			sim.Inject(tc.faults...)
			img := artifact(t, 3*chunk)
			if tc.img != nil {
				tc.img(&img)
			}
			key := sim.AdminKey
			if tc.key != nil {
				key = tc.key(sim)
			}
			tweaks := []func(*maas.Config){fast}
			if tc.tweak != nil {
				tweaks = append(tweaks, tc.tweak)
			}
			_, _, err := upload(t, newClient(t, sim, key, tweaks...), img)
			if err == nil {
				t.Fatal("upload succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), strings.SplitN(key, ":", 3)[2]) {
				t.Errorf("error shows the API key's secret: %v", err)
			}
			// Never a complete resource with other bytes, and no stuck file.
			for _, r := range sim.Resources() {
				for _, s := range r.Sets {
					for _, f := range s.Files {
						if r.Type == "Uploaded" && (f.Stuck || f.Verified && f.SHA256 != img.SHA256) {
							t.Errorf("MAAS left with %+v", f)
						}
					}
				}
			}
		})
	}
}

func TestUploadStopsWithContext(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	sim.Inject(maassim.Fault{On: maassim.OpChunk, Kind: maassim.Timeout, After: 1})
	img := artifact(t, 4*chunk)
	c := newClient(t, sim, sim.AdminKey, func(c *maas.Config) { c.Timeout = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Upload(ctx, img, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to stop", d)
	}
}

func TestNewRefusesBadConfigWithoutShowingTheKey(t *testing.T) {
	for _, key := range []string{"", "only-one-part-secret", "a:b", "a::secretvalue"} {
		_, err := maas.New(maas.Config{URL: "http://maas.example/MAAS", APIKey: key})
		if err == nil || (key != "" && strings.Contains(err.Error(), key)) {
			t.Errorf("key %q: err = %v", key, err)
		}
	}
	if _, err := maas.New(maas.Config{URL: "maas.example", APIKey: "a:b:c"}); err == nil {
		t.Error("a URL without scheme was accepted")
	}
}

func TestNewestSet(t *testing.T) {
	r := maas.Resource{Sets: map[string]maas.Set{
		"20250101.9":  {Version: "20250101.9"},
		"20250101.10": {Version: "20250101.10", Files: map[string]maas.File{"root.tgz": {SHA256: "x"}}},
		"20250101":    {Version: "20250101"},
	}}
	if s, _ := r.NewestSet(); s.Version != "20250101.10" {
		t.Errorf("newest %q", s.Version)
	}
	if f := r.File(); f == nil || f.SHA256 != "x" {
		t.Errorf("file %+v", f)
	}
}

func TestListFindDelete(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	c := newClient(t, sim, sim.AdminKey)
	ctx := context.Background()
	a, b := artifact(t, chunk), artifact(t, chunk)
	b.Name = "other-2-0"
	for _, img := range []maas.Image{a, b} {
		if _, _, err := upload(t, c, img); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.List(ctx, "all")
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.List(ctx, "uploaded")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 || len(up) != 2 || up[0].Name != "demo-1-0-0" || up[1].Name != "other-2-0" || up[0].Sets != nil {
		t.Fatalf("all %d, uploaded %+v", len(all), up)
	}
	if _, err := c.List(ctx, "bogus"); err == nil || !strings.Contains(err.Error(), "'bogus' is not a valid boot resource type") {
		t.Errorf("bogus type: %v", err)
	}
	r, err := c.Find(ctx, "custom/demo-1-0-0", "amd64/generic")
	if err != nil || r == nil || r.File().SHA256 != a.SHA256 {
		t.Fatalf("Find: %+v, %v", r, err)
	}
	if r, err := c.Find(ctx, "demo-1-0-0", "arm64/generic"); r != nil || err != nil {
		t.Errorf("Find on another architecture: %+v, %v", r, err)
	}
	if err := c.Delete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, r.ID); err != nil {
		t.Errorf("deleting a deleted resource: %v", err)
	}
	if _, err := c.Get(ctx, r.ID); !maas.IsNotFound(err) {
		t.Errorf("Get after delete: %v", err)
	}
}
