package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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
