package recipes

import (
	"fmt"
	"unicode/utf8"
)

// Unprintable names the first control character but newline and tab, C1
// control or invalid UTF-8 in s, or returns "": the fuzz test's check that
// nothing from a recipe reaches the terminal as it is.
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
