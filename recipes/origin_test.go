package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// originTree writes a recipe in <dir>/recipe and, outside its tree, a
// bundle and a file in <dir>/outside, and makes dir the working directory.
// The recipe reaches the outside through var.dir in a bundle source,
// a local, a function, a layer file's variable, and names its base image and
// artifact directory through variables.
func originTree(t *testing.T) string {
	t.Helper()
	return chdirTree(t, 0o755, map[string]string{
		"recipe/recipe.hcl": `variable "dir" {
  type    = string
  default = "../outside"
}
variable "name" {
  type    = string
  default = "b"
}
variable "base" {
  type    = string
  default = "base.qcow2"
}
variable "artifacts" {
  type    = string
  default = "artifacts"
}
locals {
  via_local = "${var.dir}/x.txt"
}
image "t" {
  title = "t"
  base {
    source   = var.base
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "inline" {
    file "/etc/a" { source = local.via_local }
    file "/etc/b" { content = file("${var.dir}/x.txt") }
  }
  layer "from-file" {
    source    = "l.hcl"
    variables = { d = var.dir }
  }
  bundle "b" {
    source     = "${var.dir}/${var.name}"
    entrypoint = "run.sh"
  }
  artifact { directory = var.artifacts }
}
`,
		"recipe/l.hcl": `variable "d" { type = string }
file "/etc/c" { source = "${var.d}/x.txt" }
`,
		"outside/x.txt":    "outside\n",
		"outside/b/run.sh": "#!/bin/sh\n",
		"vars/v.hcl":       `dir = "outside"` + "\n",
	})
}

// chdirTree writes files (path: content) with mode into a new directory,
// its path free of symlinks, and makes it the working directory.
func chdirTree(t *testing.T, mode os.FileMode, files map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	return dir
}

func loadOrigin(t *testing.T, opts Options) (*Recipe, hcl.Diagnostics) {
	t.Helper()
	return NewParser().LoadFile("recipe/recipe.hcl", opts)
}

// TestTypedPathsAreTheUsers checks that a path the user types (-var,
// IMAGECTL_VAR_*, a var file) is resolved against the working directory and
// allowed outside the recipe's tree without --root, through every way a
// recipe uses it: a bundle source, a local, file(), a layer file's variable,
// the base image and the artifact directory.
func TestTypedPathsAreTheUsers(t *testing.T) {
	dir := originTree(t)
	for _, tc := range []struct {
		name string
		in   Inputs
	}{
		{"-var", Inputs{Flags: []string{"dir=outside", "base=img/base.qcow2", "artifacts=out"}}},
		{"environment", Inputs{Env: []string{EnvPrefix + "dir=outside", EnvPrefix + "base=img/base.qcow2", EnvPrefix + "artifacts=out"}}},
		// A var file's paths are the working directory's, not the var file's.
		{"var file", Inputs{Files: []string{"vars/v.hcl"}, Flags: []string{"base=img/base.qcow2", "artifacts=out"}}},
		{"absolute", Inputs{Flags: []string{"dir=" + filepath.Join(dir, "outside"), "base=" + filepath.Join(dir, "img/base.qcow2"), "artifacts=" + filepath.Join(dir, "out")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, diags := loadOrigin(t, Options{Inputs: tc.in})
			if diags.HasErrors() {
				t.Fatalf("a path the user typed was refused: %s", diags.Error())
			}
			img := r.Image
			if got, want := img.Bundles[0].Path, filepath.Join(dir, "outside/b"); got != want {
				t.Errorf("bundle path %s, want %s", got, want)
			}
			for _, l := range img.Layers {
				for _, f := range l.Files {
					if string(f.Content) != "outside\n" {
						t.Errorf("layer %s file %s holds %q", l.Name, f.Path, f.Content)
					}
				}
			}
			if got, want := img.Base.Path, filepath.Join(dir, "img/base.qcow2"); got != want {
				t.Errorf("base image path %s, want %s", got, want)
			}
			if got, want := img.Artifact.Directory, filepath.Join(dir, "out"); got != want {
				t.Errorf("artifact directory %s, want %s", got, want)
			}
		})
	}
}

// TestRecipePathsKeepTheTreeRule checks that what a recipe names by itself
// (its literals and defaults) is still relative to the recipe and refused
// outside its tree without --root, and that a value the user gives for a
// part of such a path (not its start) does not lift the rule.
func TestRecipePathsKeepTheTreeRule(t *testing.T) {
	dir := originTree(t)
	for _, tc := range []struct {
		name string
		in   Inputs
	}{
		{"defaults", Inputs{}},
		{"typed name in the recipe's path", Inputs{Flags: []string{"name=b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := loadOrigin(t, Options{Inputs: tc.in})
			outside := 0
			for _, d := range diags {
				if d.Summary == "Source outside the recipe's directory tree" {
					outside++
				}
			}
			// The bundle, the local, the layer file's file source;
			// file()'s refusal is a call error.
			if outside != 3 || !strings.Contains(diags.Error(), "outside the allowed directory tree") {
				t.Fatalf("the recipe's own paths outside its tree were not all refused (%d):\n%s", outside, diags.Error())
			}
			r, diags := loadOrigin(t, Options{Inputs: tc.in, Roots: []string{filepath.Join(dir, "outside")}})
			if diags.HasErrors() {
				t.Fatalf("--root does not allow the tree: %s", diags.Error())
			}
			if got, want := r.Image.Base.Path, filepath.Join(dir, "recipe/base.qcow2"); got != want {
				t.Errorf("the recipe's base image is at %s, want %s (beside the recipe)", got, want)
			}
			if got := r.Image.Artifact.Directory; got != "artifacts" {
				t.Errorf("the recipe's artifact directory became %s", got)
			}
		})
	}
}

// TestDryRunLeavesBundlesUnresolved checks that a dry run of a recipe whose
// bundle sources need a variable without a value loads, with those bundles
// unresolved and one warning that names the variable, while a load for a
// build (or a variable used elsewhere too) still fails as before.
func TestDryRunLeavesBundlesUnresolved(t *testing.T) {
	dir := t.TempDir()
	recipe := func(title string) string {
		p := filepath.Join(dir, "r.hcl")
		src := `variable "site" {
  type = string
}
image "t" {
  title = ` + title + `
  base {
    source   = "b.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  bundle "one" {
    source     = "${var.site}/one"
    entrypoint = "run.sh"
  }
  bundle "two" {
    source     = "${var.site}/two"
    entrypoint = "run.sh"
  }
}
`
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := recipe(`"t"`)
	r, diags := NewParser().LoadFile(p, Options{DryRun: true})
	if diags.HasErrors() {
		t.Fatalf("the dry run failed: %s", diags.Error())
	}
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning {
		t.Fatalf("want one warning, got %d diagnostics: %s", len(diags), diags.Error())
	}
	testenv.Holds(t, "the warning", diags[0].Summary+diags[0].Detail, `"site"`, "-var site=", EnvPrefix+"site", `"one", "two"`)
	for _, b := range r.Image.Bundles {
		if !strings.Contains(b.Unresolved, "var.site") || b.Digest != "" || b.Path != "" || b.Entries != nil {
			t.Errorf("bundle %s: unresolved %q, digest %q, path %q, %d entries", b.Name, b.Unresolved, b.Digest, b.Path, len(b.Entries))
		}
		if b.Source != "${var.site}/"+b.Name {
			t.Errorf("bundle %s shows source %q, not the expression as written", b.Name, b.Source)
		}
	}
	if v := r.Variables[0]; v.Source != "unset" {
		t.Errorf("the unset variable's source is %q", v.Source)
	}

	for _, tc := range []struct {
		name, path string
		opts       Options
	}{
		{"a build", p, Options{}},
		{"a variable used beyond bundles", recipe(`"t ${var.site}"`), Options{DryRun: true}},
	} {
		_, diags := NewParser().LoadFile(tc.path, tc.opts)
		if !diags.HasErrors() || !strings.Contains(diags.Error(), `No value for variable "site"`) {
			t.Errorf("%s: the variable without a value is not an error: %s", tc.name, diags.Error())
		}
	}
}

// TestChosenPathsStayTheRecipes checks that a path the recipe writes whole
// and the user only chooses (a lookup or element key, a value that is not
// at a path boundary of it) is the recipe's: relative to the recipe, even
// where the working directory has a file of the same name.
func TestChosenPathsStayTheRecipes(t *testing.T) {
	chdirTree(t, 0o644, map[string]string{
		"recipe/recipe.hcl": `variable "env" {
  type    = string
  default = "staging"
}
variable "n" {
  type    = number
  default = 0
}
locals {
  sources = { files = "files/prod.txt", staging = "files/staging.txt" }
  list    = ["files/prod.txt", "files/staging.txt"]
}
image "t" {
  title = "t"
  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "inline" {
    file "/etc/lookup" { source = lookup(local.sources, var.env, "files/none.txt") }
    file "/etc/element" { source = element(local.list, var.n) }
    file "/etc/glued" { source = "${var.env}.txt" }
  }
}
`,
		"recipe/files/prod.txt": "recipe's\n",
		"recipe/fi.txt":         "recipe's\n",
		"files/prod.txt":        "working directory's\n",
		"fi.txt":                "working directory's\n",
		"recipe/files/none.txt": "none\n",
		"recipe/files.txt":      "recipe's\n",
	})
	r, diags := loadOrigin(t, Options{Inputs: Inputs{Flags: []string{"env=fi", "n=0"}}})
	if diags.HasErrors() {
		t.Fatalf("%s", diags.Error())
	}
	// "fi" is typed, and "fi.txt" starts with it, but not at a path
	// boundary: the recipe's "${var.env}.txt" is the recipe's path.
	for _, f := range r.Image.Layers[0].Files {
		if f.Path == "/etc/lookup" {
			continue
		}
		if string(f.Content) != "recipe's\n" {
			t.Errorf("%s holds %q, want the recipe's file", f.Path, f.Content)
		}
	}
	r, diags = loadOrigin(t, Options{Inputs: Inputs{Flags: []string{"env=files"}}})
	if diags.HasErrors() {
		t.Fatalf("%s", diags.Error())
	}
	for _, f := range r.Image.Layers[0].Files {
		if f.Path == "/etc/lookup" && string(f.Content) != "recipe's\n" {
			t.Errorf("lookup(local.sources, var.env) read %q, want the recipe's files/prod.txt", f.Content)
		}
	}
}
