package firstboot

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/ext4tar"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestScriptInAChroot runs a generated script for a tiny recipe (a small
// package, an optional one the archive lacks, a file, a service disabled,
// the apt cache cleaned) in a chroot of the project's Debian base image,
// unpacked with builder/ext4tar, with apt reaching the base's own archive:
// dpkg then has the package, the file is there with its mode, the unit is
// disabled, the result line counts the package's archive, and a rerun does
// nothing again.
func TestScriptInAChroot(t *testing.T) {
	vars := testbase.Vars(t)
	testenv.Root(t, "chroot into the base image's root filesystem")
	qemuImg := testenv.Tool(t, "qemu-img", "apt-get install qemu-utils")
	b, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^base_image\s*=\s*"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s names no base_image", vars)
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	if out, err := exec.Command(qemuImg, "convert", "-O", "raw", string(m[1]), raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	root := filepath.Join(dir, "root")
	unpack(t, raw, root)
	os.Remove(raw)

	const unit = "e2scrub_reap.service"
	wants := filepath.Join(root, "etc/systemd/system/multi-user.target.wants", unit)
	if _, err := os.Lstat(wants); err != nil {
		t.Fatalf("the base image does not enable %s: %v", unit, err)
	}
	if err := os.Remove(filepath.Join(root, "etc/resolv.conf")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	resolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/resolv.conf"), resolv, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mnt := range [][]string{{"-t", "proc", "proc", filepath.Join(root, "proc")}, {"--bind", "/dev", filepath.Join(root, "dev")}} {
		if out, err := exec.Command("mount", mnt...).CombinedOutput(); err != nil {
			t.Fatalf("mount %s: %v: %s", strings.Join(mnt, " "), err, out)
		}
		target := mnt[len(mnt)-1]
		t.Cleanup(func() { exec.Command("umount", "-l", target).Run() })
	}

	list := []steps.Step{
		steps.Packages{Packages: []string{"hello"}, NoRecommends: true},
		steps.Packages{Packages: []string{"no-such-package-imagectl-firstboot"}, Optional: true, NoRecommends: true},
		file("/etc/imagectl-firstboot/it's here", "first boot\n"),
		steps.Services{Disable: []string{unit}},
		steps.Cleanup{Actions: steps.DefaultCleanup},
	}
	script, err := scriptBytes(Script(context.Background(), layerOf(list...), sampleManifest(), Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "firstboot.sh"), script, 0o700); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		t.Helper()
		cmd := exec.Command("chroot", root, "/bin/sh", "/firstboot.sh")
		cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the script failed: %v:\n%s", err, out)
		}
		return string(out)
	}
	// Another apt holds the lists and dpkg locks when the script starts
	// (apt-daily, unattended-upgrades, cloud-init at a first boot): the
	// script waits for them rather than failing.
	release := holdLocks(t, filepath.Join(root, "var/lib/apt/lists/lock"), filepath.Join(root, "var/lib/dpkg/lock-frontend"), filepath.Join(root, "var/lib/dpkg/lock"))
	time.AfterFunc(8*time.Second, release)
	out := run()
	release()
	t.Logf("the script's output:\n%s", out)
	if !strings.Contains(out, "apt's lists are locked by another apt: waiting") {
		t.Errorf("the script did not meet the held lock:\n%s", out)
	}
	res := resultRE.FindStringSubmatch(out)
	if res == nil || !strings.HasPrefix(res[1], "status=ok steps=5 ran=5 already_done=0 not_at_first_boot=0 ") ||
		!strings.Contains(res[1], " missing_optional=no-such-package-imagectl-firstboot reboot_required=no ") {
		t.Fatalf("result %q:\n%s", res, out)
	}
	fields := map[string]int64{}
	for _, f := range strings.Fields(res[1]) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	// hello's archive is some 50 kB; the indexes some MB.
	if fields["archive_bytes"] < 10000 || fields["index_bytes"] <= 0 || fields["download_bytes"] != fields["archive_bytes"]+fields["index_bytes"] {
		t.Errorf("download counts %v:\n%s", fields, out)
	}
	dpkg, err := exec.Command("chroot", root, "dpkg-query", "-W", "-f=${db:Status-Abbrev}", "hello").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(dpkg), "ii") {
		t.Errorf("dpkg -s hello: %v %s", err, dpkg)
	}
	f := filepath.Join(root, "etc/imagectl-firstboot/it's here")
	if got, err := os.ReadFile(f); err != nil || string(got) != "first boot\n" {
		t.Errorf("the file: %v %q", err, got)
	}
	if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode: %v", err)
	}
	if _, err := os.Lstat(wants); !os.IsNotExist(err) {
		t.Errorf("%s is still enabled: %v", unit, err)
	}
	// Services were held while apt ran, and are not held after.
	if _, err := os.Lstat(filepath.Join(root, "usr/sbin/policy-rc.d")); !os.IsNotExist(err) {
		t.Errorf("the script left a policy-rc.d: %v", err)
	}
	if !strings.Contains(out, "step=5/5 partly: not on a live host: machine-id: ") {
		t.Errorf("the clean-up does not say what it left:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/machine-id")); err != nil {
		t.Errorf("the clean-up touched what a live host keeps: %v", err)
	}
	out = run()
	if res := resultRE.FindStringSubmatch(out); res == nil || !strings.HasPrefix(res[1], "status=ok steps=5 ran=0 already_done=5 not_at_first_boot=0 download_bytes=0 ") {
		t.Errorf("rerun: %q:\n%s", res, out)
	}
}

// holdLocks takes the fcntl write lock apt takes on each file (as another
// apt would hold it) and returns what releases them (once).
func holdLocks(t *testing.T, paths ...string) func() {
	t.Helper()
	var files []*os.File
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}); err != nil {
			t.Fatalf("locking %s: %v", p, err)
		}
		files = append(files, f)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, f := range files {
				f.Close()
			}
		})
	}
}

// unpack writes the ext4 root filesystem (partition 1) of a raw disk into
// dir: files, directories, symbolic and hard links with their modes and
// owners.
func unpack(t *testing.T, raw, dir string) {
	t.Helper()
	fsys, err := ext4tar.Open(raw, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	err = fsys.Walk(context.Background(), func(hdr *tar.Header, body io.Reader) error {
		p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(hdr.Name, "./")))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			return os.Symlink(hdr.Linkname, p)
		case tar.TypeLink:
			return os.Link(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(hdr.Linkname, "./"))), p)
		default:
			return nil // devices, FIFOs: a chroot needs none of the image's
		}
		if err := os.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
			return err
		}
		return os.Chmod(p, fsmode.FromUnix(uint32(hdr.Mode)))
	})
	if err != nil {
		t.Fatalf("unpacking %s: %v", raw, err)
	}
}
