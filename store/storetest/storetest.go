// Package storetest makes what tests of the store, promotion and their CLI
// share: small real artifacts (a gzip tar, its manifest with a maas section,
// a validation script, and cosign-format signatures when a signer is given).
package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
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
		if _, err := signing.SignArtifact(context.Background(), opts.Signer, tgz, manifestPath); err != nil {
			t.Fatal(err)
		}
	}
	return tgz, manifestPath
}

// Keys makes a signing key pair, writing the public key to dir/cosign.pub
// and the private key (password "pw") to dir/cosign.key.
func Keys(t testing.TB, dir string) (*signing.Signer, string) {
	t.Helper()
	priv, pub, err := signing.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := signing.LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pubPath := filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cosign.key"), priv, 0o600); err != nil {
		t.Fatal(err)
	}
	return s, pubPath
}
