package tgztest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"testing"
)

// Entry is one tar entry: a regular file unless Type says otherwise.
type Entry struct {
	Name string
	// Type is a tar type flag; zero is a regular file.
	Type byte
	// Body is a regular file's content.
	Body string
	// Link is a symlink's or hard link's target.
	Link string
}

// File is a regular file of mode 0644.
func File(name, body string) Entry { return Entry{Name: name, Type: tar.TypeReg, Body: body} }

// Dir is a directory of mode 0755.
func Dir(name string) Entry { return Entry{Name: name, Type: tar.TypeDir} }

// Symlink is a symbolic link to target.
func Symlink(name, target string) Entry {
	return Entry{Name: name, Type: tar.TypeSymlink, Link: target}
}

// Hardlink is a hard link to the entry named target.
func Hardlink(name, target string) Entry { return Entry{Name: name, Type: tar.TypeLink, Link: target} }

// Bytes packs entries as a gzip'd tar: directories of mode 0755, anything
// else 0644, a character device as 1:3 (/dev/null's numbers). The tar
// writer picks the format each header needs (PAX for a name USTAR cannot
// hold).
func Bytes(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.Name, Typeflag: typ, Linkname: e.Link, Mode: 0o644}
		switch typ {
		case tar.TypeReg:
			h.Size = int64(len(e.Body))
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeChar:
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tgztest: entry %q: %v", e.Name, err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatalf("tgztest: entry %q: %v", e.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Write writes Bytes(entries) to path (mode 0644) and returns path.
func Write(t testing.TB, path string, entries ...Entry) string {
	t.Helper()
	if err := os.WriteFile(path, Bytes(t, entries...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
