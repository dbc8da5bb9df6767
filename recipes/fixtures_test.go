package recipes

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/hclkit/hclkittest"
)

const testdata = "../testdata"

// shippedInputs give the shipped recipes what an operator passes: the
// site-bootstrap bundles (the test ones, with --root testdata).
func shippedInputs(t *testing.T) Inputs {
	dir, err := filepath.Abs(filepath.Join(testdata, "bundles"))
	if err != nil {
		t.Fatal(err)
	}
	return Inputs{Flags: []string{"site_bootstrap_dir=" + dir}}
}

// TestValidRecipes loads every recipe under testdata/recipes/valid and the
// shipped recipes; none may produce a diagnostic of any severity.
func TestValidRecipes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdata, "recipes/valid/*.hcl"))
	shipped, _ := filepath.Glob("../recipes/*.hcl")
	files = append(files, shipped...)
	if len(files) < 4 {
		t.Fatalf("found only %d valid recipes", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p := NewParser()
			opts := Options{Roots: []string{testdata}}
			if strings.HasPrefix(f, "../recipes/") {
				opts.Inputs = shippedInputs(t)
			}
			r, diags := p.LoadFile(f, opts)
			if len(diags) > 0 {
				var buf bytes.Buffer
				_ = hclkit.WriteDiagnostics(&buf, p.Files(), diags, false)
				t.Fatalf("unexpected diagnostics:\n%s", buf.String())
			}
			if r == nil || r.Image == nil {
				t.Fatal("no recipe returned")
			}
		})
	}
}

// TestInvalidRecipes loads every recipe under testdata/recipes/invalid. Each
// line that should cause a diagnostic says so in a comment, "# ERROR:
// <summary>" (or WARNING:), once per diagnostic; every diagnostic must land
// on such a line and every such comment must be met.
func TestInvalidRecipes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdata, "recipes/invalid/*.hcl"))
	if len(files) < 8 {
		t.Fatalf("found only %d invalid recipes", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p := NewParser()
			r, diags := p.LoadFile(f, Options{})
			if r != nil {
				t.Error("a recipe with errors was returned")
			}
			if !diags.HasErrors() {
				t.Fatal("no errors")
			}
			hclkittest.Check(t, f, diags)
		})
	}
}
