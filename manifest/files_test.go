package manifest

import (
	"reflect"
	"testing"
)

func TestFiles(t *testing.T) {
	want := Files{
		Tarball: "x-1.0.tgz", Manifest: "x-1.0.manifest.json", ValidationScript: "x-1.0-validate.sh",
		TarballSignature: "x-1.0.tgz.sig", TarballBundle: "x-1.0.tgz.sigstore.json",
		ManifestSignature: "x-1.0.manifest.json.sig", ManifestBundle: "x-1.0.manifest.json.sigstore.json",
		SmokeLog: "x-1.0.smoke.log", SmokeTimeline: "x-1.0.smoke-timeline.json",
		SmokeCompare: "x-1.0.smoke-compare.json", FirstBootSmokeLog: "x-1.0.smoke-first-boot.log",
		FirstBootSmokeTimeline: "x-1.0.smoke-first-boot-timeline.json",
		SBOM:                   "x-1.0.spdx.json", SBOMAttestation: "x-1.0.spdx.dsse.json",
		Provenance: "x-1.0.provenance.json", ProvenanceAttestation: "x-1.0.provenance.dsse.json",
		CycloneDX: "x-1.0.cdx.json", CycloneDXAttestation: "x-1.0.cdx.dsse.json",
	}
	if got := FilesFor("x", "1.0"); got != want {
		t.Errorf("FilesFor: %+v", got)
	}
	if got := FilesBeside("x-1.0.tgz"); got != want {
		t.Errorf("FilesBeside: %+v", got)
	}
	if got := FilesBeside("a/x-1.0.tar.gz"); got.Tarball != "a/x-1.0.tar.gz" || got.Manifest != "a/x-1.0.manifest.json" || got.TarballSignature != "a/x-1.0.tar.gz.sig" {
		t.Errorf("FilesBeside .tar.gz: %+v", got)
	}
	if got := FilesBeside("image"); got.Manifest != "image.manifest.json" {
		t.Errorf("FilesBeside without .tgz: %+v", got)
	}
	if sig, bundle := Signatures("d/f.json"); sig != "d/f.json.sig" || bundle != "d/f.json.sigstore.json" {
		t.Errorf("Signatures: %s %s", sig, bundle)
	}
	if a := Attestation("d/x.provenance.json"); a != "d/x.provenance.dsse.json" {
		t.Errorf("Attestation: %s", a)
	}
}

func TestFilesMapAndOr(t *testing.T) {
	// Every field is a path Map and Or see.
	var f Files
	if n, want := len(f.paths()), reflect.TypeOf(f).NumField(); n != want {
		t.Fatalf("paths names %d of the %d fields of Files", n, want)
	}
	all := FilesFor("x", "1.0")
	moved := all.Map(func(p string) string { return "d/" + p })
	if moved.Tarball != "d/x-1.0.tgz" || moved.CycloneDXAttestation != "d/x-1.0.cdx.dsse.json" || moved.SmokeLog != "d/x-1.0.smoke.log" {
		t.Errorf("Map: %+v", moved)
	}
	if some := (Files{Tarball: "t"}).Map(func(p string) string { return "d/" + p }); some != (Files{Tarball: "d/t"}) {
		t.Errorf("Map of a file not named: %+v", some)
	}
	named := Files{Tarball: "x-1.0.tgz", Manifest: "m.json"}
	if got := named.Or(all); got.Manifest != "m.json" || got.Tarball != "x-1.0.tgz" || got.SBOM != all.SBOM || got.ValidationScript != all.ValidationScript {
		t.Errorf("Or: %+v", got)
	}
}
