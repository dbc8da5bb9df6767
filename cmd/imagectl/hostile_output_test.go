//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaas/imagectl/internal/hclkit"
)

// The tests of this file name, as a command's output, what is not a
// regular file of ours: imagectl runs as root, and replacing a device node
// or a FIFO with a regular file (--out /dev/null did so to /dev/full)
// breaks the machine it runs on.

// validate-script --out writes a regular file, or through a link to one,
// and refuses a device, a FIFO, a directory or a dangling link, leaving it
// as it was.
func TestValidateScriptOutRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.sh")
	if err := os.Symlink("nothing", dangling); err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{fifo: "a FIFO", dir: "a directory", dangling: "a symbolic link to nothing"}
	if os.Geteuid() == 0 {
		// A null device of our own: were it replaced, only this copy would be.
		null := filepath.Join(dir, "null")
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Fatal(err)
		}
		refused[null] = "a character device"
		link := filepath.Join(dir, "to-null")
		if err := os.Symlink(null, link); err != nil {
			t.Fatal(err)
		}
		refused[link] = "a character device"
	}
	manifest := "testdata/manifests/demo-0.1.0.json"
	for p, what := range refused {
		before, _ := os.Lstat(p)
		_, errs, code := imagectl(t, nil, "validate-script", manifest, "--out", p)
		if code != 1 || !strings.Contains(errs, "refusing to write "+p) || !strings.Contains(errs, what) {
			t.Errorf("--out %s: exit %d, %q; want a refusal naming it as %s", p, code, errs, what)
		}
		if after, _ := os.Lstat(p); after == nil || after.Mode() != before.Mode() {
			t.Errorf("--out %s changed it: %v -> %v", p, before.Mode(), after)
		}
	}

	// Through a link to a regular file: the target is written, the link kept.
	target := filepath.Join(dir, "validate.sh")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sh")
	if err := os.Symlink("validate.sh", link); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := imagectl(t, nil, "validate-script", manifest, "--out", link); code != 0 {
		t.Fatalf("--out through a link: exit %d %s", code, errs)
	}
	if st, _ := os.Lstat(link); st == nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", st)
	}
	if b, _ := os.ReadFile(target); !strings.HasPrefix(string(b), "#!/bin/sh") {
		t.Errorf("the link's target was not written: %.40q", b)
	}
}

// fmt rewrites a linked recipe's target and keeps the link, whether it is
// named or found in a directory.
func TestFmtKeepsLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.hcl.txt")
	if err := os.WriteFile(real, []byte("image \"x\" {\ntitle=\"x\"\n}\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "sub")
	if err := os.Mkdir(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(linked, "recipe.hcl")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{link, linked} {
		if err := os.WriteFile(real, []byte("image \"x\" {\ntitle=\"x\"\n}\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		if _, errs, code := imagectl(t, nil, "fmt", arg); code != 0 {
			t.Fatalf("fmt %s: exit %d %s", arg, code, errs)
		}
		if st, _ := os.Lstat(link); st == nil || st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("fmt %s replaced the link: %v", arg, st)
		}
		b, _ := os.ReadFile(real)
		if st, _ := os.Stat(real); !strings.Contains(string(b), `  title = "x"`) || st.Mode().Perm() != 0o640 {
			t.Errorf("fmt %s: the target is %q, mode %v", arg, b, st.Mode())
		}
	}
}

// fmt - reads standard input within the bound of every HCL input.
func TestFmtStdinBounded(t *testing.T) {
	in := &endless{limit: 64 << 20}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"fmt", "-"}, streams{in: in, out: &out, err: &errb}, nil)
	if code != 1 || !strings.Contains(errb.String(), "standard input is larger than") {
		t.Errorf("exit %d, %q", code, errb.String())
	}
	if in.read > hclkit.MaxInputSize+64<<10 {
		t.Errorf("read %d bytes of standard input; the bound is %d", in.read, hclkit.MaxInputSize)
	}
}

// endless is standard input that never ends (up to limit, so that a test
// of the old code fails rather than runs out of memory).
type endless struct{ read, limit int }

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.limit {
		return 0, io.EOF
	}
	n := min(len(p), e.limit-e.read)
	clear(p[:n])
	e.read += n
	return n, nil
}
