package upload

import (
	"regexp"
	"strings"
)

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// VersionedName is the immutable boot-resource name an image version is
// uploaded under: the MAAS name without its "custom/" prefix, a dash, and
// the version, lowercased with anything but letters, digits and dashes
// turned into dashes. Rack controllers cache boot resources by name, so a
// new version under a new name can never be served stale bytes.
func VersionedName(maasName, version string) string {
	base := strings.TrimPrefix(maasName, "custom/")
	v := strings.Trim(nonName.ReplaceAllString(strings.ToLower(version), "-"), "-")
	n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if v == "" {
		return n
	}
	return n + "-" + v
}

// DistroSeries is what a MAAS deploy (and a site profile's distro_series)
// uses to select the custom image with the given boot-resource name.
func DistroSeries(name string) string {
	return "custom/" + strings.TrimPrefix(name, "custom/")
}
