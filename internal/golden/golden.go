// Package golden owns the tests' golden-file rule: what a test makes is
// compared, byte for byte, with a file under testdata, and `go test -update`
// rewrites the file after an intended change. Beside it, the file modes a
// git checkout gives, which goldens that hash bundle files depend on. Only
// tests import it.
package golden

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Check compares got with the golden file at path, or with -update writes
// got there. A difference fails the test at the first line that differs;
// rerun is the command that rewrites the file, named in the failure.
func Check(t testing.TB, path string, got []byte, rerun string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run %s to create it)", err, rerun)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run %s if the change is intended)", path, i+1, g, w, rerun)
		}
	}
}

// NormalizeModes makes the modes of the regular files under dirs what a git
// checkout with umask 022 gives (0755 where any execute bit is set, else
// 0644), so goldens that cover file modes do not depend on the umask.
func NormalizeModes(t testing.TB, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			return os.Chmod(p, mode)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
