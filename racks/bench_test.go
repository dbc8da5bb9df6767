package racks_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/heappeak"
	"github.com/gpuaas/imagectl/racks"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// repeated is size bytes of one random MiB over and over: a large
// version that costs a MiB of memory and serves at copy speed.
type repeated struct {
	block []byte
	size  int64
}

func newRepeated(size int64) *repeated {
	b := make([]byte, 1<<20)
	rand.Read(b)
	return &repeated{block: b, size: size}
}

func (r *repeated) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) && off < r.size {
		c := copy(p[n:min(len(p), n+int(r.size-off))], r.block[off%int64(len(r.block)):])
		n += c
		off += int64(c)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// bigSite is a 3.7 MAAS with n racks holding a version of size bytes.
func bigSite(tb testing.TB, n int, size int64, content io.ReaderAt) (*maassim.Server, *maas.Client, racks.Target) {
	tb.Helper()
	sim := maassim.New(maassim.Options{Racks: make([]maassim.RackSpec, n)})
	tb.Cleanup(sim.Close)
	sha, _, err := sim.Seed("x-1-4-0", "amd64/generic", content, size)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey})
	if err != nil {
		tb.Fatal(err)
	}
	return sim, c, racks.Target{Name: "x-1-4-0", Architecture: "amd64/generic", SHA256: sha, Size: size}
}

// plainGETs reads path from every rack at once, discarding the bytes: a
// deploy's downloads without any check, the speed to compare with.
func plainGETs(tb testing.TB, sim *maassim.Server, path string) {
	var wg sync.WaitGroup
	for _, rk := range sim.Racks() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(fmt.Sprintf("http://%s:%d%s", rk.Address, sim.RackPort(), path))
			if err != nil {
				tb.Error(err)
				return
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 {
				tb.Errorf("plain GET from %s: %d %v", rk.Hostname, resp.StatusCode, err)
			}
		}()
	}
	wg.Wait()
}

// cpuTime is the CPU time this process has used, the simulated racks'
// included.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWarmRacks checks (and warms) 4 racks of a 1 GiB version, all
// at once, and reads the same bytes from 4 other cold racks with plain
// GETs: the check's speed as a share of theirs ("ratio", at least 0.8
// wanted), and the live heap's growth during the check. It checks the
// ways promote and warm-racks do:
//   - "local-copy": with a directory store, each rack's stream compared
//     with the store's tgz (a file here), which is hashed once;
//   - "local-copy-hashed-before": the same, the tgz known unchanged since
//     an earlier check or upload hashed it: only compared;
//   - "compared-with-each-other": without a local copy (an OCI store):
//     each stream compared with the bytes the first to reach them lent
//     to the convoy's ring, those hashed once;
//   - "hash-each-stream": without a local copy, each stream hashed
//     (Options.EachHashed), the obvious way.
//
// The racks serve in this process, so each side's CPU time per byte,
// serving included, is reported too: where the CPU is what bounds both (a
// small machine), "ratio" cannot pass "cpu-ratio", their quotient,
// whatever the clock says on a busy machine. "held-share-max" is the
// largest share of a rack's time the convoy held it back for a slower
// one.
func BenchmarkWarmRacks(b *testing.B) {
	const size = 1 << 30
	content := newRepeated(size)
	tgz := filepath.Join(b.TempDir(), "x.tgz")
	f, err := os.Create(tgz)
	if err == nil {
		_, err = io.Copy(f, io.NewSectionReader(content, 0, size))
		if err == nil {
			// Written back now, not by the kernel during a later round
			// (dirty pages go to disk after 30 s): a measured round pays
			// for its own disk writes only.
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"local-copy", "local-copy-hashed-before", "compared-with-each-other", "hash-each-stream"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var ms []roundMetrics
				for range rounds {
					ms = append(ms, warmRacksRound(b, mode, tgz, content))
				}
				for _, name := range []string{"check-MB/s", "plain-MB/s", "ratio", "check-cpu-ns/B", "plain-cpu-ns/B", "cpu-ratio", "heap-growth-MiB", "held-share-max"} {
					vs := make([]float64, 0, len(ms))
					for _, m := range ms {
						vs = append(vs, m[name])
					}
					slices.Sort(vs)
					b.ReportMetric(vs[len(vs)/2], name)
					if name == "ratio" {
						b.ReportMetric(vs[0], "ratio-lowest")
					}
				}
			}
		})
	}
}

// rounds is how many times BenchmarkWarmRacks runs each way, on fresh
// racks: it reports each figure's median (the ratio's lowest too), as one
// round's ratio moves by a fifth on a busy 2-core machine.
const rounds = 3

// roundMetrics are one round's figures, by name.
type roundMetrics map[string]float64

// warmRacksRound checks 4 fresh racks of a 1 GiB version the given way,
// then reads it from 4 other fresh racks with plain GETs.
func warmRacksRound(b *testing.B, mode, tgz string, content io.ReaderAt) roundMetrics {
	const n, size = 4, 1 << 30
	b.StopTimer()
	simPlain, _, _ := bigSite(b, n, size, content)
	simCheck, c, tg := bigSite(b, n, size, content)
	ro := racks.Options{Parallel: n, Port: simCheck.RackPort()}
	var local *os.File
	switch mode {
	case "compared-with-each-other":
	case "hash-each-stream":
		ro.EachHashed = true
	default:
		var err error
		if local, err = os.Open(tgz); err != nil {
			b.Fatal(err)
		}
		defer local.Close()
		tg.Local, tg.LocalHashed = local, mode == "local-copy-hashed-before"
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.StartTimer()

	stop := heappeak.Start()
	cpu, start := cpuTime(b), time.Now()
	rep, err := racks.Check(context.Background(), c, tg, ro)
	check, checkCPU := time.Since(start), cpuTime(b)-cpu
	peak := stop()
	if err != nil || rep.Verdict != racks.Passed || rep.ComparedWithEachOther != (mode == "compared-with-each-other") {
		b.Fatalf("check: %v %+v", err, rep)
	}
	cpu, start = cpuTime(b), time.Now()
	plainGETs(b, simPlain, rep.Path)
	plain, plainCPU := time.Since(start), cpuTime(b)-cpu

	total := float64(n) * size
	return roundMetrics{
		"check-MB/s":      total / check.Seconds() / 1e6,
		"plain-MB/s":      total / plain.Seconds() / 1e6,
		"ratio":           plain.Seconds() / check.Seconds(),
		"check-cpu-ns/B":  float64(checkCPU.Nanoseconds()) / total,
		"plain-cpu-ns/B":  float64(plainCPU.Nanoseconds()) / total,
		"cpu-ratio":       plainCPU.Seconds() / checkCPU.Seconds(),
		"heap-growth-MiB": float64(int64(peak)-int64(before.HeapAlloc)) / (1 << 20),
		"held-share-max":  heldShare(rep),
	}
}

// heldShare is the largest share of a rack's fetch the check held it back
// for a slower rack (racks.Rack.Held): 0 unless the racks were compared
// with each other.
func heldShare(rep *racks.Report) float64 {
	most := 0.0
	for _, r := range rep.Racks {
		if r.Duration > 0 {
			most = max(most, r.Held.Seconds()/r.Duration.Seconds())
		}
	}
	return most
}

// TestCheckMemoryIsFlat checks 2 racks of 256 MiB and requires the live
// heap never to grow by more than a few buffers and the convoy's 16 MiB
// ring: the bytes stream through sha256, or are compared with a local
// copy or with each other in the ring, and are never held whole.
func TestCheckMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 512 MiB")
	}
	const size = 256 << 20
	content := newRepeated(size)
	for _, withLocal := range []string{"each hashed", "local copy", "compared with each other"} {
		sim, c, tg := bigSite(t, 2, size, content)
		o := racks.Options{Port: sim.RackPort()}
		switch withLocal {
		case "each hashed":
			o.EachHashed = true
		case "local copy":
			tg.Local = content
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := heappeak.Start()
		rep, err := racks.Check(context.Background(), c, tg, o)
		peak := stop()
		if err != nil || rep.Verdict != racks.Passed || rep.ComparedWithEachOther != (withLocal == "compared with each other") {
			t.Fatalf("with %q: %v %+v", withLocal, err, rep)
		}
		if grew := int64(peak) - int64(before.HeapAlloc); grew > 32<<20 {
			t.Errorf("with %q: live heap grew by %d MiB while 2 racks served 256 MiB each", withLocal, grew>>20)
		}
	}
}
