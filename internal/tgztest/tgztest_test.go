package tgztest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestBytesReadsBack(t *testing.T) {
	entries := []Entry{Dir("./"), File("./etc/hostname", "demo\n"), {Name: "./plain", Body: "x"}, Symlink("./l", "etc/hostname"),
		Hardlink("./h", "./etc/hostname"), {Name: "./dev/null", Type: tar.TypeChar}, File("./\x1b[2J\u202e", "")}
	b := Bytes(t, entries...)
	if !bytes.Equal(b, Bytes(t, entries...)) {
		t.Error("the same entries made other bytes")
	}
	p := Write(t, filepath.Join(t.TempDir(), "x.tgz"), entries...)
	if fb, err := os.ReadFile(p); err != nil || !bytes.Equal(fb, b) {
		t.Fatalf("Write wrote other bytes than Bytes: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for i, want := range entries {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		typ, mode := want.Type, int64(0o644)
		if typ == 0 {
			typ = tar.TypeReg
		}
		if typ == tar.TypeDir {
			mode = 0o755
		}
		body, _ := io.ReadAll(tr)
		if h.Name != want.Name || h.Typeflag != typ || h.Linkname != want.Link || h.Mode != mode || string(body) != want.Body {
			t.Errorf("entry %d: got %q type %c link %q mode %o body %q, want %+v", i, h.Name, h.Typeflag, h.Linkname, h.Mode, body, want)
		}
		if typ == tar.TypeChar && (h.Devmajor != 1 || h.Devminor != 3) {
			t.Errorf("character device %d:%d, want 1:3", h.Devmajor, h.Devminor)
		}
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("after the entries: %v, want EOF", err)
	}
}
