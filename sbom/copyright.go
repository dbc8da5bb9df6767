package sbom

import (
	"io"
	"regexp"
	"strings"
)

// copyrightPath matches a package's copyright file, normalized:
// usr/share/doc/<package>/copyright.
var copyrightPath = regexp.MustCompile(`^usr/share/doc/[^/]+/copyright$`)

// licenseField matches a DEP-5 License field at the start of a line.
var licenseField = regexp.MustCompile(`(?i)^License:\s*(.+)$`)

// parseCopyright returns the License values of a Debian copyright file
// (machine-readable, DEP-5), unique and in order, reading at most textLimit
// bytes and skipping lines longer than lineLimit. Continuation lines (the
// license texts) are not fields.
func parseCopyright(r io.Reader) ([]string, error) {
	var licenses []string
	seen := map[string]bool{}
	err := eachLine(io.LimitReader(r, textLimit), lineLimit, func(line string) error {
		m := licenseField.FindStringSubmatch(line)
		if m == nil {
			return nil
		}
		v := strings.TrimSpace(m[1])
		if v != "" && !seen[v] {
			seen[v] = true
			licenses = append(licenses, v)
		}
		return nil
	})
	return licenses, err
}
