// Package storetest makes what tests of the store, promotion and their CLI
// share: small real artifacts (a gzip tar, its manifest with a maas section,
// a validation script, and cosign-format signatures when a signer is given),
// a whole validation Result, and TestRecords, the evidence and revocation
// behaviour every store.Promotions must keep (the directory store, the git
// catalog, and a store opened with one).
package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/sbom"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
)

// Options adjust an artifact.
type Options struct {
	// Signer signs the tgz and the manifest; nil leaves them unsigned.
	Signer *signing.Signer
	// Deploy are the manifest's deployability findings.
	Deploy []manifest.DeployFinding
	// BaseImage is the maas section's base image (default ubuntu/noble);
	// NoMAAS leaves the section out.
	BaseImage string
	NoMAAS    bool
	// Documents adds an SBOM and a provenance statement beside the tgz,
	// recorded in the manifest (and attested when Signer is set), as a
	// build makes them.
	Documents bool
}

// Artifact writes <dir>/<image>-<version>.tgz (a small gzip tar whose
// content depends on image and version), its manifest and validation
// script, signed when opts.Signer is set. It returns the tgz and manifest.
func Artifact(t testing.TB, dir, image, version string, opts Options) (tgz, manifestPath string) {
	t.Helper()
	stem := image + "-" + version
	tgz, manifestPath = signingtest.Artifact(t, dir, stem)
	m, err := manifest.Read(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	m.Image.Name, m.Image.Version, m.Image.Title = image, version, "Test "+image
	m.Deploy = append([]manifest.DeployFinding{}, opts.Deploy...)
	if !opts.NoMAAS {
		base := opts.BaseImage
		if base == "" {
			base = "ubuntu/noble"
		}
		vn := manifest.VersionedName("custom/"+image, version)
		m.MAAS = &manifest.MAAS{Name: "custom/" + image, VersionedName: vn, DistroSeries: manifest.DistroSeries(vn),
			Title: m.Image.Title + " " + version, Filetype: "tgz", BaseImage: base}
	}
	if opts.Documents {
		documents(t, tgz, m)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifestPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := manifest.FilesBeside(tgz).ValidationScript
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho "+stem+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if opts.Signer != nil {
		statements, err := provenance.Statements(tgz, manifestPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := signing.SignArtifact(context.Background(), opts.Signer, tgz, manifestPath, statements); err != nil {
			t.Fatal(err)
		}
	}
	return tgz, manifestPath
}

// Keys makes a signing key pair, writing the public key to dir/cosign.pub
// and the private key (password "pw") to dir/cosign.key.
func Keys(t testing.TB, dir string) (*signing.Signer, string) {
	t.Helper()
	s, _, priv, pub := signingtest.KeyPair(t, []byte("pw"))
	pubPath := filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cosign.key"), priv, 0o600); err != nil {
		t.Fatal(err)
	}
	return s, pubPath
}

// documents writes an SBOM of one package (SPDX and CycloneDX) and a
// provenance statement beside the tgz, made as a build makes them, and
// records them in m.
func documents(t testing.TB, tgz string, m *manifest.Manifest) {
	t.Helper()
	beside := manifest.FilesBeside(tgz)
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	name := filepath.Base(tgz)
	img := sbom.Image{Name: m.Image.Name, Version: m.Image.Version, Architecture: "amd64", Tarball: name,
		SHA256: m.Artifact.SHA256, Created: at, Tool: "imagectl-test"}
	inv := &sbom.Inventory{OS: sbom.OSRelease{ID: "debian", VersionID: "12"}, Packages: []sbom.Package{{Name: "base-files",
		Version: "12.4+deb12u5", Architecture: "amd64", Source: "base-files", SourceVersion: "12.4+deb12u5", License: "GPL-2.0-or-later", Licenses: []string{"GPL-2+"}}}}
	doc, err := sbom.Document(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sbom.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	bom, err := sbom.CycloneDX(img, inv)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := sbom.MarshalCycloneDX(bom)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := provenance.Statement(provenance.Build{Subject: provenance.Resource{Name: name, SHA256: m.Artifact.SHA256},
		ImagectlVersion: "test", Host: "test-host", Recipe: provenance.Resource{Name: "recipe.hcl", SHA256: digest.Bytes([]byte(name)).Hex()},
		Version: m.Image.Version, VersionFrom: "recipe",
		Base:    provenance.Resource{Name: "base", URI: "https://cloud-images.example/base.img", SHA256: digest.Bytes([]byte("base")).Hex()},
		Started: at, Finished: at.Add(time.Minute), InvocationID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{beside.SBOM, sb}, {beside.CycloneDX, cb}, {beside.Provenance, pb}} {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.SBOM = &manifest.Document{File: filepath.Base(beside.SBOM), SHA256: digest.Bytes(sb).Hex(), Format: sbom.Format}
	m.Provenance = &manifest.Document{File: filepath.Base(beside.Provenance), SHA256: digest.Bytes(pb).Hex(), Format: provenance.PredicateType}
	m.CycloneDX = &manifest.Document{File: filepath.Base(beside.CycloneDX), SHA256: digest.Bytes(cb).Hex(), Format: sbom.CycloneDXFormat}
}
