package sbom

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/package-url/packageurl-go"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/gpuaas/imagectl/manifest"
)

// readLimit is the largest SPDX document Read reads.
var readLimit int64 = 256 << 20

// Read reads an SPDX JSON document (2.3, or 2.2 and 2.1, which
// tools-golang converts), imagectl's or another tool's, bounded in size.
// It takes:
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
func Read(r io.Reader) (*Summary, error) {
	s, err := read(r)
	if err != nil {
		return nil, fmt.Errorf("reading an SPDX document: %w", err)
	}
	return s, nil
}

// ReadFile is Read of a file, with its path in errors.
func ReadFile(path string) (*Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the SPDX document: %w", err)
	}
	defer f.Close()
	s, err := read(f)
	if err != nil {
		return nil, fmt.Errorf("reading the SPDX document %s: %w", path, err)
	}
	return s, nil
}

func read(r io.Reader) (s *Summary, err error) {
	// tools-golang's reader dereferences what a hostile document leaves
	// null (a package of null): its panic is this document's error.
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("not a well-formed SPDX document (%v)", p)
		}
	}()
	b, err := io.ReadAll(io.LimitReader(r, readLimit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > readLimit {
		return nil, fmt.Errorf("larger than the %d bytes imagectl reads of one", readLimit)
	}
	doc, err := spdxjson.Read(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	s = &Summary{Name: doc.DocumentName}
	if root := describedPackage(doc); root != nil {
		s.Name, s.Version = root.PackageName, root.PackageVersion
	}
	s.Packages = []manifest.Package{}
	for _, p := range doc.Packages {
		if p == nil {
			continue
		}
		if mp, ok := debOf(p); ok {
			s.Packages = append(s.Packages, mp)
		}
	}
	sort.SliceStable(s.Packages, func(i, j int) bool {
		a, b := s.Packages[i], s.Packages[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Architecture < b.Architecture
	})
	return s, nil
}

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

// debOf is the Debian package a package's deb purl names.
func debOf(p *spdx.Package) (manifest.Package, bool) {
	for _, ref := range p.PackageExternalReferences {
		if ref == nil || ref.RefType != "purl" {
			continue
		}
		u, err := packageurl.FromString(ref.Locator)
		if err != nil || u.Type != packageurl.TypeDebian {
			continue
		}
		version := u.Version
		if version == "" {
			version = p.PackageVersion
		}
		return manifest.Package{Name: u.Name, Version: version, Architecture: u.Qualifiers.Map()["arch"]}, true
	}
	return manifest.Package{}, false
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
