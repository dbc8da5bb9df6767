package recipes_test

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/recipes"
)

// FuzzLoad feeds arbitrary bytes to the recipe loader, and whatever loads to
// the planner and both renderers: nothing in a recipe may make imagectl
// panic. The seed corpus is every fixture and shipped recipe.
func FuzzLoad(f *testing.F) {
	for _, glob := range []string{"../testdata/recipes/*/*.hcl", "../recipes/*.hcl", "../examples/*.hcl", "../layers/*.hcl"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	// Load from the fixtures' directory so relative sources resolve to real
	// files as often as they can.
	dir, err := filepath.Abs("../testdata/recipes/valid")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p := recipes.NewParser()
		r, diags := p.LoadSource(filepath.Join(dir, "fuzz-input.hcl"), src, recipes.Options{})
		_ = recipes.WriteDiagnostics(io.Discard, p.Files(), diags, true)
		_ = recipes.DiagnosticsJSON(diags)
		if _, fd := recipes.Format(src, "fuzz.hcl"); fd.HasErrors() && !diags.HasErrors() {
			t.Errorf("loaded, but Format reports syntax errors: %s", fd.Error())
		}
		if r == nil {
			if !diags.HasErrors() {
				t.Fatal("no recipe and no error")
			}
			return
		}
		plan, err := builder.NewPlan(r, builder.PlanOptions{Version: "1"})
		if err != nil {
			t.Fatalf("a loaded recipe failed to plan: %v", err)
		}
		if err := plan.WriteText(io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := plan.WriteJSON(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}
