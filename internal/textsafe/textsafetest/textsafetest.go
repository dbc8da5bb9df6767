// Package textsafetest holds the tests' own check that text bound for a
// terminal is safe, written apart from textsafe so that it does not share
// textsafe's mistakes. Only tests import it.
package textsafetest

import (
	"fmt"
	"unicode/utf8"
)

// Unprintable names the first control character but newline and tab, C1
// control or invalid UTF-8 in s, or returns "".
func Unprintable(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for i, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			return fmt.Sprintf("%U at byte %d", r, i)
		}
	}
	return ""
}
