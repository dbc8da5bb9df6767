package sbom

import (
	"io"
	"strings"

	"github.com/gpuaas/imagectl/internal/deb822"
)

// osReleasePaths are where os-release is, normalized, in the order
// systemd reads them.
var osReleasePaths = []string{"etc/os-release", "usr/lib/os-release"}

// parseOSRelease reads an os-release file: shell-style KEY=value lines,
// values optionally quoted.
func parseOSRelease(r io.Reader) (OSRelease, error) {
	var o OSRelease
	err := deb822.Lines(io.LimitReader(r, textLimit), lineLimit, func(line string) error {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			return nil
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil
		}
		value = unquote(strings.TrimSpace(value))
		switch strings.TrimSpace(key) {
		case "ID":
			o.ID = value
		case "VERSION_ID":
			o.VersionID = value
		case "VERSION_CODENAME":
			o.VersionCodename = value
		case "PRETTY_NAME":
			o.PrettyName = value
		}
		return nil
	})
	return o, err
}

// unquote removes a shell value's quotes: single quotes as they are,
// double quotes with their backslash escapes.
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		return v[1 : len(v)-1]
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("\"\\$`", v[i+1]) >= 0 {
				i++
			}
			b.WriteByte(v[i])
		}
		return b.String()
	}
	return v
}
