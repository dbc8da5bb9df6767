package hclkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/internal/textsafe/textsafetest"
	"github.com/hashicorp/hcl/v2"
)

func rangeAt(file string, line, col, byteOff, width int) *hcl.Range {
	return &hcl.Range{Filename: file,
		Start: hcl.Pos{Line: line, Column: col, Byte: byteOff},
		End:   hcl.Pos{Line: line, Column: col + width, Byte: byteOff + width}}
}

func TestWriteDiagnosticsSnippet(t *testing.T) {
	src := "layer \"l\" {\n    pakages = [\"curl\"]\n}\n"
	files := map[string]*hcl.File{"r.hcl": {Bytes: []byte(src)}}
	diags := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported argument",
		Detail: `An argument named "pakages" is not expected here.`, Subject: rangeAt("r.hcl", 2, 5, 16, 7)}}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, files, diags, false); err != nil {
		t.Fatal(err)
	}
	want := `r.hcl:2:5: error: Unsupported argument
    2 |     pakages = ["curl"]
      |     ^^^^^^^
  An argument named "pakages" is not expected here.

1 error, 0 warnings
`
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestWriteDiagnosticsBounded: 100 KB of random bytes printed 3,606
// diagnostics (1.6 MB). Now MaxDiagnostics are printed, errors before
// warnings, and the rest counted.
func TestWriteDiagnosticsBounded(t *testing.T) {
	src := strings.Repeat("x\n", 4000)
	files := map[string]*hcl.File{"r.hcl": {Bytes: []byte(src)}}
	var diags hcl.Diagnostics
	for i := range 3000 {
		sev := hcl.DiagError
		if i < 1000 {
			sev = hcl.DiagWarning // first in the file: errors must still come first
		}
		diags = append(diags, &hcl.Diagnostic{Severity: sev, Summary: fmt.Sprintf("Problem %d", i), Detail: "Detail.", Subject: rangeAt("r.hcl", i+1, 1, 2*i, 1)})
	}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, files, diags, false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, ": error: "); n != MaxDiagnostics {
		t.Errorf("%d errors printed, want %d", n, MaxDiagnostics)
	}
	if strings.Contains(out, ": warning: ") {
		t.Error("warnings printed while errors were left out")
	}
	if !strings.HasSuffix(out, "... and 1950 more errors and 1000 warnings not shown (imagectl shows 50)\n2000 errors, 1000 warnings\n") {
		t.Errorf("output ends:\n%s", out[max(0, len(out)-300):])
	}
	js := DiagnosticsJSON(diags)
	if len(js) != MaxDiagnostics+1 || js[MaxDiagnostics].Summary != "Too many diagnostics" ||
		js[MaxDiagnostics].Detail != "1950 more errors and 1000 warnings are not shown: imagectl shows 50." {
		t.Errorf("%d JSON diagnostics, the last %+v", len(js), js[len(js)-1])
	}
}

// TestDiagnosticsEscapeInput: text from the input (the source line, a
// value quoted in a message, the file name) used to reach the terminal
// raw, escape sequences included.
func TestDiagnosticsEscapeInput(t *testing.T) {
	src := "title = \"\x1b[2J\x1b]0;pwned\x07\xff\xfe\u202e\u009b\"\n"
	name := "r\x1b[31m.hcl"
	files := map[string]*hcl.File{name: {Bytes: []byte(src)}}
	diags := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Bad \x1b[5mtitle",
		Detail: "The title \"\x1b[2J\u009b\xff\" is wrong.\n\tIndented.", Subject: rangeAt(name, 1, 9, 8, 20)}}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, files, diags, false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if u := textsafetest.Unprintable(out); u != "" {
		t.Errorf("text output holds %s:\n%q", u, out)
	}
	testenv.Holds(t, "text output", out, `r\x1b[31m.hcl:1:9: error: Bad \x1b[5mtitle`, `title = "\x1b[2J\x1b]0;pwned\a\xff\xfe\u202e\u009b"`,
		"\n      |         "+strings.Repeat("^", len(`"\x1b[2J\x1b]0;pwned\a\xff\xfe\u202e`))+"\n", `The title "\x1b[2J\u009b\xff" is wrong.`, "\n  \tIndented.")
	b, err := json.Marshal(DiagnosticsJSON(diags))
	if err != nil {
		t.Fatal(err)
	}
	var back []JSONDiagnostic
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{string(b), back[0].Summary, back[0].Detail, back[0].Range.Filename} {
		if u := textsafetest.Unprintable(s); u != "" {
			t.Errorf("JSON output holds %s: %q", u, s)
		}
	}
	if back[0].Detail != `The title "\x1b[2J\u009b\xff" is wrong.`+"\n\tIndented." {
		t.Errorf("JSON detail %q", back[0].Detail)
	}
}

// TestSnippetLongLine: a 60,000-bracket line was printed whole in the
// snippet of each diagnostic on it. It is cut around the place, with the
// caret still under it.
func TestSnippetLongLine(t *testing.T) {
	line := strings.Repeat("[", 30000) + "X" + strings.Repeat("]", 30000)
	files := map[string]*hcl.File{"r.hcl": {Bytes: []byte(line + "\n")}}
	diags := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Here", Subject: rangeAt("r.hcl", 1, 30001, 30000, 1)}}
	var buf bytes.Buffer
	if err := WriteDiagnostics(&buf, files, diags, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	src, caret := lines[1], lines[2]
	if len(src) > snippetWidth+20 || !strings.Contains(src, " | ...[") || !strings.HasSuffix(src, "]...") {
		t.Errorf("snippet line %q", src)
	}
	if i := strings.Index(caret, "^"); i < 0 || src[i] != 'X' || strings.Count(caret, "^") != 1 {
		t.Errorf("caret not under X:\n%s\n%s", src, caret)
	}
}
