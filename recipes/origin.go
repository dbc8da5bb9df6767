package recipes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// A path the user types (-var, a var file, IMAGECTL_VAR_*) is theirs, as in
// Terraform and Packer: relative to the working directory, and not held to
// the recipe's tree (--root), which guards what a recipe names by itself.
// Values carry where they came from through every expression as cty marks:
// the value of a variable the user set is marked with that variable
// (typed), and templates, conditionals, locals, functions and layer
// variables carry the marks of what they were made from. A path is the
// user's when it starts with a text the user gave (a string in the value of
// a variable it is marked with): "${var.site_bootstrap_dir}/h200-ib" is,
// while "bundles/${var.name}" stays the recipe's path with a name from the
// user.
//
// Var files are read the same way: their paths are relative to the working
// directory, not to the var file (Packer and Terraform do the same).

// typed marks what is made from the value of a variable the user set (-var,
// a var file, IMAGECTL_VAR_*). One mark for the whole value, whatever its
// size: cty passes a collection's marks on to its elements.
type typed struct{ v *Variable }

// userTyped reports whether s starts with a text the user gave, up to a
// path separator or the end: a string in the value of a variable among
// marks, those of the value s was read from. Marks also pass from a
// condition to what it chose (var.env == "x" ? "x/a" : "b"), so a path the
// recipe writes whole, chosen by a value of the user's that is its first
// element, counts as the user's; lookup and element do not pass their
// key's marks on (selecting).
func userTyped(s string, marks cty.ValueMarks) bool {
	for m := range marks {
		t, ok := m.(typed)
		if !ok {
			continue
		}
		found := false
		_ = cty.Walk(t.v.Value, func(_ cty.Path, e cty.Value) (bool, error) {
			if e.Type() == cty.String && e.IsKnown() && !e.IsNull() && e.AsString() != "" && pathPrefix(s, e.AsString()) {
				found = true
			}
			return !found, nil
		})
		if found {
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

// pathPrefix reports whether p begins with the path prefix: the whole of
// it, or it followed by a separator.
func pathPrefix(p, prefix string) bool {
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	return len(p) == len(prefix) || strings.HasSuffix(prefix, "/") || p[len(prefix)] == '/'
}

// selecting wraps f, which picks a value out of a collection by a key (its
// argument key): the typed marks of the key do not pass on to what it
// picks, which is the recipe's value chosen by the user, not the user's
// (lookup(local.sources, var.profile) is the recipe's path). Other marks
// (sensitive values) pass as they do through f.
func selecting(f function.Function, key int) function.Function {
	params := f.Params()
	params[key].AllowMarked = true
	unmarked := func(args []cty.Value) []cty.Value {
		out := slices.Clone(args)
		v, marks := out[key].Unmark()
		kept := cty.NewValueMarks()
		for m := range marks {
			if _, ok := m.(typed); !ok {
				kept[m] = struct{}{}
			}
		}
		out[key] = v.WithMarks(kept)
		return out
	}
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      params,
		VarParam:    f.VarParam(),
		Type: func(args []cty.Value) (cty.Type, error) {
			return f.ReturnTypeForValues(unmarked(args))
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return f.Call(unmarked(args))
		},
	})
}
