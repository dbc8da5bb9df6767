package pack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/ext4tar/ext4tartest"
	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// rootTar builds a tar stream like the appliance's tar-out: every entry type,
// xattrs (a file capability), user/group names and atimes that must go.
func rootTar(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(1700000000, 123456789)
	add := func(h *tar.Header, body string) {
		h.ModTime, h.AccessTime, h.Uname, h.Gname, h.Format = mt, time.Now(), "root", "root", tar.FormatPAX
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if body != "" {
			tw.Write([]byte(body))
		}
	}
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}, "")
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "./usr/bin/", Mode: 0o755}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/ping", Mode: 0o755,
		PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00", "atime": "1"}}, "ELF...")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/sudo", Mode: 0o4755, Uid: 0, Gid: 0}, "sudo")
	add(&tar.Header{Typeflag: tar.TypeLink, Name: "./usr/bin/sudoedit", Linkname: "./usr/bin/sudo"}, "")
	add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "./bin", Linkname: "usr/bin"}, "")
	add(&tar.Header{Typeflag: tar.TypeChar, Name: "./dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}, "")
	add(&tar.Header{Typeflag: tar.TypeFifo, Name: "./run/fifo", Mode: 0o600}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./var/lib/x", Mode: 0o640, Uid: 105, Gid: 110, Uname: "netdata"}, "x")
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "./boot/efi/", Mode: 0o700}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./boot/efi/EFI/debian/grubx64.efi", Mode: 0o700}, "efi")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "./boot/vmlinuz", Mode: 0o644}, "kernel")
	tw.Close()
	return buf.Bytes()
}

func TestRepack(t *testing.T) {
	in := rootTar(t)
	var a, b bytes.Buffer
	ra, err := Repack(context.Background(), bytes.NewReader(in), &a, 6, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Repack(context.Background(), bytes.NewReader(in), &b, 6, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("packing the same stream twice gave different bytes")
	}
	if ra.SHA256 != digest.Bytes(a.Bytes()).Hex() || ra.Size != int64(a.Len()) {
		t.Errorf("result %+v does not describe the output", ra)
	}
	zr, err := gzip.NewReader(&a)
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header varies: %v %q", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	got := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if h.Uname != "" || h.Gname != "" || !h.AccessTime.IsZero() {
			t.Errorf("%s keeps names or atime: %+v", h.Name, h)
		}
		if strings.HasPrefix(h.Name, "./boot/efi") {
			t.Errorf("%s is under ./boot/efi", h.Name)
		}
	}
	if ra.Entries != len(got) || len(got) != 10 {
		t.Errorf("%d entries, result says %d", len(got), ra.Entries)
	}
	if h := got["./usr/bin/ping"]; h == nil || h.PAXRecords["SCHILY.xattr.security.capability"] == "" || h.PAXRecords["atime"] != "" {
		t.Errorf("ping: %+v", h)
	}
	if h := got["./usr/bin/sudo"]; h.Mode != 0o4755 {
		t.Errorf("sudo mode %o", h.Mode)
	}
	if h := got["./usr/bin/sudoedit"]; h.Typeflag != tar.TypeLink || h.Linkname != "./usr/bin/sudo" {
		t.Errorf("hard link: %+v", h)
	}
	if h := got["./dev/null"]; h.Typeflag != tar.TypeChar || h.Devmajor != 1 || h.Devminor != 3 {
		t.Errorf("device: %+v", h)
	}
	if h := got["./var/lib/x"]; h.Uid != 105 || h.Gid != 110 || !h.ModTime.Equal(time.Unix(1700000000, 123456789)) {
		t.Errorf("owner or mtime lost: %+v", h)
	}
}

func TestRepackCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Repack(ctx, bytes.NewReader(rootTar(t)), io.Discard, 6, time.Time{}); err == nil {
		t.Error("a cancelled pack succeeded")
	}
}

func BenchmarkRepack(b *testing.B) {
	in := rootTar(b)
	for b.Loop() {
		if _, err := Repack(context.Background(), bytes.NewReader(in), io.Discard, 6, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHostUnpackable(t *testing.T) {
	root := guest.Mount{Point: "/", Device: "/dev/sda1", Partition: 1, Type: "ext4"}
	esp := guest.Mount{Point: "/boot/efi", Device: "/dev/sda15", Partition: 15, Type: "vfat"}
	for _, c := range []struct {
		mounts []guest.Mount
		want   string
	}{
		{[]guest.Mount{root, esp}, ""},
		{[]guest.Mount{root}, ""},
		{[]guest.Mount{{Point: "/", Device: "/dev/sda", Partition: 0, Type: "ext4"}}, ""},
		{nil, "not known"},
		{[]guest.Mount{{Point: "/", Device: "/dev/mapper/vg-root", Partition: -1, Type: "ext4"}}, "not on a partition"},
		{[]guest.Mount{{Point: "/", Device: "/dev/sda1", Partition: 1, Type: "xfs"}}, "xfs, not ext4"},
		{[]guest.Mount{root, esp, {Point: "/var", Device: "/dev/sda3", Partition: 3, Type: "ext4"}}, "mounts /dev/sda3 on /var"},
	} {
		got := hostUnpackable(c.mounts)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("hostUnpackable(%+v) = %q, want %q", c.mounts, got, c.want)
		}
	}
}

// TestPackRelaunchesForALaterRefusal: a filesystem whose features the host
// reader takes but one of whose inodes it refuses (here a file flagged
// compressed, which no probe of the superblock sees) is packed through a
// new appliance session in auto mode, saying why, and refused in host
// mode; neither leaves a tgz behind. The session is this test's error: no
// appliance is launched.
func TestPackRelaunchesForALaterRefusal(t *testing.T) {
	src := oneFileTree(t)
	img := filepath.Join(t.TempDir(), "root.ext4")
	ext4tartest.Mkfs(t, src, img, "16M")
	ext4tartest.Run(t, "debugfs", "-w", "-R", "sif /f flags 0x80004", img) // extents | COMPR
	mounts := []guest.Mount{{Point: "/", Device: "/dev/sda", Partition: 0, Type: "ext4"}}
	errNoAppliance := errors.New("no appliance in this test")
	for _, mode := range []string{"auto", "host"} {
		t.Run(mode, func(t *testing.T) {
			var logs []string
			reopened := 0
			p := Root{Mode: mode, Disk: img, Level: 1, Log: func(s string) { logs = append(logs, s) },
				Reopen: func() (guest.Session, error) { reopened++; return nil, errNoAppliance }}
			tgz := filepath.Join(t.TempDir(), "out.tgz")
			_, _, _, err := p.Pack(context.Background(), nil, mounts, tgz)
			switch mode {
			case "auto":
				said := strings.Join(logs, "\n")
				if !errors.Is(err, errNoAppliance) || reopened != 1 || !strings.Contains(said, "launching it again") || !strings.Contains(said, "cannot read f on the host") {
					t.Errorf("got %v, %d reopens, logs %q; want the appliance launched again, saying why", err, reopened, said)
				}
			case "host":
				if err == nil || !strings.Contains(err.Error(), "packing the root filesystem on the host") || reopened != 0 {
					t.Errorf("got %v, %d reopens; want a refusal and no appliance", err, reopened)
				}
			}
			if entries, _ := os.ReadDir(filepath.Dir(tgz)); len(entries) > 0 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}
}

// TestHostRefusal: what a build that must pack on the host checks right
// after the appliance starts. The layout and the filesystem's features
// refuse at once; an inode the reader refuses is seen only when packing,
// so the probe passes it.
func TestHostRefusal(t *testing.T) {
	src := oneFileTree(t)
	dir := t.TempDir()
	good, noCsum, compressed := filepath.Join(dir, "good.ext4"), filepath.Join(dir, "nocsum.ext4"), filepath.Join(dir, "compressed.ext4")
	ext4tartest.Mkfs(t, src, good, "16M")
	ext4tartest.Mkfs(t, src, noCsum, "16M", "-O", "^metadata_csum")
	ext4tartest.Mkfs(t, src, compressed, "16M")
	ext4tartest.Run(t, "debugfs", "-w", "-R", "sif /f flags 0x80004", compressed) // extents | COMPR
	whole := []guest.Mount{{Point: "/", Device: "/dev/sda", Partition: 0, Type: "ext4"}}
	for _, c := range []struct {
		disk   string
		mounts []guest.Mount
		want   string
	}{
		{good, whole, ""},
		{compressed, whole, ""},
		{noCsum, whole, "metadata_csum"},
		{good, []guest.Mount{{Point: "/", Device: "/dev/sda", Partition: 0, Type: "xfs"}}, "xfs, not ext4"},
	} {
		err := HostRefusal(c.disk, c.mounts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want no refusal", filepath.Base(c.disk), err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--packer host")):
			t.Errorf("%s: %v, want a refusal naming %q and the packer", filepath.Base(c.disk), err, c.want)
		}
	}
}

// oneFileTree is a directory holding one small file, f, for mke2fs -d;
// the tests that use it also need debugfs.
func oneFileTree(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"mke2fs", "debugfs"} {
		testenv.Tool(t, tool, "make deps installs e2fsprogs")
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}
