package builder

import (
	"strings"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/manifest"
)

// Manifest is the part of the build manifest the plan already knows: what
// the recipe asks for, with digests. A build adds what only running it
// tells (installed package versions, missing optional packages, fetched
// keys, timings, the artifact); a validation script generated from a
// recipe alone uses it as it is.
func (p *Plan) Manifest() *manifest.Manifest {
	m := &manifest.Manifest{
		SchemaVersion:    manifest.SchemaVersion,
		Image:            manifest.Image{Name: p.Image.Name, Title: p.Image.Title, Version: p.Image.Version, Architecture: p.Image.Architecture},
		Recipe:           manifest.Recipe{Path: p.Recipe.Path, Digest: p.Recipe.Digest},
		Builder:          manifest.Builder{Version: p.BuilderVersion},
		Base:             manifest.Base{Source: p.Base.Source, SHA256: strings.TrimPrefix(p.Base.Checksum, "sha256:"), Format: p.Base.Format, Size: p.Base.SizeBytes},
		Packages:         []manifest.Package{},
		RequiredPackages: []string{},
		MissingOptional:  []string{},
		Files:            []manifest.File{},
		Bundles:          []manifest.Bundle{},
		Services:         manifest.Services{Enabled: []string{}, Disabled: []string{}},
		KernelArgs:       p.KernelArgs,
		Validation: manifest.Validation{Script: p.Validation.Script, Marker: p.Image.BuildMarker,
			ServicesActive: p.Validation.ServicesActive, FilesExist: p.Validation.FilesExist, Checks: []manifest.Check{},
			DefaultProfile: p.Validation.DefaultProfile, DefaultStage: p.Validation.DefaultStage,
			CollectorWaitSeconds: p.Validation.CollectorWaitSeconds, GPU: p.Validation.GPU, Profiles: p.Validation.Profiles},
		Lineage: manifest.Lineage{BaseDigest: p.Base.Checksum, RecipeDigest: p.Recipe.Digest},
	}
	if len(p.Waivers) > 0 {
		m.DeployWaivers = p.Waivers
	}
	if t := p.MAAS; t != nil {
		m.MAAS = &manifest.MAAS{Name: t.Name, VersionedName: t.VersionedName, DistroSeries: t.DistroSeries, Title: t.Title,
			Filetype: t.Filetype, BaseImage: t.BaseImage, Site: t.Site}
	}
	for _, c := range p.Validation.Checks {
		m.Validation.Checks = append(m.Validation.Checks, manifest.Check{Name: c.Name, Command: c.Command})
	}
	if nd := p.Netdata; nd != nil {
		m.Netdata = &manifest.Netdata{Enabled: nd.Enabled, Bind: nd.Bind, RetentionMB: nd.RetentionMB, UpdateEvery: nd.UpdateEvery, Collectors: nd.Collectors}
	}
	if nw := p.Network; nw != nil {
		m.Network = &manifest.Network{WaitOnlineTimeoutSeconds: nw.WaitOnlineTimeoutSeconds, WaitOnlineAny: nw.WaitOnlineAny}
	}
	for _, l := range p.Layers {
		m.Layers = append(m.Layers, manifest.Layer{Name: l.Name, File: l.File, FileDigest: l.FileDigest, Enabled: l.Enabled, Digest: l.Digest, Key: l.Key})
		if l.Enabled {
			m.Lineage.TopKey = l.Key
		}
		for _, st := range l.Steps {
			switch s := st.(type) {
			case steps.Packages:
				if !s.Optional {
					m.RequiredPackages = append(m.RequiredPackages, s.Packages...)
				}
			case steps.WriteFile:
				m.Files = append(m.Files, manifest.File{Path: s.Path, SHA256: s.SHA256, Mode: fsmode.String(s.Mode), Owner: s.Owner, Layer: l.Name})
			case steps.Services:
				m.Services.Enabled = append(m.Services.Enabled, s.Enable...)
				m.Services.Disabled = append(m.Services.Disabled, s.Disable...)
			case steps.StageBundle:
				m.Bundles = append(m.Bundles, manifestBundle(s))
			}
		}
	}
	return m
}
