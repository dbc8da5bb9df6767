package oci_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/heappeak"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/oci"
	"github.com/gpuaas/imagectl/store/oci/ocitest"
)

// bigTarball writes a sparse tgz-named file of size bytes (its content is
// not looked at by the store) and returns it with its digest.
func bigTarball(t testing.TB, size int64) (string, digest.Digest) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "big.tgz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("imagectl"), size/2); err != nil { // not all zeros
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d, err := digest.File(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

// bigArtifact is the big tgz with a manifest naming it image:version.
func bigArtifact(t testing.TB, tgz string, d digest.Digest, image, version string) manifest.Files {
	t.Helper()
	a := artifact(t, image, version, nil)
	manifesttest.Edit(t, a.Manifest, func(m *manifest.Manifest) {
		m.Artifact.File, m.Artifact.SHA256, m.Artifact.Size = filepath.Base(tgz), d.Hex(), d.Size
	})
	a.Tarball = tgz
	return a
}

// storePushPull publishes a through a store and fetches its tgz through
// another with an empty cache.
func storePushPull(t testing.TB, reg *ocitest.Registry, a manifest.Files, image, version string) (push, pull time.Duration) {
	ctx := context.Background()
	start := time.Now()
	if _, err := open(t, reg, "bench", oci.Options{}).Publish(ctx, a, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	push = time.Since(start)
	start = time.Now()
	v, err := open(t, reg, "bench", oci.Options{}).Version(ctx, image, version)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.LocalTarball(ctx); err != nil {
		t.Fatal(err)
	}
	return push, time.Since(start)
}

// plainPushPull is the baseline: a monolithic blob upload (POST, then PUT
// of the bytes) and a GET into a file, with net/http.
func plainPushPull(t testing.TB, reg *ocitest.Registry, tgz string, d digest.Digest, repo string) (push, pull time.Duration) {
	c := &http.Client{Transport: reg.Transport(t)}
	defer c.CloseIdleConnections()
	do := func(method, url string, body io.Reader, size int64, want int) *http.Response {
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(reg.Username, reg.Password)
		if body != nil {
			req.ContentLength = size
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %s", method, url, resp.Status)
		}
		return resp
	}
	base := "https://" + reg.Host + "/v2/" + repo + "/blobs/"
	start := time.Now()
	resp := do(http.MethodPost, base+"uploads/", nil, 0, http.StatusAccepted)
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	q := loc.Query()
	q.Set("digest", d.String())
	loc.RawQuery = q.Encode()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	do(http.MethodPut, loc.String(), f, d.Size, http.StatusCreated).Body.Close()
	push = time.Since(start)

	start = time.Now()
	resp = do(http.MethodGet, base+d.String(), nil, 0, http.StatusOK)
	defer resp.Body.Close()
	out, err := os.Create(filepath.Join(t.TempDir(), "pulled"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		t.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		t.Fatal(err)
	}
	return push, time.Since(start)
}

func BenchmarkPushPull1GiB(b *testing.B) {
	reg := ocitest.Start(b)
	const size = 1 << 30
	tgz, d := bigTarball(b, size)
	b.SetBytes(2 * size)
	var storePush, storePull, plainPush, plainPull time.Duration
	var peak uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		image := fmt.Sprintf("big%d", i)
		a := bigArtifact(b, tgz, d, image, "1")
		b.StartTimer()
		stop := heappeak.Start()
		push, pull := storePushPull(b, reg, a, image, "1")
		peak = max(peak, stop())
		b.StopTimer()
		pp, pl := plainPushPull(b, reg, tgz, d, fmt.Sprintf("plain%d", i))
		b.StartTimer()
		storePush += push
		storePull += pull
		plainPush += pp
		plainPull += pl
	}
	b.ReportMetric(storePush.Seconds()/plainPush.Seconds(), "push-ratio")
	b.ReportMetric(storePull.Seconds()/plainPull.Seconds(), "pull-ratio")
	b.ReportMetric(float64(size)/(1<<20)/(storePush.Seconds()/float64(b.N)), "store-push-MiB/s")
	b.ReportMetric(float64(size)/(1<<20)/(storePull.Seconds()/float64(b.N)), "store-pull-MiB/s")
	b.ReportMetric(float64(size)/(1<<20)/(plainPush.Seconds()/float64(b.N)), "plain-push-MiB/s")
	b.ReportMetric(float64(size)/(1<<20)/(plainPull.Seconds()/float64(b.N)), "plain-pull-MiB/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

func TestPushPullMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes and pulls 256 MiB")
	}
	reg := ocitest.Start(t)
	const size = 256 << 20
	tgz, d := bigTarball(t, size)
	a := bigArtifact(t, tgz, d, "flat", "1")
	stop := heappeak.Start()
	storePushPull(t, reg, a, "flat", "1")
	// And streamed through range requests.
	v, err := open(t, reg, "bench", oci.Options{}).Version(context.Background(), "flat", "1")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := v.OpenTarball(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyBuffer(io.Discard, io.NewSectionReader(blob, 0, v.Size), make([]byte, 4<<20)); err != nil {
		t.Fatal(err)
	}
	blob.Close()
	peak := stop()
	t.Logf("peak heap %.1f MiB pushing and pulling %d MiB", float64(peak)/(1<<20), size>>20)
	if peak >= 64<<20 {
		t.Errorf("peak heap %.1f MiB, want < 64 MiB", float64(peak)/(1<<20))
	}
}
