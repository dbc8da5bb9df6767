package sbom

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/package-url/packageurl-go"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
	"github.com/spdx/tools-golang/spdxlib"
	"github.com/spdx/tools-golang/utils"

	"github.com/gpuaas/imagectl/manifest"
)

const tgzSHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func testImage() Image {
	return Image{
		Name: "gpu-node", Version: "2024.06.1", Architecture: "amd64",
		Tarball: "gpu-node-2024.06.1.tgz", SHA256: tgzSHA256,
		Created: time.Date(2024, 6, 1, 14, 30, 5, 999, time.FixedZone("CEST", 2*3600)),
		Tool:    "imagectl-1.4.0",
		Bundles: []manifest.Bundle{{Name: "tool", Destination: "/opt/tool", Digest: "sha256:0123abcd"}},
	}
}

// testDocument scans debianImage, makes its document, encodes it and reads
// it back with tools-golang.
func testDocument(t *testing.T) (*Inventory, []byte, *spdx.Document) {
	t.Helper()
	inv := debianInventory(t)
	doc, err := Document(testImage(), inv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := spdxjson.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("reading the document back: %v\n%s", err, b)
	}
	return inv, b, back
}

func TestDocument(t *testing.T) {
	inv, b, doc := testDocument(t)
	if err := spdxlib.ValidateDocument(doc); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte("}\n")) || !bytes.HasPrefix(b, []byte("{\n  \"")) {
		t.Errorf("not indented JSON with a final newline:\n%.200s", b)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXIdentifier != "DOCUMENT" ||
		doc.DocumentName != "gpu-node-2024.06.1" ||
		doc.DocumentNamespace != "https://github.com/gpuaas/imagectl/spdx/gpu-node-2024.06.1-"+tgzSHA256 {
		t.Errorf("document header %q %q %q %q %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXIdentifier, doc.DocumentName, doc.DocumentNamespace)
	}
	if ci := doc.CreationInfo; ci.Created != "2024-06-01T12:30:05Z" ||
		!reflect.DeepEqual(ci.Creators, []common.Creator{{Creator: "imagectl-1.4.0", CreatorType: "Tool"}}) {
		t.Errorf("creation info %+v", ci)
	}
	ids, err := spdxlib.GetDescribedPackageIDs(doc)
	if err != nil || !reflect.DeepEqual(ids, []common.ElementID{"Image"}) {
		t.Fatalf("described %v, %v", ids, err)
	}

	pkgs := map[common.ElementID]*spdx.Package{}
	for _, p := range doc.Packages {
		if pkgs[p.PackageSPDXIdentifier] != nil {
			t.Errorf("duplicate id %s", p.PackageSPDXIdentifier)
		}
		pkgs[p.PackageSPDXIdentifier] = p
	}
	root := pkgs["Image"]
	if root.PackageName != "gpu-node" || root.PackageVersion != "2024.06.1" || root.PackageFileName != "gpu-node-2024.06.1.tgz" ||
		root.PrimaryPackagePurpose != "OPERATING-SYSTEM" || root.FilesAnalyzed || root.PackageDownloadLocation != "NOASSERTION" ||
		!reflect.DeepEqual(root.PackageChecksums, []common.Checksum{{Algorithm: common.SHA256, Value: tgzSHA256}}) ||
		len(root.PackageExternalReferences) != 0 {
		t.Errorf("root %+v", root)
	}

	// The Debian packages.
	wantPurls := map[common.ElementID]string{
		"DEB-absdoc-all":       "pkg:deb/debian/absdoc@1?arch=all&distro=debian-12",
		"DEB-bash-amd64":       "pkg:deb/debian/bash@1:5.2.15-2?arch=amd64&distro=debian-12",
		"DEB-held-all":         "pkg:deb/debian/held@3.0?arch=all&distro=debian-12",
		"DEB-libc6-amd64":      "pkg:deb/debian/libc6@2.36-9?arch=amd64&distro=debian-12&upstream=glibc",
		"DEB-libfoo-dev-amd64": "pkg:deb/debian/libfoo-dev@1.2-1%2Bb1?arch=amd64&distro=debian-12&upstream=foo%401.2-1",
		"DEB-libfoo1-amd64":    "pkg:deb/debian/libfoo1@1.2-1%2Bb1?arch=amd64&distro=debian-12&upstream=foo%401.2-1",
		"DEB-libfoo1-i386":     "pkg:deb/debian/libfoo1@1.2-1%2Bb1?arch=i386&distro=debian-12&upstream=foo%401.2-1",
	}
	refs := map[string]bool{}
	for _, ol := range doc.OtherLicenses {
		if refs[ol.LicenseIdentifier] {
			t.Errorf("%s twice in hasExtractedLicensingInfos", ol.LicenseIdentifier)
		}
		refs[ol.LicenseIdentifier] = true
		if ol.ExtractedText == "" {
			t.Errorf("%s has no extracted text", ol.LicenseIdentifier)
		}
	}
	for i, p := range inv.Packages {
		id := common.ElementID("DEB-" + sanitize(p.Name) + "-" + p.Architecture)
		sp := pkgs[id]
		if sp == nil {
			t.Fatalf("no package %s", id)
		}
		if doc.Packages[i+1] != sp {
			t.Errorf("package %d is %s, want %s", i+1, doc.Packages[i+1].PackageSPDXIdentifier, id)
		}
		if sp.PackageName != p.Name || sp.PackageVersion != p.Version || sp.PackageLicenseDeclared != p.License ||
			sp.PackageLicenseConcluded != "NOASSERTION" || sp.PackageCopyrightText != "NOASSERTION" || sp.FilesAnalyzed ||
			sp.PackageSourceInfo != "built from source package "+p.Source+" "+p.SourceVersion {
			t.Errorf("package %s: %+v", id, sp)
		}
		if len(sp.PackageExternalReferences) != 1 {
			t.Fatalf("package %s refs %+v", id, sp.PackageExternalReferences)
		}
		ref := sp.PackageExternalReferences[0]
		if ref.Category != "PACKAGE-MANAGER" || ref.RefType != "purl" || ref.Locator != wantPurls[id] {
			t.Errorf("package %s ref %+v, want purl %s", id, ref, wantPurls[id])
		}
		u, err := packageurl.FromString(ref.Locator)
		if err != nil || u.Type != "deb" || u.Namespace != "debian" || u.Name != p.Name || u.Version != p.Version ||
			u.Qualifiers.Map()["arch"] != p.Architecture || u.Qualifiers.Map()["distro"] != "debian-12" {
			t.Errorf("purl %s parses as %+v, %v", ref.Locator, u, err)
		}
		for _, r := range licenseRefs.FindAllString(sp.PackageLicenseDeclared, -1) {
			if !refs[r] {
				t.Errorf("package %s uses %s, not in hasExtractedLicensingInfos", id, r)
			}
		}
	}
	if u, err := packageurl.FromString(pkgs["DEB-libfoo1-i386"].PackageExternalReferences[0].Locator); err != nil || u.Qualifiers.Map()["upstream"] != "foo@1.2-1" {
		t.Errorf("libfoo1's upstream: %+v, %v", u.Qualifiers, err)
	}
	if got := pkgs["DEB-libc6-amd64"].PackageSupplier; *got != (common.Supplier{SupplierType: "Organization", Supplier: "GNU Libc Maintainers (debian-glibc@lists.debian.org)"}) {
		t.Errorf("libc6 supplier %+v", got)
	}
	if !bytes.Contains(b, []byte(`"supplier": "Organization: GNU Libc Maintainers (debian-glibc@lists.debian.org)"`)) {
		t.Error("libc6's supplier not in the JSON as expected")
	}
	if got := pkgs["DEB-absdoc-all"].PackageSupplier; got.Supplier != "NOASSERTION" {
		t.Errorf("absdoc supplier %+v", got)
	}
	want := []*spdx.OtherLicense{{LicenseIdentifier: "LicenseRef-Weird-License-1.0", LicenseName: "Weird License 1.0",
		ExtractedText: `The license named "Weird License 1.0" in the Debian copyright file of package libc6`}}
	if !reflect.DeepEqual(doc.OtherLicenses, want) {
		t.Errorf("other licenses %+v", doc.OtherLicenses)
	}

	// The bundle and the files.
	bundle := pkgs["Bundle-tool"]
	if bundle == nil || bundle.PackageName != "tool" || !bundle.FilesAnalyzed || bundle.PrimaryPackagePurpose != "OTHER" ||
		bundle.PackageVersion != "sha256:0123abcd" || !strings.Contains(bundle.PackageComment, "sha256:0123abcd") {
		t.Fatalf("bundle %+v", bundle)
	}
	files := map[common.ElementID]*spdx.File{}
	var names []string
	for _, f := range doc.Files {
		files[f.FileSPDXIdentifier] = f
		names = append(names, f.FileName)
		var sha1s int
		for _, c := range f.Checksums {
			if c.Algorithm == common.SHA1 && len(c.Value) == 40 {
				sha1s++
			}
		}
		if sha1s != 1 || len(f.Checksums) != 2 || f.LicenseConcluded != "NOASSERTION" || f.FileCopyrightText != "NOASSERTION" {
			t.Errorf("file %+v", f)
		}
	}
	if want := []string{"./etc/apt/sources.list", "./etc/imagectl/recipe.conf", "./opt/tool/bin/tool", "./opt/tool/bin/tool-again", "./opt/tool/share/data.txt"}; !reflect.DeepEqual(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	contained := map[common.ElementID][]common.ElementID{}
	for _, r := range doc.Relationships {
		switch {
		case r.Relationship == "DESCRIBES":
			if r.RefA.ElementRefID != "DOCUMENT" || r.RefB.ElementRefID != "Image" {
				t.Errorf("relationship %+v", r)
			}
		case r.Relationship == "CONTAINS":
			contained[r.RefA.ElementRefID] = append(contained[r.RefA.ElementRefID], r.RefB.ElementRefID)
		default:
			t.Errorf("relationship %+v", r)
		}
	}
	wantImage := []common.ElementID{"DEB-absdoc-all", "DEB-bash-amd64", "DEB-held-all", "DEB-libc6-amd64", "DEB-libfoo-dev-amd64",
		"DEB-libfoo1-amd64", "DEB-libfoo1-i386", "Bundle-tool", "Recipe-files"}
	if !reflect.DeepEqual(contained["Image"], wantImage) {
		t.Errorf("image contains %v, want %v", contained["Image"], wantImage)
	}
	wantRecipe := []common.ElementID{"File-etc-apt-sources.list", "File-etc-imagectl-recipe.conf"}
	if !reflect.DeepEqual(contained["Recipe-files"], wantRecipe) {
		t.Errorf("recipe files %v, want %v", contained["Recipe-files"], wantRecipe)
	}
	if rf := pkgs["Recipe-files"]; rf == nil || rf.PackageName != "gpu-node-recipe-files" || rf.PackageVersion != "2024.06.1" ||
		!rf.FilesAnalyzed || rf.PackageVerificationCode == nil {
		t.Errorf("recipe files package %+v", rf)
	}
	checkContainsRule(t, doc)
	wantBundle := []common.ElementID{"File-opt-tool-bin-tool", "File-opt-tool-bin-tool-again", "File-opt-tool-share-data.txt"}
	if !reflect.DeepEqual(contained["Bundle-tool"], wantBundle) {
		t.Errorf("bundle contains %v, want %v", contained["Bundle-tool"], wantBundle)
	}
	// The verification code, recomputed by SPDX 2.3's algorithm (7.9.4)
	// and by tools-golang's.
	var sha1s []string
	var bundleFiles []*spdx.File
	for _, id := range wantBundle {
		bundleFiles = append(bundleFiles, files[id])
		for _, c := range files[id].Checksums {
			if c.Algorithm == common.SHA1 {
				sha1s = append(sha1s, c.Value)
			}
		}
	}
	sort.Strings(sha1s)
	sum := sha1.Sum([]byte(strings.Join(sha1s, "")))
	if got := bundle.PackageVerificationCode; got == nil || got.Value != hex.EncodeToString(sum[:]) || len(got.ExcludedFiles) != 0 {
		t.Errorf("verification code %+v, want %x", got, sum)
	}
	if code, err := utils.GetVerificationCode(bundleFiles, ""); err != nil || code.Value != bundle.PackageVerificationCode.Value {
		t.Errorf("tools-golang's verification code %+v, %v", code, err)
	}
}

func TestDocumentDeterministic(t *testing.T) {
	_, b1, _ := testDocument(t)
	_, b2, _ := testDocument(t)
	if !bytes.Equal(b1, b2) {
		t.Error("two documents of the same image differ")
	}
	// Order of the inputs does not matter either.
	inv := debianInventory(t)
	for i, j := 0, len(inv.Packages)-1; i < j; i, j = i+1, j-1 {
		inv.Packages[i], inv.Packages[j] = inv.Packages[j], inv.Packages[i]
	}
	img := testImage()
	img.Bundles = append([]manifest.Bundle{{Name: "empty", Destination: "/opt/empty"}}, img.Bundles...)
	d1, err := Document(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	img.Bundles[0], img.Bundles[1] = img.Bundles[1], img.Bundles[0]
	d2, err := Document(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	m1, err1 := Marshal(d1)
	m2, err2 := Marshal(d2)
	if err1 != nil || err2 != nil || !bytes.Equal(m1, m2) {
		t.Errorf("documents differ with the inputs' order (%v, %v)", err1, err2)
	}
}

func TestDocumentIDs(t *testing.T) {
	inv := &Inventory{
		Packages: []Package{
			{Name: "libstdc++6", Version: "12.2.0-14", Architecture: "amd64", License: "GPL-3.0-or-later AND LicenseRef-handmade"},
			{Name: "libstdc--6", Version: "1", Architecture: "amd64"},
			{Name: "noarch", Version: "1"},
		},
		Files: []File{
			{Path: "/opt/a b/x", SHA1: strings.Repeat("1", 40), SHA256: strings.Repeat("2", 64)},
			{Path: "/opt/a-b/x", SHA1: strings.Repeat("3", 40), SHA256: strings.Repeat("4", 64)},
			{Path: "/opt/nested/inner/f", SHA1: strings.Repeat("5", 40), SHA256: strings.Repeat("6", 64)},
		},
	}
	img := testImage()
	img.Bundles = []manifest.Bundle{{Name: "outer", Destination: "/opt/nested"}, {Name: "inner", Destination: "/opt/nested/inner/"}, {Name: "my bundle", Destination: "/srv"}}
	doc, err := Document(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range doc.Packages {
		ids = append(ids, string(p.PackageSPDXIdentifier))
	}
	for _, f := range doc.Files {
		ids = append(ids, string(f.FileSPDXIdentifier))
	}
	want := []string{"Image", "DEB-libstdc--6-amd64", "DEB-libstdc--6-amd64-2", "DEB-noarch-none", "Bundle-inner", "Bundle-my-bundle", "Bundle-outer",
		"Recipe-files", "File-opt-a-b-x", "File-opt-a-b-x-2", "File-opt-nested-inner-f"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %q, want %q", ids, want)
	}
	for _, r := range doc.Relationships {
		if r.RefB.ElementRefID == "File-opt-nested-inner-f" && r.RefA.ElementRefID != "Bundle-inner" {
			t.Errorf("the nested file is in %s", r.RefA.ElementRefID)
		}
	}
	if len(doc.OtherLicenses) != 1 || doc.OtherLicenses[0].LicenseIdentifier != "LicenseRef-handmade" {
		t.Errorf("other licenses %+v", doc.OtherLicenses)
	}
	if doc.Packages[2].PackageLicenseDeclared != "NOASSERTION" {
		t.Errorf("a package without a license: %q", doc.Packages[2].PackageLicenseDeclared)
	}
	b, err := Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := spdxjson.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := spdxlib.ValidateDocument(back); err != nil {
		t.Error(err)
	}
	checkContainsRule(t, back)
}

func TestDocumentErrors(t *testing.T) {
	if _, err := Document(testImage(), nil); err == nil {
		t.Error("no inventory: no error")
	}
	img := testImage()
	img.SHA256 = "abc"
	if _, err := Document(img, &Inventory{}); err == nil || !strings.Contains(err.Error(), "gpu-node-2024.06.1") {
		t.Errorf("bad sha256: %v", err)
	}
	img = testImage()
	img.Version = ""
	if _, err := Document(img, &Inventory{}); err == nil {
		t.Error("no version: no error")
	}
	if _, err := Marshal(nil); err == nil {
		t.Error("Marshal(nil): no error")
	}
}

func TestPurl(t *testing.T) {
	debian := OSRelease{ID: "debian", VersionID: "12"}
	for _, c := range []struct {
		os   OSRelease
		p    Package
		want string
	}{
		{debian, Package{Name: "libc6", Version: "2.36-9", Architecture: "amd64", Source: "glibc", SourceVersion: "2.36-9"},
			"pkg:deb/debian/libc6@2.36-9?arch=amd64&distro=debian-12&upstream=glibc"},
		{debian, Package{Name: "libc6", Version: "2.36-9", Architecture: "amd64", Source: "libc6", SourceVersion: "2.36-9"},
			"pkg:deb/debian/libc6@2.36-9?arch=amd64&distro=debian-12"},
		{debian, Package{Name: "libc6", Version: "2.36-9+b1", Architecture: "amd64", Source: "glibc", SourceVersion: "2.36-9"},
			"pkg:deb/debian/libc6@2.36-9%2Bb1?arch=amd64&distro=debian-12&upstream=glibc%402.36-9"},
		{debian, Package{Name: "zlib1g", Version: "1:1.2.13.dfsg-1+b1", Architecture: "amd64", Source: "zlib1g", SourceVersion: "1:1.2.13.dfsg-1"},
			"pkg:deb/debian/zlib1g@1:1.2.13.dfsg-1%2Bb1?arch=amd64&distro=debian-12&upstream=zlib1g%401:1.2.13.dfsg-1"},
		{OSRelease{ID: "ubuntu", VersionID: "24.04"}, Package{Name: "bash", Version: "5.2.21-2ubuntu4", Architecture: "amd64"},
			"pkg:deb/ubuntu/bash@5.2.21-2ubuntu4?arch=amd64&distro=ubuntu-24.04"},
		{OSRelease{}, Package{Name: "bash", Version: "5.2", Architecture: "arm64"},
			"pkg:deb/debian/bash@5.2?arch=arm64"},
		{OSRelease{ID: "debian"}, Package{Name: "bash", Version: "5.2~rc1"},
			"pkg:deb/debian/bash@5.2~rc1?distro=debian"},
	} {
		got := Purl(c.os, c.p)
		if got != c.want {
			t.Errorf("Purl(%+v, %+v) = %s, want %s", c.os, c.p, got, c.want)
		}
		u, err := packageurl.FromString(got)
		if err != nil || u.Version != c.p.Version || u.Name != c.p.Name {
			t.Errorf("%s parses as %+v, %v", got, u, err)
		}
	}
}

// checkContainsRule holds the document to SPDX 2.3's 7.8.1, which
// tools-golang's validation does not check and SPDX's Python tools do: a
// package whose files were not analyzed contains no files, and one whose
// files were has a verification code.
func checkContainsRule(t *testing.T, doc *spdx.Document) {
	t.Helper()
	files := map[common.ElementID]bool{}
	for _, f := range doc.Files {
		files[f.FileSPDXIdentifier] = true
	}
	pkgs := map[common.ElementID]*spdx.Package{}
	for _, p := range doc.Packages {
		pkgs[p.PackageSPDXIdentifier] = p
		if p.FilesAnalyzed && p.PackageVerificationCode == nil {
			t.Errorf("package %s: files analyzed, no verification code", p.PackageSPDXIdentifier)
		}
	}
	for _, r := range doc.Relationships {
		if r.Relationship != common.TypeRelationshipContains || !files[r.RefB.ElementRefID] {
			continue
		}
		if p := pkgs[r.RefA.ElementRefID]; p == nil || !p.FilesAnalyzed {
			t.Errorf("%s CONTAINS file %s, but its files are not analyzed (SPDX 2.3 7.8.1)", r.RefA.ElementRefID, r.RefB.ElementRefID)
		}
	}
}
