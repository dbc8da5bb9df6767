package racks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/racks"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// pattern is size bytes made up from their offsets: large versions cost
// no memory. onRead, when set, is called with each read's offset.
type pattern struct {
	size   int64
	onRead func(off int64)
}

func (p *pattern) ReadAt(b []byte, off int64) (int, error) {
	if p.onRead != nil {
		p.onRead(off)
	}
	n := 0
	for ; n < len(b) && off+int64(n) < p.size; n++ {
		o := off + int64(n)
		b[n] = byte(o ^ o>>8 ^ o>>17)
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// site is a simulated MAAS with racks and one seeded version.
func site(t testing.TB, version string, size int64, specs ...maassim.RackSpec) (*maassim.Server, *maas.Client, racks.Target, *pattern) {
	t.Helper()
	sim := maassim.New(maassim.Options{Version: version, Racks: specs})
	t.Cleanup(sim.Close)
	p := &pattern{size: size}
	sha, _, err := sim.Seed("x-1-4-0", "amd64/generic", p, size)
	if err != nil {
		t.Fatal(err)
	}
	c, err := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey, Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c, racks.Target{Name: "custom/x-1-4-0", Architecture: "amd64/generic", SHA256: sha, Size: size}, p
}

// checkedWith has a check compare the racks' streams with p as a local
// copy ("local copy") or with each other ("each other"), or hash each
// ("").
func checkedWith(way string, tg *racks.Target, p io.ReaderAt, o *racks.Options) {
	switch way {
	case "local copy":
		tg.Local = p
	case "":
		o.EachHashed = true
	}
}

func verdicts(rep *racks.Report) map[string]racks.Verdict {
	out := map[string]racks.Verdict{}
	for _, r := range rep.Racks {
		out[r.Hostname] = r.Verdict
	}
	return out
}

func TestAllRacksPassAndAreWarmAfter(t *testing.T) {
	// 3.5.0 and 3.5.1 give no filename_on_disk and name files by their
	// sha256; from 3.5.2 the name on disk is the API's, and the racks
	// know files by it alone.
	// The racks' streams are compared with each other (the third rack
	// starts when one of the first two is done: it compares with the
	// bytes they left, as the version fits the convoy's ring); at 3.7
	// also each hashed.
	for _, v := range []string{"3.5", "3.5.1", "3.5.2", "3.7", "3.7+each", "3.8"} {
		t.Run(v, func(t *testing.T) {
			v, each, _ := strings.Cut(v, "+")
			sim, c, tg, _ := site(t, v, 3<<20, maassim.RackSpec{}, maassim.RackSpec{}, maassim.RackSpec{})
			var seen atomic.Int32
			o := racks.Options{Port: sim.RackPort(), Parallel: 2, Progress: func(racks.Rack) { seen.Add(1) }}
			o.EachHashed = each != ""
			rep, err := racks.Check(context.Background(), c, tg, o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.ComparedWithEachOther == o.EachHashed {
				t.Errorf("compared with each other: %v, each hashed: %v", rep.ComparedWithEachOther, o.EachHashed)
			}
			if rep.Verdict != racks.Passed || len(rep.Racks) != 3 || seen.Load() != 3 {
				t.Fatalf("verdict %s, %d racks, %d reported: %+v", rep.Verdict, len(rep.Racks), seen.Load(), rep.Racks)
			}
			onDisk := tg.SHA256[:7]
			if v == "3.5" || v == "3.5.1" {
				onDisk = tg.SHA256
			}
			if !strings.HasPrefix(rep.Path, "/images/"+onDisk+"/custom/amd64/generic/x-1-4-0/uploaded/root.tgz") {
				t.Errorf("path %s", rep.Path)
			}
			for i, r := range rep.Racks {
				rk := sim.Racks()[i]
				rk.Idle()
				if r.Cache != "miss" || r.Bytes != tg.Size || r.SHA256 != tg.SHA256 || len(r.Addresses) != 1 || r.Addresses[0] != rk.Address {
					t.Errorf("rack %s: %+v", r.Hostname, r)
				}
				if !rk.Cached(onDisk) {
					t.Errorf("rack %s is not warm after the check", rk.Hostname)
				}
				if fills, most, _ := rk.Fills(); fills != 1 || most != 1 {
					t.Errorf("rack %s: %d fills, %d at once; want 1, 1", rk.Hostname, fills, most)
				}
				if r.Held > r.Duration/2+150*time.Millisecond || (o.EachHashed && r.Held != 0) {
					t.Errorf("rack %s: held %v of its %v", rk.Hostname, r.Held, r.Duration)
				}
			}
			// Again: every rack had it.
			rep, err = racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
			if err != nil || rep.Verdict != racks.Passed {
				t.Fatalf("second check: %v %+v", err, rep)
			}
			for _, r := range rep.Racks {
				if r.Cache != "hit" {
					t.Errorf("second check, rack %s: cache %q", r.Hostname, r.Cache)
				}
			}
		})
	}
}

func TestRackServingOtherBytesFailsNamingItAndTheDigest(t *testing.T) {
	// Each rack's stream hashed, compared with a local copy, and compared
	// with each other.
	for _, withLocal := range []string{"", "local copy", "each other"} {
		sim, c, tg, p := site(t, "3.7", 1<<20, maassim.RackSpec{Hostname: "r1"}, maassim.RackSpec{Hostname: "stale", State: maassim.RackOtherBytes})
		o := racks.Options{Port: sim.RackPort()}
		checkedWith(withLocal, &tg, p, &o)
		rep, err := racks.Check(context.Background(), c, tg, o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ComparedWithEachOther != (withLocal == "each other") {
			t.Fatalf("with %q: compared with each other: %v", withLocal, rep.ComparedWithEachOther)
		}
		if rep.Verdict != racks.Failed || verdicts(rep)["r1"] != racks.Passed || rep.Racks[0].SHA256 != tg.SHA256 {
			t.Fatalf("with %q: verdicts %v, overall %s, r1's sha256 %s", withLocal, verdicts(rep), rep.Verdict, rep.Racks[0].SHA256)
		}
		// What the stale rack served: the version with its first byte flipped.
		served, err := io.ReadAll(io.NewSectionReader(p, 0, tg.Size))
		if err != nil {
			t.Fatal(err)
		}
		served[0] ^= 0xff
		sum := sha256.Sum256(served)
		bad := rep.Racks[1]
		if bad.Verdict != racks.Failed || !strings.Contains(bad.Detail, "rack stale serves other bytes") ||
			!strings.Contains(bad.Detail, "want "+tg.SHA256) || bad.SHA256 != hex.EncodeToString(sum[:]) || !strings.Contains(bad.Detail, bad.SHA256) {
			t.Fatalf("with %q: stale rack: %+v", withLocal, bad)
		}
	}
}

// With a local copy of the version, every rack passes and is warm after,
// as when each stream is hashed.
func TestAllRacksPassComparedWithALocalCopy(t *testing.T) {
	sim, c, tg, p := site(t, "3.7", 3<<20, maassim.RackSpec{}, maassim.RackSpec{})
	tg.Local = p
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
	if err != nil || rep.Verdict != racks.Passed || !rep.ComparedWithLocalCopy {
		t.Fatalf("%v %+v", err, rep)
	}
	for i, r := range rep.Racks {
		rk := sim.Racks()[i]
		rk.Idle()
		if r.Bytes != tg.Size || r.SHA256 != tg.SHA256 || !rk.Cached(tg.SHA256[:7]) {
			t.Errorf("rack %s: %+v, warm %v", r.Hostname, r, rk.Cached(tg.SHA256[:7]))
		}
	}
}

// A local copy that is not the version cannot vouch for any rack: the
// check is an error, whatever the racks served, and each rack's verdict
// as it ended speaks of its own bytes.
func TestLocalCopyThatIsNotTheVersionIsAnError(t *testing.T) {
	for name, local := range map[string]func(p *pattern) io.ReaderAt{
		"other bytes": func(p *pattern) io.ReaderAt { return flipped{p} },
		"shorter":     func(p *pattern) io.ReaderAt { return io.NewSectionReader(p, 0, p.size-1) },
		"longer":      func(p *pattern) io.ReaderAt { return &pattern{size: p.size + 1} },
		"unreadable":  func(*pattern) io.ReaderAt { return failing{} },
	} {
		t.Run(name, func(t *testing.T) {
			sim, c, tg, p := site(t, "3.7", 1<<20, maassim.RackSpec{}, maassim.RackSpec{})
			tg.Local = local(p)
			var mu sync.Mutex
			var seen []racks.Rack
			rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), Progress: func(r racks.Rack) {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, r)
			}})
			if err == nil || !strings.Contains(err.Error(), "local copy") || rep != nil {
				t.Fatalf("%v %+v", err, rep)
			}
			for _, r := range seen {
				if r.Verdict == racks.Failed {
					t.Errorf("rack %s, which served the version, was told failed: %s", r.Hostname, r.Detail)
				}
			}
		})
	}
}

// A local copy with the same wrong bytes as a rack cannot pass the check:
// it is an error, and the rack that served the version is told passed.
// Hashed by the check, the copy never passes the rack that served its
// bytes; said to have been hashed before (Target.LocalHashed), the copy
// is trusted until the rack that served the version proves it wrong.
func TestRackServingTheWrongLocalCopysBytesNeverPasses(t *testing.T) {
	for _, hashedBefore := range []bool{false, true} {
		t.Run(fmt.Sprint("hashed before ", hashedBefore), func(t *testing.T) {
			sim, c, tg, p := site(t, "3.7", 1<<20, maassim.RackSpec{Hostname: "good"}, maassim.RackSpec{Hostname: "stale", State: maassim.RackOtherBytes})
			tg.Local, tg.LocalHashed = firstFlipped{p}, hashedBefore // what the stale rack serves
			var mu sync.Mutex
			got := map[string]racks.Verdict{}
			rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), Progress: func(r racks.Rack) {
				mu.Lock()
				defer mu.Unlock()
				got[r.Hostname] = r.Verdict
			}})
			if err == nil || rep != nil || !strings.Contains(err.Error(), "local copy") ||
				hashedBefore != strings.Contains(err.Error(), "hashed before") {
				t.Fatalf("%v %+v", err, rep)
			}
			if (!hashedBefore && got["stale"] == racks.Passed) || got["good"] != racks.Passed {
				t.Errorf("verdicts as they ended: %v", got)
			}
		})
	}
}

// A local copy hashed before (Target.LocalHashed) is read only to be
// compared with, once per rack, and not hashed again; every rack passes.
func TestLocalCopyHashedBeforeIsOnlyCompared(t *testing.T) {
	sim, c, tg, p := site(t, "3.7", 3<<20, maassim.RackSpec{}, maassim.RackSpec{})
	local := &counting{r: p}
	tg.Local, tg.LocalHashed = local, true
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
	if err != nil || rep.Verdict != racks.Passed || !rep.ComparedWithLocalCopy || !rep.LocalCopyHashedBefore {
		t.Fatalf("%v %+v", err, rep)
	}
	if got, want := local.n.Load(), 2*tg.Size; got != want {
		t.Errorf("the local copy was read for %d bytes, want %d: one comparison per rack, no hash", got, want)
	}
}

// A local copy said to have been hashed before that cannot be read is no
// proof either: the check is an error, never a pass on the racks' word.
func TestUnreadableLocalCopySaidHashedIsAnError(t *testing.T) {
	sim, c, tg, _ := site(t, "3.7", 1<<20, maassim.RackSpec{}, maassim.RackSpec{})
	tg.Local, tg.LocalHashed = failing{}, true
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
	if err == nil || rep != nil || !strings.Contains(err.Error(), "hashed before") || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("%v %+v", err, rep)
	}
}

// counting counts the bytes read through it.
type counting struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *counting) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.n.Add(int64(n))
	return n, err
}

// firstFlipped is p with its first byte flipped, as maassim's other-bytes
// rack serves it.
type firstFlipped struct{ p *pattern }

func (f firstFlipped) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.p.ReadAt(b, off)
	if off == 0 && n > 0 {
		b[0] ^= 0xff
	}
	return n, err
}

// flipped is r with its last byte flipped.
type flipped struct{ p *pattern }

func (f flipped) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.p.ReadAt(b, off)
	if last := f.p.size - 1 - off; last >= 0 && last < int64(n) {
		b[last] ^= 0xff
	}
	return n, err
}

// failing fails every read.
type failing struct{}

func (failing) ReadAt([]byte, int64) (int, error) { return 0, errors.New("disk gone") }

func TestUnreachableRackIsUnknownNeverPassed(t *testing.T) {
	sim, c, tg, _ := site(t, "3.7", 1<<20, maassim.RackSpec{Hostname: "r1"}, maassim.RackSpec{Hostname: "away", State: maassim.RackUnreachable})
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != racks.Unknown || verdicts(rep)["away"] != racks.Unknown || verdicts(rep)["r1"] != racks.Passed {
		t.Fatalf("verdicts %v, overall %s", verdicts(rep), rep.Verdict)
	}
	if d := rep.Racks[0].Detail; !strings.Contains(d, "rack away cannot be reached") {
		t.Errorf("detail %q", d)
	}
}

func TestStoppedAgentAndLostRegionFail(t *testing.T) {
	sim, c, tg, _ := site(t, "3.7", 1<<20, maassim.RackSpec{Hostname: "stopped", State: maassim.RackAgentStopped},
		maassim.RackSpec{Hostname: "lost", State: maassim.RackNoRegion})
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != racks.Failed {
		t.Fatalf("overall %s", rep.Verdict)
	}
	lost, stopped := rep.Racks[0], rep.Racks[1]
	if stopped.Verdict != racks.Failed || !strings.Contains(stopped.Detail, "its agent service is dead") || stopped.Status != 0 {
		t.Errorf("stopped: %+v", stopped)
	}
	if lost.Verdict != racks.Failed || lost.Status != 502 || !strings.Contains(lost.Detail, "cannot reach a region") {
		t.Errorf("lost: %+v", lost)
	}
}

func TestMAAS34RacksImportThenServe(t *testing.T) {
	sim, c, tg, _ := site(t, "3.4", 1<<20, maassim.RackSpec{Hostname: "r1"}, maassim.RackSpec{Hostname: "r2"},
		maassim.RackSpec{Hostname: "lost", State: maassim.RackNoRegion})
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), PollInterval: time.Millisecond, ImportTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Path != "/images/custom/amd64/generic/x-1-4-0/uploaded/root-tgz" {
		t.Errorf("path %s", rep.Path)
	}
	v := verdicts(rep)
	if v["r1"] != racks.Passed || v["r2"] != racks.Passed || v["lost"] != racks.Failed || rep.Verdict != racks.Failed {
		t.Fatalf("verdicts %v: %+v", v, rep.Racks)
	}
	for _, rk := range sim.Racks()[:2] {
		if !rk.Imported("x-1-4-0", "amd64/generic") {
			t.Errorf("rack %s did not import", rk.Hostname)
		}
	}
	if d := rep.Racks[0].Detail; !strings.Contains(d, "rack lost does not hold x-1-4-0") {
		t.Errorf("lost: %q", d)
	}
}

func TestMAASWithoutTheVersionOrWithOtherBytesIsAnError(t *testing.T) {
	sim, c, tg, _ := site(t, "3.7", 1<<10, maassim.RackSpec{})
	other := tg
	other.SHA256 = strings.Repeat("0", 64)
	if _, err := racks.Check(context.Background(), c, other, racks.Options{Port: sim.RackPort()}); err == nil || !strings.Contains(err.Error(), "MAAS holds other bytes") {
		t.Errorf("other bytes: %v", err)
	}
	missing := tg
	missing.Name = "x-9-9-9"
	if _, err := racks.Check(context.Background(), c, missing, racks.Options{Port: sim.RackPort()}); err == nil || !strings.Contains(err.Error(), "no boot resource x-9-9-9") {
		t.Errorf("missing: %v", err)
	}
}

func TestCancelStopsTheCheck(t *testing.T) {
	// Also while the local copy is hashed (it is the racks' bytes here,
	// whose reads cancel).
	for _, withLocal := range []string{"", "local copy", "each other"} {
		sim, c, tg, p := site(t, "3.7", 64<<20, maassim.RackSpec{}, maassim.RackSpec{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p.onRead = func(off int64) {
			if off > 8<<20 {
				cancel()
			}
		}
		o := racks.Options{Port: sim.RackPort()}
		checkedWith(withLocal, &tg, p, &o)
		_, err := racks.Check(ctx, c, tg, o)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("with %q: want the context's error, got %v", withLocal, err)
		}
	}
}

func TestTimeoutAfterConnectingFailsAndRacksNotStartedAreUnknown(t *testing.T) {
	sim, c, tg, p := site(t, "3.7", 64<<20, maassim.RackSpec{Hostname: "slow"}, maassim.RackSpec{Hostname: "waiting"})
	release := make(chan struct{})
	defer close(release)
	p.onRead = func(off int64) {
		if off > 8<<20 {
			<-release
		}
	}
	var seen atomic.Int32
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), Parallel: 1, Timeout: 300 * time.Millisecond,
		Progress: func(racks.Rack) { seen.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	// Parallel 1: whichever rack went first stalled, the other never started.
	var slow, waiting racks.Rack
	for _, r := range rep.Racks {
		if r.Bytes > 0 {
			slow = r
		} else {
			waiting = r
		}
	}
	if rep.Verdict != racks.Failed || slow.Verdict != racks.Failed || !strings.Contains(slow.Detail, "when the check's timeout of 300ms ran out: it is reachable but not serving") {
		t.Fatalf("connected rack: %s: %+v", rep.Verdict, rep.Racks)
	}
	if waiting.Verdict != racks.Unknown || !strings.Contains(waiting.Detail, "not started: the check's timeout of 300ms ran out") {
		t.Fatalf("rack not started: %+v", waiting)
	}
	if seen.Load() != 2 {
		t.Errorf("%d racks reported, want both", seen.Load())
	}
}

func TestStalledRackFailsAndGivesItsSlotBack(t *testing.T) {
	sim, c, tg, p := site(t, "3.7", 64<<20, maassim.RackSpec{Hostname: "stuck"})
	release := make(chan struct{})
	defer close(release)
	p.onRead = func(off int64) {
		if off > 8<<20 {
			<-release
		}
	}
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), StallTimeout: 200 * time.Millisecond, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Racks[0]; rep.Verdict != racks.Failed || !strings.Contains(r.Detail, "sent nothing for 200ms after") || !strings.Contains(r.Detail, "reachable but not serving") {
		t.Fatalf("%s: %+v", rep.Verdict, r)
	}
}

// A check that holds a stream for longer than the stall timeout (its disk
// slow: here, the local copy's reads) does not blame the rack: only the
// time the check waits for the rack's bytes counts.
func TestSlowCheckingIsNoStall(t *testing.T) {
	sim, c, tg, p := site(t, "3.7", 32<<20, maassim.RackSpec{Hostname: "fine"})
	tg.Local = slowReads{r: p, at: 8 << 20, wait: 5 * time.Second}
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), StallTimeout: 2 * time.Second, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Racks[0]; rep.Verdict != racks.Passed || r.Bytes != tg.Size {
		t.Fatalf("%s: %+v", rep.Verdict, r)
	}
}

// slowReads is r whose read across offset at (once for a reader in
// order) takes wait first.
type slowReads struct {
	r    io.ReaderAt
	at   int64
	wait time.Duration
}

func (s slowReads) ReadAt(p []byte, off int64) (int, error) {
	if off <= s.at && s.at < off+int64(len(p)) {
		time.Sleep(s.wait)
	}
	return s.r.ReadAt(p, off)
}

func TestDegradedServiceIsFetchedAnyway(t *testing.T) {
	for _, name := range []string{"3.4", "3.7", "3.7 with a local copy", "3.7 with a local copy hashed before"} {
		t.Run(name, func(t *testing.T) {
			v, how, _ := strings.Cut(name, " ")
			sim, c, tg, p := site(t, v, 1<<20, maassim.RackSpec{Hostname: "half", State: maassim.RackDegraded})
			if how != "" {
				tg.Local, tg.LocalHashed = p, strings.HasSuffix(how, "hashed before")
			}
			rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), PollInterval: time.Millisecond, ImportTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Racks[0]
			if rep.Verdict != racks.Passed || r.Bytes != tg.Size || !strings.Contains(r.Detail, "note: MAAS says its rackd service is degraded") {
				t.Fatalf("%s: %+v", rep.Verdict, r)
			}
		})
	}
}

func TestRackServingMoreThanTheVersionIsReadNoFurther(t *testing.T) {
	for _, each := range []bool{false, true} {
		sim, c, tg, _ := site(t, "3.7", 1<<20, maassim.RackSpec{Hostname: "endless", State: maassim.RackEndless}, maassim.RackSpec{Hostname: "r2"})
		o := racks.Options{Port: sim.RackPort(), Timeout: 5 * time.Second, EachHashed: each}
		rep, err := racks.Check(context.Background(), c, tg, o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ComparedWithEachOther == each {
			t.Fatalf("each hashed %v: compared with each other %v", each, rep.ComparedWithEachOther)
		}
		if r := rep.Racks[0]; rep.Verdict != racks.Failed || r.Bytes != tg.Size+1 || !strings.Contains(r.Detail, "more than the 1048576 bytes") {
			t.Fatalf("each hashed %v: %s: %+v", each, rep.Verdict, r)
		}
		if r := rep.Racks[1]; r.Verdict != racks.Passed || r.SHA256 != tg.SHA256 {
			t.Fatalf("each hashed %v: the other rack: %+v", each, r)
		}
	}
}

func TestOverallPassesOnlyWhenEveryRackPassed(t *testing.T) {
	p, f, u := racks.Rack{Verdict: racks.Passed}, racks.Rack{Verdict: racks.Failed}, racks.Rack{Verdict: racks.Unknown}
	for _, tc := range []struct {
		rs   []racks.Rack
		want racks.Verdict
	}{
		{[]racks.Rack{p, p}, racks.Passed},
		{[]racks.Rack{p, u}, racks.Unknown},
		{[]racks.Rack{u, f, p}, racks.Failed},
		{[]racks.Rack{p, {}}, racks.Unknown},
		{nil, racks.Unknown},
	} {
		if got := racks.Overall(tc.rs); got != tc.want {
			t.Errorf("Overall(%v) = %s, want %s", tc.rs, got, tc.want)
		}
	}
}

func TestNotFoundSaysWhatIsMissingAtEachVersion(t *testing.T) {
	for v, want := range map[string]string{"3.4": "its own copy of the file is missing", "3.7": "neither it nor its region holds the file"} {
		t.Run(v, func(t *testing.T) {
			sim, c, tg, _ := site(t, v, 1<<10, maassim.RackSpec{Hostname: "gone", State: maassim.RackLostCopy})
			rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort(), PollInterval: time.Millisecond, ImportTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if r := rep.Racks[0]; r.Verdict != racks.Failed || r.Status != 404 || !strings.Contains(r.Detail, want) {
				t.Fatalf("%+v", r)
			}
		})
	}
}

func TestTwoChecksAtOnceFillEachRackOnce(t *testing.T) {
	sim, c, tg, _ := site(t, "3.7", 8<<20, maassim.RackSpec{}, maassim.RackSpec{})
	var wg sync.WaitGroup
	reps := make([]*racks.Report, 2)
	errs := make([]error, 2)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
		}()
	}
	wg.Wait()
	for i := range reps {
		if errs[i] != nil || reps[i].Verdict != racks.Passed {
			t.Fatalf("check %d: %v %+v", i, errs[i], reps[i])
		}
	}
	for _, rk := range sim.Racks() {
		rk.Idle()
		if fills, most, requests := rk.Fills(); fills != 1 || most != 1 || requests != 2 {
			t.Errorf("rack %s: %d fills, %d at once, %d requests; want 1, 1, 2", rk.Hostname, fills, most, requests)
		}
	}
}

func TestRackWithoutDHCPIsTriedAtAllItsAddresses(t *testing.T) {
	sim, c, tg, _ := site(t, "3.7", 1<<10, maassim.RackSpec{Hostname: "nodhcp", NoDHCP: true})
	rep, err := racks.Check(context.Background(), c, tg, racks.Options{Port: sim.RackPort()})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Racks[0]
	if rep.Verdict != racks.Passed || len(r.Addresses) != 2 || r.Addresses[1] != sim.Racks()[0].Address || !strings.Contains(r.URL, sim.Racks()[0].Address) {
		t.Fatalf("%s: %+v", rep.Verdict, r)
	}
}
