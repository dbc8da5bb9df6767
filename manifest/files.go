package manifest

import (
	"fmt"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// The files of a build are named after one stem, <name>-<version>: the
// tgz, and beside it the files that describe, check, sign or test it. A
// signed file's signatures are beside it, named after the whole file name
// (x-1.0.tgz.sig, x-1.0.manifest.json.sigstore.json).
const (
	TarballExt          = ".tgz"
	ManifestExt         = ".manifest.json"
	ValidationScriptExt = "-validate.sh"
	// SignatureExt and SigstoreBundleExt follow any signed file: its
	// base64 signature and its Sigstore bundle, as cosign writes them.
	SignatureExt      = ".sig"
	SigstoreBundleExt = ".sigstore.json"
	// SmokeLogExt and SmokeTimelineExt are imagectl smoke's serial
	// console log and boot timeline.
	SmokeLogExt      = ".smoke.log"
	SmokeTimelineExt = ".smoke-timeline.json"
	// SmokeCompareExt is imagectl smoke --compare-first-boot's result: the
	// baked tgz against the base image with the first-boot script;
	// FirstBootSmokeLogExt and FirstBootSmokeTimelineExt are the console
	// log and boot timeline of its first-boot path (the baked path's are
	// the smoke's own).
	SmokeCompareExt           = ".smoke-compare.json"
	FirstBootSmokeLogExt      = ".smoke-first-boot.log"
	FirstBootSmokeTimelineExt = ".smoke-first-boot-timeline.json"
	// SBOMExt is the image's SPDX 2.3 JSON SBOM; ProvenanceExt its
	// in-toto statement with a SLSA v1 provenance predicate.
	SBOMExt       = ".spdx.json"
	ProvenanceExt = ".provenance.json"
	// CycloneDXExt is the same SBOM as CycloneDX 1.6 JSON, for the tools
	// that read only CycloneDX (Dependency-Track).
	CycloneDXExt = ".cdx.json"
	// AttestationExt replaces a statement's or document's .json: the DSSE
	// envelope, in cosign's attestation format, that signs it for the tgz
	// (x-1.0.provenance.dsse.json, x-1.0.spdx.dsse.json, x-1.0.cdx.dsse.json).
	AttestationExt = ".dsse.json"
)

// SPDXPredicateType and CycloneDXPredicateType are the predicate types of
// the in-toto statements that carry the SBOM as SPDX (cosign's --type
// spdxjson) and as CycloneDX (--type cyclonedx): what provenance makes,
// signing verifies and the registry store attaches.
const (
	SPDXPredicateType      = "https://spdx.dev/Document"
	CycloneDXPredicateType = "https://cyclonedx.org/bom"
)

// SBOMFile is one of the SBOMs a manifest records, where it lies beside
// the tgz and how it is attested: as the predicate of an in-toto
// statement about the tgz, of PredicateType, in the DSSE envelope at
// Attestation.
type SBOMFile struct {
	Name                             string // "sbom" (SPDX), "cyclonedx sbom"
	Document                         *Document
	Path, Attestation, PredicateType string
}

// SBOMs are the SBOMs m records, beside the tgz whose files are f: SPDX,
// then CycloneDX; none for a build before imagectl made them.
func (m *Manifest) SBOMs(f Files) []SBOMFile {
	var out []SBOMFile
	if m.SBOM != nil {
		out = append(out, SBOMFile{"sbom", m.SBOM, f.SBOM, f.SBOMAttestation, SPDXPredicateType})
	}
	if m.CycloneDX != nil {
		out = append(out, SBOMFile{"cyclonedx sbom", m.CycloneDX, f.CycloneDX, f.CycloneDXAttestation, CycloneDXPredicateType})
	}
	return out
}

// Files are the paths of one build's files.
type Files struct {
	Tarball          string
	Manifest         string
	ValidationScript string
	// The signatures of the tgz and of the manifest.
	TarballSignature, TarballBundle   string
	ManifestSignature, ManifestBundle string
	SmokeLog, SmokeTimeline           string
	// The smoke comparison's result, and its first-boot path's console
	// log and timeline.
	SmokeCompare, FirstBootSmokeLog, FirstBootSmokeTimeline string
	// SBOM (SPDX), Provenance and the SBOM as CycloneDX, and the signed
	// attestation of each.
	SBOM, SBOMAttestation             string
	Provenance, ProvenanceAttestation string
	CycloneDX, CycloneDXAttestation   string
}

// Attestations are the attestations beside a tgz, each a DSSE envelope.
func (f Files) Attestations() []string {
	return []string{f.SBOMAttestation, f.CycloneDXAttestation, f.ProvenanceAttestation}
}

// FilesFor names the files of image name at version, without a directory.
func FilesFor(name, version string) Files {
	stem := name + "-" + version
	return filesOf(stem, stem+TarballExt)
}

// FilesBeside names the files beside a tgz: its path without .tgz (or
// .tar.gz) is the stem, so a/x-1.0.tgz has a/x-1.0.manifest.json.
func FilesBeside(tgz string) Files {
	return filesOf(Stem(tgz), tgz)
}

// Stem is a tgz's path without its .tgz or .tar.gz.
func Stem(tgz string) string {
	if s, ok := strings.CutSuffix(tgz, TarballExt); ok {
		return s
	}
	return strings.TrimSuffix(tgz, ".tar.gz")
}

// Attestation is the DSSE envelope beside a statement or document that
// attests it for the tgz: its .json replaced by .dsse.json.
func Attestation(file string) string {
	return strings.TrimSuffix(file, ".json") + AttestationExt
}

// Signatures are the signature and the Sigstore bundle beside a signed
// file.
func Signatures(file string) (signature, bundle string) {
	return file + SignatureExt, file + SigstoreBundleExt
}

func filesOf(stem, tgz string) Files {
	f := Files{
		Tarball:                tgz,
		Manifest:               stem + ManifestExt,
		ValidationScript:       stem + ValidationScriptExt,
		SmokeLog:               stem + SmokeLogExt,
		SmokeTimeline:          stem + SmokeTimelineExt,
		SmokeCompare:           stem + SmokeCompareExt,
		FirstBootSmokeLog:      stem + FirstBootSmokeLogExt,
		FirstBootSmokeTimeline: stem + FirstBootSmokeTimelineExt,
		SBOM:                   stem + SBOMExt,
		Provenance:             stem + ProvenanceExt,
		CycloneDX:              stem + CycloneDXExt,
	}
	f.SBOMAttestation, f.ProvenanceAttestation = Attestation(f.SBOM), Attestation(f.Provenance)
	f.CycloneDXAttestation = Attestation(f.CycloneDX)
	f.TarballSignature, f.TarballBundle = Signatures(f.Tarball)
	f.ManifestSignature, f.ManifestBundle = Signatures(f.Manifest)
	return f
}

// ReadDocument reads a document beside the tgz (the SBOMs, the provenance)
// within limit bytes and checks that it is the one d records.
func ReadDocument(path string, d *Document, limit int64) ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("%s: the manifest records no such document", path)
	}
	b, err := readlimit.File(path, limit)
	if err != nil {
		return nil, fmt.Errorf("reading a document the manifest records: %w", err)
	}
	if got := digest.Bytes(b); !got.Matches(d.SHA256) {
		return nil, fmt.Errorf("%s has sha256 %s, but the manifest records %s: it changed since the build", path, got.Hex(), d.SHA256)
	}
	return b, nil
}

// paths are f's paths, every field, for Map and Or.
func (f *Files) paths() []*string {
	return []*string{&f.Tarball, &f.Manifest, &f.ValidationScript,
		&f.TarballSignature, &f.TarballBundle, &f.ManifestSignature, &f.ManifestBundle,
		&f.SmokeLog, &f.SmokeTimeline, &f.SmokeCompare, &f.FirstBootSmokeLog, &f.FirstBootSmokeTimeline, &f.SBOM, &f.SBOMAttestation,
		&f.Provenance, &f.ProvenanceAttestation, &f.CycloneDX, &f.CycloneDXAttestation}
}

// Map is f with fn applied to every path it names ("" stays "": a file
// it does not name): where a build's files are once moved.
func (f Files) Map(fn func(string) string) Files {
	for _, p := range f.paths() {
		if *p != "" {
			*p = fn(*p)
		}
	}
	return f
}

// Or is f with every file it does not name taken from g: the files a
// caller names, the others beside the tgz.
func (f Files) Or(g Files) Files {
	gp := g.paths()
	for i, p := range f.paths() {
		if *p == "" {
			*p = *gp[i]
		}
	}
	return f
}
