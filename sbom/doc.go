// Package sbom owns the image's software bill of materials: what Scan
// reads from a packed tgz (the installed packages of its dpkg database,
// each with its source package and the licenses its copyright file states,
// the OS it is, the apt repositories it is configured with, and the hashes
// of the files the recipe wrote and the bundles staged), the SPDX 2.3 JSON
// document made of that with spdx/tools-golang, the same inventory as a
// CycloneDX 1.6 BOM with CycloneDX's Go library, and reading either kind
// back (imagectl's or another tool's) for imagectl diff.
//
// Scan reads the tgz as a stream, keeping only what it parsed (never whole
// files) and within bounds: a dpkg status file over 64 MiB is refused; of
// copyright, os-release and apt sources files the first MiB is read and
// lines over 64 KiB are skipped. One pass is the rule. A file the SBOM
// hashes that is a hard link to a copy earlier in the tgz costs another
// pass that hashes only those copies, and each link met there one more, at
// most 8 further passes in all.
//
// The document describes one package, SPDXRef-Image (the image, its tgz's
// SHA-256), which CONTAINS the Debian packages (SPDXRef-DEB-<name>-<arch>,
// each with a pkg:deb purl, its source package, its maintainer as supplier
// and the SPDX expression of its copyright file's licenses as declared
// license), the bundles (SPDXRef-Bundle-<name>, files analyzed, which
// CONTAIN their files) and SPDXRef-Recipe-files, files analyzed, which
// CONTAINS the recipe's other files: SPDXRef-Image itself is not files
// analyzed, and SPDX 2.3 (7.8.1) lets such a package contain no files.
// Debian license names SPDX
// does not know become LicenseRef- identifiers, each stated once in the
// document's extracted licensing infos.
//
// ReadFile takes the described package's name and version and the packages
// with a pkg:deb purl from any SPDX JSON document or CycloneDX JSON BOM, so
// that imagectl diff compares imagectl's SBOM with syft's (syft dir:/scan
// of a root filesystem, -o spdx-json or cyclonedx-json) as it compares two
// of imagectl's.
package sbom
