package firstboot

import (
	"strings"
	"testing"
)

// The console of a first boot: the script's lines among the kernel's and
// cloud-init's, some after a console's own prefix.
const okConsole = `[   41.2] cloud-init[612]: Cloud-init v. 22.4.2 running 'modules:final'
IMAGECTL_FIRSTBOOT time firstboot-start=41.20
IMAGECTL_FIRSTBOOT image=demo version=0.1.0 steps=4 time=2026-11-26T18:00:00Z state=/var/lib/imagectl/firstboot
IMAGECTL_FIRSTBOOT step=1/4 time=2026-11-26T18:00:00Z uptime=41.22 start packages: jq
[   52.0] cloud-init[612]: Setting up jq (1.6-2.1) ...
IMAGECTL_FIRSTBOOT step=1/4 time=2026-11-26T18:00:11Z uptime=52.31 done
IMAGECTL_FIRSTBOOT step=2/4 time=2026-11-26T18:00:11Z not-at-first-boot bundles: stage big (why: over 16 MiB)
IMAGECTL_FIRSTBOOT step=3/4 partly: the initramfs is not rebuilt
IMAGECTL_FIRSTBOOT step=2/4 time=2026-11-26T18:00:12Z not-at-first-boot bundles: stage big (why: over 16 MiB, rerun)
IMAGECTL_FIRSTBOOT step=4/4 time=2026-11-26T18:00:12Z not-at-first-boot cleanup (why: not on a live host)
[   60.1] cloud-init[612]: IMAGECTL_FIRSTBOOT time firstboot-done=60.10
IMAGECTL_FIRSTBOOT result status=ok steps=4 ran=3 already_done=0 not_at_first_boot=1 download_bytes=1234567 archive_bytes=1000000 index_bytes=234567 missing_optional=nvtop,htop reboot_required=yes seconds=18.900
`

func read(s string) (*Console, int) {
	c, n := &Console{}, 0
	for _, l := range strings.SplitAfter(s, "\n") {
		if c.Line(l) {
			n++
		}
	}
	return c, n
}

func TestConsoleOK(t *testing.T) {
	c, n := read(okConsole)
	if n != 10 {
		t.Errorf("%d of the script's lines, want 10", n)
	}
	want := "step 2/4: bundles: stage big (why: over 16 MiB, rerun)|step 4/4: cleanup (why: not on a live host)"
	if got := strings.Join(c.NotHere, "|"); got != want {
		t.Errorf("not here %q, want %q", got, want)
	}
	if len(c.Partly) != 1 || c.Partly[0] != "step 3/4: the initramfs is not rebuilt" {
		t.Errorf("partly %q", c.Partly)
	}
	if c.Failure() != "" || c.Status != "ok" || c.Steps != 4 || c.Ran != 3 || c.NotAtFirstBoot != 1 || c.FailedStep != 0 {
		t.Errorf("%+v: %s", c, c.Failure())
	}
	if c.DownloadBytes != 1234567 || c.ArchiveBytes != 1000000 || c.IndexBytes != 234567 {
		t.Errorf("bytes %d = %d + %d", c.DownloadBytes, c.ArchiveBytes, c.IndexBytes)
	}
	if !c.RebootRequired || c.Seconds != 18.9 || strings.Join(c.MissingOptional, " ") != "nvtop htop" {
		t.Errorf("reboot %v, seconds %v, missing %q", c.RebootRequired, c.Seconds, c.MissingOptional)
	}
	if c.Times[MilestoneStart] != 41.2 || c.Times[MilestoneDone] != 60.1 {
		t.Errorf("times %v", c.Times)
	}
}

func TestConsoleFailed(t *testing.T) {
	c, _ := read(`IMAGECTL_FIRSTBOOT time firstboot-start=40.00
IMAGECTL_FIRSTBOOT step=2/4 time=2026-11-26T18:00:00Z uptime=41.22 start packages: jq
E: Unable to locate package jq
IMAGECTL_FIRSTBOOT step=2/4 error apt-get install failed
IMAGECTL_FIRSTBOOT step=2/4 time=2026-11-26T18:00:03Z uptime=44.00 failed exit=1
IMAGECTL_FIRSTBOOT result status=failed steps=4 ran=1 already_done=0 not_at_first_boot=0 failed_step=2 download_bytes=0 archive_bytes=0 index_bytes=0 missing_optional=- reboot_required=no seconds=4.000
`)
	if c.Status != "failed" || c.FailedStep != 2 || c.RebootRequired || c.MissingOptional != nil {
		t.Errorf("%+v", c)
	}
	if got, want := c.Failure(), "the first-boot script failed at step 2 of 4: apt-get install failed"; got != want {
		t.Errorf("failure %q, want %q", got, want)
	}
}

func TestConsoleMissing(t *testing.T) {
	c, n := read("[  1.0] Linux version 6.1.0\nIMAGECTL_SMOKE done\n")
	if n != 0 || !strings.Contains(c.Failure(), "never ran") {
		t.Errorf("%d lines, failure %q", n, c.Failure())
	}
	c.Line("IMAGECTL_FIRSTBOOT time firstboot-start=40.00\r\n")
	if !strings.Contains(c.Failure(), "never wrote its result line") {
		t.Errorf("failure %q", c.Failure())
	}
	// A result line without numbers reads as zeros, not as a panic.
	c.Line("IMAGECTL_FIRSTBOOT result status=ok")
	if c.Failure() != "" || c.DownloadBytes != 0 {
		t.Errorf("%+v", c)
	}
}
