// Package testbase owns how tests find the project's Debian base image
// (make base-image writes its var file; the Makefile exports its path as
// IMAGECTL_TEST_BASE_VARS): one gate for every test that builds or boots
// an image. Only tests import it.
package testbase

import (
	"os"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// Env is the environment variable that names the base image's var file.
const Env = "IMAGECTL_TEST_BASE_VARS"

// Vars returns the base image's var file. It skips the test under -short
// and, when the variable is not set, skips outside CI and fails under CI
// (the testenv rule); a variable naming a missing file fails the test.
func Vars(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds or boots an image: skipped with -short")
	}
	p := os.Getenv(Env)
	if p == "" {
		testenv.Missing(t, Env+" is not set (make base-image, then run the tests through make)")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("base image vars: %v", err)
	}
	return p
}
