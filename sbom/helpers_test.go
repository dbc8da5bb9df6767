package sbom

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/internal/tgztest"
)

// The entries of a test tgz, packed by internal/tgztest.
type entry = tgztest.Entry

var (
	reg      = tgztest.File
	dir      = tgztest.Dir
	symlink  = tgztest.Symlink
	hardlink = tgztest.Hardlink
	tgzBytes = tgztest.Bytes
)

// writeTgz writes a test tgz into a temporary directory.
func writeTgz(t testing.TB, entries ...entry) string {
	t.Helper()
	return tgztest.Write(t, filepath.Join(t.TempDir(), "image.tgz"), entries...)
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
