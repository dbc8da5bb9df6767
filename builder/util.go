package builder

import (
	"compress/gzip"
	"io"
	"strings"
)

// indent prefixes every line with four spaces, for command output in errors.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

func gzipReader(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
