package recipes

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// A path the user types (-var, a var file, IMAGECTL_VAR_*) is theirs, as in
// Terraform and Packer: relative to the working directory, and not held to
// the recipe's tree (--root), which guards what a recipe names by itself.
// Values carry where they came from through every expression as cty marks:
// each string the user gave is marked with its own text (typed), and
// templates, conditionals, locals, functions and layer variables carry the
// marks of what they were made from. A path is the user's when it starts
// with a text the user gave: "${var.site_bootstrap_dir}/h200-ib" is, while
// "bundles/${var.name}" stays the recipe's path with a name from the user.
//
// Var files are read the same way: their paths are relative to the working
// directory, not to the var file (Packer and Terraform do the same).

// typed marks a string the user gave on the command line, with its text.
type typed struct{ text string }

// markTyped marks every non-empty known string in v, at any depth, with its
// own text.
func markTyped(v cty.Value) cty.Value {
	out, err := cty.Transform(v, func(_ cty.Path, v cty.Value) (cty.Value, error) {
		if v.Type() == cty.String && v.IsKnown() && !v.IsNull() && !v.IsMarked() && v.AsString() != "" {
			return v.Mark(typed{v.AsString()}), nil
		}
		return v, nil
	})
	if err != nil {
		return v
	}
	return out
}

// userTyped reports whether s starts with a text the user gave, among the
// marks of the value s was read from.
func userTyped(s string, marks cty.ValueMarks) bool {
	for m := range marks {
		if t, ok := m.(typed); ok && strings.HasPrefix(s, t.text) {
			return true
		}
	}
	return false
}

// pathOf reads a path argument of a file function: its text, and whether
// it is the user's.
func pathOf(v cty.Value) (string, bool) {
	v, marks := v.UnmarkDeep()
	s := v.AsString()
	return s, userTyped(s, marks)
}

// located is the absolute form of p: relative to the working directory when
// it is the user's (userPath), else to baseDir, the directory of the file
// that names it.
func located(baseDir, p string, userPath bool) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if userPath {
		if wd, err := os.Getwd(); err == nil {
			return filepath.Join(wd, p)
		}
	}
	return filepath.Join(baseDir, p)
}
