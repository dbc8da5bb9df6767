package sbom

import (
	"bytes"
	"fmt"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/uuid"
)

// CycloneDXFormat is the CycloneDX SBOM's standard, as the build manifest
// records it.
const CycloneDXFormat = "CycloneDX-1.6"

// CycloneDX makes the CycloneDX 1.6 BOM of an image from the same inventory
// as its SPDX document, for the tools that read CycloneDX only
// (Dependency-Track): the image is the BOM's subject (metadata.component,
// an operating-system, with the tgz's SHA-256); the components are the
// Debian packages (libraries with their purl, maintainer as supplier,
// declared license expression, source package and architecture as
// properties), the bundles (applications whose files are nested
// components with their SHA-1 and SHA-256) and the recipe's other files.
// The serial number is a name-based (SHA-1, version 5) UUID of the BOM's
// own content, so the same inputs make the same BOM and any change, even
// of the timestamp alone, a new serial number, as CycloneDX requires.
func CycloneDX(img Image, inv *Inventory) (*cdx.BOM, error) {
	switch {
	case inv == nil:
		return nil, fmt.Errorf("making the CycloneDX BOM of %s-%s: no inventory", img.Name, img.Version)
	case img.Name == "" || img.Version == "" || !sha256Hex.MatchString(strings.ToLower(img.SHA256)):
		return nil, fmt.Errorf("making the CycloneDX BOM of %s-%s: the image needs a name, a version and the tgz's sha256", img.Name, img.Version)
	}
	tool := img.Tool
	if tool == "" {
		tool = "imagectl"
	}
	sum := strings.ToLower(img.SHA256)
	bom := cdx.NewBOM()
	bom.SpecVersion = cdx.SpecVersion1_6
	root := cdx.Component{
		BOMRef:      "image:" + img.Name + "@" + img.Version,
		Type:        cdx.ComponentTypeOS,
		Name:        img.Name,
		Version:     img.Version,
		Description: rootComment(img, inv.OS),
		Hashes:      &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: sum}},
	}
	if img.Tarball != "" {
		root.Properties = &[]cdx.Property{{Name: "imagectl:tarball", Value: img.Tarball}}
	}
	bom.Metadata = &cdx.Metadata{
		Timestamp: img.Created.UTC().Format("2006-01-02T15:04:05Z"),
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: strings.SplitN(tool, "-", 2)[0], Version: toolVersion(tool),
		}}},
		Component: &root,
	}

	pkgs := append([]Package(nil), inv.Packages...)
	sortPackages(pkgs, Package.nameArch)
	var comps []cdx.Component
	refs := map[string]int{}
	ref := func(r string) string { // unique, as CycloneDX requires
		refs[r]++
		if n := refs[r]; n > 1 {
			return fmt.Sprintf("%s#%d", r, n)
		}
		return r
	}
	var deps []string
	for _, p := range pkgs {
		purl := Purl(inv.OS, p)
		c := cdx.Component{
			BOMRef:     ref(purl),
			Type:       cdx.ComponentTypeLibrary,
			Name:       p.Name,
			Version:    p.Version,
			PackageURL: purl,
			Supplier:   cdxSupplier(p.Maintainer),
		}
		if p.License != "" && p.License != NoAssertion {
			c.Licenses = &cdx.Licenses{{Expression: p.License}}
		}
		props := []cdx.Property{}
		if p.Architecture != "" {
			props = append(props, cdx.Property{Name: "imagectl:deb:architecture", Value: p.Architecture})
		}
		if p.Source != "" {
			props = append(props, cdx.Property{Name: "imagectl:deb:source", Value: strings.TrimSpace(p.Source + " " + p.SourceVersion)})
		}
		if len(props) > 0 {
			c.Properties = &props
		}
		comps = append(comps, c)
		deps = append(deps, c.BOMRef)
	}

	// Each file belongs to the bundle whose destination holds it, as in
	// the SPDX document, or stands alone.
	bundles, files, owner := ownedFiles(img.Bundles, inv.Files)
	owned := make([][]cdx.Component, len(bundles))
	for i, f := range files {
		fc := cdx.Component{
			BOMRef: ref("file:" + f.Path),
			Type:   cdx.ComponentTypeFile,
			Name:   f.Path,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA1, Value: f.SHA1}, {Algorithm: cdx.HashAlgoSHA256, Value: f.SHA256}},
		}
		if owner[i] >= 0 {
			owned[owner[i]] = append(owned[owner[i]], fc)
		} else {
			comps = append(comps, fc)
			deps = append(deps, fc.BOMRef)
		}
	}
	for b, bd := range bundles {
		c := cdx.Component{
			BOMRef:      ref("bundle:" + bd.Name),
			Type:        cdx.ComponentTypeApplication,
			Name:        bd.Name,
			Version:     bd.Digest,
			Description: "bundle staged at " + bd.Destination,
		}
		if len(owned[b]) > 0 {
			c.Components = &owned[b]
		}
		comps = append(comps, c)
		deps = append(deps, c.BOMRef)
	}
	if len(comps) > 0 {
		bom.Components = &comps
		bom.Dependencies = &[]cdx.Dependency{{Ref: root.BOMRef, Dependencies: &deps}}
	}
	content, err := MarshalCycloneDX(bom)
	if err != nil {
		return nil, err
	}
	bom.SerialNumber = uuid.NewSHA1(serialSpace, content).URN()
	return bom, nil
}

// serialSpace is the UUID namespace of imagectl's BOM serial numbers.
var serialSpace = uuid.MustParse("5c0d6e2a-8f0b-4c3e-9a59-1d2e7b8f4a61")

// MarshalCycloneDX encodes a BOM as indented JSON with a final newline.
func MarshalCycloneDX(bom *cdx.BOM) ([]byte, error) {
	var buf bytes.Buffer
	enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
	enc.SetPretty(true).SetEscapeHTML(false)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("encoding the CycloneDX BOM: %w", err)
	}
	b := buf.Bytes()
	if !bytes.HasSuffix(b, []byte("\n")) {
		b = append(b, '\n')
	}
	return b, nil
}

// toolVersion is the version part of "imagectl-<version>".
func toolVersion(tool string) string {
	if _, v, ok := strings.Cut(tool, "-"); ok {
		return v
	}
	return ""
}

// cdxSupplier is the supplier of a Debian Maintainer field: its name and
// email, or nil when there is none.
func cdxSupplier(maintainer string) *cdx.OrganizationalEntity {
	m := strings.TrimSpace(maintainer)
	if m == "" {
		return nil
	}
	name, email := m, ""
	if i := strings.IndexByte(m, '<'); i >= 0 {
		name = strings.TrimSpace(m[:i])
		email = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[i+1:]), ">"))
	}
	if name == "" {
		name = email
	}
	e := &cdx.OrganizationalEntity{Name: name}
	if email != "" {
		e.Contact = &[]cdx.OrganizationalContact{{Email: email}}
	}
	return e
}
