package sbom

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/manifest"
)

// Format is the SBOM's standard, as the build manifest records it.
const Format = "SPDX-2.3"

// ScanOptions name the image files, beyond the dpkg database, that Scan
// hashes.
type ScanOptions struct {
	// Files are absolute paths in the image (the files the recipe wrote).
	Files []string
	// Dirs are absolute directories in the image (the bundles'
	// destinations) whose regular files are hashed.
	Dirs []string
}

// Inventory is what Scan read from a tgz.
type Inventory struct {
	OS OSRelease
	// Packages are the installed packages (dpkg status "install ok
	// installed"), sorted by name and architecture.
	Packages []Package
	// Files are the hashed files, sorted by path.
	Files []File
	// AptSources are the repositories the image's apt is configured with
	// (sources.list and sources.list.d, one-line and deb822), without
	// credentials.
	AptSources []AptSource
}

// OSRelease is the image's os-release.
type OSRelease struct {
	ID, VersionID, VersionCodename, PrettyName string
}

// Package is an installed Debian package.
type Package struct {
	Name, Version, Architecture string
	// Source and SourceVersion are its source package (its own name and
	// version when the database names none).
	Source, SourceVersion string
	Maintainer            string
	// Licenses are the License fields of its copyright file, as stated
	// (Debian short names); License the SPDX expression made of them, or
	// NOASSERTION when the file states none.
	Licenses []string
	License  string
}

func (p Package) nameArch() (string, string) { return p.Name, p.Architecture }

// sortPackages sorts packages by name, then architecture, keeping the
// order of equal ones; nameArch gives a package's.
func sortPackages[P any](ps []P, nameArch func(P) (string, string)) {
	slices.SortStableFunc(ps, func(a, b P) int {
		an, aa := nameArch(a)
		bn, ba := nameArch(b)
		return cmp.Or(strings.Compare(an, bn), strings.Compare(aa, ba))
	})
}

// File is a regular file of the image, hashed.
type File struct {
	Path         string // absolute, in the image
	SHA1, SHA256 string // hex
	Size         int64
}

// AptSource is one configured repository.
type AptSource struct {
	// File is where it is configured, in the image.
	File       string
	Types      []string // deb, deb-src
	URIs       []string
	Suites     []string
	Components []string
}

// Image describes the root package: the image the tgz is.
type Image struct {
	Name, Version, Architecture string
	// Tarball is the tgz's file name, SHA256 its digest (hex).
	Tarball, SHA256 string
	// Created is when the image was built; Tool the creator
	// ("imagectl-<version>").
	Created time.Time
	Tool    string
	// Bundles are the bundles staged into the image, as the manifest
	// records them: a bundle's files are the inventory's files under its
	// Destination (its entries are not read here).
	Bundles []manifest.Bundle
}

// Summary is what imagectl diff reads from an SPDX document: the root
// package and the Debian packages.
type Summary struct {
	Name, Version string
	Packages      []manifest.Package
}
