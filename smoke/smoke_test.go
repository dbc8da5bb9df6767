//go:build guestfs

package smoke

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/qemuproc"
	"github.com/gpuaas/imagectl/manifest"
)

// These tests build the Debian stand-in of the H200 recipe
// (testdata/h200-debian.hcl) on the project's Debian base image (make
// base-image; the Makefile exports IMAGECTL_TEST_BASE_VARS), then deploy
// and boot it, and broken variants of it, for real. -short skips them.

func TestMain(m *testing.M) {
	code := m.Run()
	if standInDir != "" {
		os.RemoveAll(standInDir)
	}
	os.Exit(code)
}

func runSmoke(t *testing.T, ctx context.Context, tgz string, opts Options) (*Result, []event.Event, error) {
	t.Helper()
	var events []event.Event
	work := t.TempDir()
	opts.WorkDir = work
	inner := opts.Events
	opts.Events = func(e event.Event) {
		events = append(events, e)
		if e.Type == "log" || (e.Type == "phase" && e.Status != "start") {
			t.Logf("%s %s %s %.0fs %s", e.Type, e.Phase, e.Status, e.Seconds, firstLine(e.Message))
		}
		if inner != nil {
			inner(e)
		}
	}
	res, err := Run(ctx, tgz, opts)
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		t.Errorf("scratch files left in %s: %v", work, entries)
	}
	if pids := qemuproc.Children(); len(pids) > 0 {
		t.Errorf("QEMU processes left running: %v", pids)
	}
	if res != nil {
		t.Logf("deploy %.0fs, boot %.0fs, validate %.0fs under %s", res.Seconds[PhaseDeploy], res.Seconds[PhaseBoot],
			res.Seconds[PhaseValidate], res.Accelerator)
	}
	return res, events, err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// checkTimeline: every milestone of a boot is there but
// the loader's (GRUB does not report it to systemd; firmware and GRUB
// together are qemu-start to kernel), in boot order, and the file beside
// the console log holds the same.
func checkTimeline(t *testing.T, tgz string, res *Result) {
	t.Helper()
	tl := res.Timeline
	if tl == nil || res.TimelineFile != manifest.FilesBeside(tgz).SmokeTimeline {
		t.Fatalf("timeline %+v in %q", tl, res.TimelineFile)
	}
	for _, m := range tl.Milestones {
		t.Logf("%-18s %8.1f %+8.1f %s", m.Name, m.Seconds, m.Delta, m.Source)
	}
	if len(tl.Missing) > 1 || (len(tl.Missing) == 1 && tl.Missing[0] != MilestoneLoader) {
		t.Errorf("missing %v", tl.Missing)
	}
	at := func(name string) float64 {
		if m := tl.Find(name); m != nil {
			return m.Seconds
		}
		return -1
	}
	// cloud-final runs after multi-user.target; the smoke unit waits for
	// the boot to finish, cloud-final included. Times taken with
	// /proc/uptime are in hundredths.
	order := []string{MilestoneQEMUStart, MilestoneKernel, MilestoneUserspace, MilestoneCloudInitStart, MilestoneMultiUser,
		MilestoneCloudInitDone, MilestoneBootFinished, MilestoneValidationStart, MilestoneValidationDone}
	for i := 1; i < len(order); i++ {
		if !(at(order[i-1]) <= at(order[i])+0.02) {
			t.Errorf("%s at %.1f is not after %s at %.1f", order[i], at(order[i]), order[i-1], at(order[i-1]))
		}
	}
	// The guest's clock read zero about when the console showed the
	// kernel's banner (under TCG up to a second or so later: the kernel's
	// first second runs on a slow clock).
	if off := tl.GuestClockOffset; off == nil || *off < at(MilestoneKernel)-5 || *off > at(MilestoneKernel)+5 {
		t.Errorf("guest clock offset %v, kernel on the console at %.1f", tl.GuestClockOffset, at(MilestoneKernel))
	}
	onDisk, err := ReadTimeline(res.TimelineFile)
	if err != nil || !onDisk.Passed || len(onDisk.Milestones) != len(tl.Milestones) {
		t.Errorf("timeline file: %+v, %v", onDisk, err)
	}
}

// withoutKernelArg is a copy of the tgz (and its manifest) with arg taken
// out of GRUB's files, /etc/default/grub and the imagectl grub.d drop-in,
// as a GRUB missing a kernel arg the recipe sets; the manifest still lists
// the arg, so the validation script checks it.
func withoutKernelArg(t *testing.T, tgz, arg string) string {
	t.Helper()
	// GRUB_CMDLINE_LINUX holds the arg bare, the drop-in single-quoted.
	re := regexp.MustCompile(`(^|[" ])(` + regexp.QuoteMeta(arg) + `|'` + regexp.QuoteMeta(arg) + `')`)
	files := []string{"./etc/default/grub", "." + compile.GrubDropIn}
	edited := map[string]bool{}
	dst := brokenCopy(t, tgz, func(h *tar.Header, body func() []byte) (bool, []byte) {
		if !slices.Contains(files, h.Name) {
			return true, nil
		}
		out := re.ReplaceAll(body(), []byte("$1"))
		edited[h.Name] = !bytes.Equal(out, body())
		return true, out
	})
	for _, f := range files {
		if !edited[f] {
			t.Fatalf("%s of %s does not carry %s", f, tgz, arg)
		}
	}
	return dst
}

// A tgz without a kernel and initrd fails in the deploy, saying so, and
// never boots. The tgz is the stand-in's /etc and /boot, less the kernel
// and initrd: the refusal does not depend on the rest, and extracting the
// whole image would cost minutes under TCG for nothing.
func TestSmokeNoKernel(t *testing.T) {
	kept := func(name string) bool {
		name = strings.TrimSuffix(name, "/")
		return name == "." || name == "./etc" || name == "./boot" || strings.HasPrefix(name, "./etc/") || strings.HasPrefix(name, "./boot/")
	}
	tgz := brokenCopy(t, standInArtifact(t), func(h *tar.Header, _ func() []byte) (bool, []byte) {
		base := filepath.Base(h.Name)
		kernel := strings.HasPrefix(h.Name, "./boot/") && (strings.HasPrefix(base, "vmlinuz") || strings.HasPrefix(base, "initrd.img"))
		return kept(h.Name) && !kernel && (h.Typeflag != tar.TypeLink || kept(h.Linkname)), nil
	})
	_, events, err := runSmoke(t, context.Background(), tgz, Options{})
	if err == nil || !strings.Contains(err.Error(), "the tgz has no kernel: no /boot/vmlinuz-*") {
		t.Fatalf("got %v", err)
	}
	for _, e := range events {
		if e.Phase == PhaseBoot {
			t.Error("a tgz without a kernel was booted")
		}
	}
	if _, err := os.Stat(manifest.FilesBeside(tgz).SmokeLog); err == nil {
		t.Error("a console log for a boot that never happened")
	}
}

func TestSmokeCancelledDuringDeploy(t *testing.T) {
	tgz := standInArtifact(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt time.Time
	_, _, err := runSmoke(t, ctx, tgz, Options{ConsoleLog: filepath.Join(t.TempDir(), "console.log"), Events: func(e event.Event) {
		if e.Type == "log" && strings.HasPrefix(e.Message, "extracting") {
			time.AfterFunc(3*time.Second, func() { cancelledAt = time.Now(); cancel() })
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(cancelledAt); took > 20*time.Second {
		t.Errorf("took %s to stop after cancellation", took)
	}
}

// brokenCopy writes a copy of the tgz and its manifest into a new
// directory, passing every entry through edit: keep false drops it, a
// non-nil body replaces its content.
func brokenCopy(t *testing.T, tgz string, edit func(h *tar.Header, body func() []byte) (keep bool, replace []byte)) string {
	t.Helper()
	dir := t.TempDir()
	dst := filepath.Join(dir, filepath.Base(tgz))
	b, err := os.ReadFile(manifest.FilesBeside(tgz).Manifest)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(manifest.FilesBeside(dst).Manifest, b, 0o644)
	in, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	zw, err := gzip.NewWriterLevel(out, gzip.BestSpeed) // the copy's compression does not matter, its time does
	if err != nil {
		t.Fatal(err)
	}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var content []byte
		body := func() []byte {
			if content == nil {
				content, _ = io.ReadAll(tr)
			}
			return content
		}
		keep, replace := edit(h, body)
		if replace == nil && content != nil {
			replace = content // read by edit, kept as it was
		}
		if !keep {
			continue
		}
		if replace != nil {
			h.Size = int64(len(replace))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		var src io.Reader = tr
		if replace != nil {
			src = strings.NewReader(string(replace))
		}
		if _, err := io.Copy(tw, src); err != nil {
			t.Fatal(fmt.Errorf("%s: %w", h.Name, err))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
