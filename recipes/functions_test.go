package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

func evalIn(t *testing.T, dir, expr string) (string, error) {
	t.Helper()
	e, diags := hclsyntax.ParseExpression([]byte(expr), "expr", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parse %q: %s", expr, diags.Error())
	}
	ctx := &hcl.EvalContext{Functions: functions(tree{}, dir)}
	v, diags := e.Value(ctx)
	if diags.HasErrors() {
		return "", diags
	}
	return jsonOf(t, v), nil
}

func TestFunctions(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t.tmpl"), []byte("%{ for p in pkgs }${upper(p)} %{ endfor }on ${host}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ expr, want string }{
		{`file("f.txt")`, `"hello\n"`},
		{`filesha256("f.txt")`, `"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"`},
		{`sha256("hello\n")`, `"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"`},
		{`templatefile("t.tmpl", { pkgs = ["jq", "curl"], host = "h1" })`, `"JQ CURL on h1"`},
		{`join(" ", concat(["a"], ["b", "c"]))`, `"a b c"`},
		{`format("%s-%03d", lower("IMG"), 7)`, `"img-007"`},
		{`upper("x")`, `"X"`},
		{`length("four")`, `4`},
		{`length(["a", "b"])`, `2`},
		{`fileexists("nope")`, `false`},
		{`compact(split(" ", "intel_iommu=on  iommu=pt"))`, `["intel_iommu=on","iommu=pt"]`},
		{`basename("/a/b.sh")`, `"b.sh"`},
	} {
		got, err := evalIn(t, dir, tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s = %s, want %s", tc.expr, got, tc.want)
		}
	}
}

func TestFunctionsStayInTheTree(t *testing.T) {
	dir := t.TempDir()
	inner := filepath.Join(dir, "recipe")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "secret"), filepath.Join(inner, "link")); err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{`file("../secret")`, `file("link")`, `file("/etc/hostname")`, `templatefile("../secret", {})`} {
		_, err := evalIn(t, inner, expr)
		if err == nil || !strings.Contains(err.Error(), "outside") {
			t.Errorf("%s: got %v, want an outside-the-tree error", expr, err)
		}
	}
	for _, expr := range []string{`env("HOME")`} {
		if _, err := evalIn(t, inner, expr); err == nil {
			t.Errorf("%s: recipes are env-free, but it evaluated", expr)
		}
	}
}

func TestTemplateFileRejectsUnknownVariables(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.tmpl"), []byte("${missing}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := evalIn(t, dir, `templatefile("t.tmpl", {})`)
	if err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("got %v", err)
	}
}

// TestLinearFunctionsAgree: the functions a recipe calls take their
// collection arguments through convertValue (linear) rather than HCL's
// conversion (quadratic); they must give what go-cty's own give, errors
// included.
func TestLinearFunctionsAgree(t *testing.T) {
	reference := map[string]function.Function{}
	for name, f := range stdFunctions {
		reference[name] = f
	}
	reference["distinct"] = stdlib.DistinctFunc
	eval := func(fns map[string]function.Function, expr string) (cty.Value, hcl.Diagnostics) {
		e, diags := hclsyntax.ParseExpression([]byte(expr), "expr", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("parse %q: %s", expr, diags.Error())
		}
		ctx := &hcl.EvalContext{Functions: fns, Variables: map[string]cty.Value{
			"unknown": cty.UnknownVal(cty.List(cty.String)), "dyn": cty.DynamicVal, "nul": cty.NullVal(cty.List(cty.String)),
		}}
		return e.Value(ctx)
	}
	for _, expr := range []string{
		`sort(["b", "a", "c"])`, `sort(["b", 1])`, `sort([{}])`, `sort(unknown)`, `sort(dyn)`, `sort(nul)`,
		`distinct(["a", "b", "a"])`, `distinct([1, 1.0, 2])`, `distinct([true, false, true])`, `distinct(["a", 1, "1"])`,
		`distinct([["a"], ["a"]])`, `distinct([])`, `distinct(unknown)`, `distinct(["a", null, "a", null])`,
		`join(",", ["a", "b"], ["c"])`, `join(",", [1, 2])`, `join(",", [[1]])`, `join(",", unknown)`,
		`tolist(["a", "b"])`, `tolist(["a", 1])`, `tolist([[], ["a"]])`, `tolist([{}, 1])`, `tolist([])`, `tolist(unknown)`,
		`toset(["b", "a", "b"])`, `toset([1, "1"])`, `toset([])`, `tomap({a = 1, b = "x"})`, `tomap({a = [1], b = []})`, `tomap({})`,
		`setunion(["a"], ["b", "a"])`, `coalescelist([], ["a"])`, `compact(["a", "", "b"])`, `reverse(["a", "b"])`,
		`slice(["a", "b", "c"], 0, 2)`, `element(["a", "b"], 3)`, `contains(["a"], "a")`, `length(["a", 1])`,
		`flatten([["a"], ["b", ["c"]]])`, `concat(["a"], ["b"], [1])`, `formatlist("%s-x", ["a", "b"])`, `zipmap(["a"], ["b"])`,
		`keys({a = 1})`, `values({a = 1, b = "x"})`, `lookup({a = "x"}, "a", "d")`, `merge({a = 1}, {b = 2})`, `max(1, 2)`,
	} {
		want, wantDiags := eval(reference, expr)
		got, gotDiags := eval(pureFunctions, expr)
		if wantDiags.HasErrors() != gotDiags.HasErrors() {
			t.Errorf("%s: errors %v, go-cty's %v", expr, gotDiags, wantDiags)
			continue
		}
		// Unknown results (of variables that already failed, skipped
		// by the decoder) may lack go-cty's refinements.
		if !want.IsKnown() && !got.IsKnown() && got.Type().Equals(want.Type()) {
			continue
		}
		if !wantDiags.HasErrors() && !got.RawEquals(want) {
			t.Errorf("%s = %#v, go-cty's %#v", expr, got, want)
		}
	}
}
