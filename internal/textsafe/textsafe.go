// Package textsafe owns how text that came from input (a recipe, a tar
// entry name, a manifest, an SBOM, a server's answer) is made safe to
// print: Terminal, Escape and Fprintf for a terminal or a log, where a
// control character, an escape sequence, a bidi override or invalid UTF-8
// is written as a Go escape (\x1b, \u202e, \xff) instead of driving the
// terminal or starting a line of its own; MarkdownText and MarkdownCode
// for a Markdown document, where nothing from the data becomes a heading,
// a list, a link, a table or HTML. JSON needs neither: its encoding
// escapes already.
package textsafe

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Terminal returns s with every character that is not printable written as
// a Go escape: control characters (newline and tab too: a value printed on
// one line stays on it), C1 controls, bidi overrides and other format
// characters, invalid UTF-8, and U+FFFD itself (which a terminal shows for
// invalid UTF-8). Printable text is returned as it is.
func Terminal(s string) string { return Escape(s, "") }

// Escape is Terminal, except that the characters in keep stay as they are
// (Escape(s, "\n\t") for text whose lines are its structure).
func Escape(s, keep string) string {
	if clean(s, keep) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strings.ContainsRune(keep, r) || (r != utf8.RuneError && strconv.IsPrint(r)):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u0085', '\ufffd'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// Fprintf is fmt.Fprintf with every argument that is text (a string, a
// type whose kind is string, an error) escaped as Terminal does, so that a
// format's own newlines are the only ones printed: for output whose values
// came from input.
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, Args(args...)...)
}

// Args returns args with every text argument escaped as Terminal does (see
// Fprintf): a string, a type whose kind is string, an error, and what a
// Stringer that is not a number prints; the others as they are.
func Args(args ...any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = Terminal(v)
		case error:
			out[i] = Terminal(v.Error())
		case fmt.Stringer:
			// What %s and %v print; a number with a String method
			// (a Duration, a mode) may be formatted as a number.
			if numeric(a) {
				out[i] = a
			} else {
				out[i] = Terminal(v.String())
			}
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				out[i] = Terminal(rv.String())
			} else {
				out[i] = a
			}
		}
	}
	return out
}

// numeric reports whether a is of a kind that %d, %x or %f may format.
func numeric(a any) bool {
	switch reflect.ValueOf(a).Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}

// clean reports whether Escape(s, keep) is s.
func clean(s, keep string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || (!strconv.IsPrint(r) && !strings.ContainsRune(keep, r)) {
			return false
		}
		i += size
	}
	return true
}

// Cut returns s cut to at most n characters, "…" marking a cut; it never
// cuts a character in two.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// markdownSpecial are the characters that start Markdown (CommonMark and
// GitHub's) inline syntax anywhere on a line: emphasis, code, links and
// images, autolinks and HTML, entities, tables, strikethrough, math, and
// the closing #s of a heading. A backslash before each makes it text.
const markdownSpecial = "\\`*_[]<>&!|~#$"

// MarkdownText returns s for the inside of a Markdown line (after other
// text, such as "## "): escaped as Terminal does, so it stays on its line,
// and with a backslash before every character that could start Markdown
// syntax, so that it reads as the text it is.
func MarkdownText(s string) string {
	s = Terminal(s)
	if !strings.ContainsAny(s, markdownSpecial) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(markdownSpecial, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// MarkdownCode returns s as a Markdown code span, escaped as Terminal does:
// nothing inside a code span is Markdown, and its fence is longer than any
// run of backticks in s, so s cannot close it.
func MarkdownCode(s string) string {
	s = Terminal(s)
	run, longest := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	// A span that starts or ends with a backtick needs a space between it
	// and the fence; one space each side is stripped again when both are
	// there (CommonMark), so a span that has them keeps its own.
	if s == "" || s[0] == '`' || s[len(s)-1] == '`' || (s[0] == ' ' && s[len(s)-1] == ' ') {
		s = " " + s + " "
	}
	return fence + s + fence
}
