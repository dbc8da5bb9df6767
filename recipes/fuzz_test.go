package recipes_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/textsafe/textsafetest"
	"github.com/gpuaas/imagectl/recipes"
)

// maxLoad bounds the time one input may take to load, plan and render:
// inputs are at most hclkit.MaxInputSize, and nothing in loading them is worse
// than linear (far less than this, even under the race detector).
const maxLoad = 20 * time.Second

// FuzzLoad feeds arbitrary bytes to the recipe loader, and whatever loads to
// the planner and both renderers. Nothing in a recipe may make imagectl
// panic or overflow its stack, take more than maxLoad, print more than
// hclkit.MaxDiagnostics diagnostics, or print a control character from the input.
// The seed corpus is every fixture and shipped recipe and the checked-in
// inputs under testdata/fuzz/FuzzLoad (deep nesting of each kind, long
// lists, random bytes, invalid UTF-8 and escape sequences, each under 20
// KB); TestLargeHostileInputs checks larger ones of the same kinds, which
// would leave the fuzzer mutating megabytes at a few inputs a second.
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
	f.Fuzz(checkLoad)
}

// TestLargeHostileInputs holds the inputs that took imagectl down to what
// FuzzLoad holds any input to.
func TestLargeHostileInputs(t *testing.T) {
	for i, src := range largeSeeds() {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkLoad(t, src) })
	}
}

var diagHeader = regexp.MustCompile(`(?m)^(\S+:\d+:\d+: )?(error|warning): `)

// checkLoad loads src as a recipe, renders what it gives and checks the
// properties FuzzLoad promises.
func checkLoad(t *testing.T, src []byte) {
	// Load from the fixtures' directory so relative sources resolve to
	// real files as often as they can.
	dir, err := filepath.Abs("../testdata/recipes/valid")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p := recipes.NewParser()
	r, diags := p.LoadSource(filepath.Join(dir, "fuzz-input.hcl"), src, recipes.Options{})
	var text bytes.Buffer
	if err := hclkit.WriteDiagnostics(&text, p.Files(), diags, false); err != nil {
		t.Fatal(err)
	}
	_ = hclkit.WriteDiagnostics(io.Discard, p.Files(), diags, true)
	js := hclkit.DiagnosticsJSON(diags)
	if n := len(diagHeader.FindAllIndex(text.Bytes(), -1)); n > hclkit.MaxDiagnostics {
		t.Errorf("%d diagnostics printed, more than %d", n, hclkit.MaxDiagnostics)
	}
	if len(js) > hclkit.MaxDiagnostics+1 {
		t.Errorf("%d JSON diagnostics, more than %d and the count of the rest", len(js), hclkit.MaxDiagnostics)
	}
	if u := textsafetest.Unprintable(text.String()); u != "" {
		t.Errorf("the diagnostics print %s:\n%s", u, text.String())
	}
	for _, d := range js {
		for _, s := range []string{d.Summary, d.Detail} {
			if u := textsafetest.Unprintable(s); u != "" {
				t.Errorf("a JSON diagnostic holds %s: %q", u, s)
			}
		}
	}
	if _, fd := recipes.Format(src, "fuzz.hcl"); fd.HasErrors() && !diags.HasErrors() {
		t.Errorf("loaded, but Format reports syntax errors: %s", fd.Error())
	}
	if r == nil {
		if !diags.HasErrors() {
			t.Fatal("no recipe and no error")
		}
	} else {
		plan, err := plan.New(r, plan.Options{Version: "1"})
		if err != nil {
			t.Fatalf("a loaded recipe failed to plan: %v", err)
		}
		if err := plan.WriteText(io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := plan.WriteJSON(io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > maxLoad {
		t.Errorf("took %s (%d bytes)", took, len(src))
	}
}

// largeSeeds are inputs of the kinds that took imagectl down, too large to
// check in: nesting far past the limit (60,000 brackets overflowed the
// stack), a package list as long as Debian's (loading was quadratic in it),
// and 100 KB of random bytes (3,606 diagnostics, escape sequences and all).
func largeSeeds() [][]byte {
	recipe := func(packages string) []byte {
		return []byte("image \"x\" {\n  title = \"x\"\n  base {\n    source   = \"b.qcow2\"\n    checksum = \"sha256:" +
			strings.Repeat("0", 64) + "\"\n  }\n  layer \"l\" {\n    packages = " + packages + "\n  }\n}\n")
	}
	var list strings.Builder
	list.WriteString("[")
	for i := range 16000 {
		fmt.Fprintf(&list, "\"pkg%d\", ", i)
	}
	list.WriteString("]")
	garbage := make([]byte, 100<<10)
	rand.New(rand.NewSource(1)).Read(garbage)
	return [][]byte{
		recipe(strings.Repeat("[", 60000) + strings.Repeat("]", 60000)),
		recipe(strings.Repeat("(", 60000) + "1" + strings.Repeat(")", 60000)),
		recipe(strings.Repeat("!", 200000) + "true"),
		recipe(strings.Repeat("1 + ", 200000) + "1"),
		recipe(list.String()),
		garbage,
		append(recipe(`"x"`), bytes.Repeat([]byte("\x1b[2J\xff\u009b\n"), 20000)...),
	}
}
