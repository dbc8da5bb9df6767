// Package shell owns how values enter the shell imagectl generates or
// runs: every value written into a script, a sourced drop-in or a command
// line goes through Quote (or Join), and every value written into a
// comment line through Comment, so that data stays data. (The one
// exception is the curl command package profile prints for a person to run,
// which double-quotes, escaping every value, so that its ${SITE_ID}-style
// placeholders still expand.) It also owns the rule for a variable's name
// (IsName).
package shell

import (
	"strings"

	"github.com/gpuaas/imagectl/internal/textsafe"
)

// Quote returns s as one POSIX shell word that stands for exactly s:
// single-quoted, each ' ending the quote, escaped, and reopening it. Inside single quotes no shell
// expands anything ($, `, \, globs, ~, newlines are all literal). A NUL
// byte cannot be carried by any shell word: callers refuse it first.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each argument and joins them with spaces.
func Join(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// Comment returns s fit for the text of a "#" comment line: every
// character that is not printable (newlines and other control characters,
// which would end the comment and start a command, C1 controls, format
// characters such as bidi overrides, invalid UTF-8) is written as a Go
// escape (\n, \x1b, \u202e, \xff), as textsafe.Terminal writes it.
func Comment(s string) string { return textsafe.Terminal(s) }
