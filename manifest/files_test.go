package manifest

import "testing"

func TestFiles(t *testing.T) {
	want := Files{
		Tarball: "x-1.0.tgz", Manifest: "x-1.0.manifest.json", ValidationScript: "x-1.0-validate.sh",
		TarballSignature: "x-1.0.tgz.sig", TarballBundle: "x-1.0.tgz.sigstore.json",
		ManifestSignature: "x-1.0.manifest.json.sig", ManifestBundle: "x-1.0.manifest.json.sigstore.json",
		SmokeLog: "x-1.0.smoke.log", SmokeTimeline: "x-1.0.smoke-timeline.json",
		SBOM: "x-1.0.spdx.json", SBOMAttestation: "x-1.0.spdx.dsse.json",
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
