// Package plan owns what a build of a recipe will do before anything runs:
// the static part of the build manifest (what the image will be), the
// compiled layers of steps that make it (package compile), the local inputs
// they read, and the plan's text and JSON renderings that build --dry-run
// prints, each step with whether it runs at first boot (package firstboot's
// verdict). A build (package builder) executes a Plan; the dry run renders
// the same one, and imagectl firstboot writes its layers as a script, so
// they cannot disagree.
package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/buildinfo"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/fsmode"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// SchemaVersion is the version of the plan's JSON form.
const SchemaVersion = 1

// Plan is everything a build of a recipe will do, resolved and digested,
// before anything is touched: the static part of the build manifest (what
// the image will be), the ordered layers of steps that make it, and the
// local inputs they read. It keeps no pointer back to the recipe: --dry-run
// renders it, a build executes it, and both read the same step list.
type Plan struct {
	// Manifest is the build manifest as far as the recipe fixes it: image,
	// MAAS target, recipe, builder, base, layers with digests and keys,
	// files, bundles, services, kernel args, Netdata, network, validation,
	// waivers and lineage. A build adds what only running it tells
	// (packages, apt keys, timings, findings, the artifact) to a Clone.
	Manifest *manifest.Manifest
	// VersionFrom says where Manifest.Image.Version came from: "recipe",
	// "--version" or "generated".
	VersionFrom string
	Variables   []Variable
	// Layers are the compiled layers, in order: Manifest.Layers[i]
	// records Layers[i].
	Layers []*compile.Layer
	Inputs Inputs
	Output Output
	// secrets are the values of sensitive variables, kept out of renderings
	// wherever a step carries them (a run command, a URI).
	secrets []string
	// aptProxy is the recipe's apt_proxy, credentials included.
	aptProxy string
}

// AptProxy is the proxy the guest's apt goes through during the build
// (the recipe's apt_proxy, credentials included: never to be printed; the
// manifest records it without them), "" when none.
func (p *Plan) AptProxy() string { return p.aptProxy }

// Variable is a resolved variable; sensitive values are not shown.
type Variable struct {
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value"`
	Source    string          `json:"source"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// Inputs are the local things a build reads that the manifest does not
// record as such, resolved when the recipe was loaded.
type Inputs struct {
	// Dir is the recipe's directory: a relative artifact directory, layer
	// files and bundle sources are relative to it.
	Dir string
	// BasePath is the local base image, "" when it is downloaded.
	BasePath string
	// BaseSize is the size the disk is grown to as the recipe writes it
	// ("20G"; Manifest.Base.Size has it in bytes), "" to keep the base's.
	BaseSize string
}

// Output is where and how a build writes its files.
type Output struct {
	// Directory is the recipe's artifact directory, relative to
	// Inputs.Dir unless absolute.
	Directory string
	// Files names them, without the directory.
	Files            manifest.Files
	CompressionLevel int
	SignKey          string
}

// Options adjust a plan.
type Options struct {
	// Version overrides the recipe's image version.
	Version string
	// SignKey overrides the recipe's artifact sign_key.
	SignKey string
	// Now is the clock used to generate a version when neither the recipe
	// nor Version gives one; time.Now when nil.
	Now func() time.Time
}

// New resolves a loaded recipe into the plan a build executes.
func New(r *recipes.Recipe, opts Options) (*Plan, error) {
	img := r.Image
	p := &Plan{VersionFrom: "recipe", Inputs: Inputs{Dir: r.Dir, BasePath: img.Base.Path, BaseSize: img.Base.SizeText}}
	version := img.Version
	switch {
	case opts.Version != "":
		version, p.VersionFrom = opts.Version, "--version"
	case img.Version == "":
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		version, p.VersionFrom = now().UTC().Format("20060102.150405"), "generated"
	}
	// The name and version name the build's files and store paths: they
	// are held to the manifest's rule here, so every caller gets the
	// check whoever gave them (Options.Version is build --version).
	if err := manifest.CheckImageName(img.Name); err != nil {
		return nil, fmt.Errorf("planning: image name: %w", err)
	}
	if err := manifest.CheckVersion(version); err != nil {
		if p.VersionFrom == "--version" {
			return nil, fmt.Errorf("--version: %w", err)
		}
		return nil, fmt.Errorf("planning %s: version: %w", img.Name, err)
	}

	for _, v := range r.Variables {
		pv := Variable{Name: v.Name, Source: v.Source, Sensitive: v.Sensitive}
		if v.Sensitive {
			pv.Value = json.RawMessage(`"(sensitive)"`)
			if v.Value.Type() == cty.String && v.Value.IsKnown() && !v.Value.IsNull() && len(v.Value.AsString()) >= 4 {
				p.secrets = append(p.secrets, v.Value.AsString())
			}
		} else if !v.Value.IsWhollyKnown() {
			// Unset in a dry run: a build needs a value.
			pv.Value = json.RawMessage(`null`)
		} else {
			b, err := ctyjson.Marshal(v.Value, v.Value.Type())
			if err != nil {
				return nil, fmt.Errorf("encoding variable %q: %w", v.Name, err)
			}
			pv.Value = b
		}
		p.Variables = append(p.Variables, pv)
	}

	var err error
	if p.Layers, err = compile.Image(img); err != nil {
		return nil, err
	}
	p.Manifest = staticManifest(r, version, p.Layers)
	if img.AptProxy != "" {
		p.aptProxy = img.AptProxy
		redact.RegisterURL(img.AptProxy)
		p.Manifest.Builder.AptProxy = redact.Userinfo(img.AptProxy)
	}
	p.Output = Output{Directory: img.Artifact.Directory, Files: manifest.FilesFor(img.Name, version),
		CompressionLevel: img.Artifact.CompressionLevel, SignKey: img.Artifact.SignKey}
	if opts.SignKey != "" {
		p.Output.SignKey = opts.SignKey
	}
	return p, nil
}

// staticManifest is the part of the build manifest the recipe and its
// compiled layers fix: what the recipe asks for, with digests. A build
// adds what only running it tells (installed package versions, missing
// optional packages, fetched keys, timings, the artifact); a validation
// script generated from a recipe alone uses it as it is.
func staticManifest(r *recipes.Recipe, version string, layers []*compile.Layer) *manifest.Manifest {
	img := r.Image
	v := img.Validation
	m := &manifest.Manifest{
		SchemaVersion:    manifest.SchemaVersion,
		Image:            manifest.Image{Name: img.Name, Title: img.Title, Version: version, Architecture: img.Architecture},
		Recipe:           manifest.Recipe{Path: r.Path, Digest: r.Digest},
		Builder:          manifest.Builder{Version: buildinfo.Version},
		Base:             manifest.Base{Source: img.Base.Source, SHA256: strings.TrimPrefix(img.Base.Checksum, digest.Prefix), Format: img.Base.Format, Size: img.Base.Size},
		Packages:         []manifest.Package{},
		RequiredPackages: []string{},
		MissingOptional:  []string{},
		Files:            []manifest.File{},
		Bundles:          []manifest.Bundle{},
		Services:         manifest.Services{Enabled: []string{}, Disabled: []string{}},
		KernelArgs:       append([]string{}, img.Kernel.Args...),
		Validation: manifest.Validation{Script: v.Script, Marker: img.BuildMarker,
			ServicesActive: append([]string{}, v.ServicesActive...), FilesExist: append([]string{}, v.FilesExist...), Checks: append([]manifest.Check{}, v.Commands...),
			DefaultProfile: v.DefaultProfile, DefaultStage: v.DefaultStage,
			CollectorWaitSeconds: int(v.CollectorWait.Seconds()), GPU: v.GPU, Profiles: append([]manifest.Profile{}, v.Profiles...)},
		Lineage: manifest.Lineage{BaseDigest: img.Base.Checksum, RecipeDigest: r.Digest},
	}
	for _, w := range img.Waivers {
		m.DeployWaivers = append(m.DeployWaivers, manifest.Waiver{Check: w.Check, Reason: w.Reason})
	}
	if mt := img.MAAS; mt != nil {
		vn := manifest.VersionedName(mt.Name, version)
		m.MAAS = &manifest.MAAS{Name: mt.Name, VersionedName: vn, DistroSeries: manifest.DistroSeries(vn), Title: mt.Title + " " + version,
			Filetype: mt.Filetype, BaseImage: mt.BaseImage, Site: mt.Site}
	}
	if n := img.Netdata; n != nil {
		m.Netdata = &manifest.Netdata{Enabled: n.Enabled, Bind: n.Bind, RetentionMB: n.RetentionMB, UpdateEvery: n.UpdateEvery, Collectors: append([]string{}, n.Collectors...)}
	}
	if n := img.Network; n != nil {
		m.Network = &manifest.Network{WaitOnlineTimeoutSeconds: int(n.WaitOnlineTimeout.Seconds()), WaitOnlineAny: n.WaitOnlineAny}
	}
	for _, l := range layers {
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

// bundles are the plan's staged bundles, in order.
func (p *Plan) bundles() []steps.StageBundle {
	var out []steps.StageBundle
	for _, l := range p.Layers {
		for _, st := range l.Steps {
			if b, ok := st.(steps.StageBundle); ok {
				out = append(out, b)
			}
		}
	}
	return out
}

// Resolved says why the plan cannot be built, naming each unresolved
// bundle, or returns nil when it can: a dry run's plan may show bundles it
// could not read (recipes.Options.DryRun), which a build refuses before
// anything runs.
func (p *Plan) Resolved() error {
	var missing []string
	for _, b := range p.bundles() {
		if b.Unresolved {
			missing = append(missing, fmt.Sprintf("bundle %s is unresolved (%s)", b.Name, b.Reason))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot build %s: %s", p.Manifest.Image.Name, strings.Join(missing, "; "))
	}
	return nil
}

// BaseChecksum is the base image's checksum as the recipe writes it
// ("sha256:<hex>"), which roots the layers' keys.
func (p *Plan) BaseChecksum() string { return p.Manifest.Lineage.BaseDigest }

// manifestBundle is a staged bundle as the manifest records it.
func manifestBundle(b steps.StageBundle) manifest.Bundle {
	mb := manifest.Bundle{Name: b.Name, Destination: b.Destination, Entrypoint: b.Entrypoint, Digest: b.Digest}
	for _, e := range b.Entries {
		mb.Entries = append(mb.Entries, manifest.BundleEntry{Path: e.Path, Type: e.Type, Mode: fsmode.String(e.Mode), Size: e.Size, SHA256: e.SHA256, Target: e.Target})
	}
	return mb
}
