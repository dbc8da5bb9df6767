// Package attest owns what a build says about its tgz: the SBOM (SPDX and
// CycloneDX, read from the packed tgz by package sbom), the in-toto
// statements that attest each SBOM for the tgz, and the SLSA provenance of
// the build (package provenance), each recorded in the manifest by digest.
// Signing them is the signer's (package signing); this package only keeps
// them within what a signed envelope may hold.
package attest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/sbom"
	"github.com/gpuaas/imagectl/signing"
)

// maxDocument bounds the SBOM: its attestation is an envelope of it in
// base64, and signing.MaxEnvelopeSize bounds what verification reads.
const maxDocument = signing.MaxEnvelopeSize / 4 * 3 * 9 / 10

// Documents are the files a build writes that describe its tgz: the SPDX
// SBOM, the same as CycloneDX, the provenance statement, and the
// statements that attest each SBOM for the tgz (signed, when the build
// signs, with the provenance).
type Documents struct {
	SBOM, CycloneDX, Provenance       []byte
	SBOMStatement, CycloneDXStatement []byte
}

// Describe reads the packed tgz's inventory and makes the build's SBOM and
// provenance, recording their digests in m, the build's manifest. The
// tgz's sha256 and the manifest's times are final when it runs; packer
// says how the tgz was packed; debs are the package archives the build
// fetched, which the provenance lists (their URLs without credentials).
func Describe(ctx context.Context, plan *plan.Plan, m *manifest.Manifest, tgz, packer string, debs []provenance.Package) (*Documents, error) {
	opts := sbom.ScanOptions{}
	for _, f := range m.Files {
		opts.Files = append(opts.Files, f.Path)
	}
	for _, b := range m.Bundles {
		opts.Dirs = append(opts.Dirs, b.Destination)
	}
	inv, err := sbom.Scan(ctx, tgz, opts)
	if err != nil {
		return nil, err
	}
	img := sbom.Image{Name: m.Image.Name, Version: m.Image.Version, Architecture: m.Image.Architecture,
		Tarball: plan.Output.Files.Tarball, SHA256: m.Artifact.SHA256, Created: m.Build.Finished, Tool: "imagectl-" + m.Builder.Version}
	img.Bundles = m.Bundles
	doc, err := sbom.Document(img, inv)
	if err != nil {
		return nil, fmt.Errorf("making the SBOM of %s: %w", tgz, err)
	}
	d := &Documents{}
	if d.SBOM, err = sbom.Marshal(doc); err != nil {
		return nil, fmt.Errorf("encoding the SBOM of %s: %w", tgz, err)
	}
	// Within what a DSSE envelope (base64, a third larger) may hold when
	// verified; a sensitive value is never in the documents.
	if len(d.SBOM) > maxDocument {
		return nil, fmt.Errorf("the SBOM of %s is %d bytes, more than the %d an attestation of it may hold (bundles of very many files?)", tgz, len(d.SBOM), maxDocument)
	}
	d.SBOM = plan.Redact(d.SBOM)
	subject := provenance.Resource{Name: plan.Output.Files.Tarball, SHA256: m.Artifact.SHA256}
	if d.SBOMStatement, err = provenance.SBOMStatement(subject, manifest.SPDXPredicateType, d.SBOM); err != nil {
		return nil, err
	}
	m.SBOM = &manifest.Document{File: plan.Output.Files.SBOM, SHA256: digest.Bytes(d.SBOM).Hex(), Format: sbom.Format}

	bom, err := sbom.CycloneDX(img, inv)
	if err != nil {
		return nil, fmt.Errorf("making the CycloneDX SBOM of %s: %w", tgz, err)
	}
	if d.CycloneDX, err = sbom.MarshalCycloneDX(bom); err != nil {
		return nil, fmt.Errorf("encoding the CycloneDX SBOM of %s: %w", tgz, err)
	}
	if len(d.CycloneDX) > maxDocument {
		return nil, fmt.Errorf("the CycloneDX SBOM of %s is %d bytes, more than the %d an attestation of it may hold (bundles of very many files?)", tgz, len(d.CycloneDX), maxDocument)
	}
	d.CycloneDX = plan.Redact(d.CycloneDX)
	if d.CycloneDXStatement, err = provenance.SBOMStatement(subject, manifest.CycloneDXPredicateType, d.CycloneDX); err != nil {
		return nil, err
	}
	m.CycloneDX = &manifest.Document{File: plan.Output.Files.CycloneDX, SHA256: digest.Bytes(d.CycloneDX).Hex(), Format: sbom.CycloneDXFormat}

	b := provenanceOf(plan, m, inv, packer)
	for _, d := range debs {
		d.URI = redact.Userinfo(d.URI)
		b.Packages = append(b.Packages, d)
	}
	b.Byproducts = []provenance.Resource{
		{Name: m.SBOM.File, SHA256: m.SBOM.SHA256, Annotations: map[string]string{"mediaType": "application/spdx+json"}},
		{Name: m.CycloneDX.File, SHA256: m.CycloneDX.SHA256, Annotations: map[string]string{"mediaType": "application/vnd.CycloneDX+json"}},
	}
	if d.Provenance, err = provenance.Statement(b); err != nil {
		return nil, fmt.Errorf("making the provenance of %s: %w", tgz, err)
	}
	d.Provenance = plan.Redact(d.Provenance)
	m.Provenance = &manifest.Document{File: plan.Output.Files.Provenance, SHA256: digest.Bytes(d.Provenance).Hex(), Format: provenance.PredicateType}
	return d, nil
}

// provenanceOf is what the build tells its provenance: the recipe and the
// variables given to it (sensitive ones left out), everything it resolved
// (the base image, layer files, bundles, apt repositories: those the
// recipe added and those the image came configured with) and how it ran.
func provenanceOf(plan *plan.Plan, m *manifest.Manifest, inv *sbom.Inventory, packer string) provenance.Build {
	host, _ := os.Hostname()
	b := provenance.Build{
		Subject:         provenance.Resource{Name: plan.Output.Files.Tarball, SHA256: m.Artifact.SHA256},
		ImagectlVersion: m.Builder.Version, Host: host, Accelerator: m.Builder.Accelerator, Packer: packer, AptProxy: redact.Userinfo(m.Builder.AptProxy),
		Recipe:  provenance.Resource{Name: m.Recipe.Path, URI: fileURI("", m.Recipe.Path), SHA256: m.Recipe.Digest},
		Version: m.Image.Version, VersionFrom: plan.VersionFrom,
		SourceRevision: m.Lineage.SourceRevision,
		Base:           provenance.Resource{Name: "base", URI: baseURI(plan), SHA256: plan.BaseChecksum()},
		InvocationID:   invocationID(),
		Started:        m.Build.Started, Finished: m.Build.Finished,
	}
	for _, v := range plan.Variables {
		if v.Sensitive || v.Source == "default" {
			continue
		}
		b.Variables = append(b.Variables, provenance.Variable{Name: v.Name, Value: v.Value, Source: v.Source})
	}
	keys := map[string]string{}
	for _, k := range m.AptKeys {
		keys[k.Repository] = k.SHA256
	}
	for _, l := range plan.Layers {
		if !l.Enabled {
			continue
		}
		if l.File != "" {
			b.LayerFiles = append(b.LayerFiles, provenance.Resource{Name: l.File, URI: fileURI(plan.Inputs.Dir, l.File), SHA256: l.FileDigest})
		}
		for _, st := range l.Steps {
			switch s := st.(type) {
			case steps.AptRepository:
				key := s.KeySHA256
				if key == "" {
					key = keys[s.Name]
				}
				b.AptRepositories = append(b.AptRepositories, provenance.AptRepository{Name: s.Name, URI: redact.Userinfo(s.URI),
					Suite: s.Suite, Components: s.Components, KeySHA256: key, ConfiguredIn: "recipe layer " + l.Name})
			case steps.StageBundle:
				src := s.SourcePath
				if src == "" {
					src = s.Source
				}
				b.Bundles = append(b.Bundles, provenance.Resource{Name: s.Name, URI: fileURI(plan.Inputs.Dir, src), SHA256: s.Digest})
			}
		}
	}
	// A repository the recipe added is also in the sources file it wrote
	// into the image: it is listed once, as the recipe's.
	fromRecipe := map[[2]string]bool{}
	for _, a := range b.AptRepositories {
		fromRecipe[[2]string{strings.TrimSuffix(a.URI, "/"), a.Suite}] = true
	}
	for _, src := range inv.AptSources {
		for _, uri := range src.URIs {
			for _, suite := range src.Suites {
				if fromRecipe[[2]string{strings.TrimSuffix(redact.Userinfo(uri), "/"), suite}] {
					continue
				}
				b.AptRepositories = append(b.AptRepositories, provenance.AptRepository{Name: path.Base(src.File), URI: redact.Userinfo(uri),
					Suite: suite, Components: src.Components, ConfiguredIn: src.File})
			}
		}
	}
	return b
}

// fileURI is a local file's URI, a relative path being relative to dir
// (the recipe's directory; "" for the working directory); "" for "". A
// URL is returned without credentials.
func fileURI(dir, p string) string {
	if p == "" || strings.Contains(p, "://") {
		return redact.Userinfo(p)
	}
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return "file://" + filepath.ToSlash(p)
}

// baseURI is where the base image came from: its URL, or the local file.
func baseURI(plan *plan.Plan) string {
	if plan.Inputs.BasePath != "" {
		return fileURI("", plan.Inputs.BasePath)
	}
	return redact.Userinfo(plan.Manifest.Base.Source)
}

// invocationID identifies one build run in its provenance.
func invocationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
