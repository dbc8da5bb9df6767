package maas_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	sum := sha256.Sum256(b)
	return maas.Image{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: size, Name: "demo-1-0-0",
		Title: "Demo 1.0.0", Architecture: "amd64/generic", BaseImage: "ubuntu/noble"}
}

// newClient is a client of sim with short waits, so faults cost little.
func newClient(t testing.TB, sim *maassim.Server, key string, tweak ...func(*maas.Config)) *maas.Client {
	t.Helper()
	cfg := maas.Config{URL: sim.URL, APIKey: key, ChunkSize: chunk, Timeout: 2 * time.Second, LastChunkTimeout: 3 * time.Second,
		PollInterval: time.Millisecond, SettleTimeout: 50 * time.Millisecond, CompleteTimeout: 5 * time.Second,
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
	events []maas.Event
}

func (r *recorder) add(e maas.Event) {
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
			var last maas.Event
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
