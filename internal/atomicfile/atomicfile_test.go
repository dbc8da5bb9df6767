package atomicfile

import (
	"errors"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/imagectl/internal/testenv"
	"os"
	"path/filepath"
	"testing"
)

func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.tgz")
	f, err := Create(p, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatal("the final name exists before Commit")
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // no effect after Commit
	if b, err := os.ReadFile(p); err != nil || string(b) != "partial" {
		t.Fatalf("%q %v", b, err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode())
	}

	g, err := Create(filepath.Join(dir, "aborted"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	g.Abort()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// A Set publishes all its files or none: a failed rename takes back the
// files published before it.
func TestSet(t *testing.T) {
	dir := t.TempDir()
	var s Set
	defer s.Abort()
	if err := s.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 || entries[0].Name()[0] != '.' {
		t.Fatalf("before Commit: %v", entries)
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(b) != n {
			t.Errorf("%s: %q %v", n, b, err)
		}
	}

	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	var failing Set
	defer failing.Abort()
	if err := failing.WriteFile(filepath.Join(dir, "c"), []byte("c"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := failing.WriteFile(filepath.Join(sub, "d"), []byte("d"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(sub) // the rename of d fails
	if err := failing.Commit(); err == nil {
		t.Fatal("Commit succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("after a failed Commit: %v", entries)
	}
}

func TestReplaceKeepsMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.hcl")
	if err := os.WriteFile(p, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Replace(p, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new" {
		t.Errorf("content %q", b)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode())
	}
	if err := Replace(filepath.Join(t.TempDir(), "none"), nil); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

// A name that holds anything but a regular file is refused, and left as it
// was: as root, a rename would replace a device node (the probe replaced
// /dev/full with a regular file).
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nothing"), dangling); err != nil {
		t.Fatal(err)
	}
	toFIFO := filepath.Join(dir, "to-fifo")
	if err := os.Symlink("fifo", toFIFO); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{fifo: "a FIFO", sub: "a directory", dangling: "a symbolic link to nothing", toFIFO: "a FIFO"}
	if os.Geteuid() == 0 {
		// The null device's numbers, made here: were it replaced, only
		// this copy would be.
		null := filepath.Join(dir, "null")
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
		cases[null] = "a character device"
	}
	for p, what := range cases {
		before, _ := os.Lstat(p)
		err := WriteFile(p, []byte("x"), 0o644)
		var nr *NotRegularError
		if !errors.As(err, &nr) || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), p) {
			t.Errorf("WriteFile(%s): %v; want a refusal naming it and %q", p, err, what)
		}
		after, _ := os.Lstat(p)
		if after == nil || after.Mode() != before.Mode() {
			t.Errorf("%s changed: %v -> %v", p, before.Mode(), after)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(cases) {
		t.Errorf("left behind: %v", entries)
	}
}

// Through a link to a regular file, the target is written and the link
// kept (fmt on a linked recipe used to replace the link with a copy); the
// target keeps its mode and, as root, its owner.
func TestWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "recipe.hcl")
	if err := os.Mkdir(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(real, 4321, 4321); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.hcl")
	if err := os.Symlink("real/recipe.hcl", link); err != nil {
		t.Fatal(err)
	}
	if err := Replace(link, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is gone: %v %v", st, err)
	}
	st, err := os.Stat(real)
	if b, _ := os.ReadFile(real); err != nil || string(b) != "new" || st.Mode().Perm() != 0o640 {
		t.Fatalf("target: %q %v %v", b, st.Mode(), err)
	}
	if os.Geteuid() == 0 {
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 4321 || sys.Gid != 4321 {
			t.Errorf("owner %d:%d, want 4321:4321", sys.Uid, sys.Gid)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(real)); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// In a sticky, world-writable directory (/tmp), another user's link is not
// followed: as root it would replace whatever it names (/etc/shadow).
func TestRefusesAnotherUsersLinkInASharedDirectory(t *testing.T) {
	testenv.Root(t, "give a link to another user")
	dir := t.TempDir()
	shared := filepath.Join(dir, "tmp")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "shadow")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(shared, "v.sh")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(link, []byte("#!/bin/sh\n"), 0o755)
	if err == nil || !strings.Contains(err.Error(), "protected_symlinks") {
		t.Errorf("WriteFile through another user's link in a sticky directory: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "secret" {
		t.Errorf("the link's target was replaced: %q", b)
	}
	// Root's own link there is followed, as the kernel would.
	if err := os.Lchown(link, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new"), 0o600); err != nil {
		t.Errorf("root's own link: %v", err)
	}
}

func TestCopy(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, []byte("firmware vars"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, []byte("an older, longer copy"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Copy(dst, src, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "firmware vars" {
		t.Errorf("content %q", b)
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	if err := Copy(filepath.Join(dir, "other"), filepath.Join(dir, "none"), 0o600); !os.IsNotExist(err) {
		t.Errorf("a missing source: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); !os.IsNotExist(err) {
		t.Errorf("a failed copy left a file: %v", err)
	}
}
