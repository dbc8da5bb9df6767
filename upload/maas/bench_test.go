package maas_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	gomaasapi "github.com/juju/gomaasapi/v2"

	"github.com/gpuaas/imagectl/internal/heappeak"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// sparse makes a sparse file of size bytes (all zeros, no disk used) and
// returns it as an image to upload.
func sparse(tb testing.TB, size int64) maas.Image {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "sparse.tgz")
	testenv.Sparse(tb, p, size)
	h := sha256.New()
	zeros := make([]byte, 1<<20)
	for n := int64(0); n < size; n += int64(len(zeros)) {
		h.Write(zeros[:min(int64(len(zeros)), size-n)])
	}
	return maas.Image{Path: p, SHA256: hex.EncodeToString(h.Sum(nil)), Size: size, Name: "bench-1-0",
		Title: "Bench 1.0", Architecture: "amd64/generic", BaseImage: "ubuntu/noble"}
}

// plainPUTs is the baseline: the same create and 4 MiB chunks as the
// client, signed, with nothing else (no lookups, no bookkeeping).
func plainPUTs(tb testing.TB, sim *maassim.Server, img maas.Image) {
	p := strings.Split(sim.AdminKey, ":")
	signer, _ := gomaasapi.NewPlainTestOAuthSigner(&gomaasapi.OAuthToken{ConsumerKey: p[0], TokenKey: p[1], TokenSecret: p[2]}, "MAAS API")
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	api := sim.URL + "/api/2.0/"
	form := url.Values{"name": {img.Name}, "architecture": {img.Architecture}, "base_image": {img.BaseImage},
		"sha256": {img.SHA256}, "size": {strconv.FormatInt(img.Size, 10)}}
	req, _ := http.NewRequest("POST", api+"boot-resources/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	signer.OAuthSign(req)
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	var res maas.Resource
	json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	f, err := os.Open(img.Path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	uri := sim.URL[:strings.Index(sim.URL, "/MAAS")] + res.File().UploadURI
	for off := int64(0); off < img.Size; off += maas.DefaultChunkSize {
		n := min(maas.DefaultChunkSize, img.Size-off)
		req, _ := http.NewRequest("PUT", uri, io.NewSectionReader(f, off, n))
		req.ContentLength = n
		signer.OAuthSign(req)
		resp, err := hc.Do(req)
		if err != nil {
			tb.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			tb.Fatalf("PUT at %d: %d", off, resp.StatusCode)
		}
	}
}

// BenchmarkUpload1GiB uploads a 1 GiB sparse artifact to the simulator on
// loopback with the client (4 MiB chunks, defaults but for the poll
// interval) and with plain sequential PUTs of the same chunks. It reports
// throughput (MB/s) and the peak live heap of the process (client and
// simulator together) in MiB.
func BenchmarkUpload1GiB(b *testing.B) {
	img := sparse(b, 1<<30)
	for _, mode := range []string{"client", "plain-puts"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(img.Size)
			var peak uint64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
				runtime.GC()
				stop := heappeak.Start()
				b.StartTimer()
				if mode == "client" {
					c, err := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey, PollInterval: 10 * time.Millisecond})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := c.Upload(context.Background(), img, nil); err != nil {
						b.Fatal(err)
					}
				} else {
					plainPUTs(b, sim, img)
				}
				b.StopTimer()
				peak = max(peak, stop())
				if rs := sim.Resources(); !rs[len(rs)-1].Sets[0].Files[0].Verified {
					b.Fatal("upload did not verify")
				}
				sim.Close()
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// TestUploadMemoryIsFlat uploads 512 MiB and checks the live heap never
// grows by more than a few chunks: the file is streamed, never loaded.
func TestUploadMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 512 MiB")
	}
	img := sparse(t, 512<<20)
	sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
	defer sim.Close()
	c, err := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := heappeak.Start()
	if _, err := c.Upload(context.Background(), img, nil); err != nil {
		t.Fatal(err)
	}
	peak := stop()
	if grew := int64(peak) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Errorf("live heap grew by %d MiB during a 512 MiB upload", grew>>20)
	} else {
		t.Logf("live heap grew by %.1f MiB (peak %.1f MiB)", float64(grew)/(1<<20), float64(peak)/(1<<20))
	}
}
