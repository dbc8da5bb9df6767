package sbom

import (
	"io"
	"strings"

	"github.com/gpuaas/imagectl/internal/deb822"
)

// statusPath is the dpkg database's status file, normalized.
const statusPath = "var/lib/dpkg/status"

// parseStatus reads a dpkg status file's installed packages: those whose
// Status field's third word is "installed" (not config-files, half-installed
// and the like).
func parseStatus(r io.Reader) ([]Package, error) {
	var pkgs []Package
	err := deb822.Paragraphs(r, false, lineLimit, func(f map[string]string) error {
		status := strings.Fields(f["status"])
		if len(status) != 3 || status[2] != "installed" || f["package"] == "" {
			return nil
		}
		p := Package{
			Name:         f["package"],
			Version:      f["version"],
			Architecture: f["architecture"],
			Maintainer:   firstLine(f["maintainer"]),
		}
		p.Source, p.SourceVersion = sourceOf(firstLine(f["source"]), p.Name, p.Version)
		pkgs = append(pkgs, p)
		return nil
	})
	return pkgs, err
}

// sourceOf parses a Source field: absent (the package is its own source),
// "glibc" (the binary's version) or "glibc (2.36-9)".
func sourceOf(field, name, version string) (string, string) {
	if field == "" {
		return name, version
	}
	src, ver, ok := strings.Cut(field, "(")
	src = strings.TrimSpace(src)
	if !ok {
		return src, version
	}
	ver = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(ver), ")"))
	if ver == "" {
		ver = version
	}
	return src, ver
}

// firstLine is a field value's first line.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
