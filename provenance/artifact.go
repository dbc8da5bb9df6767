package provenance

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
)

// maxDocument bounds an SBOM or a statement read from disk.
const maxDocument = 256 << 20

// SBOMStatement is the in-toto statement that attests an SBOM for the tgz
// subject: the document is its predicate, of predicateType (SPDX or
// CycloneDX), as cosign attest --type spdxjson or --type cyclonedx makes
// it.
func SBOMStatement(subject Resource, predicateType string, doc []byte) ([]byte, error) {
	sum, err := digest.Parse(subject.SHA256)
	if err != nil {
		return nil, fmt.Errorf("attesting the SBOM (%s) of %s: its sha256: %w", predicateType, subject.Name, err)
	}
	if !json.Valid(doc) {
		return nil, fmt.Errorf("attesting the SBOM (%s) of %s: the SBOM is not JSON", predicateType, subject.Name)
	}
	st := struct {
		Type          string          `json:"_type"`
		Subject       []subjectJSON   `json:"subject"`
		PredicateType string          `json:"predicateType"`
		Predicate     json.RawMessage `json:"predicate"`
	}{statementType, []subjectJSON{{Name: subject.Name, Digest: map[string]string{"sha256": digest.Digest{Sum: sum}.Hex()}}},
		predicateType, json.RawMessage(doc)}
	return json.Marshal(st)
}

const statementType = "https://in-toto.io/Statement/v1"

type subjectJSON struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// WithSubject returns the statement with one more subject: an in-toto
// statement about the tgz, made about its registry manifest too (cosign
// verify-attestation wants the image's digest among the subjects).
// Everything else is kept as it is.
func WithSubject(statement []byte, r Resource) ([]byte, error) {
	sum, err := digest.Parse(r.SHA256)
	if err != nil {
		return nil, fmt.Errorf("adding subject %s: its sha256: %w", r.Name, err)
	}
	var st map[string]json.RawMessage
	if err := json.Unmarshal(statement, &st); err != nil {
		return nil, fmt.Errorf("adding subject %s: not a statement: %w", r.Name, err)
	}
	var subjects []subjectJSON
	if err := json.Unmarshal(st["subject"], &subjects); err != nil {
		return nil, fmt.Errorf("adding subject %s: the statement's subjects: %w", r.Name, err)
	}
	subjects = append(subjects, subjectJSON{Name: r.Name, Digest: map[string]string{"sha256": digest.Digest{Sum: sum}.Hex()}})
	if st["subject"], err = json.Marshal(subjects); err != nil {
		return nil, err
	}
	return json.Marshal(st)
}

// Statements are the in-toto statements about a built tgz that its
// manifest records, by the path of the DSSE envelope that attests each:
// the provenance statement beside it and the statements that carry its
// SBOM as SPDX and as CycloneDX. Each file must be the one the manifest
// records by digest. A manifest of a build before imagectl made them
// records none.
func Statements(tarball, manifestPath string) (map[string][]byte, error) {
	m, err := manifest.Read(manifestPath)
	if err != nil {
		return nil, err
	}
	if m.Artifact == nil {
		return nil, fmt.Errorf("%s has no artifact section: it is a build marker, not the manifest of a tgz", manifestPath)
	}
	beside := manifest.FilesBeside(tarball)
	out := map[string][]byte{}
	if d := m.Provenance; d != nil {
		b, err := manifest.ReadDocument(beside.Provenance, d, maxDocument)
		if err != nil {
			return nil, err
		}
		out[beside.ProvenanceAttestation] = b
	}
	subject := Resource{Name: filepath.Base(tarball), SHA256: m.Artifact.SHA256}
	for _, s := range m.SBOMs(beside) {
		b, err := manifest.ReadDocument(s.Path, s.Document, maxDocument)
		if err != nil {
			return nil, err
		}
		if out[s.Attestation], err = SBOMStatement(subject, s.PredicateType, b); err != nil {
			return nil, err
		}
	}
	return out, nil
}
