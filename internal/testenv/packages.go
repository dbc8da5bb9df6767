package testenv

import (
	"os"
	"testing"
)

// PackageCacheVar names the package cache the builds of one test run
// share; make test sets it to a directory of its own for the run.
const PackageCacheVar = "IMAGECTL_TEST_PACKAGE_CACHE"

// PackageCache is the package cache (builder/debcache) a test's build
// uses, as a user's build does by default: the run's shared one when make
// test names it in $IMAGECTL_TEST_PACKAGE_CACHE, so each archive is
// fetched once a run whichever test builds first, else a fresh one of the
// test's own. A test about the package cache itself (what it fetches,
// what it refuses) keeps a cache of its own instead.
func PackageCache(t testing.TB) string {
	if dir := os.Getenv(PackageCacheVar); dir != "" {
		return dir
	}
	return t.TempDir()
}
