package atomicfile

import (
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
