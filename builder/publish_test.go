package builder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/attest"
	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/sbom"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

// TestPublishSigned: the outputs are signed before they appear, published
// with their signatures (which the verifier accepts), or not at all when
// signing or publishing one of them fails; a build without a key removes
// stale signatures.
func TestPublishSigned(t *testing.T) {
	signer, verifier, _, _ := signingtest.KeyPair(t, []byte("pw"))
	arts := manifest.FilesFor("demo", "1")
	hook := func(r SignRequest) (map[string][]byte, error) {
		_, files, err := signer.SignBuilt(context.Background(), r.Tarball, r.SHA256, r.Size, r.ManifestPath, r.Manifest, r.Attestations)
		return files, err
	}
	publishOnce := func(t *testing.T, dir string, sign func(SignRequest) (map[string][]byte, error)) (*Result, error) {
		t.Helper()
		tgz, err := atomicfile.Create(filepath.Join(dir, arts.Tarball), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer tgz.Abort()
		content := []byte("not really a tgz, but bytes with a digest")
		tgz.Write(content)
		m := &manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Image: manifest.Image{Name: "demo", Version: "1"},
			Artifact: &manifest.Artifact{File: arts.Tarball, SHA256: digest.Bytes(content).Hex(), Size: int64(len(content))}}
		return publish(context.Background(), m, tgz, manifest.FilesBeside(filepath.Join(dir, arts.Tarball)), testDocuments(t, m, arts), sign)
	}
	files := func(dir string) []string {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return names
	}

	dir := t.TempDir()
	res, err := publishOnce(t, dir, hook)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Signatures) != 7 || len(files(dir)) != 13 {
		t.Fatalf("published %v with signatures %v", files(dir), res.Signatures)
	}
	r, err := signing.VerifyArtifact(context.Background(), verifier, res.Files.Tarball, res.Files.Manifest)
	if err != nil || r.Err() != nil {
		t.Fatalf("the published artifact does not verify: %v %v", err, r.Err())
	}

	// Without a key, the new artifact replaces the old one and its
	// signatures go: they would not match.
	if _, err := publishOnce(t, dir, nil); err != nil {
		t.Fatal(err)
	}
	if got := files(dir); len(got) != 6 {
		t.Errorf("after an unsigned rebuild: %v (want the tgz, manifest, script, SBOMs and provenance)", got)
	}

	// A signing failure publishes nothing.
	empty := t.TempDir()
	_, err = publishOnce(t, empty, func(SignRequest) (map[string][]byte, error) {
		return nil, errors.New("the key is gone")
	})
	if err == nil || len(files(empty)) != 0 {
		t.Errorf("failed signing: %v, left %v", err, files(empty))
	}

	// The manifest, published last, cannot take its name (a directory
	// holds it): the script, the signatures and the tgz, published by
	// then, are taken back.
	blocked := t.TempDir()
	if err := os.MkdirAll(filepath.Join(blocked, arts.Manifest, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = publishOnce(t, blocked, hook)
	if got := files(blocked); err == nil || len(got) != 1 || got[0] != arts.Manifest {
		t.Errorf("failed publish: %v, left %v", err, got)
	}
}

// testDocuments makes the SBOM and provenance of a published test
// artifact, as attest.Describe does, recording them in m.
func testDocuments(t *testing.T, m *manifest.Manifest, arts manifest.Files) *attest.Documents {
	t.Helper()
	at := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	img := sbom.Image{Name: "demo", Version: "1", Tarball: arts.Tarball, SHA256: m.Artifact.SHA256, Created: at, Tool: "imagectl-test"}
	inv := &sbom.Inventory{OS: sbom.OSRelease{ID: "debian", VersionID: "12"}}
	doc, err := sbom.Document(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	d := &attest.Documents{}
	if d.SBOM, err = sbom.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	bom, err := sbom.CycloneDX(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	if d.CycloneDX, err = sbom.MarshalCycloneDX(bom); err != nil {
		t.Fatal(err)
	}
	m.CycloneDX = &manifest.Document{File: arts.CycloneDX, SHA256: digest.Bytes(d.CycloneDX).Hex(), Format: sbom.CycloneDXFormat}
	subject := provenance.Resource{Name: arts.Tarball, SHA256: m.Artifact.SHA256}
	if d.SBOMStatement, err = provenance.SBOMStatement(subject, manifest.SPDXPredicateType, d.SBOM); err != nil {
		t.Fatal(err)
	}
	if d.CycloneDXStatement, err = provenance.SBOMStatement(subject, manifest.CycloneDXPredicateType, d.CycloneDX); err != nil {
		t.Fatal(err)
	}
	if d.Provenance, err = provenance.Statement(provenance.Build{Subject: subject, ImagectlVersion: "test", Host: "h",
		Recipe: provenance.Resource{Name: "demo.hcl", SHA256: m.Artifact.SHA256}, Version: "1",
		Base: provenance.Resource{URI: "file:///base.qcow2", SHA256: m.Artifact.SHA256}, Started: at, Finished: at}); err != nil {
		t.Fatal(err)
	}
	m.SBOM = &manifest.Document{File: arts.SBOM, SHA256: digest.Bytes(d.SBOM).Hex(), Format: sbom.Format}
	m.Provenance = &manifest.Document{File: arts.Provenance, SHA256: digest.Bytes(d.Provenance).Hex(), Format: provenance.PredicateType}
	return d
}
