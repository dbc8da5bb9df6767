package recipes

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// SortDiagnostics orders diagnostics by file and position, those without a
// source range first, keeping discovery order among equals.
func SortDiagnostics(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
}

// WriteDiagnostics prints diagnostics the way compilers do:
//
//	recipes/h200.hcl:12:5: error: Unsupported argument
//	   12 |     pakages = ["curl"]
//	      |     ^^^^^^^
//	  An argument named "pakages" is not expected here. Did you mean "packages"?
//
// followed by a count. files supplies the snippets (Parser.Files).
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, color bool) error {
	bw := bufio.NewWriter(w)
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	SortDiagnostics(diags)
	var errs, warns int
	for _, d := range diags {
		sev := paint("1;31", "error")
		if d.Severity == hcl.DiagWarning {
			sev = paint("1;33", "warning")
			warns++
		} else {
			errs++
		}
		if d.Subject != nil {
			fmt.Fprintf(bw, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, paint("1", d.Summary))
			writeSnippet(bw, files, d.Subject, paint)
		} else {
			fmt.Fprintf(bw, "%s: %s\n", sev, paint("1", d.Summary))
		}
		if d.Detail != "" {
			for _, line := range strings.Split(strings.TrimSpace(d.Detail), "\n") {
				fmt.Fprintf(bw, "  %s\n", line)
			}
		}
		if d.Context != nil && (d.Subject == nil || d.Context.Filename != d.Subject.Filename || d.Context.Start.Line != d.Subject.Start.Line) {
			fmt.Fprintf(bw, "  (see %s)\n", d.Context)
		}
		fmt.Fprintln(bw)
	}
	switch {
	case errs > 0 || warns > 0:
		fmt.Fprintf(bw, "%s, %s\n", plural(errs, "error"), plural(warns, "warning"))
	}
	return bw.Flush()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// writeSnippet prints the source line of rng with a caret underline.
func writeSnippet(w io.Writer, files map[string]*hcl.File, rng *hcl.Range, paint func(string, string) string) {
	f := files[rng.Filename]
	if f == nil || len(f.Bytes) == 0 {
		return
	}
	lines := bytes.Split(f.Bytes, []byte("\n"))
	if rng.Start.Line < 1 || rng.Start.Line > len(lines) {
		return
	}
	line := strings.TrimRight(string(lines[rng.Start.Line-1]), "\r")
	line = strings.ReplaceAll(line, "\t", " ")
	num := fmt.Sprintf("%5d", rng.Start.Line)
	fmt.Fprintf(w, "%s | %s\n", num, line)
	start := rng.Start.Column - 1
	if start < 0 || start > len(line) {
		return
	}
	end := len(line)
	if rng.End.Line == rng.Start.Line && rng.End.Column-1 <= len(line) {
		end = rng.End.Column - 1
	}
	width := end - start
	if width < 1 {
		width = 1
	}
	fmt.Fprintf(w, "%s | %s%s\n", strings.Repeat(" ", len(num)), strings.Repeat(" ", runeCount(line[:start])), paint("1;31", strings.Repeat("^", runeCount(line[start:start+min(width, len(line)-start)])+boolInt(start == len(line)))))
}

func runeCount(s string) int { return len([]rune(s)) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// JSONDiagnostic is a diagnostic for --output json.
type JSONDiagnostic struct {
	Severity string     `json:"severity"`
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail,omitempty"`
	Range    *JSONRange `json:"range,omitempty"`
}

// JSONRange is a source range; lines and columns count from 1.
type JSONRange struct {
	Filename    string `json:"filename"`
	StartLine   int    `json:"start_line"`
	StartColumn int    `json:"start_column"`
	EndLine     int    `json:"end_line"`
	EndColumn   int    `json:"end_column"`
}

// DiagnosticsJSON converts diagnostics for machine-readable output.
func DiagnosticsJSON(diags hcl.Diagnostics) []JSONDiagnostic {
	SortDiagnostics(diags)
	out := make([]JSONDiagnostic, 0, len(diags))
	for _, d := range diags {
		jd := JSONDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
		}
		if s := d.Subject; s != nil {
			jd.Range = &JSONRange{Filename: s.Filename, StartLine: s.Start.Line, StartColumn: s.Start.Column, EndLine: s.End.Line, EndColumn: s.End.Column}
		}
		out = append(out, jd)
	}
	return out
}
