package sbom

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/package-url/packageurl-go"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/utils"

	"github.com/gpuaas/imagectl/manifest"
)

// Namespace is where imagectl's SPDX documents' namespaces begin; a
// document's is Namespace/<name>-<version>-<tgz sha256>.
const Namespace = "https://github.com/gpuaas/imagectl/spdx"

// RootID is the SPDX identifier (without "SPDXRef-") of the package that
// is the image, the one the document describes.
const RootID = "Image"

// recipeFilesID is the package of the recipe's files outside bundles.
const recipeFilesID = "Recipe-files"

// Document makes the SPDX 2.3 document of an image: the image is the
// described package (SPDXRef-Image); it contains the Debian packages
// (SPDXRef-DEB-<name>-<arch>, with their purls, source packages and
// declared licenses), the bundles (SPDXRef-Bundle-<name>, with their files)
// and the recipe's other files (in SPDXRef-Recipe-files). Every package
// that contains files has them analyzed, with a verification code. The
// same inputs make the same document.
func Document(img Image, inv *Inventory) (*spdx.Document, error) {
	switch {
	case inv == nil:
		return nil, errors.New("making an SPDX document: no inventory")
	case img.Name == "" || img.Version == "":
		return nil, fmt.Errorf("making the SPDX document of image %q version %q: the image needs a name and a version", img.Name, img.Version)
	case !sha256Hex.MatchString(strings.ToLower(img.SHA256)):
		return nil, fmt.Errorf("making the SPDX document of %s-%s: %q is not the tgz's sha256 in hex", img.Name, img.Version, img.SHA256)
	}
	tool := img.Tool
	if tool == "" {
		tool = "imagectl"
	}
	created := img.Created.UTC().Format(time.RFC3339)
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      img.Name + "-" + img.Version,
		DocumentNamespace: fmt.Sprintf("%s/%s-%s-%s", Namespace, img.Name, img.Version, strings.ToLower(img.SHA256)),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: tool}},
			Created:  created,
		},
	}
	ids := idSet{}
	ids.take(RootID)
	root := &spdx.Package{
		PackageName:               img.Name,
		PackageSPDXIdentifier:     RootID,
		PackageVersion:            img.Version,
		PackageFileName:           img.Tarball,
		PackageDownloadLocation:   NoAssertion,
		IsFilesAnalyzedTagPresent: true,
		PackageChecksums:          []common.Checksum{{Algorithm: common.SHA256, Value: strings.ToLower(img.SHA256)}},
		PackageLicenseConcluded:   NoAssertion,
		PackageLicenseDeclared:    NoAssertion,
		PackageCopyrightText:      NoAssertion,
		PackageComment:            rootComment(img, inv.OS),
		PrimaryPackagePurpose:     "OPERATING-SYSTEM",
	}
	doc.Packages = append(doc.Packages, root)
	relate(doc, "DOCUMENT", common.TypeRelationshipDescribe, RootID)

	pkgs := append([]Package(nil), inv.Packages...)
	sortPackages(pkgs, Package.nameArch)
	refs := map[string]*spdx.OtherLicense{}
	for _, p := range pkgs {
		sp := debPackage(p, inv.OS, ids.take("DEB-"+sanitize(p.Name)+"-"+sanitize(p.Architecture)))
		doc.Packages = append(doc.Packages, sp)
		relate(doc, RootID, common.TypeRelationshipContains, string(sp.PackageSPDXIdentifier))
		addRefs(refs, p)
	}

	bundles, invFiles, owner := ownedFiles(img.Bundles, inv.Files)
	files := make([]*spdx.File, len(invFiles))
	for i, f := range invFiles {
		files[i] = spdxFile(f, ids.take("File-"+sanitize(strings.TrimPrefix(f.Path, "/"))))
	}
	for b, bd := range bundles {
		var own []*spdx.File
		for i := range invFiles {
			if owner[i] == b {
				own = append(own, files[i])
			}
		}
		sp, err := bundlePackage(bd, own, ids.take("Bundle-"+sanitize(bd.Name)))
		if err != nil {
			return nil, fmt.Errorf("making the SPDX document of %s-%s: %w", img.Name, img.Version, err)
		}
		doc.Packages = append(doc.Packages, sp)
		relate(doc, RootID, common.TypeRelationshipContains, string(sp.PackageSPDXIdentifier))
		for _, f := range own {
			relate(doc, string(sp.PackageSPDXIdentifier), common.TypeRelationshipContains, string(f.FileSPDXIdentifier))
		}
	}
	// The image's package is not file-analyzed (its other files are not
	// listed), and SPDX 2.3 (7.8) lets such a package contain no files: the
	// recipe's own files get a package of their own that is.
	var loose []*spdx.File
	for i, f := range files {
		if owner[i] < 0 {
			loose = append(loose, f)
		}
	}
	if len(loose) > 0 {
		id := ids.take(recipeFilesID)
		comment := "files the recipe placed in the image outside its bundles, hashed as the tgz holds them"
		sp, err := filesPackage(img.Name+"-recipe-files", img.Version, comment, loose, id)
		if err != nil {
			return nil, fmt.Errorf("making the SPDX document of %s-%s: %w", img.Name, img.Version, err)
		}
		doc.Packages = append(doc.Packages, sp)
		relate(doc, RootID, common.TypeRelationshipContains, id)
		for _, f := range loose {
			relate(doc, id, common.TypeRelationshipContains, string(f.FileSPDXIdentifier))
		}
	}
	doc.Files = files

	refIDs := make([]string, 0, len(refs))
	for id := range refs {
		refIDs = append(refIDs, id)
	}
	sort.Strings(refIDs)
	for _, id := range refIDs {
		doc.OtherLicenses = append(doc.OtherLicenses, refs[id])
	}
	return doc, nil
}

// sha256Hex matches a SHA-256 digest in hex.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// rootComment says what the image is.
func rootComment(img Image, os OSRelease) string {
	what := "MAAS host image"
	if os.PrettyName != "" {
		what += " of " + os.PrettyName
	}
	if img.Architecture != "" {
		what += " for " + img.Architecture
	}
	return what + ", a root filesystem packed as a tgz"
}

// debPackage is the SPDX package of an installed Debian package.
func debPackage(p Package, os OSRelease, id string) *spdx.Package {
	license := p.License
	if license == "" {
		license = NoAssertion
	}
	sp := &spdx.Package{
		PackageName:               p.Name,
		PackageSPDXIdentifier:     common.ElementID(id),
		PackageVersion:            p.Version,
		PackageSupplier:           supplier(p.Maintainer),
		PackageDownloadLocation:   NoAssertion,
		IsFilesAnalyzedTagPresent: true,
		PackageLicenseConcluded:   NoAssertion,
		PackageLicenseDeclared:    license,
		PackageCopyrightText:      NoAssertion,
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: common.CategoryPackageManager,
			RefType:  common.TypePackageManagerPURL,
			Locator:  Purl(os, p),
		}},
	}
	if p.Source != "" {
		sp.PackageSourceInfo = strings.TrimSpace("built from source package " + p.Source + " " + p.SourceVersion)
	}
	return sp
}

// supplier is the SPDX supplier of a Debian Maintainer field: the
// Organization "Name (email)", or NOASSERTION when there is none.
func supplier(maintainer string) *common.Supplier {
	m := strings.TrimSpace(maintainer)
	if m == "" {
		return &common.Supplier{Supplier: NoAssertion}
	}
	if i := strings.IndexByte(m, '<'); i >= 0 {
		email := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[i+1:]), ">"))
		name := strings.TrimSpace(m[:i])
		switch {
		case name == "":
			m = email
		case email == "":
			m = name
		default:
			m = name + " (" + email + ")"
		}
	}
	return &common.Supplier{SupplierType: "Organization", Supplier: m}
}

// addRefs records the LicenseRefs a package's license uses, each once,
// with where its name came from.
func addRefs(refs map[string]*spdx.OtherLicense, p Package) {
	for _, v := range p.Licenses {
		_, names := LicenseExpression(v)
		for id, name := range names {
			if _, ok := refs[id]; !ok {
				refs[id] = &spdx.OtherLicense{LicenseIdentifier: id, LicenseName: name, ExtractedText: describeRef(name, p.Name)}
			}
		}
	}
	// An inventory made by hand may state refs its Licenses do not.
	for _, id := range licenseRefs.FindAllString(p.License, -1) {
		if _, ok := refs[id]; !ok {
			name := strings.TrimPrefix(id, "LicenseRef-")
			refs[id] = &spdx.OtherLicense{LicenseIdentifier: id, LicenseName: name, ExtractedText: describeRef(name, p.Name)}
		}
	}
}

// spdxFile is the SPDX file of a hashed file; its name is relative to the
// image's root ("./opt/tool/bin/tool").
func spdxFile(f File, id string) *spdx.File {
	return &spdx.File{
		FileName:           "./" + strings.TrimPrefix(f.Path, "/"),
		FileSPDXIdentifier: common.ElementID(id),
		Checksums: []common.Checksum{
			{Algorithm: common.SHA1, Value: f.SHA1},
			{Algorithm: common.SHA256, Value: f.SHA256},
		},
		LicenseConcluded:  NoAssertion,
		FileCopyrightText: NoAssertion,
	}
}

// bundlePackage is the SPDX package of a staged bundle, its files analyzed.
func bundlePackage(b manifest.Bundle, files []*spdx.File, id string) (*spdx.Package, error) {
	comment := "bundle staged at " + b.Destination
	if b.Digest != "" {
		comment += "; imagectl digest " + b.Digest
	}
	return filesPackage(b.Name, b.Digest, comment, files, id)
}

// filesPackage is an SPDX package of the given files, analyzed: its
// verification code is computed over them.
func filesPackage(name, version, comment string, files []*spdx.File, id string) (*spdx.Package, error) {
	code, err := utils.GetVerificationCode(files, "")
	if err != nil {
		return nil, fmt.Errorf("computing the verification code of %s: %w", name, err)
	}
	return &spdx.Package{
		PackageName:               name,
		PackageSPDXIdentifier:     common.ElementID(id),
		PackageVersion:            version,
		PackageDownloadLocation:   NoAssertion,
		FilesAnalyzed:             true,
		IsFilesAnalyzedTagPresent: true,
		PackageVerificationCode:   &code,
		PackageLicenseConcluded:   NoAssertion,
		PackageLicenseDeclared:    NoAssertion,
		PackageCopyrightText:      NoAssertion,
		PackageComment:            comment,
		PrimaryPackagePurpose:     "OTHER",
	}, nil
}

// ownedFiles sorts the bundles by name and the files by path, and gives
// each file the index of the bundle whose destination holds it (the
// deepest, should destinations nest), or -1: the one rule both documents
// follow.
func ownedFiles(bs []manifest.Bundle, fs []File) (bundles []manifest.Bundle, files []File, owner []int) {
	bundles = append([]manifest.Bundle(nil), bs...)
	sort.SliceStable(bundles, func(i, j int) bool { return bundles[i].Name < bundles[j].Name })
	dests := make([]string, len(bundles))
	for b, bd := range bundles {
		dests[b] = "/" + normalize(bd.Destination)
	}
	files = append([]File(nil), fs...)
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	owner = make([]int, len(files))
	for i, f := range files {
		owner[i] = -1
		for b, dest := range dests {
			if under(f.Path, dest) && (owner[i] < 0 || len(dest) > len(dests[owner[i]])) {
				owner[i] = b
			}
		}
	}
	return bundles, files, owner
}

// under reports whether an absolute path is in directory dir.
func under(p, dir string) bool {
	return dir == "/" || strings.HasPrefix(p, dir+"/")
}

// relate adds the relationship a TYPE b.
func relate(doc *spdx.Document, a, typ, b string) {
	doc.Relationships = append(doc.Relationships, &spdx.Relationship{
		RefA:         common.MakeDocElementID("", a),
		RefB:         common.MakeDocElementID("", b),
		Relationship: typ,
	})
}

// idChars are the characters an SPDX idstring may not have.
var idChars = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// sanitize makes s fit in an SPDX identifier.
func sanitize(s string) string {
	if s == "" {
		return "none"
	}
	return idChars.ReplaceAllString(s, "-")
}

// idSet hands out unique SPDX identifiers, suffixing repeats -2, -3, ...
type idSet map[string]bool

func (s idSet) take(id string) string {
	cand := id
	for n := 2; s[cand]; n++ {
		cand = fmt.Sprintf("%s-%d", id, n)
	}
	s[cand] = true
	return cand
}

// Purl is the package URL of an installed Debian package, with the
// qualifiers syft gives one:
// pkg:deb/<os id>/<name>@<version>?arch=<arch>&distro=<id>-<version id>,
// plus upstream=<source> (upstream=<source>@<source version> when the
// versions differ) for a package built from another source package or
// another version of its own. Qualifiers are in purl's canonical order
// and encoding (sorted by key; "@" in a value is "%40", "+" in the version
// "%2B"), which may differ from syft's text but not from its meaning.
func Purl(os OSRelease, p Package) string {
	ns := strings.ToLower(os.ID)
	if ns == "" {
		ns = "debian"
	}
	var q packageurl.Qualifiers
	if p.Architecture != "" {
		q = append(q, packageurl.Qualifier{Key: "arch", Value: p.Architecture})
	}
	if os.ID != "" {
		distro := os.ID
		if os.VersionID != "" {
			distro += "-" + os.VersionID
		}
		q = append(q, packageurl.Qualifier{Key: "distro", Value: distro})
	}
	if p.Source != "" && (p.Source != p.Name || (p.SourceVersion != "" && p.SourceVersion != p.Version)) {
		up := p.Source
		if p.SourceVersion != "" && p.SourceVersion != p.Version {
			up += "@" + p.SourceVersion
		}
		q = append(q, packageurl.Qualifier{Key: "upstream", Value: up})
	}
	return packageurl.NewPackageURL(packageurl.TypeDebian, ns, p.Name, p.Version, q, "").ToString()
}

// Marshal encodes a document as indented SPDX JSON, with a final newline.
func Marshal(doc *spdx.Document) ([]byte, error) {
	if doc == nil {
		return nil, errors.New("encoding an SPDX document: no document")
	}
	var b bytes.Buffer
	if err := spdxjson.Write(doc, &b, spdxjson.Indent("  "), spdxjson.EscapeHTML(false)); err != nil {
		return nil, fmt.Errorf("encoding the SPDX document %s: %w", doc.DocumentName, err)
	}
	return b.Bytes(), nil
}
