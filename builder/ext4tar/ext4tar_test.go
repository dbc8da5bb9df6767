package ext4tar

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/imagectl/builder/ext4tar/ext4tartest"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// These tests make real ext4 images with mke2fs -d from a directory the test
// fills (no mounts, no loop devices) and compare what Walk reports against
// the host kernel's view of that directory: the source tree is the oracle.
// The differential test against the appliance's tar-out of a whole system
// lives in builder/guestfs.

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		testenv.Tool(t, tool, "make deps installs e2fsprogs")
	}
}

var run = ext4tartest.Run

// mkfs makes an ext4 image of dir; opts are extra mke2fs options.
func mkfs(t *testing.T, dir, size string, opts ...string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.raw")
	ext4tartest.Mkfs(t, dir, img, size, opts...)
	return img
}

// entry is what the comparison looks at, for Walk's headers and for the
// source tree alike.
type entry struct {
	Type     byte
	Mode     int64
	UID, GID int
	Size     int64
	SHA256   string
	Link     string
	Dev      [2]int64
	Xattrs   map[string]string
	MTime    time.Time
}

func (e entry) String() string {
	return fmt.Sprintf("%c %o %d:%d size=%d sha=%.12s link=%q dev=%v mtime=%s xattrs=%q",
		e.Type, e.Mode, e.UID, e.GID, e.Size, e.SHA256, e.Link, e.Dev, e.MTime.UTC().Format(time.RFC3339Nano), e.Xattrs)
}

func walkImage(t *testing.T, img string, part int) ([]string, map[string]entry) {
	t.Helper()
	f, err := Open(img, part)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer f.Close()
	var order []string
	got := map[string]entry{}
	err = f.Walk(context.Background(), func(h *tar.Header, body io.Reader) error {
		e := entry{Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Size: h.Size, Link: h.Linkname,
			Dev: [2]int64{h.Devmajor, h.Devminor}, MTime: h.ModTime}
		if body != nil {
			hash := sha256.New()
			n, err := io.Copy(hash, body)
			if err != nil {
				return err
			}
			if n != h.Size {
				return fmt.Errorf("%s: body gave %d bytes, header says %d", h.Name, n, h.Size)
			}
			e.SHA256 = hex.EncodeToString(hash.Sum(nil))
		}
		for k, v := range h.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				if e.Xattrs == nil {
					e.Xattrs = map[string]string{}
				}
				e.Xattrs[strings.TrimPrefix(k, "SCHILY.xattr.")] = v
			}
		}
		if h.Typeflag == tar.TypeLink {
			e = entry{Type: tar.TypeLink, Link: h.Linkname}
		}
		order = append(order, h.Name)
		got[h.Name] = e
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return order, got
}

// sourceTree reads dir the way GNU tar --xattrs --numeric-owner would archive
// it, in the order Walk promises, with mtimes cut to what mke2fs -d keeps.
func sourceTree(t *testing.T, dir string) ([]string, map[string]entry) {
	t.Helper()
	var order []string
	want := map[string]entry{}
	links := map[uint64]string{}
	var visit func(p, name string)
	visit = func(p, name string) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		e := entry{Mode: int64(st.Mode & 0o7777), UID: int(st.Uid), GID: int(st.Gid),
			MTime: time.Unix(st.Mtim.Sec, 0)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = tar.TypeDir
		case unix.S_IFREG:
			e.Type, e.Size = tar.TypeReg, st.Size
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			e.SHA256 = digest.Bytes(b).Hex()
		case unix.S_IFLNK:
			e.Type = tar.TypeSymlink
			e.Link, _ = os.Readlink(p)
		case unix.S_IFCHR, unix.S_IFBLK:
			e.Type = tar.TypeChar
			if st.Mode&unix.S_IFMT == unix.S_IFBLK {
				e.Type = tar.TypeBlock
			}
			e.Dev = [2]int64{int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))}
		case unix.S_IFIFO:
			e.Type = tar.TypeFifo
		}
		if (e.Type == tar.TypeReg || e.Type == tar.TypeSymlink) && st.Nlink > 1 {
			if first, ok := links[st.Ino]; ok {
				e = entry{Type: tar.TypeLink, Link: first}
			} else {
				links[st.Ino] = name
			}
		}
		if e.Type != tar.TypeLink {
			e.Xattrs = xattrs(t, p)
		}
		order = append(order, name)
		want[name] = e
		if e.Type == tar.TypeDir {
			ents, err := os.ReadDir(p)
			if err != nil {
				t.Fatal(err)
			}
			sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
			for _, de := range ents {
				n := name + de.Name()
				if de.IsDir() {
					n += "/"
				}
				visit(filepath.Join(p, de.Name()), n)
			}
		}
	}
	visit(dir, "./")
	return order, want
}

func xattrs(t *testing.T, p string) map[string]string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil || n == 0 {
		return nil
	}
	out := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		v := make([]byte, 64<<10)
		m, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Fatalf("getxattr %s %s: %v", p, name, err)
		}
		out[name] = string(v[:m])
	}
	return out
}

func compare(t *testing.T, wantOrder []string, want map[string]entry, gotOrder []string, got map[string]entry) {
	t.Helper()
	if strings.Join(wantOrder, "\n") != strings.Join(gotOrder, "\n") {
		t.Errorf("entry order differs:\nwant %d entries %.400q\ngot  %d entries %.400q", len(wantOrder), wantOrder, len(gotOrder), gotOrder)
	}
	bad := 0
	for _, name := range wantOrder {
		w, g := want[name], got[name]
		if w.String() != g.String() {
			if bad++; bad <= 20 {
				t.Errorf("%s:\nwant %s\ngot  %s", name, w, g)
			}
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected entry %s", name)
		}
	}
}

func write(t *testing.T, p string, data []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(p, uint32(mode)); err != nil { // past the umask, with setuid bits
		t.Fatal(err)
	}
}

func setxattr(t *testing.T, p, name string, v []byte) {
	t.Helper()
	if err := unix.Lsetxattr(p, name, v, 0); err != nil {
		testenv.Missing(t, fmt.Sprintf("the test's scratch filesystem cannot hold its xattrs (%s on %s: %v); set TMPDIR to an ext4 or xfs directory", name, p, err))
	}
}

// TestWalkMatchesSourceTree covers every entry type and the cases go-diskfs
// reads wrongly on its own: sparse files (leading, inner and trailing
// holes), ACLs (ext4's on-disk format), empty xattr values, a file
// capability, a long symlink, hard links, devices, a directory large enough
// for an htree, odd owners and setuid bits.
func TestWalkMatchesSourceTree(t *testing.T) {
	need(t, "mke2fs")
	testenv.Root(t, "set owners, devices and security xattrs")
	src := t.TempDir()
	write(t, src+"/usr/bin/ping", bytes.Repeat([]byte("ELF"), 5000), 0o755)
	setxattr(t, src+"/usr/bin/ping", "security.capability", []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	write(t, src+"/usr/bin/sudo", []byte("sudo"), 0o4755)
	run(t, "ln", src+"/usr/bin/sudo", src+"/usr/bin/sudoedit")
	write(t, src+"/etc/motd", []byte("hello\n"), 0o644)
	setxattr(t, src+"/etc/motd", "user.empty", nil)
	setxattr(t, src+"/etc/motd", "user.checksum", []byte("abc"))
	setxattr(t, src+"/etc/motd", "trusted.big", bytes.Repeat([]byte("x"), 1000)) // into the EA block
	write(t, src+"/srv/acl", []byte("acl"), 0o640)
	// user::rw- user:1000:r-- group::r-- mask::r-- other::--- in getxattr's
	// format; mke2fs stores it in ext4's shorter on-disk form.
	acl := []byte{2, 0, 0, 0}
	for _, e := range [][3]uint32{{aclUserObj, 6, ^uint32(0)}, {aclUser, 4, 1000}, {aclGroupObj, 4, ^uint32(0)}, {aclMask, 4, ^uint32(0)}, {aclOther, 0, ^uint32(0)}} {
		acl = binary.LittleEndian.AppendUint16(acl, uint16(e[0]))
		acl = binary.LittleEndian.AppendUint16(acl, uint16(e[1]))
		acl = binary.LittleEndian.AppendUint32(acl, e[2])
	}
	setxattr(t, src+"/srv/acl", "system.posix_acl_access", acl)
	os.MkdirAll(src+"/srv/shared", 0o2775)
	setxattr(t, src+"/srv/shared", "system.posix_acl_default", acl)

	// Sparse files: mke2fs -d keeps their holes.
	sparse := func(name string, size int64, at ...int64) {
		f, err := os.Create(src + "/var/" + name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, off := range at {
			if _, err := f.WriteAt(bytes.Repeat([]byte{byte(off)}, 5000), off); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(src+"/var", 0o755)
	sparse("leading-hole", 3<<20, 2<<20)
	sparse("inner-hole", 3<<20, 0, 2<<20)
	sparse("trailing-hole", 3<<20, 0)
	sparse("all-hole", 1<<20)

	os.Symlink("usr/bin", src+"/bin")
	long := "/" + strings.Repeat("long-target/", 10) + "end"
	os.Symlink(long, src+"/srv/long-link")
	if err := unix.Mknod(src+"/dev-null", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(src+"/dev-big", unix.S_IFBLK|0o660, int(unix.Mkdev(259, 70000))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(src+"/fifo", 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, src+"/home/u/file", []byte("owned"), 0o600)
	os.Chown(src+"/home/u/file", 70000, 1234)
	os.Chown(src+"/home/u", 70000, 1234)
	os.MkdirAll(src+"/boot/efi", 0o700)
	for i := range 3000 {
		write(t, fmt.Sprintf("%s/usr/share/big/file-%05d", src, i), []byte(fmt.Sprint(i)), 0o644)
	}
	old := time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)
	os.Chtimes(src+"/etc/motd", old, old)
	future := time.Date(2150, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(src+"/usr/bin/sudo", future, future)

	img := mkfs(t, src, "64M")
	// mke2fs -d keeps 32-bit whole seconds only: give one file nanoseconds
	// and another a time past 2106 (the extra field holds epoch bits in its
	// low 2 bits, nanoseconds above them).
	run(t, "debugfs", "-w", "-R", fmt.Sprintf("set_inode_field /etc/motd mtime_extra %d", 123456789<<2), img)
	run(t, "debugfs", "-w", "-R", "set_inode_field /usr/bin/sudo mtime_extra 1", img)

	wantOrder, want := sourceTree(t, src)
	m := want["./etc/motd"]
	m.MTime = m.MTime.Add(123456789)
	want["./etc/motd"] = m
	// The lost+found mke2fs adds is not in the source.
	gotOrder, got := walkImage(t, img, 0)
	lf := "./lost+found/"
	if _, ok := got[lf]; !ok {
		t.Fatal("no ./lost+found/ in the image")
	}
	delete(got, lf)
	gotOrder = removeString(gotOrder, lf)
	// Nor is its root directory's time: mke2fs sets it.
	r := want["./"]
	r.MTime = got["./"].MTime
	want["./"] = r
	compare(t, wantOrder, want, gotOrder, got)
}

func removeString(s []string, x string) []string {
	out := s[:0]
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// TestOpenPartition reads the filesystem from a partition of a GPT disk,
// as the builder does with the guest's root.
func TestOpenPartition(t *testing.T) {
	need(t, "mke2fs", "sgdisk")
	src := t.TempDir()
	write(t, src+"/etc/hostname", []byte("guest\n"), 0o644)
	fsImg := mkfs(t, src, "16M")
	disk := filepath.Join(t.TempDir(), "disk.raw")
	// Partition 1 is a small ESP-like filler; the root is partition 2.
	ext4tartest.GPTDisk(t, fsImg, disk)
	order, got := walkImage(t, disk, 2)
	if got["./etc/hostname"].SHA256 == "" || len(order) < 3 {
		t.Fatalf("partition 2 read as %q", order)
	}
	if parts, err := Partitions(disk); err != nil || fmt.Sprint(parts) != "[1 2]" {
		t.Fatalf("Partitions: %v, %v; want [1 2]", parts, err)
	}
	if parts, err := Partitions(fsImg); err != nil || len(parts) != 0 {
		t.Fatalf("Partitions of a bare filesystem: %v, %v; want none", parts, err)
	}
	// WalkHeaders gives Walk's headers, in Walk's order, without contents.
	f, err := Open(disk, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var headers []string
	if err := f.WalkHeaders(context.Background(), func(h *tar.Header) error {
		if e := got[h.Name]; e.Size != h.Size || !e.MTime.Equal(h.ModTime) || e.Mode != h.Mode {
			t.Errorf("WalkHeaders: %s %+v, Walk: %+v", h.Name, h, e)
		}
		headers = append(headers, h.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(headers) != fmt.Sprint(order) {
		t.Errorf("WalkHeaders' order %q, Walk's %q", headers, order)
	}
	if _, err := Open(disk, 3); err == nil || !strings.Contains(err.Error(), "no partition 3") {
		t.Fatalf("Open of a missing partition: %v", err)
	}
	if _, err := Open(disk, 1); !IsUnsupported(err) {
		t.Fatalf("Open of a non-ext4 partition: %v, want an UnsupportedError", err)
	}
	if err := ProbeFeatures(disk, 2); err != nil {
		t.Fatalf("ProbeFeatures of partition 2: %v", err)
	}
	if err := ProbeFeatures(disk, 1); !IsUnsupported(err) {
		t.Fatalf("ProbeFeatures of a non-ext4 partition: %v, want an UnsupportedError", err)
	}
	if err := ProbeFeatures(disk, 3); err == nil || !strings.Contains(err.Error(), "no partition 3") {
		t.Fatalf("ProbeFeatures of a missing partition: %v", err)
	}
}

// TestRefusals: each filesystem the host-side reader does not support is
// refused with a reason, before anything is read, so the build packs it
// through the appliance instead. ProbeFeatures refuses the same features
// and passes what a mounted filesystem's state gives (a build asks it
// while the appliance still has the filesystem mounted).
func TestRefusals(t *testing.T) {
	need(t, "mke2fs", "debugfs")
	src := t.TempDir()
	write(t, src+"/etc/hostname", []byte("guest\n"), 0o644)
	write(t, src+"/tiny", []byte("x"), 0o644)
	cases := []struct {
		name    string
		opts    []string
		debugfs string // a debugfs -w request that patches the image
		want    string
		state   bool // the filesystem's state, not its features: ProbeFeatures passes it
	}{
		{name: "inline data", opts: []string{"-O", "inline_data"}, want: "inline_data"},
		{name: "128-byte inodes", opts: []string{"-I", "128"}, want: "128-byte inodes"},
		{name: "no metadata_csum", opts: []string{"-O", "^metadata_csum"}, want: "metadata_csum"},
		{name: "no extents", opts: []string{"-O", "^extent,^64bit"}, want: "no extents"},
		{name: "bigalloc", opts: []string{"-O", "bigalloc", "-C", "16384"}, want: "bigalloc"},
		{name: "meta_bg", opts: []string{"-O", "meta_bg,^resize_inode"}, want: "meta_bg"},
		{name: "not cleanly unmounted", debugfs: "ssv state 0", want: "not cleanly unmounted", state: true},
		{name: "journal needs recovery", debugfs: "feature needs_recovery", want: "journal needs recovery", state: true},
		{name: "orphans", debugfs: "ssv last_orphan 12", want: "orphaned inodes", state: true},
		{name: "errors", debugfs: "ssv state 3", want: "filesystem errors", state: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := mkfs(t, src, "32M", c.opts...)
			if c.debugfs != "" {
				run(t, "debugfs", "-w", "-R", c.debugfs, img)
			}
			f, err := Open(img, 0)
			if err == nil {
				f.Close()
				t.Fatal("Open accepted it")
			}
			var u *UnsupportedError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v; want an UnsupportedError mentioning %q", err, c.want)
			}
			err = ProbeFeatures(img, 0)
			switch {
			case c.state && err != nil:
				t.Errorf("ProbeFeatures: %v; want nil (state, not a feature)", err)
			case !c.state && (!IsUnsupported(err) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("ProbeFeatures: %v; want an UnsupportedError mentioning %q", err, c.want)
			}
		})
	}
	t.Run("supported", func(t *testing.T) {
		if err := ProbeFeatures(mkfs(t, src, "32M"), 0); err != nil {
			t.Fatalf("ProbeFeatures of a default ext4: %v", err)
		}
	})
	t.Run("not ext4", func(t *testing.T) {
		img := filepath.Join(t.TempDir(), "zero.raw")
		run(t, "truncate", "-s", "4M", img)
		if _, err := Open(img, 0); !IsUnsupported(err) {
			t.Fatalf("Open of zeros: %v", err)
		}
	})
	t.Run("missing image", func(t *testing.T) {
		_, err := Open(filepath.Join(t.TempDir(), "nope.raw"), 0)
		if !errors.Is(err, fs.ErrNotExist) || IsUnsupported(err) {
			t.Fatalf("Open of a missing file: %v", err)
		}
	})
}

// TestWalkCancel stops between entries.
func TestWalkCancel(t *testing.T) {
	need(t, "mke2fs")
	src := t.TempDir()
	for i := range 50 {
		write(t, fmt.Sprintf("%s/f%02d", src, i), []byte("x"), 0o644)
	}
	f, err := Open(mkfs(t, src, "16M"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = f.Walk(ctx, func(_ *tar.Header, body io.Reader) error {
		if n++; n == 5 {
			cancel()
		}
		if body != nil {
			_, err := io.Copy(io.Discard, body)
			return err
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 5 {
		t.Fatalf("Walk after cancel: %v after %d entries", err, n)
	}
}
