package sbom

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

// TestRead reads imagectl's SPDX document and syft's into their summaries.
func TestRead(t *testing.T) {
	_, b, _ := testDocument(t)
	for _, tc := range []struct {
		name string
		read func() (*Summary, error)
		want *Summary
	}{
		{"imagectl", func() (*Summary, error) { return readSBOM(bytes.NewReader(b)) },
			&Summary{Name: "gpu-node", Version: "2024.06.1", Packages: []manifest.Package{
				{Name: "absdoc", Version: "1", Architecture: "all"},
				{Name: "bash", Version: "1:5.2.15-2", Architecture: "amd64"},
				{Name: "held", Version: "3.0", Architecture: "all"},
				{Name: "libc6", Version: "2.36-9", Architecture: "amd64"},
				{Name: "libfoo-dev", Version: "1.2-1+b1", Architecture: "amd64"},
				{Name: "libfoo1", Version: "1.2-1+b1", Architecture: "amd64"},
				{Name: "libfoo1", Version: "1.2-1+b1", Architecture: "i386"},
			}}},
		{"syft", func() (*Summary, error) { return ReadFile(filepath.Join("testdata", "syft-debian.spdx.json")) },
			&Summary{Name: "/tmp/rootfs", Packages: []manifest.Package{
				{Name: "base-files", Version: "12.4+deb12u8", Architecture: "amd64"},
				{Name: "libc6", Version: "2.36-9+deb12u9", Architecture: "amd64"},
				{Name: "zlib1g", Version: "1:1.2.13.dfsg-1", Architecture: "amd64"},
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.read()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Errorf("summary\n got %+v\nwant %+v", s, tc.want)
			}
		})
	}
}

// imagectl's CycloneDX BOM reads as its SPDX document does; syft's (syft
// convert of the SPDX fixture, CycloneDX 1.7) as syft's SPDX does.
func TestReadCycloneDX(t *testing.T) {
	inv, b, _ := testDocument(t)
	spdx, err := readSBOM(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_, cb := cycloneDX(t, testImage(), inv)
	s, err := readSBOM(bytes.NewReader(cb))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, spdx) {
		t.Errorf("from CycloneDX\n got %+v\nwant %+v", s, spdx)
	}

	syftSPDX, err := ReadFile(filepath.Join("testdata", "syft-debian.spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	syftCDX, err := ReadFile(filepath.Join("testdata", "syft-debian.cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(syftCDX.Packages, syftSPDX.Packages) || syftCDX.Name != "/tmp/rootfs" {
		t.Errorf("syft's CycloneDX\n got %+v\nwant the packages of %+v", syftCDX, syftSPDX)
	}
	if _, err := readSBOM(strings.NewReader(`{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": {}}`)); err == nil ||
		!strings.Contains(err.Error(), "CycloneDX") {
		t.Errorf("a malformed BOM: %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ name, doc, want string }{
		{"not JSON", "<spdx/>", "invalid character"},
		{"no version", `{"SPDXID": "SPDXRef-DOCUMENT"}`, "spdxVersion"},
		{"SPDX 3", `{"spdxVersion": "SPDX-3.0"}`, "unsupported"},
		{"truncated", `{"spdxVersion": "SPDX-2.3", "packages": [`, "unexpected end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFile(writeFile(t, "doc.spdx.json", []byte(c.doc)))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "doc.spdx.json") {
				t.Errorf("error %v, want one naming the file with %q", err, c.want)
			}
		})
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}

	defer func(old int64) { readLimit = old }(readLimit)
	readLimit = 1000
	_, b, _ := testDocument(t)
	if _, err := readSBOM(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "larger than the 1000 bytes") {
		t.Errorf("over the bound: %v", err)
	}
}

func TestReadNoRoot(t *testing.T) {
	// Two packages and no DESCRIBES: the document's name is the root's.
	doc := `{"spdxVersion": "SPDX-2.2", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT", "name": "loose",
	  "documentNamespace": "https://example.org/x", "creationInfo": {"creators": ["Tool: x"], "created": "2024-01-01T00:00:00Z"},
	  "packages": [
	    {"name": "a", "SPDXID": "SPDXRef-a", "versionInfo": "1", "downloadLocation": "NOASSERTION",
	     "externalRefs": [{"referenceCategory": "PACKAGE_MANAGER", "referenceType": "purl", "referenceLocator": "pkg:deb/ubuntu/a?arch=arm64"}]},
	    {"name": "b", "SPDXID": "SPDXRef-b", "downloadLocation": "NOASSERTION",
	     "externalRefs": [{"referenceCategory": "PACKAGE_MANAGER", "referenceType": "purl", "referenceLocator": "not a purl"}]}
	  ]}`
	s, err := readSBOM(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := &Summary{Name: "loose", Packages: []manifest.Package{{Name: "a", Version: "1", Architecture: "arm64"}}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("summary %+v, want %+v", s, want)
	}
}

func TestDiff(t *testing.T) {
	a := &Summary{Name: "gpu-node", Version: "1", Packages: []manifest.Package{
		{Name: "bash", Version: "5.2.15-2", Architecture: "amd64"},
		{Name: "gone", Version: "1", Architecture: "amd64"},
		{Name: "libc6", Version: "2.36-9", Architecture: "amd64"},
		{Name: "libc6", Version: "2.36-9", Architecture: "i386"},
		{Name: "tilde", Version: "1.0", Architecture: "all"},
		{Name: "same", Version: "1", Architecture: "all"},
	}}
	b := &Summary{Name: "gpu-node", Version: "2", Packages: []manifest.Package{
		{Name: "bash", Version: "1:5.0-1", Architecture: "amd64"}, // the epoch wins
		{Name: "libc6", Version: "2.36-9+deb12u4", Architecture: "amd64"},
		{Name: "new", Version: "3", Architecture: "arm64"},
		{Name: "tilde", Version: "1.0~rc1", Architecture: "all"}, // ~ sorts before
		{Name: "same", Version: "1", Architecture: "all"},
	}}
	d := Diff(a, b)
	want := &manifest.Diff{
		A: manifest.Ref{Name: "gpu-node", Version: "1"},
		B: manifest.Ref{Name: "gpu-node", Version: "2"},
		Packages: manifest.PackageChanges{
			Added:   []manifest.Package{{Name: "new", Version: "3", Architecture: "arm64"}},
			Removed: []manifest.Package{{Name: "gone", Version: "1", Architecture: "amd64"}, {Name: "libc6", Version: "2.36-9", Architecture: "i386"}},
			Upgraded: []manifest.PackageVersion{
				{Name: "bash", Architecture: "amd64", From: "5.2.15-2", To: "1:5.0-1"},
				{Name: "libc6", Architecture: "amd64", From: "2.36-9", To: "2.36-9+deb12u4"},
			},
			Downgraded:         []manifest.PackageVersion{{Name: "tilde", Architecture: "all", From: "1.0", To: "1.0~rc1"}},
			NativeArchitecture: "amd64",
		},
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("diff\n got %+v\nwant %+v", d, want)
	}
	if d := Diff(a, a); !d.Equal || d.Layers != nil || d.Files != nil {
		t.Errorf("a diff of equals: %+v", d)
	}

	// imagectl's SBOM against syft's, both read back.
	_, doc, _ := testDocument(t)
	mine, err := readSBOM(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	syft, err := ReadFile(filepath.Join("testdata", "syft-debian.spdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	d = Diff(mine, syft)
	if d.Equal || len(d.Packages.Added) != 2 || len(d.Packages.Upgraded) != 1 || d.Packages.Upgraded[0].Name != "libc6" {
		t.Errorf("imagectl vs syft: %+v", d.Packages)
	}
}

// A document whose packages are null is an error, not a crash.
func TestReadNullPackage(t *testing.T) {
	for _, doc := range []string{`{"spdxVersion":"SPDX-2.3","packages":[null]}`,
		`{"spdxVersion":"SPDX-2.3","SPDXID":"SPDXRef-DOCUMENT","packages":[null],"relationships":[{"spdxElementId":"SPDXRef-DOCUMENT","relationshipType":"DESCRIBES","relatedSpdxElement":"SPDXRef-x"}]}`} {
		if _, err := readSBOM(strings.NewReader(doc)); err == nil {
			t.Errorf("readSBOM(%s) = nil error", doc)
		}
	}
}

// readSBOM is ReadFile of a document in hand, bounded the same: the tests'
// way to read what they make.
func readSBOM(r io.Reader) (*Summary, error) {
	b, err := io.ReadAll(io.LimitReader(r, readLimit+1))
	if err == nil && int64(len(b)) > readLimit {
		err = errTooLarge()
	}
	if err != nil {
		return nil, fmt.Errorf("reading an SBOM: %w", err)
	}
	s, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("reading an SBOM: %w", err)
	}
	return s, nil
}
