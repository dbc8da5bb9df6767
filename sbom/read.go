package sbom

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/package-url/packageurl-go"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
)

// readLimit is the largest SBOM ReadFile reads.
var readLimit int64 = 256 << 20

// ReadFile reads an SBOM file, imagectl's or another tool's, bounded in
// size (a file that is not a regular file is refused, and one past the
// bound by its size alone), with its path in errors: an SPDX JSON document
// (2.3, or 2.2 and 2.1, which tools-golang converts) or a CycloneDX JSON
// BOM (its "bomFormat" says so; the versions cyclonedx-go reads). Of SPDX
// it takes:
//   - the root package: the one the document DESCRIBES (imagectl's
//     SPDXRef-Image; syft's SPDXRef-DocumentRoot-..., named after the
//     directory or image it scanned), its name and version; the document's
//     name when it describes no single package;
//   - the Debian packages: those with a purl external reference of type
//     deb (syft's "pkg:deb/debian/libc6@2.36-9?arch=amd64&upstream=glibc&distro=debian-12"
//     as well as imagectl's), with the purl's name, version (the package's
//     versionInfo when the purl has none) and arch qualifier, sorted by name
//     and architecture. Other packages (syft's binaries, language
//     packages), files and licenses are not read.
//
// Of CycloneDX, the same from metadata.component and the components with a
// deb purl, nested ones included.
func ReadFile(path string) (*Summary, error) {
	b, err := readlimit.File(path, readLimit)
	if errors.Is(err, readlimit.ErrTooLarge) {
		return nil, fmt.Errorf("reading the SBOM %s: %w", path, errTooLarge())
	}
	if err != nil {
		return nil, fmt.Errorf("reading the SBOM: %w", err)
	}
	s, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("reading the SBOM %s: %w", path, err)
	}
	return s, nil
}

func errTooLarge() error {
	return fmt.Errorf("larger than the %d bytes imagectl reads of one", readLimit)
}

// parse reads the SBOM in b.
func parse(b []byte) (s *Summary, err error) {
	// tools-golang's reader dereferences what a hostile document leaves
	// null (a package of null): its panic is this document's error.
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("not a well-formed SBOM (%v)", p)
		}
	}()
	var format struct {
		BOMFormat string `json:"bomFormat"`
	}
	if json.Unmarshal(b, &format) == nil && format.BOMFormat == "CycloneDX" {
		s, err = readCycloneDX(b)
	} else {
		s, err = readSPDX(b)
	}
	if err != nil {
		return nil, err
	}
	sortPackages(s.Packages, func(p manifest.Package) (string, string) { return p.Name, p.Architecture })
	return s, nil
}

func readSPDX(b []byte) (*Summary, error) {
	doc, err := spdxjson.Read(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	s := &Summary{Name: doc.DocumentName, Packages: []manifest.Package{}}
	if root := describedPackage(doc); root != nil {
		s.Name, s.Version = root.PackageName, root.PackageVersion
	}
	for _, p := range doc.Packages {
		if p == nil {
			continue
		}
		for _, ref := range p.PackageExternalReferences {
			if ref == nil || ref.RefType != "purl" {
				continue
			}
			if mp, ok := debOf(ref.Locator, p.PackageVersion); ok {
				s.Packages = append(s.Packages, mp)
				break
			}
		}
	}
	return s, nil
}

// readCycloneDX reads a CycloneDX JSON BOM: its subject
// (metadata.component) and the components, nested ones included, with a
// deb purl.
func readCycloneDX(b []byte) (*Summary, error) {
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(b), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return nil, fmt.Errorf("not a well-formed CycloneDX BOM: %w", err)
	}
	s := &Summary{Packages: []manifest.Package{}}
	if bom.Metadata != nil && bom.Metadata.Component != nil {
		s.Name, s.Version = bom.Metadata.Component.Name, bom.Metadata.Component.Version
	}
	var walk func(cs *[]cdx.Component, depth int)
	walk = func(cs *[]cdx.Component, depth int) {
		if cs == nil || depth > maxNesting {
			return
		}
		for _, c := range *cs {
			if mp, ok := debOf(c.PackageURL, c.Version); ok {
				s.Packages = append(s.Packages, mp)
			}
			walk(c.Components, depth+1)
		}
	}
	walk(bom.Components, 0)
	return s, nil
}

// maxNesting bounds how deep readCycloneDX follows nested components.
const maxNesting = 64

// describedPackage is the one package the document describes, or nil.
func describedPackage(doc *spdx.Document) *spdx.Package {
	ids, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil || len(ids) != 1 {
		return nil
	}
	for _, p := range doc.Packages {
		if p != nil && p.PackageSPDXIdentifier == ids[0] {
			return p
		}
	}
	return nil
}

// debOf is the Debian package a deb purl names; version is the package's
// own, for a purl without one.
func debOf(purl, version string) (manifest.Package, bool) {
	u, err := packageurl.FromString(purl)
	if err != nil || u.Type != packageurl.TypeDebian {
		return manifest.Package{}, false
	}
	if u.Version != "" {
		version = u.Version
	}
	return manifest.Package{Name: u.Name, Version: version, Architecture: u.Qualifiers.Map()["arch"]}, true
}

// Diff is the package changes from a to b, as imagectl diff shows them:
// packages added, removed, upgraded and downgraded (by Debian version
// order), keyed by name and architecture. Only A, B, Equal and Packages
// are set.
func Diff(a, b *Summary) *manifest.Diff {
	if a == nil {
		a = &Summary{}
	}
	if b == nil {
		b = &Summary{}
	}
	pc := manifest.ComparePackages(a.Packages, b.Packages)
	return &manifest.Diff{
		A:        manifest.Ref{Name: a.Name, Version: a.Version},
		B:        manifest.Ref{Name: b.Name, Version: b.Version},
		Equal:    len(pc.Added)+len(pc.Removed)+len(pc.Upgraded)+len(pc.Downgraded) == 0,
		Packages: pc,
	}
}
