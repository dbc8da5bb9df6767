package sbom

import (
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/gpuaas/imagectl/internal/deb822"
)

// copyrightPath matches a package's copyright file, normalized:
// usr/share/doc/<package>/copyright.
var copyrightPath = regexp.MustCompile(`^usr/share/doc/[^/]+/copyright$`)

// licenseField matches a DEP-5 License field at the start of a line.
var licenseField = regexp.MustCompile(`(?i)^License:\s*(.+)$`)

// dep5 matches the Format field that opens a machine-readable (DEP-5)
// copyright file.
var dep5 = regexp.MustCompile(`(?i)^Format:\s*\S`)

// parseCopyright returns the License values of a Debian copyright file
// (machine-readable, DEP-5), unique and in order, reading at most textLimit
// bytes and skipping lines longer than lineLimit. Continuation lines (the
// license texts) are not fields. A free-form copyright file (no Format
// field first) states no license Scan can read: its prose is not parsed
// (syft does the same).
func parseCopyright(r io.Reader) ([]string, error) {
	var licenses []string
	seen := map[string]bool{}
	first := true
	err := deb822.Lines(io.LimitReader(r, textLimit), lineLimit, func(line string) error {
		if first {
			if strings.TrimSpace(line) == "" {
				return nil
			}
			first = false
			if !dep5.MatchString(line) {
				return errNotDEP5
			}
		}
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
	if err == errNotDEP5 {
		return nil, nil
	}
	return licenses, err
}

// errNotDEP5 stops reading a free-form copyright file.
var errNotDEP5 = errors.New("not a machine-readable copyright file")
