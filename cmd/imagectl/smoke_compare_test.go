package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smoke --compare-first-boot refuses what cannot be compared before it
// deploys anything: recipe flags without the comparison, a baseline with
// it, a recipe that does not load, and a recipe whose plan is not the
// build the tgz is of.
func TestSmokeCompareRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	tgz := filepath.Join(dir, "x-1.tgz")
	os.WriteFile(tgz, []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "x-1.manifest.json"), []byte(`{"schema_version": 1, "image": {"name": "x", "version": "1"}, "validation": {"script": "/v.sh"}}`), 0o644)
	vars := []string{"--var", "base_image=" + tgz, "--var", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--var", "a=b"}, "--var, --var-file and --root are the recipe's of --compare-first-boot"},
		{[]string{"--compare-first-boot", "testdata/compare-small.hcl", "--baseline", filepath.Join(dir, "t.json")}, "give one of them"},
		{[]string{"--pairs", "2"}, "--pairs 2: give a count of 1 or more, with --compare-first-boot"},
		{[]string{"--compare-first-boot", "testdata/compare-small.hcl", "--pairs", "0"}, "--pairs 0: give a count of 1 or more"},
		{[]string{"--compare-first-boot", "testdata/compare-small.hcl"}, "base_image"},
		{append([]string{"--compare-first-boot", "testdata/compare-small.hcl"}, vars...), "the manifest is a build of x, not of imagectl-compare-small"},
	} {
		_, errs, code := imagectl(t, nil, append([]string{"smoke", tgz}, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, errs, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
}
