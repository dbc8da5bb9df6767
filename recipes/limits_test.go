package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/internal/hclkit"
)

// TestInputLimitsEveryPath: every way user bytes reach an HCL parser goes
// through the guard: the recipe, a layer file, a var file, a -var value,
// an IMAGECTL_VAR_ value, a template and Format. Each reports, none
// crashes.
func TestInputLimitsEveryPath(t *testing.T) {
	deep := strings.Repeat("[", 60000) + strings.Repeat("]", 60000)
	recipe := func(layer string) string {
		return `variable "extra" {
  type    = list(list(string))
  default = []
}
image "x" {
  title = "x"
  base {
    source   = "b.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "l" {
    ` + layer + `
  }
}
`
	}
	for _, tc := range []struct {
		name   string
		recipe string
		files  map[string]string
		in     func(dir string) Inputs
		want   string
	}{
		{name: "recipe", recipe: "image \"x\" {\n  title = " + deep + "\n}\n", want: "Nested too deeply"},
		{name: "layer file", recipe: recipe(`source = "layer.hcl"`), files: map[string]string{"layer.hcl": "packages = " + deep}, want: "Nested too deeply"},
		{name: "var file", recipe: recipe(""), files: map[string]string{"vars.hcl": "extra = " + deep},
			in: func(dir string) Inputs { return Inputs{Files: []string{filepath.Join(dir, "vars.hcl")}} }, want: "Nested too deeply"},
		{name: "-var", recipe: recipe(""), in: func(string) Inputs { return Inputs{Flags: []string{"extra=" + deep}} },
			want: "is nested more than 256 levels deep"},
		{name: "environment", recipe: recipe(""), in: func(string) Inputs { return Inputs{Env: []string{"IMAGECTL_VAR_extra=" + deep}} },
			want: "is nested more than 256 levels deep"},
		{name: "template", recipe: recipe(`file "/etc/x" {
      template = "x.tmpl"
    }`), files: map[string]string{"x.tmpl": "${" + deep + "}"}, want: "Nested too deeply"},
		{name: "templatefile", recipe: recipe(`run = [templatefile("x.tmpl", {})]`), files: map[string]string{"x.tmpl": "${" + deep + "}"}, want: "Nested too deeply"},
		{name: "large recipe", recipe: recipe("") + "#" + strings.Repeat("x", hclkit.MaxInputSize), want: "larger than 1048576 bytes"},
		{name: "large layer file", recipe: recipe(`source = "layer.hcl"`), files: map[string]string{"layer.hcl": strings.Repeat("#", hclkit.MaxInputSize+1)},
			want: "Layer file too large"},
		{name: "large var file", recipe: recipe(""), files: map[string]string{"vars.hcl": strings.Repeat("#", hclkit.MaxInputSize+1)},
			in: func(dir string) Inputs { return Inputs{Files: []string{filepath.Join(dir, "vars.hcl")}} }, want: "larger than 1048576 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "r.hcl")
			if err := os.WriteFile(path, []byte(tc.recipe), 0o644); err != nil {
				t.Fatal(err)
			}
			var in Inputs
			if tc.in != nil {
				in = tc.in(dir)
			}
			r, diags := NewParser().LoadFile(path, Options{Inputs: in})
			if r != nil || !strings.Contains(diags.Error(), tc.want) {
				t.Errorf("diagnostics lack %q: %s", tc.want, diags.Error())
			}
		})
	}
	if _, diags := Format([]byte("x = "+deep+"\n"), "deep.hcl"); !strings.Contains(diags.Error(), "Nested too deeply") {
		t.Errorf("Format: %v", diags)
	}
}

// longListRecipe is a recipe whose one layer installs n packages, written
// as a list (form "literal"), as a variable's default ("variable"), or
// through functions ("functions").
func longListRecipe(n int, form string) []byte {
	var list strings.Builder
	list.WriteString("[")
	for i := range n {
		if i > 0 {
			list.WriteString(", ")
		}
		list.WriteString(`"pkg`)
		list.WriteString(strings.Repeat("x", i%3))
		list.WriteString(itoa(i))
		list.WriteString(`"`)
	}
	list.WriteString("]")
	var head, packages string
	switch form {
	case "literal":
		packages = list.String()
	case "variable":
		head = "variable \"packages\" {\n  default = " + list.String() + "\n}\n"
		packages = "var.packages"
	case "functions":
		packages = "sort(distinct(tolist(toset(concat(" + list.String() + ", [])))))"
	}
	return []byte(head + "image \"long\" {\n  title = \"Long\"\n  base {\n    source   = \"base.qcow2\"\n    checksum = \"sha256:" +
		strings.Repeat("0", 64) + "\"\n  }\n  layer \"l\" {\n    packages = " + packages + "\n  }\n}\n")
}

func itoa(i int) string { return cty.NumberIntVal(int64(i)).AsBigFloat().Text('f', 0) }

// TestLongListsLoad: a list of 64,000 packages (about the most a 1 MiB
// recipe holds) loads written out and as a variable's default, and one of
// 16,000 through functions (go-cty sorts a set each time it is read: n
// log² n). Before, loading was quadratic in a list's length (go-cty
// unifies the element types of every list it converts, pair by pair) and
// this took minutes; how long it takes now is BenchmarkLoadLongList's and
// BenchmarkConvertList's business, not a timed test's.
func TestLongListsLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("loads three 700 KB recipes: skipped with -short")
	}
	for form, n := range map[string]int{"literal": 64000, "variable": 64000, "functions": 16000} {
		t.Run(form, func(t *testing.T) {
			r, diags := NewParser().LoadSource("long.hcl", longListRecipe(n, form), Options{})
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if got := len(r.Image.Layers[0].Packages); got != n {
				t.Fatalf("%d packages, want %d", got, n)
			}
		})
	}
}

// TestConvertValue: the linear conversion gives what go-cty's does.
func TestConvertValue(t *testing.T) {
	for _, tc := range []struct {
		in   cty.Value
		ty   cty.Type
		want string
	}{
		{cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}), cty.List(cty.String), `["a","b"]`},
		{cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(1)}), cty.List(cty.String), `["a","1"]`},
		{cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(1)}), cty.List(cty.DynamicPseudoType), `["a","1"]`},
		{cty.TupleVal([]cty.Value{cty.StringVal("b"), cty.StringVal("a"), cty.StringVal("b")}), cty.Set(cty.String), `["a","b"]`},
		{cty.ObjectVal(map[string]cty.Value{"x": cty.TupleVal([]cty.Value{cty.StringVal("a")})}), cty.Map(cty.List(cty.String)), `{"x":["a"]}`},
		{cty.EmptyTupleVal, cty.List(cty.String), `[]`},
		{cty.TupleVal([]cty.Value{cty.NumberIntVal(-12), cty.NumberFloatVal(1.5), cty.MustParseNumberVal("1e30"), cty.NumberIntVal(0)}), cty.List(cty.String),
			`["-12","1.5","1000000000000000000000000000000","0"]`},
	} {
		got, err := convertValue(tc.in, tc.ty)
		if err != nil {
			t.Errorf("%#v to %#v: %v", tc.in, tc.ty, err)
			continue
		}
		if s := jsonOf(t, got); s != tc.want {
			t.Errorf("%#v to %#v = %s, want %s", tc.in, tc.ty, s, tc.want)
		}
	}
	if _, err := convertValue(cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.EmptyObjectVal}), cty.List(cty.String)); err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("an object converted to a string: %v", err)
	}
}
