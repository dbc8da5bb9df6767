package hashstamp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/hashstamp"
)

const sha = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// identity is the identity of a new file, and the file's path.
func identity(t *testing.T) (hashstamp.Identity, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.tgz")
	if err := os.WriteFile(p, []byte("test"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := hashstamp.Of(f)
	if err != nil {
		t.Fatal(err)
	}
	return id, p
}

func TestRecordHoldsUntilTheFileChanges(t *testing.T) {
	id, p := identity(t)
	d := hashstamp.Dir(filepath.Join(t.TempDir(), "hashed"))
	if d.Holds(sha, id) {
		t.Fatal("holds before any record")
	}
	// Read as it was just written: not recorded.
	if ok, err := d.Record(sha, id, time.Unix(0, id.Ctime)); ok || err != nil {
		t.Fatalf("a file read in the tick it changed was recorded: %v %v", ok, err)
	}
	if d.Holds(sha, id) {
		t.Fatal("holds a record refused")
	}
	read := time.Unix(0, id.Ctime).Add(hashstamp.Settle)
	if ok, err := d.Record(sha, id, read); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	// Either form of the digest names the record.
	if !d.Holds(sha, id) || !d.Holds(strings.TrimPrefix(sha, "sha256:"), id) {
		t.Fatal("a record does not hold")
	}
	other := strings.Replace(sha, "9f", "00", 1)
	if d.Holds(other, id) {
		t.Error("holds under another digest")
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	changed, err := hashstamp.Of(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if changed == id || d.Holds(sha, changed) {
		t.Errorf("holds for a changed file: %+v, was %+v", changed, id)
	}
	if err := d.Forget(sha); err != nil || d.Holds(sha, id) {
		t.Fatalf("forget: %v, holds %v", err, d.Holds(sha, id))
	}
	if err := d.Forget(sha); err != nil {
		t.Errorf("forgetting what is not recorded: %v", err)
	}
}

// Only a record nobody but root or this user could have written holds,
// and only one that reads as a record.
func TestOnlyTrustedRecordsHold(t *testing.T) {
	id, _ := identity(t)
	d := hashstamp.Dir(t.TempDir())
	if ok, err := d.Record(sha, id, time.Unix(0, id.Ctime).Add(hashstamp.Settle)); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	rec := filepath.Join(string(d), strings.TrimPrefix(sha, "sha256:"))
	good, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rec, 0o620); err != nil {
		t.Fatal(err)
	}
	if d.Holds(sha, id) {
		t.Error("a group-writable record holds")
	}
	if err := os.Chmod(rec, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(rec, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if d.Holds(sha, id) {
			t.Error("a record of another user holds")
		}
		if err := os.Chown(rec, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string][]byte{
		"not JSON":  []byte("yes"),
		"too large": append(good[:len(good)-1], strings.Repeat(" ", 8<<10)...),
		"empty":     nil,
	} {
		if err := os.WriteFile(rec, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if d.Holds(sha, id) {
			t.Errorf("a record %s holds", name)
		}
	}
	if err := os.WriteFile(rec, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if !d.Holds(sha, id) {
		t.Error("the good record again does not hold")
	}
	if hashstamp.Dir("").Holds(sha, id) {
		t.Error("no folder holds a record")
	}
	if _, err := d.Record("not a digest", id, time.Now()); err == nil {
		t.Error("recorded under a name that is not a digest")
	}
}
