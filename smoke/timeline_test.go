package smoke

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// replay feeds a recorded console transcript (testdata/*.console: each
// line after the host time it arrived at) to a watcher.
func replay(t *testing.T, w *watcher, file string) (bool, error) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		at, line, _ := strings.Cut(l, " ")
		secs, err := strconv.ParseFloat(at, 64)
		if err != nil {
			t.Fatalf("%s: bad line %q", file, l)
		}
		if done, err := w.feed(line, time.Duration(secs*float64(time.Second))); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

func convergedResult() *Result {
	return &Result{Image: "imagectl-demo", Version: "0.1.0", Accelerator: "tcg", Profile: "bare-metal", Stage: "converged",
		Bootstrap: &Bootstrap{Bundle: "demo", Entrypoint: "/usr/local/share/gpuaas/site-bootstrap/demo/bootstrap.sh"}}
}

// A real boot's console: the demo image at stage converged under TCG.
func TestTimelineFromTranscript(t *testing.T) {
	res := convergedResult()
	done, err := replay(t, newWatcher(res, nil), "converged-boot.console")
	if !done || err != nil || !res.Passed() || len(res.Lines) != 29 {
		t.Fatalf("done %v, err %v, %d lines: %s", done, err, len(res.Lines), res.Failure())
	}
	tl := newTimeline(res, true)
	var got []string
	prev := 0.0
	for _, m := range tl.Milestones {
		got = append(got, fmt.Sprintf("%s=%g(%s)", m.Name, m.Seconds, m.Source))
		if m.Delta != round3(m.Seconds-prev) || (m.GuestSeconds != nil) != (m.Source == sourceSystemd || m.Source == sourceSmoke) {
			t.Errorf("%+v", m)
		}
		prev = m.Seconds
	}
	// The guest's clock read zero 12.365 s after QEMU started (the second
	// clock line, 155.55 at 167.915, arrived sooner after its reading than
	// the first, 75.69 at 88.115): half a second after the kernel's banner,
	// since the kernel's first second runs on a slow clock under TCG.
	want := "qemu-start=0(host) kernel=11.875(console) userspace=24.633(systemd) cloud-init-start=33.299(systemd) " +
		"multi-user=87.17(systemd) bootstrap-start=108.955(smoke) bootstrap-done=109.295(smoke) cloud-init-done=110.863(systemd) " +
		"boot-finished=110.95(systemd) validation-start=111.235(smoke) validation-done=167.025(smoke)"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	if *tl.GuestClockOffset != 12.365 || strings.Join(tl.Missing, ",") != MilestoneLoader {
		t.Errorf("offset %v, missing %v (GRUB does not report the loader to systemd)", *tl.GuestClockOffset, tl.Missing)
	}
	// The bootstrap ran in cloud-final, which ended before the validation
	// began; its duration is the guest's.
	if b := res.Bootstrap; b.Exit == nil || *b.Exit != 0 || b.Seconds != 0.34 || len(b.tail) != 2 {
		t.Errorf("bootstrap %+v", b)
	}
	if !(tl.Find(MilestoneBootstrapDone).Seconds < tl.Find(MilestoneCloudInitDone).Seconds &&
		tl.Find(MilestoneCloudInitDone).Seconds < tl.Find(MilestoneValidationStart).Seconds) {
		t.Error("the validation started before the bootstrap and cloud-init ended")
	}
}

// A boot that stopped early has the milestones it reached; the rest are
// missing, not estimated.
func TestTimelineOfAnEarlyFailure(t *testing.T) {
	res := convergedResult()
	w := newWatcher(res, nil)
	w.feed("BdsDxe: starting Boot0001\r\n", 9*time.Second)
	w.feed("[    0.000000] Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org)\r\n", 30*time.Second)
	_, err := w.feed("[    3.1] Kernel panic - not syncing: VFS: Unable to mount root fs\r\n", 33*time.Second)
	if err == nil {
		t.Fatal("no error for a panic")
	}
	tl := newTimeline(res, false)
	if len(tl.Milestones) != 2 || tl.Milestones[1].Name != MilestoneKernel || tl.Milestones[1].Delta != 30 {
		t.Errorf("milestones %+v", tl.Milestones)
	}
	if len(tl.Missing) != len(milestoneCatalog)-2 || tl.GuestClockOffset != nil {
		t.Errorf("missing %v, offset %v", tl.Missing, tl.GuestClockOffset)
	}
	// Without a bootstrap to run, its milestones are not expected.
	res.Bootstrap = nil
	if tl := newTimeline(res, false); strings.Contains(strings.Join(tl.Missing, ","), "bootstrap") {
		t.Errorf("missing %v", tl.Missing)
	}
}

func TestTimelineFileRoundTrip(t *testing.T) {
	res := convergedResult()
	replay(t, newWatcher(res, nil), "converged-boot.console")
	res.observed.qemuStarted = time.Date(2025, 11, 21, 10, 1, 52, 0, time.UTC)
	tl := newTimeline(res, true)
	p := filepath.Join(t.TempDir(), "x-1.smoke-timeline.json")
	if err := writeJSON(p, tl); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTimeline(p)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(tl)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Errorf("round trip:\n%s\n%s", a, b)
	}
	// The documented keys, stable for other tools.
	raw, _ := os.ReadFile(p)
	for _, k := range []string{`"schema_version": 1`, `"profile": "bare-metal"`, `"stage": "converged"`, `"qemu_started": "2025-11-21T10:01:52Z"`,
		`"guest_clock_offset": 12.365`, `"name": "userspace"`, `"seconds": 24.633`, `"delta": 12.758`, `"guest_seconds": 12.268`,
		`"source": "systemd"`, `"missing": [`} {
		if !strings.Contains(string(raw), k) {
			t.Errorf("timeline file lacks %s:\n%s", k, raw)
		}
	}
	os.WriteFile(p, []byte(`{"schema_version": 2}`), 0o644)
	if _, err := ReadTimeline(p); err == nil || !strings.Contains(err.Error(), "schema version 2") {
		t.Errorf("schema 2: %v", err)
	}
}

func TestCompareTimelines(t *testing.T) {
	ms := func(kv ...any) *Timeline {
		tl := &Timeline{}
		for i := 0; i < len(kv); i += 2 {
			tl.Milestones = append(tl.Milestones, Milestone{Name: kv[i].(string), Seconds: kv[i+1].(float64)})
		}
		return tl
	}
	base := ms(MilestoneQEMUStart, 0.0, MilestoneKernel, 30.0, MilestoneBootstrapDone, 200.0, MilestoneValidationDone, 260.0)
	cur := ms(MilestoneQEMUStart, 0.0, MilestoneKernel, 31.5, MilestoneUserspace, 40.0, MilestoneValidationDone, 170.25)
	var got []string
	for _, c := range CompareTimelines(base, cur) {
		s := c.Name
		for _, p := range []*float64{c.Baseline, c.Current, c.Change} {
			if p == nil {
				s += " -"
			} else {
				s += " " + strconv.FormatFloat(*p, 'f', -1, 64)
			}
		}
		got = append(got, s)
	}
	want := "qemu-start 0 0 0; kernel 30 31.5 1.5; userspace - 40 -; validation-done 260 170.25 -89.75; bootstrap-done 200 - -"
	if strings.Join(got, "; ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, "; "), want)
	}
}
