package manifest

import (
	"regexp"
	"strings"
)

// The names of a MAAS boot resource, as MAAS.VersionedName and
// MAAS.DistroSeries record them: the build plans them, upload and release
// use them, so they live here, beside the record, below all three.

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// customPrefix is MAAS's namespace of custom images.
const customPrefix = "custom/"

// VersionedName is the immutable boot-resource name an image version is
// uploaded under: the MAAS name without its "custom/" prefix, a dash, and
// the version, lowercased with anything but letters, digits and dashes
// turned into dashes. Rack controllers cache boot resources by name, so a
// new version under a new name can never be served stale bytes.
func VersionedName(maasName, version string) string {
	base := strings.TrimPrefix(maasName, customPrefix)
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
	return customPrefix + strings.TrimPrefix(name, customPrefix)
}

// BareName is a custom image's name without MAAS's "custom/" namespace.
func BareName(name string) string { return strings.TrimPrefix(name, customPrefix) }

// MAASName is the MAAS name the manifest's image is uploaded under: the
// recipe's maas block's name, or custom/<image>.
func (m *Manifest) MAASName() string {
	if m.MAAS != nil && m.MAAS.Name != "" {
		return m.MAAS.Name
	}
	return DistroSeries(m.Image.Name)
}

// SameName reports whether two names of a custom image, boot-resource
// names or distro_series values, name the same image: MAAS strips a
// boot-resource name's "custom/" prefix (up to 3.7) and the GPUaaS
// execution client puts a bare distro_series into custom/, so "x" and
// "custom/x" are one image.
func SameName(a, b string) bool {
	return BareName(a) == BareName(b)
}
