package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/store"
)

// The racks are compared with a stored tgz only when no one but its owner
// can change it, and a change while they were compared is an error.
func TestLocalTarballOnlyWhenItsOwnerAloneCanChangeIt(t *testing.T) {
	dir := t.TempDir()
	tgz := filepath.Join(dir, "x.tgz")
	if err := os.WriteFile(tgz, []byte("the version's bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := &store.Version{Tarball: tgz}
	l := localTarball(v)
	if l == nil {
		t.Fatal("a tgz only its owner can write was not used")
	}
	if err := l.unchanged(); err != nil {
		t.Errorf("unchanged: %v", err)
	}
	// A write changes its times (a second later: a clock of coarse
	// ticks could hide it).
	later := time.Now().Add(time.Second)
	if err := os.WriteFile(tgz, []byte("other bytes, same size"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tgz, later, later); err != nil {
		t.Fatal(err)
	}
	if err := l.unchanged(); err == nil || !strings.Contains(err.Error(), "changed meanwhile") {
		t.Errorf("after a write: %v", err)
	}
	l.Close()

	for name, mode := range map[string]os.FileMode{"group-writable": 0o664, "world-writable": 0o646} {
		if err := os.Chmod(tgz, mode); err != nil {
			t.Fatal(err)
		}
		if l := localTarball(v); l != nil {
			l.Close()
			t.Errorf("a %s tgz was used", name)
		}
	}
	if err := os.Chmod(tgz, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tgz, filepath.Join(dir, "another-name")); err != nil {
		t.Fatal(err)
	}
	if l := localTarball(v); l != nil {
		l.Close()
		t.Error("a tgz with another link was used")
	}
	if l := localTarball(&store.Version{}); l != nil {
		t.Error("a version with no local tgz gave one")
	}
}
