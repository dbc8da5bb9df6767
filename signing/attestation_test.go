package signing_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

const slsaV1 = "https://slsa.dev/provenance/v1"

// statement is a minimal in-toto statement about sha256 (hex).
func statement(sha256Hex, predicateType, predicate string) []byte {
	return []byte(fmt.Sprintf(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x.tgz","digest":{"sha256":%q}}],"predicateType":%q,"predicate":%s}`,
		sha256Hex, predicateType, predicate))
}

func hexOf(b []byte) string {
	return digest.Bytes(b).Hex()
}

// documented writes an SBOM and a provenance statement beside a test
// artifact, records them in its manifest, and signs all of it with their
// attestations. It returns the statements signed.
func documented(t *testing.T, k keys, stem string) (tgz, man string, statements map[string][]byte) {
	t.Helper()
	tgz, man = signingtest.Artifact(t, t.TempDir(), stem)
	m, err := manifest.Read(man)
	if err != nil {
		t.Fatal(err)
	}
	beside := manifest.FilesBeside(tgz)
	sbomDoc := []byte(`{"spdxVersion": "SPDX-2.3", "name": "` + stem + `"}` + "\n")
	cdxDoc := []byte(`{"bomFormat": "CycloneDX", "specVersion": "1.6"}` + "\n")
	prov := statement(m.Artifact.SHA256, slsaV1, `{"buildDefinition":{"buildType":"t","externalParameters":{"a":"b"}},"runDetails":{"builder":{"id":"https://example.com/b"}}}`)
	for p, b := range map[string][]byte{beside.SBOM: sbomDoc, beside.CycloneDX: cdxDoc, beside.Provenance: prov} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.SBOM = &manifest.Document{File: stem + ".spdx.json", SHA256: hexOf(sbomDoc), Format: "SPDX-2.3"}
	m.Provenance = &manifest.Document{File: stem + ".provenance.json", SHA256: hexOf(prov), Format: slsaV1}
	m.CycloneDX = &manifest.Document{File: stem + ".cdx.json", SHA256: hexOf(cdxDoc), Format: "CycloneDX-1.6"}
	manifesttest.Write(t, man, m)
	statements = map[string][]byte{
		beside.ProvenanceAttestation: prov,
		beside.SBOMAttestation:       statement(m.Artifact.SHA256, manifest.SPDXPredicateType, string(sbomDoc)),
		beside.CycloneDXAttestation:  statement(m.Artifact.SHA256, manifest.CycloneDXPredicateType, string(cdxDoc)),
	}
	a, err := signing.SignArtifact(context.Background(), k.signer, tgz, man, statements)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Files()) != 7 {
		t.Fatalf("signed files %v, want four signatures and three attestations", a.Files())
	}
	return tgz, man, statements
}

// A manifest that records an SBOM and provenance verifies only with both
// documents unchanged and attested for this tgz under the key.
func TestVerifyDocuments(t *testing.T) {
	ctx := context.Background()
	k := newKeys(t)
	tgz, man, _ := documented(t, k, "demo-0.1.0")
	r, err := signing.VerifyArtifact(ctx, k.verifier, tgz, man)
	if err != nil || r.Err() != nil {
		t.Fatalf("verify: %v %v", err, r.Err())
	}
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "sbom,sbom attestation,cyclonedx sbom,cyclonedx sbom attestation,provenance,provenance attestation") {
		t.Errorf("checks %s", got)
	}

	other, _, _ := documented(t, k, "demo-0.2.0")
	beside, otherBeside := manifest.FilesBeside(tgz), manifest.FilesBeside(other)
	for _, tc := range []struct {
		name, check, want string
		change            func(t *testing.T)
	}{
		{"sbom changed", "sbom", "changed since the build", func(t *testing.T) {
			appendTo(t, beside.SBOM, " ")
		}},
		{"cyclonedx changed", "cyclonedx sbom", "changed since the build", func(t *testing.T) {
			appendTo(t, beside.CycloneDX, " ")
		}},
		{"cyclonedx missing", "cyclonedx sbom", "no such file", func(t *testing.T) {
			os.Remove(beside.CycloneDX)
		}},
		{"provenance changed", "provenance", "changed since the build", func(t *testing.T) {
			appendTo(t, beside.Provenance, " ")
		}},
		{"attestation missing", "provenance attestation", "no such file", func(t *testing.T) {
			os.Remove(beside.ProvenanceAttestation)
		}},
		{"another build's attestation", "sbom attestation", "attests another artifact", func(t *testing.T) {
			copyFile(t, otherBeside.SBOMAttestation, beside.SBOMAttestation)
		}},
		{"attestations swapped", "sbom attestation", "predicate type", func(t *testing.T) {
			copyFile(t, beside.ProvenanceAttestation, beside.SBOMAttestation)
		}},
		{"cyclonedx attestation missing", "cyclonedx sbom attestation", "no such file", func(t *testing.T) {
			os.Remove(beside.CycloneDXAttestation)
		}},
		{"the SPDX attestation as CycloneDX's", "cyclonedx sbom attestation", "predicate type", func(t *testing.T) {
			copyFile(t, beside.SBOMAttestation, beside.CycloneDXAttestation)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgz, man, _ := documented(t, k, "demo-0.1.0")
			beside = manifest.FilesBeside(tgz)
			tc.change(t)
			r, err := signing.VerifyArtifact(ctx, k.verifier, tgz, man)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verified {
				t.Fatal("verified")
			}
			for _, c := range r.Checks {
				if c.Name == tc.check && !c.OK && strings.Contains(c.Error, tc.want) {
					return
				}
			}
			t.Errorf("no failed %q check saying %q: %v", tc.check, tc.want, r.Err())
		})
	}

	// Another key's attestations do not verify.
	k2 := newKeys(t)
	tgz2, man2, _ := documented(t, k2, "demo-0.1.0")
	if r, err := signing.VerifyArtifact(ctx, k.verifier, tgz2, man2); err != nil || r.Verified ||
		!strings.Contains(r.Err().Error(), "does not verify under this key") {
		t.Errorf("another key's artifact: %v %v", err, r.Err())
	}
}

// Attest signs statements about the tgz only.
func TestAttestRefusesOtherSubjects(t *testing.T) {
	k := newKeys(t)
	st := statement(strings.Repeat("a", 64), slsaV1, `{}`)
	if _, err := k.signer.Attest(context.Background(), strings.Repeat("b", 64), map[string][]byte{"x.dsse.json": st}); err == nil ||
		!strings.Contains(err.Error(), "do not include the tgz") {
		t.Errorf("err = %v", err)
	}
	if _, err := k.signer.Attest(context.Background(), strings.Repeat("b", 64), map[string][]byte{"x.dsse.json": []byte(`{"_type":"x"}`)}); err == nil ||
		!strings.Contains(err.Error(), "not an in-toto statement") {
		t.Errorf("err = %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to, read(t, from), 0o644); err != nil {
		t.Fatal(err)
	}
}
