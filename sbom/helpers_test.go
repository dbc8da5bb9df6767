package sbom

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// entry is one tar entry of a test tgz: a regular file unless typ says
// otherwise (link is a symlink's or hard link's target).
type entry struct {
	name string
	typ  byte
	body string
	link string
}

func reg(name, body string) entry       { return entry{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) entry             { return entry{name: name, typ: tar.TypeDir} }
func symlink(name, target string) entry { return entry{name: name, typ: tar.TypeSymlink, link: target} }
func hardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target}
}

// tgzBytes packs entries as a gzip tar.
func tgzBytes(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644}
		switch e.typ {
		case tar.TypeReg:
			h.Size = int64(len(e.body))
		case tar.TypeDir:
			h.Mode = 0o755
		case tar.TypeChar:
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
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

// writeTgz writes a test tgz into a temporary directory.
func writeTgz(t testing.TB, entries ...entry) string {
	t.Helper()
	return writeFile(t, "image.tgz", tgzBytes(t, entries...))
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// hashed is the File Scan should make of content at path p.
func hashed(p, content string) File {
	s1 := sha1.Sum([]byte(content))
	s256 := sha256.Sum256([]byte(content))
	return File{Path: p, SHA1: hex.EncodeToString(s1[:]), SHA256: hex.EncodeToString(s256[:]), Size: int64(len(content))}
}
