package hclkit

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/textsafe"
)

// ErrorAt is an error diagnostic about what stands at rng.
func ErrorAt(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}
}

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

// MaxDiagnostics is how many diagnostics WriteDiagnostics and
// DiagnosticsJSON show: a file of random bytes has thousands, and the first
// ones are what to fix. The rest are counted, not shown.
const MaxDiagnostics = 50

// shownDiagnostics sorts diags (SortDiagnostics) and returns those to show,
// in order, and how many errors and warnings are left out. When there are
// too many, errors are shown before warnings.
func shownDiagnostics(diags hcl.Diagnostics) (shown hcl.Diagnostics, moreErrs, moreWarns int) {
	SortDiagnostics(diags)
	if len(diags) <= MaxDiagnostics {
		return diags, 0, 0
	}
	var errs int
	for _, d := range diags {
		if d.Severity != hcl.DiagWarning {
			errs++
		}
	}
	warnRoom := max(MaxDiagnostics-errs, 0)
	for _, d := range diags {
		switch {
		case d.Severity != hcl.DiagWarning && len(shown) < MaxDiagnostics:
			shown = append(shown, d)
		case d.Severity == hcl.DiagWarning && warnRoom > 0:
			shown = append(shown, d)
			warnRoom--
		case d.Severity == hcl.DiagWarning:
			moreWarns++
		default:
			moreErrs++
		}
	}
	return shown, moreErrs, moreWarns
}

// WriteDiagnostics prints diagnostics the way compilers do:
//
//	recipes/h200.hcl:12:5: error: Unsupported argument
//	   12 |     pakages = ["curl"]
//	      |     ^^^^^^^
//	  An argument named "pakages" is not expected here. Did you mean "packages"?
//
// followed by a count. files supplies the snippets (recipes.Parser.Files,
// sites.Sites.Files). At most
// MaxDiagnostics are printed, and the count says how many more there are.
// Nothing from the input reaches the terminal as it is: control characters
// and invalid UTF-8 are escaped (\x1b, \u0085, \xff), and long source lines
// are cut around the place.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, color bool) error {
	bw := bufio.NewWriter(w)
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	shown, moreErrs, moreWarns := shownDiagnostics(diags)
	lines := map[string][]int{}
	for _, d := range shown {
		sev := paint("1;31", "error")
		if d.Severity == hcl.DiagWarning {
			sev = paint("1;33", "warning")
		}
		summary := paint("1", escapeText(d.Summary, ""))
		if d.Subject != nil {
			fmt.Fprintf(bw, "%s:%d:%d: %s: %s\n", escapeText(d.Subject.Filename, ""), d.Subject.Start.Line, d.Subject.Start.Column, sev, summary)
			writeSnippet(bw, files, lines, d.Subject, paint)
		} else {
			fmt.Fprintf(bw, "%s: %s\n", sev, summary)
		}
		if d.Detail != "" {
			for _, line := range strings.Split(strings.TrimSpace(d.Detail), "\n") {
				fmt.Fprintf(bw, "  %s\n", escapeText(line, "\t"))
			}
		}
		if d.Context != nil && (d.Subject == nil || d.Context.Filename != d.Subject.Filename || d.Context.Start.Line != d.Subject.Start.Line) {
			fmt.Fprintf(bw, "  (see %s)\n", escapeText(d.Context.String(), ""))
		}
		fmt.Fprintln(bw)
	}
	if moreErrs+moreWarns > 0 {
		fmt.Fprintf(bw, "... and %s not shown (imagectl shows %d)\n", moreText(moreErrs, moreWarns), MaxDiagnostics)
	}
	var errs, warns int
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			warns++
		} else {
			errs++
		}
	}
	if errs > 0 || warns > 0 {
		fmt.Fprintf(bw, "%s, %s\n", plural(errs, "error"), plural(warns, "warning"))
	}
	return bw.Flush()
}

// moreText says how many errors and warnings are left out.
func moreText(errs, warns int) string {
	switch {
	case warns == 0:
		return fmt.Sprintf("%d more %s", errs, pluralWord(errs, "error"))
	case errs == 0:
		return fmt.Sprintf("%d more %s", warns, pluralWord(warns, "warning"))
	}
	return fmt.Sprintf("%d more %s and %s", errs, pluralWord(errs, "error"), plural(warns, "warning"))
}

func plural(n int, word string) string { return fmt.Sprintf("%d %s", n, pluralWord(n, word)) }

func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// escapeText writes the characters of s that are not printable as Go
// escapes, keeping those in keep (textsafe.Escape), so that text from a
// recipe or a sites file cannot drive the terminal it is printed on.
func escapeText(s, keep string) string { return textsafe.Escape(s, keep) }

// cutRunes returns s cut to at most n characters, "..." marking a cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// lineStarts returns the byte offsets at which the lines of src start.
func lineStarts(src []byte) []int {
	starts := []int{0}
	for i, c := range src {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// Snippet widths, in characters: a source line is cut to about snippetWidth
// around the place, of which the marked part takes at most snippetMark.
const (
	snippetWidth = 120
	snippetMark  = 60
)

// writeSnippet prints the source line of rng with a caret underline; index
// caches each file's line starts.
func writeSnippet(w io.Writer, files map[string]*hcl.File, index map[string][]int, rng *hcl.Range, paint func(string, string) string) {
	f := files[rng.Filename]
	if f == nil || len(f.Bytes) == 0 {
		return
	}
	starts, ok := index[rng.Filename]
	if !ok {
		starts = lineStarts(f.Bytes)
		index[rng.Filename] = starts
	}
	if rng.Start.Line < 1 || rng.Start.Line > len(starts) {
		return
	}
	lineStart := starts[rng.Start.Line-1]
	lineEnd := len(f.Bytes)
	if rng.Start.Line < len(starts) {
		lineEnd = starts[rng.Start.Line] - 1
	}
	line := strings.TrimRight(string(f.Bytes[lineStart:lineEnd]), "\r")
	// The marked part, in bytes of line: from the range's start to its end
	// or the end of the line.
	from, to := rng.Start.Byte-lineStart, len(line)
	if from < 0 || from > len(line) {
		// The range's offset is not on its line: the line, without a caret.
		fmt.Fprintf(w, "%5d | %s\n", rng.Start.Line, escapeText(strings.ReplaceAll(cutRunes(line, snippetWidth), "\t", " "), ""))
		return
	}
	if rng.End.Line == rng.Start.Line && rng.End.Byte-lineStart >= from && rng.End.Byte-lineStart <= len(line) {
		to = rng.End.Byte - lineStart
	}
	show := func(s string) []rune { return []rune(escapeText(strings.ReplaceAll(s, "\t", " "), "")) }
	before, marked, after := show(line[:from]), show(line[from:to]), show(line[to:])
	var cutBefore, cutAfter bool
	if len(marked) > snippetMark {
		marked, after, cutAfter = marked[:snippetMark], nil, true
	}
	if room := snippetWidth - len(marked); len(before)+len(after) > room {
		keepBefore := min(len(before), max(room/3, room-len(after)))
		if keepBefore < len(before) {
			before, cutBefore = before[len(before)-keepBefore:], true
		}
		if keep := room - len(before); keep < len(after) {
			after, cutAfter = after[:max(keep, 0)], true
		}
	}
	lead := ""
	if cutBefore {
		lead = "..."
	}
	tail := ""
	if cutAfter {
		tail = "..."
	}
	num := fmt.Sprintf("%5d", rng.Start.Line)
	fmt.Fprintf(w, "%s | %s%s%s%s%s\n", num, lead, string(before), string(marked), string(after), tail)
	width := max(len(marked), 1)
	fmt.Fprintf(w, "%s | %s%s\n", strings.Repeat(" ", len(num)), strings.Repeat(" ", len(lead)+len(before)), paint("1;31", strings.Repeat("^", width)))
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

// DiagnosticsJSON converts diagnostics for machine-readable output: at
// most MaxDiagnostics of them, then, when there were more, one that says
// how many more. Text from the input is escaped as WriteDiagnostics does
// (newlines and tabs stay in details), so no control character reaches
// the output even after a JSON decoder.
func DiagnosticsJSON(diags hcl.Diagnostics) []JSONDiagnostic {
	shown, moreErrs, moreWarns := shownDiagnostics(diags)
	out := make([]JSONDiagnostic, 0, len(shown)+1)
	for _, d := range shown {
		jd := JSONDiagnostic{Severity: "error", Summary: escapeText(d.Summary, ""), Detail: escapeText(d.Detail, "\n\t")}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
		}
		if s := d.Subject; s != nil {
			jd.Range = &JSONRange{Filename: escapeText(s.Filename, ""), StartLine: s.Start.Line, StartColumn: s.Start.Column, EndLine: s.End.Line, EndColumn: s.End.Column}
		}
		out = append(out, jd)
	}
	if moreErrs+moreWarns > 0 {
		sev := "error"
		if moreErrs == 0 {
			sev = "warning"
		}
		out = append(out, JSONDiagnostic{Severity: sev, Summary: "Too many diagnostics",
			Detail: fmt.Sprintf("%s are not shown: imagectl shows %d.", moreText(moreErrs, moreWarns), MaxDiagnostics)})
	}
	return out
}
