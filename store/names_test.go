package store_test

import (
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/store"
)

// TestStartBuildRefusesVersions: a dry run never looked the version up,
// so one with a newline or ../ passed; every build into a store now holds
// it to the manifest's rule first, and nothing is staged.
func TestStartBuildRefusesVersions(t *testing.T) {
	root := t.TempDir()
	s := store.NewDir(root)
	for _, v := range []string{"0.1\ntouch x", "../../../../etc/x", "a/b"} {
		for _, dry := range []bool{true, false} {
			_, err := store.StartBuild(ctx, s, store.BuildOptions{Image: "demo", Version: v, DryRun: dry, Stage: true})
			if err == nil || !strings.Contains(err.Error(), "is not a valid version name") {
				t.Errorf("version %q (dry run %v): %v", v, dry, err)
			}
		}
	}
	if e := entries(t, root); len(e) > 0 {
		t.Errorf("refused builds left %v in the store", e)
	}
}

// TestCheckKeyIsTheManifestRule: the store keys images and versions by the
// manifest's one rule (its length bound and ".." included).
func TestCheckKeyIsTheManifestRule(t *testing.T) {
	for _, tc := range []struct{ kind, s string }{
		{"image", "a..b"}, {"image", strings.Repeat("a", 101)}, {"version", "1..2"}, {"version", "1\n2"},
	} {
		if store.CheckKey(tc.kind, tc.s) == nil {
			t.Errorf("%s %q accepted", tc.kind, tc.s)
		}
	}
	if err := store.CheckKey("version", "1.4.0+b~rc1"); err != nil {
		t.Error(err)
	}
}
