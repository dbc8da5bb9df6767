package recipes

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestFunctionResultsAreBounded: a few bytes of recipe asked a function
// for gigabytes (indent(1e9, s) reached 2 GB) and the kernel killed
// imagectl; now each call says what is too large,
// before it runs where an argument sets the size, and after it runs
// otherwise, which stops a chain of locals doubling a string.
func TestFunctionResultsAreBounded(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ expr, want string }{
		{`indent(1000000000, "a\nb")`, "indenting 2 lines by 1000000000 spaces"},
		{`format("%1000000000d", 1)`, "width or precision 1000000000"},
		{`formatlist("%.99999999f", [1])`, "width or precision 99999999"},
		{`join("", [for i in range(1000): format("%20000d", i)])`, "the result of join is larger than 16 MiB"},
	} {
		_, err := evalIn(t, dir, tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.expr, err, tc.want)
		}
	}
	// Within the bounds, the same functions work as they always did.
	for _, tc := range []struct{ expr, want string }{
		{`range(3, 0, -1)`, `[3,2,1]`},
		{`indent(4, "a\nb")`, `"a\n    b"`},
		{`format("%05.1f|%-4s|%[1]d", 3, "x")`, `"003.0|x   |3"`},
		{`length(join(",", [for i in range(1000): join(",", [for j in range(100): "p${i}-${j}"])]))`, `778999`},
	} {
		got, err := evalIn(t, dir, tc.expr)
		if err != nil || got != tc.want {
			t.Errorf("%s = %s, %v; want %s", tc.expr, got, err, tc.want)
		}
	}
}

// TestReadsAreBounded: what a recipe reads into memory (templates, file(),
// file sources, keys) is bounded too, without reading past the bound: a
// 10 GB file in the tree would have been read whole.
func TestReadsAreBounded(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int64{"big.tmpl": hclkit.MaxInputSize + 1, "big.bin": maxResultBytes + 1, "huge.bin": 10 << 30} {
		testenv.Sparse(t, filepath.Join(dir, name), size)
	}
	for _, tc := range []struct{ expr, want string }{
		{`templatefile("big.tmpl", {})`, "big.tmpl is larger than 1 MiB"},
		{`file("big.bin")`, "big.bin is larger than 16 MiB"},
	} {
		if _, err := evalIn(t, dir, tc.expr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.expr, err, tc.want)
		}
	}
	// fileexists and filesha256 read no file into memory: any size will do.
	for expr, want := range map[string]string{
		`fileexists("huge.bin")`: `true`,
		`fileexists("nope")`:     `false`,
		`filesha256("big.bin")`:  `"` + sparseSHA256(maxResultBytes+1) + `"`,
	} {
		if got, err := evalIn(t, dir, expr); err != nil || got != want {
			t.Errorf("%s = %s, %v; want %s", expr, got, err, want)
		}
	}
}

func sparseSHA256(n int) string {
	h := sha256.New()
	h.Write(make([]byte, n))
	return hex.EncodeToString(h.Sum(nil))
}
