package deploycheck

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/heappeak"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// gz compresses b as one gzip member. Members concatenated are one gzip
// stream to a reader, so a test can repeat one member to make a large
// archive from a small file, as an attacker does.
func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	return gzLevel(t, b, gzip.BestSpeed)
}

func gzLevel(t *testing.T, b []byte, level int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, level)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarHeader is the tar encoding of h alone, without the content.
func tarHeader(t *testing.T, h *tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes() // written at once; the content is not

}

// bombTgz writes a tgz of n entries named name(i), each of size zero
// bytes, from one compressed member of zeros shared by all.
func bombTgz(t *testing.T, n int, name func(int) string, size int64) string {
	t.Helper()
	var out bytes.Buffer
	var zeros []byte
	if size > 0 {
		zeros = gzLevel(t, make([]byte, size), gzip.BestCompression)
	}
	for i := 0; i < n; i++ {
		out.Write(gz(t, tarHeader(t, &tar.Header{Typeflag: tar.TypeReg, Name: name(i), Mode: 0o644, Size: size, Format: tar.FormatPAX})))
		out.Write(zeros) // size is a multiple of 512: no padding
	}
	out.Write(gz(t, make([]byte, 1024)))
	p := filepath.Join(t.TempDir(), "hostile.tgz")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkPeak runs CheckDeployable on tgz and returns its error and the peak
// of the live heap above what it was before.
func checkPeak(t *testing.T, ctx context.Context, tgz string) (uint64, error) {
	t.Helper()
	// A tight collector keeps the garbage between collections small, so
	// that the peak is what the check keeps, not how far a collector
	// starved of CPU lagged: under -race on a busy machine, the default
	// GOGC let the garbage of 200,000 headers reach 36 MiB.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := heappeak.Start()
	_, err := CheckDeployable(ctx, tgz, DeployOptions{})
	peak := stop()
	return peak - min(peak, before.HeapAlloc), err
}

// TestCheckDeployableBounded: a small hostile tgz made CheckDeployable
// keep what it read without bound: every grub.d drop-in up to 64 MiB each
// (a 1 MB tgz took 1.5 GB), and every tar header (a million in 9.6 MB:
// 419 MB; 333 KB of long names: 793 MB). Now it keeps only what the checks
// need, within bounds, and refuses past them naming the entry.
func TestCheckDeployableBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tgz   func(t *testing.T) string
		want  string // in the error; "" for none
		limit uint64 // of the heap's growth; 0 for 32 MiB
	}{
		{"large drop-ins", func(t *testing.T) string {
			return bombTgz(t, 24, func(i int) string { return fmt.Sprintf("./etc/default/grub.d/%d.cfg", i) }, 16<<20)
		}, `entry "./etc/default/grub.d/0.cfg" has 16777216 bytes, more than the 1 MiB the check reads of it`, 0},
		{"many drop-ins at the bound", func(t *testing.T) string {
			return bombTgz(t, 80, func(i int) string { return fmt.Sprintf("./etc/default/grub.d/%d.cfg", i) }, 1<<20)
		}, `entry "./etc/default/grub.d/48.cfg" brings the files the checks read`, maxWantedTotal + 16<<20},
		{"one drop-in repeated", func(t *testing.T) string {
			return bombTgz(t, 80, func(int) string { return "./etc/default/grub.d/x.cfg" }, 1<<20)
		}, "past 48 MiB in all", 0},
		{"too many drop-ins", func(t *testing.T) string {
			return bombTgz(t, 300, func(i int) string { return fmt.Sprintf("./etc/default/grub.d/%d.cfg", i) }, 0)
		}, "more than 256 GRUB drop-ins", 0},
		{"long names", func(t *testing.T) string {
			return bombTgz(t, 64, func(i int) string { return fmt.Sprintf("./usr/share/%d/%s", i, strings.Repeat("n", 1<<20-100)) }, 0)
		}, "", 64 << 20}, // each 1 MiB name is read, parsed and dropped: garbage until the next GC
		{"many entries", func(t *testing.T) string {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
			tw := tar.NewWriter(zw)
			for i := 0; i < 200000; i++ {
				tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("./usr/share/doc/p%d/%s", i, strings.Repeat("x", 60)), Mode: 0o644})
			}
			tw.Close()
			zw.Close()
			p := filepath.Join(t.TempDir(), "many.tgz")
			if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgz := tc.tgz(t)
			peak, err := checkPeak(t, context.Background(), tgz)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "checking "+tgz+": ")):
				t.Errorf("error %v, want %q", err, tc.want)
			}
			limit := tc.limit
			if limit == 0 {
				limit = 32 << 20
			}
			if peak > limit {
				t.Errorf("the heap grew by %d MiB, more than %d", peak>>20, limit>>20)
			}
		})
	}
}

// TestCheckDeployableTruncated: a tgz cut short said only "unexpected
// EOF"; now the error names the file and the entry after which it broke.
func TestCheckDeployableTruncated(t *testing.T) {
	root := goodRoot()
	root["./usr/share/big"] = strings.Repeat("incompressible? no, but long enough ", 4000)
	full, err := os.ReadFile(writeTgz(t, root))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "x.tgz")
	if err := os.WriteFile(p, full[:len(full)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = CheckDeployable(context.Background(), p, DeployOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "checking "+p+": ") || !strings.Contains(err.Error(), "unexpected EOF") ||
		!(strings.Contains(err.Error(), "reading the tar stream after entry \"./") || strings.Contains(err.Error(), "reading entry \"./")) {
		t.Errorf("%v", err)
	}
	if err := os.WriteFile(p, full[:5], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err = CheckDeployable(context.Background(), p, DeployOptions{}); err == nil || !strings.Contains(err.Error(), "checking "+p+": reading its gzip header: unexpected EOF") {
		t.Errorf("%v", err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if fs, err := CheckDeployable(context.Background(), p, DeployOptions{}); err != nil || checks(fs) != "compression" || fs[0].Message != p+" is empty: curtin's smtar recognises gzip, bzip2, xz and compress only" {
		t.Errorf("%+v %v", fs, err)
	}
}

// TestCheckDeployableStopsInsideAnEntry: the context was looked at only
// between entries, so one entry of gigabytes of zeros (a gzip bomb of a
// few megabytes) kept it reading long after it was cancelled.
func TestCheckDeployableStopsInsideAnEntry(t *testing.T) {
	var out bytes.Buffer
	member := gzLevel(t, make([]byte, 64<<20), gzip.BestCompression)
	const size = 8 << 30
	out.Write(gz(t, tarHeader(t, &tar.Header{Typeflag: tar.TypeReg, Name: "./big", Mode: 0o644, Size: size})))
	for i := 0; i < size/(64<<20); i++ {
		out.Write(member)
	}
	p := filepath.Join(t.TempDir(), "bomb.tgz")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := CheckDeployable(ctx, p, DeployOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %s to stop", took)
	}
}

// TestCheckDeployableRefusesAFIFO: a FIFO as the tgz blocked the open
// forever; it is refused at once.
func TestCheckDeployableRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "x.tgz")
	testenv.Mkfifo(t, fifo)
	done := make(chan error, 1)
	go func() { _, err := CheckDeployable(context.Background(), fifo, DeployOptions{}); done <- err }()
	select {
	case err := <-done:
		if err == nil || err.Error() != "checking the artifact: "+fifo+": not a regular file (a FIFO)" {
			t.Errorf("%v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting on the FIFO")
	}
}
