package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
)

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

// TestBootComparisonSummary: the one line show, release notes and commit
// messages print: both times and deploys, the ratio and the key with its
// memory; a failed path and why; the differences when the paths did not
// do the same work.
func TestBootComparisonSummary(t *testing.T) {
	c := storetest.Comparison("img", "1", "kvm", false, t0)
	d1, d2 := 61.0, 12.5
	c.Baked.DeploySeconds, c.FirstBoot.DeploySeconds = &d1, &d2
	if err := c.Settle(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := "validated in 40.0 s baked vs 160.0 s at first boot (deploy 61.0 s vs 12.5 s), 0.25x (kvm, 4096 MiB, slice/converged, measured 2026-11-26T10:00:00Z)"
	if got := c.Summary(); got != want || !c.LikeForLike() {
		t.Errorf("Summary:\n%s\nwant\n%s", got, want)
	}
	c.Differences = []string{"not-at-first-boot stage bundle big (why: over 16 MiB)"}
	if got := c.Summary(); got != want+"; not like for like: not-at-first-boot stage bundle big (why: over 16 MiB)" || c.LikeForLike() {
		t.Errorf("Summary with a difference:\n%s", got)
	}
	f := storetest.Comparison("img", "1", "tcg", true, t0)
	if err := f.Settle(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.Summary(), "not compared: the first-boot path FAILED: apt-get install: could not reach deb.example.com (tcg, 4096 MiB, slice/converged, measured 2026-11-26T10:00:00Z)"; got != want {
		t.Errorf("Summary of a failure:\n%s\nwant\n%s", got, want)
	}
}

// TestBootComparisonDifferencesCut: Settle keeps the differences within
// their bounds, cut and counted, never refused; Check refuses a file's
// that is not.
func TestBootComparisonDifferencesCut(t *testing.T) {
	c := storetest.Comparison("img", "1", "kvm", false, t0)
	for i := range store.MaxDifferences + 5 {
		c.Differences = append(c.Differences, fmt.Sprintf("step %d ", i)+strings.Repeat("é", store.MaxDifferenceLen))
	}
	c.Differences = append(c.Differences, "  ")
	if err := c.Settle(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if len(c.Differences) != store.MaxDifferences || c.Differences[store.MaxDifferences-1] != "and 6 more" {
		t.Fatalf("differences: %d, last %q", len(c.Differences), c.Differences[len(c.Differences)-1])
	}
	if n := utf8.RuneCountInString(c.Differences[0]); n != store.MaxDifferenceLen+1 || !strings.HasSuffix(c.Differences[0], "…") {
		t.Errorf("a long difference is %d characters: %q", n, c.Differences[0])
	}
	c.Differences = append(c.Differences, "one too many")
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "differences, more than the") {
		t.Errorf("Check of too many: %v", err)
	}
	c.Differences = []string{strings.Repeat("x", store.MaxDifferenceLen+2)}
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("Check of a long one: %v", err)
	}
}

// TestBootComparisonMemoryKey: comparisons under another memory are of
// another key, neither replacing the other as latest; a version keeps
// KeepBootComparisons in all, its latest measured.
func TestBootComparisonMemoryKey(t *testing.T) {
	a := storetest.Comparison("img", "1", "kvm", false, t0)
	b := a
	b.MemoryMB, b.MeasuredAt = 16384, t0.Add(time.Minute)
	latest := store.LatestBootComparisons(store.AppendBootComparisons(nil, []store.BootComparison{a, b}))
	if len(latest) != 2 || latest[0].MemoryMB != 4096 || latest[1].MemoryMB != 16384 {
		t.Errorf("latest: %+v", latest)
	}
	var many []store.BootComparison
	for i := range store.KeepBootComparisons + 3 {
		c := a
		c.MemoryMB, c.MeasuredAt = 1024+i, t0.Add(time.Duration(i)*time.Second)
		many = append(many, c)
	}
	kept := store.AppendBootComparisons(nil, many)
	if len(kept) != store.KeepBootComparisons || kept[0].MemoryMB != 1024+3 {
		t.Errorf("kept %d, the first of %d MiB", len(kept), kept[0].MemoryMB)
	}
}
