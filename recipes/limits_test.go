package recipes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// nested returns an expression nested n levels deep in one of the ways
// hclsyntax recurses on.
func nested(kind string, n int) string {
	switch kind {
	case "brackets":
		return strings.Repeat("[", n) + strings.Repeat("]", n)
	case "braces":
		return strings.Repeat("{a = ", n) + "1" + strings.Repeat("}", n)
	case "parentheses":
		return strings.Repeat("(", n) + "1" + strings.Repeat(")", n)
	case "calls":
		return strings.Repeat("tolist(", n) + "[]" + strings.Repeat(")", n)
	case "interpolations":
		return strings.Repeat(`"${`, n) + "1" + strings.Repeat(`}"`, n)
	case "heredocs":
		return "<<EOT\n" + strings.Repeat("${<<EOT\n", n) + "x\n" + strings.Repeat("EOT\n}\n", n) + "EOT\n"
	case "directives":
		return `"` + strings.Repeat("%{if true}", n) + "x" + strings.Repeat("%{endif}", n) + `"`
	case "unary":
		return strings.Repeat("!", n) + "true"
	case "negation":
		return strings.Repeat("-", n) + "1"
	case "sums":
		return strings.Repeat("1 + ", n) + "1"
	case "sums over lines":
		return "(" + strings.Repeat("1 +\n", n) + "1)"
	case "conditionals":
		return strings.Repeat("true ? 1 : ", n) + "1"
	case "splats":
		return "[[1]]" + strings.Repeat("[*]", n)
	case "attribute splats":
		return "[{a = 1}]" + strings.Repeat(".*", n)
	}
	panic(kind)
}

var nestingKinds = []string{"brackets", "braces", "parentheses", "calls", "interpolations", "heredocs", "directives",
	"unary", "negation", "sums", "sums over lines", "conditionals", "splats", "attribute splats"}

// TestNestingLimit: each way of nesting is refused past MaxNesting with a
// diagnostic at the place, and each reads normally well within it. Before
// the limit, 60,000 brackets (120 KB) overflowed the stack.
func TestNestingLimit(t *testing.T) {
	for _, kind := range nestingKinds {
		t.Run(kind, func(t *testing.T) {
			src := "x = " + nested(kind, 20000) + "\n"
			diags := checkInput([]byte(src), "deep.hcl", hcl.InitialPos, configSyntax)
			if len(diags) != 1 || diags[0].Summary != "Nested too deeply" || diags[0].Subject == nil || diags[0].Subject.Start.Byte == 0 {
				t.Fatalf("20000 levels: %v", diags)
			}
			shallow := "x = " + nested(kind, 20) + "\n"
			if diags := checkInput([]byte(shallow), "ok.hcl", hcl.InitialPos, configSyntax); diags.HasErrors() {
				t.Errorf("20 levels refused: %v", diags)
			}
			// (HCL allows no splat inside an attribute splat.)
			if _, diags := ParseConfig([]byte(shallow), "ok.hcl"); diags.HasErrors() && kind != "attribute splats" {
				t.Errorf("20 levels do not parse: %v", diags)
			}
		})
	}
	// Operators count per expression: many short ones are fine.
	var many strings.Builder
	for range 1000 {
		many.WriteString("a = 1 + 2 * 3 - (4 / 5) == 6 ? !true : false\n")
	}
	many.WriteString("l = [" + strings.Repeat("1 + 1, ", 1000) + "]\n")
	// A line comment holds its line's newline (the lexer's token): lines
	// that end in one end their expressions too.
	for i := range 300 {
		fmt.Fprintf(&many, "c%d = 1 - 2 # note\n", i)
	}
	many.WriteString("o = {\n")
	for i := range 300 {
		fmt.Fprintf(&many, "  k%d = -1 // note\n", i)
	}
	many.WriteString("}\n")
	if diags := checkInput([]byte(many.String()), "flat.hcl", hcl.InitialPos, configSyntax); diags.HasErrors() {
		t.Errorf("short expressions refused: %v", diags)
	}
}

// TestInputLimitsEveryPath: every way user bytes reach an HCL parser goes
// through the guard: the recipe, a layer file, a var file, a -var value,
// an IMAGECTL_VAR_ value, a template and Format. Each reports, none
// crashes.
func TestInputLimitsEveryPath(t *testing.T) {
	deep := nested("brackets", 60000)
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
		{name: "large recipe", recipe: recipe("") + "#" + strings.Repeat("x", MaxInputSize), want: "larger than 1048576 bytes"},
		{name: "large layer file", recipe: recipe(`source = "layer.hcl"`), files: map[string]string{"layer.hcl": strings.Repeat("#", MaxInputSize+1)},
			want: "Layer file too large"},
		{name: "large var file", recipe: recipe(""), files: map[string]string{"vars.hcl": strings.Repeat("#", MaxInputSize+1)},
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
