// Package testenv owns the one rule for tests that need something from the
// machine (a tool, root, a filesystem feature, a variable make test sets):
// outside CI a missing need skips the test, saying what is missing and how
// to get it; under CI (CI set, as .ci/run sets it) it fails the test, so CI
// never passes by skipping. Beside it, the FIFO helpers of the tests that
// block a reader on one, the sparse files of the tests of size bounds, a
// buffer goroutines share, a local port that refuses connections, and the
// check that an output holds each of several strings, and the package
// cache the builds of one test run share.
// Only tests import it.
package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// CI reports whether the tests run in CI: CI is set to anything but "",
// "0" or "false" (CI systems set CI=true; .ci/run does too).
func CI() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "", "0", "false":
		return false
	}
	return true
}

// Missing stops a test whose need is not met: it skips with why outside CI
// and fails with why under CI.
func Missing(t testing.TB, why string) {
	t.Helper()
	if CI() {
		t.Fatal(why + " (CI must run this test)")
	}
	t.Skip(why)
}

// Tool returns the path of the named program on PATH, or stops the test
// through Missing, naming how to install it.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not installed ("+install+")")
	}
	return p
}

// Root stops the test through Missing unless it runs as root, saying what
// needs root.
func Root(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root to "+what)
	}
}

// Sparse makes a file of size bytes at path with nothing written (a hole,
// no disk used), for tests of bounds that must not read what they bound.
func Sparse(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}
