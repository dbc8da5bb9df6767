package recipes

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/hclkit"
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

var expectRE = regexp.MustCompile(`(ERROR|WARNING): ([^#]+)`)

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
			want := expectations(t, f)
			p := NewParser()
			r, diags := p.LoadFile(f, Options{})
			if r != nil {
				t.Error("a recipe with errors was returned")
			}
			if !diags.HasErrors() {
				t.Fatal("no errors")
			}
			var got []string
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic without a source range: %s: %s", d.Summary, d.Detail)
					continue
				}
				if filepath.Clean(d.Subject.Filename) != filepath.Clean(f) {
					t.Errorf("diagnostic in another file: %s: %s", d.Subject, d.Summary)
					continue
				}
				sev := "ERROR"
				if d.Severity == hcl.DiagWarning {
					sev = "WARNING"
				}
				got = append(got, fmt.Sprintf("%d %s: %s", d.Subject.Start.Line, sev, d.Summary))
				if d.Detail == "" {
					t.Errorf("line %d: %q has no detail", d.Subject.Start.Line, d.Summary)
				}
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("diagnostics differ\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

func expectations(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		for _, m := range expectRE.FindAllStringSubmatch(sc.Text(), -1) {
			want = append(want, fmt.Sprintf("%d %s: %s", line, m[1], strings.TrimSpace(m[2])))
		}
	}
	sort.Strings(want)
	return want
}
