package plan

import (
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/recipes"
)

func loadRecipe(t *testing.T, tc planCase) *recipes.Recipe {
	t.Helper()
	r, diags := recipes.NewParser().LoadFile(tc.recipe, recipes.Options{Inputs: tc.inputs, Roots: tc.roots})
	if diags.HasErrors() {
		t.Fatalf("%s: %v", tc.recipe, diags)
	}
	return r
}

// TestNewRefusesVersions: build --version was not checked at all, so a
// newline reached the validation script's header and ../ put the artifact
// outside the output directory. New refuses both, naming the flag,
// whichever command asks for the plan.
func TestNewRefusesVersions(t *testing.T) {
	chdirRoot(t)
	var tc planCase
	for _, c := range planCases {
		if c.name == "full" { // no site inputs needed
			tc = c
		}
	}
	for _, v := range []string{"0.1\ntouch x", "../../../../etc/x", "a/b", "..", " 1", strings.Repeat("1", 101)} {
		tc.opts = Options{Version: v}
		p := loadRecipe(t, tc)
		if _, err := New(p, tc.opts); err == nil || !strings.HasPrefix(err.Error(), "--version: ") || !strings.Contains(err.Error(), "is not a valid version") {
			t.Errorf("--version %q: %v", v, err)
		}
	}
	tc.opts = Options{Version: "1.4.0+build.2~rc1"}
	if _, err := New(loadRecipe(t, tc), tc.opts); err != nil {
		t.Errorf("a good version: %v", err)
	}
}
