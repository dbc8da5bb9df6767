// Package hclkittest owns the tests' rule for invalid fixtures of the HCL
// languages (recipes, sites): each line that should cause a diagnostic says
// so in a comment, "# ERROR: <summary>" (or "# WARNING:"), once per
// diagnostic, as terraform's error fixtures do. Only tests import it.
package hclkittest

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
)

var expectRE = regexp.MustCompile(`(ERROR|WARNING): ([^#]+)`)

// Expectations returns the diagnostics the fixture at path asks for, one
// "LINE SEVERITY: summary" each, sorted.
func Expectations(t testing.TB, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	sc := bufio.NewScanner(bytes.NewReader(src))
	for line := 1; sc.Scan(); line++ {
		for _, m := range expectRE.FindAllStringSubmatch(sc.Text(), -1) {
			want = append(want, fmt.Sprintf("%d %s: %s", line, m[1], strings.TrimSpace(m[2])))
		}
	}
	sort.Strings(want)
	return want
}

// Check fails the test unless diags are exactly what the fixture at path
// asks for: every diagnostic carries a source range in that file and a
// detail, and lands on a line whose comment names its severity and
// summary; every such comment is met.
func Check(t testing.TB, path string, diags hcl.Diagnostics) {
	t.Helper()
	want := Expectations(t, path)
	var got []string
	for _, d := range diags {
		if d.Subject == nil {
			t.Errorf("diagnostic without a source range: %s: %s", d.Summary, d.Detail)
			continue
		}
		if filepath.Clean(d.Subject.Filename) != filepath.Clean(path) {
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
}
