package pack

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
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/ext4tar"
	"github.com/gpuaas/imagectl/builder/ext4tar/ext4tartest"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestRepackClampsToEpoch: every modification time newer than the epoch
// becomes the epoch, older and equal ones are kept to the nanosecond, and
// two streams that differ only in times after the epoch pack to the same
// bytes.
func TestRepackClampsToEpoch(t *testing.T) {
	epoch := time.Unix(1700000000, 0)
	stream := func(written time.Time) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range []struct {
			name string
			mt   time.Time
		}{
			{"./usr/bin/jq", time.Unix(1690000000, 250)}, // from a package: older
			{"./etc/base", epoch},                        // the base's newest
			{"./etc/imagectl/build.json", written},       // what the build wrote
			{"./etc/later", epoch.Add(time.Nanosecond)},
		} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: 1, ModTime: e.mt, Format: tar.FormatPAX}); err != nil {
				t.Fatal(err)
			}
			tw.Write([]byte("x"))
		}
		tw.Close()
		return buf.Bytes()
	}
	pack := func(in []byte, epoch time.Time) []byte {
		var out bytes.Buffer
		if _, err := Repack(context.Background(), bytes.NewReader(in), &out, 6, epoch); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	now := time.Now()
	a := pack(stream(now), epoch)
	if b := pack(stream(now.Add(time.Hour+time.Millisecond)), epoch); !bytes.Equal(a, b) {
		t.Error("two streams differing only in times after the epoch packed to different bytes")
	}
	if b := pack(stream(now), time.Time{}); bytes.Equal(a, b) {
		t.Error("without an epoch the build's times were clamped too")
	}
	want := map[string]time.Time{"./usr/bin/jq": time.Unix(1690000000, 250), "./etc/base": epoch,
		"./etc/imagectl/build.json": epoch, "./etc/later": epoch}
	zr, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if w := want[h.Name]; !h.ModTime.Equal(w) {
			t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime.UnixNano(), w.UnixNano())
		}
		delete(want, h.Name)
	}
	if len(want) != 0 {
		t.Errorf("entries lost: %v", want)
	}
}

// TestBaseSourceDate chooses E from a real GPT disk like the project's base
// image (a non-ext4 partition first, the ext4 root second): the newest
// modification time before the build's start, whole seconds; times after
// the start (a wrong clock when the base was made) do not count.
func TestBaseSourceDate(t *testing.T) {
	for _, tool := range []string{"mke2fs", "sgdisk"} {
		testenv.Tool(t, tool, "make deps installs e2fsprogs and gdisk")
	}
	src := t.TempDir()
	// mke2fs makes lost+found now: the start is before that.
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	newest := start.Add(-400*24*time.Hour + 999*time.Millisecond)
	files := map[string]time.Time{
		"etc/hostname":      time.Date(2021, 11, 14, 22, 13, 20, 0, time.UTC),
		"usr/bin/tool":      newest,
		"var/lib/future":    start.Add(30 * time.Minute), // after the start: ignored
		"var/lib/at-start":  start,                       // not older than the start: ignored
		"usr/share/doc/old": time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for name := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Directories last, their times fixed after their files were made.
	for _, d := range []string{"etc", "usr/bin", "usr/share/doc", "usr/share", "usr", "var/lib", "var", "."} {
		if err := os.Chtimes(filepath.Join(src, d), time.Time{}, time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
	}
	for name, mt := range files {
		if err := os.Chtimes(filepath.Join(src, name), time.Time{}, mt); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	fsImg := filepath.Join(dir, "root.ext4")
	ext4tartest.Mkfs(t, src, fsImg, "16M")
	disk := filepath.Join(dir, "disk.raw")
	ext4tartest.GPTDisk(t, fsImg, disk)

	want := time.Unix(newest.Unix(), 0)
	for _, img := range []string{disk, fsImg} {
		sd, err := BaseSourceDate(context.Background(), img, start)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(img), err)
		}
		if !sd.Time.Equal(want) || sd.From != "base image" || sd.Epoch() != newest.Unix() {
			t.Errorf("%s: E %v (%s), want %v", filepath.Base(img), sd.Time, sd.From, want)
		}
	}
	// An earlier start leaves the one older file.
	if sd, err := BaseSourceDate(context.Background(), disk, time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil || !sd.Time.Equal(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("start in 2021: E %v, %v; want the oldest file's 2020", sd.Time, err)
	}
	blank := filepath.Join(dir, "blank.raw")
	ext4tartest.Run(t, "truncate", "-s", "4M", blank)
	if _, err := BaseSourceDate(context.Background(), blank, start); !errors.Is(err, ErrNoSourceDate) {
		t.Errorf("a disk without ext4: %v, want ErrNoSourceDate", err)
	}
	// EachExt4: the ext4 partition (not the ESP), or the bare filesystem
	// as 0; ErrStop ends the walk with no error, another error is
	// returned.
	for img, want := range map[string]string{disk: "2", fsImg: "0", blank: ""} {
		var parts []string
		err := EachExt4(context.Background(), img, func(part int, _ *ext4tar.FS) error {
			parts = append(parts, fmt.Sprint(part))
			return ErrStop
		})
		if err != nil || strings.Join(parts, ",") != want {
			t.Errorf("%s: partitions %q, %v; want %q", filepath.Base(img), parts, err, want)
		}
	}
	boom := errors.New("boom")
	if err := EachExt4(context.Background(), disk, func(int, *ext4tar.FS) error { return boom }); err != boom {
		t.Errorf("fn's error: %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want int64
		ok   bool
		err  bool
	}{
		{nil, 0, false, false},
		{[]string{"SOURCE_DATE_EPOCH="}, 0, false, false},
		{[]string{"SOURCE_DATE_EPOCH=1700000000"}, 1700000000, true, false},
		{[]string{"SOURCE_DATE_EPOCH=0"}, 0, true, false},
		{[]string{"SOURCE_DATE_EPOCH=1700000000", "SOURCE_DATE_EPOCH=1"}, 1, true, false},
		{[]string{"SOURCE_DATE_EPOCH=yesterday"}, 0, false, true},
		{[]string{"SOURCE_DATE_EPOCH=-5"}, 0, false, true},
		{[]string{"SOURCE_DATE_EPOCH=1.5"}, 0, false, true},
	} {
		sd, ok, err := FromEnv(c.env)
		if (err != nil) != c.err || ok != c.ok || (ok && (sd.Epoch() != c.want || sd.From != SourceDateEnv)) {
			t.Errorf("%q: %+v %v %v", c.env, sd, ok, err)
		}
	}
}
