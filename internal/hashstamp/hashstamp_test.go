package hashstamp_test

import (
	"os"
	"path/filepath"
	"slices"
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
	if d.Holds(strings.Replace(sha, "9f", "00", 1), id) {
		t.Error("holds under another digest")
	}
	// Times set by another machine's clock (NFS) are not recorded.
	nfs := id
	nfs.FSType = 0x6969
	if ok, err := hashstamp.Dir(t.TempDir()).Record(sha, nfs, read); ok || err != nil {
		t.Errorf("a file on NFS was recorded: %v %v", ok, err)
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
	// Under another digest's name, through a link, or in a folder
	// others may write: none holds.
	other := strings.Replace(strings.TrimPrefix(sha, "sha256:"), "9f", "00", 1)
	if err := os.Rename(rec, filepath.Join(string(d), other)); err != nil {
		t.Fatal(err)
	}
	if d.Holds(other, id) {
		t.Error("a record renamed to another digest holds")
	}
	if err := os.Symlink(other, rec); err != nil {
		t.Fatal(err)
	}
	if d.Holds(sha, id) {
		t.Error("a record through a link holds")
	}
	if err := os.Remove(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(string(d), other), rec); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(string(d), 0o777); err != nil {
		t.Fatal(err)
	}
	if d.Holds(sha, id) {
		t.Error("a record in a world-writable folder holds")
	}
	if err := os.Chmod(string(d), 0o700); err != nil {
		t.Fatal(err)
	}
	if !d.Holds(sha, id) {
		t.Error("the record put back does not hold")
	}
	moved := id
	moved.Path += ".old"
	if d.Holds(sha, moved) {
		t.Error("a record holds for a file opened by another path")
	}
	if hashstamp.Dir("").Holds(sha, id) {
		t.Error("no folder holds a record")
	}
	if _, err := d.Record("not a digest", id, time.Now()); err == nil {
		t.Error("recorded under a name that is not a digest")
	}
}

// recordNew writes a file and records it, settled.
func recordNew(t *testing.T, d hashstamp.Dir, sha string) string {
	t.Helper()
	id, p := identity(t)
	if ok, err := d.Record(sha, id, time.Unix(0, id.Ctime).Add(hashstamp.Settle)); !ok || err != nil {
		t.Fatalf("record: %v %v", ok, err)
	}
	return p
}

// A record is current while its file is unchanged; Sweep removes the
// records of files removed or changed since, and old leftovers that are not
// records, and keeps the current records and a write that may be in
// progress.
func TestListAndSweep(t *testing.T) {
	d := hashstamp.Dir(filepath.Join(t.TempDir(), "hashed"))
	if es, err := d.List(); err != nil || len(es) != 0 {
		t.Fatalf("a folder not made yet: %v %v", es, err)
	}
	if rm, freed, err := d.Sweep(); err != nil || len(rm) != 0 || freed != 0 {
		t.Fatalf("sweeping a folder not made yet: %v %d %v", rm, freed, err)
	}
	shas := []string{
		"sha256:" + strings.Repeat("1", 64), // kept
		"sha256:" + strings.Repeat("2", 64), // its file removed
		"sha256:" + strings.Repeat("3", 64), // its file changed
	}
	var files []string
	for _, s := range shas {
		files = append(files, recordNew(t, d, s))
	}
	if err := os.Remove(files[1]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[2], []byte("tess"), 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := d.List()
	if err != nil || len(es) != 3 {
		t.Fatalf("listed %+v, %v", es, err)
	}
	for i, e := range es {
		if e.SHA256 != shas[i] || e.Path != files[i] || e.Bytes == 0 || e.Recorded.IsZero() || e.Current != (i == 0) {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	old := time.Now().Add(-time.Hour)
	leftover := filepath.Join(string(d), "."+strings.Repeat("4", 64)+".tmp-1")
	inProgress := filepath.Join(string(d), "."+strings.Repeat("5", 64)+".tmp-2")
	for _, p := range []string{leftover, inProgress} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}
	rm, freed, err := d.Sweep()
	if err != nil || len(rm) != 2 || rm[0].SHA256 != shas[1] || rm[1].SHA256 != shas[2] || freed != es[1].Bytes+es[2].Bytes+1 {
		t.Fatalf("swept %+v, %d bytes, %v", rm, freed, err)
	}
	des, err := os.ReadDir(string(d))
	var left []string
	for _, de := range des {
		left = append(left, de.Name())
	}
	if want := []string{filepath.Base(inProgress), strings.Repeat("1", 64)}; err != nil || !slices.Equal(left, want) {
		t.Errorf("left %v (%v), want %v", left, err, want)
	}
	if es, err := d.List(); err != nil || len(es) != 1 || !es[0].Current {
		t.Errorf("after the sweep: %+v, %v", es, err)
	}
}

// A record names its file by its absolute path, whatever folder it was
// opened from.
func TestIdentityPathIsAbsolute(t *testing.T) {
	_, p := identity(t)
	t.Chdir(filepath.Dir(p))
	f, err := os.Open(filepath.Base(p))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := hashstamp.Of(f)
	if err != nil || id.Path != p {
		t.Errorf("path %q, want %q (%v)", id.Path, p, err)
	}
}

// Sweep removes nothing through a link, or in a folder others may write.
func TestSweepOnlyItsOwnFolder(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(other, "kept")
	if err := os.WriteFile(kept, []byte("not a record"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(kept, old, old); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "hashed")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := hashstamp.Dir(link).Sweep(); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("swept through a link: %v", err)
	}
	if err := os.Chmod(other, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := hashstamp.Dir(other).Sweep(); err == nil {
		t.Error("swept a folder others may write")
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("removed: %v", err)
	}
	if err := os.Chmod(other, 0o700); err != nil {
		t.Fatal(err)
	}
	if rm, _, err := hashstamp.Dir(other).Sweep(); err != nil || len(rm) != 0 {
		t.Errorf("sweeping its own folder: %v %v", rm, err)
	}
	if _, err := os.Stat(kept); err == nil {
		t.Error("an old file that is not a record was kept")
	}
}
