package builder

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
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// SchemaVersion is the version of the plan's JSON form.
const SchemaVersion = 1

// Plan is everything a build of a recipe will do, resolved and digested,
// before anything is touched.
type Plan struct {
	SchemaVersion  int            `json:"schema_version"`
	BuilderVersion string         `json:"builder_version"`
	Recipe         RecipeRef      `json:"recipe"`
	Variables      []PlanVariable `json:"variables"`
	Image          ImageRef       `json:"image"`
	Base           BaseRef        `json:"base"`
	Layers         []*PlanLayer   `json:"layers"`
	KernelArgs     []string       `json:"kernel_args"`
	Netdata        *NetdataRef    `json:"netdata"`
	Network        *NetworkRef    `json:"network"`
	Bundles        []BundleRef    `json:"bundles"`
	Validation     ValidationRef  `json:"validation"`
	// Waivers are the deployability checks the recipe waives.
	Waivers   []manifest.Waiver `json:"deploy_waivers"`
	Artifacts Artifacts         `json:"artifacts"`
	MAAS      *MAASTarget       `json:"maas"`
	// Source is the recipe the plan was made from.
	Source *recipes.Recipe `json:"-"`
	// secrets are the values of sensitive variables, kept out of renderings
	// wherever a step carries them (a run command, a URI).
	secrets []string
}

// RecipeRef identifies the recipe a plan came from.
type RecipeRef struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

// PlanVariable is a resolved variable; sensitive values are not shown.
type PlanVariable struct {
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value"`
	Source    string          `json:"source"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// ImageRef names the image being built.
type ImageRef struct {
	Name         string `json:"name"`
	Title        string `json:"title"`
	Version      string `json:"version"`
	VersionFrom  string `json:"version_from"`
	Architecture string `json:"architecture"`
	BuildMarker  string `json:"build_marker"`
}

// BaseRef is the base image and what is done to it first.
type BaseRef struct {
	Source    string `json:"source"`
	Checksum  string `json:"checksum"`
	Format    string `json:"format"`
	Size      string `json:"size,omitempty"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
}

// PlanLayer is one layer of the plan. Key chains the layer's digest with its
// parent's key (the base checksum at the root): equal keys mean equal disk
// states, which is what a layer cache keys on.
type PlanLayer struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	File        string `json:"file,omitempty"`
	FileDigest  string `json:"file_digest,omitempty"`
	Enabled     bool   `json:"enabled"`
	Digest      string `json:"digest,omitempty"`
	Key         string `json:"key,omitempty"`
	// Unresolved: a step is an unresolved bundle (a dry run's), so the
	// layer has no digest, and neither it nor any layer after it a key.
	Unresolved bool         `json:"unresolved,omitempty"`
	Steps      []steps.Step `json:"-"`
}

// MarshalJSON writes the layer with its steps, each with its kind.
func (l *PlanLayer) MarshalJSON() ([]byte, error) {
	type alias PlanLayer
	encoded := make([]json.RawMessage, 0, len(l.Steps))
	for _, s := range l.Steps {
		b, err := steps.Encode(s)
		if err != nil {
			return nil, err
		}
		encoded = append(encoded, b)
	}
	return json.Marshal(struct {
		*alias
		Steps []json.RawMessage `json:"steps"`
	}{(*alias)(l), encoded})
}

// NetdataRef is the Netdata configuration baked in.
type NetdataRef struct {
	Enabled     bool     `json:"enabled"`
	Bind        string   `json:"bind"`
	RetentionMB int      `json:"retention_mb"`
	UpdateEvery int      `json:"update_every"`
	Collectors  []string `json:"collectors"`
}

// NetworkRef is the systemd-networkd-wait-online bound.
type NetworkRef struct {
	WaitOnlineTimeoutSeconds int  `json:"wait_online_timeout_seconds"`
	WaitOnlineAny            bool `json:"wait_online_any"`
}

// BundleRef summarizes a staged bundle (its entries are in its step). An
// unresolved one (a dry run's, see recipes.Options.DryRun) has no digest,
// and Reason says what it needs.
type BundleRef struct {
	Name        string `json:"name"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	Entrypoint  string `json:"entrypoint"`
	Digest      string `json:"digest,omitempty"`
	Files       int    `json:"files"`
	Bytes       int64  `json:"bytes"`
	Unresolved  bool   `json:"unresolved,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// ValidationRef is the extra on-host validation the recipe asks for.
type ValidationRef struct {
	Script         string          `json:"script"`
	ServicesActive []string        `json:"services_active"`
	FilesExist     []string        `json:"files_exist"`
	Checks         []recipes.Check `json:"checks"`
	// What the script checks without --profile and --stage, and the stages
	// it can check (manifest.Stages).
	DefaultProfile       string             `json:"default_profile"`
	DefaultStage         string             `json:"default_stage"`
	Stages               []string           `json:"stages"`
	CollectorWaitSeconds int                `json:"collector_wait_seconds"`
	GPU                  *manifest.GPU      `json:"gpu"`
	Profiles             []manifest.Profile `json:"profiles"`
}

// Artifacts are the files a build writes, named by manifest.FilesFor.
type Artifacts struct {
	Directory      string `json:"directory"`
	Tarball        string `json:"tarball"`
	Manifest       string `json:"manifest"`
	Signature      string `json:"signature"`
	SigstoreBundle string `json:"sigstore_bundle"`
	// The manifest is signed too, so that it verifies with the tgz.
	ManifestSignature      string `json:"manifest_signature"`
	ManifestSigstoreBundle string `json:"manifest_sigstore_bundle"`
	ValidationScript       string `json:"validation_script"`
	// SBOM (SPDX), its CycloneDX form and Provenance describe the tgz;
	// with a key, each is signed for it as a DSSE attestation.
	SBOM                  string `json:"sbom"`
	SBOMAttestation       string `json:"sbom_attestation"`
	Provenance            string `json:"provenance"`
	ProvenanceAttestation string `json:"provenance_attestation"`
	CycloneDX             string `json:"cyclonedx"`
	CycloneDXAttestation  string `json:"cyclonedx_attestation"`
	CompressionLevel      int    `json:"compression_level"`
	SignKey               string `json:"sign_key,omitempty"`
}

// MAASTarget is the boot resource the image becomes.
type MAASTarget struct {
	Name          string `json:"name"`
	VersionedName string `json:"versioned_name"`
	DistroSeries  string `json:"distro_series"`
	Title         string `json:"title"`
	Architecture  string `json:"architecture"`
	Filetype      string `json:"filetype"`
	BaseImage     string `json:"base_image"`
	Site          string `json:"site,omitempty"`
}

// PlanOptions adjust a plan.
type PlanOptions struct {
	// Version overrides the recipe's image version.
	Version string
	// SignKey overrides the recipe's artifact sign_key.
	SignKey string
	// Now is the clock used to generate a version when neither the recipe
	// nor Version gives one; time.Now when nil.
	Now func() time.Time
}

// NewPlan resolves a loaded recipe into the plan a build executes.
func NewPlan(r *recipes.Recipe, opts PlanOptions) (*Plan, error) {
	img := r.Image
	p := &Plan{
		SchemaVersion:  SchemaVersion,
		BuilderVersion: buildinfo.Version,
		Recipe:         RecipeRef{Path: r.Path, Digest: r.Digest},
		Image: ImageRef{Name: img.Name, Title: img.Title, Version: img.Version, VersionFrom: "recipe",
			Architecture: img.Architecture, BuildMarker: img.BuildMarker},
		Base:       BaseRef{Source: img.Base.Source, Checksum: img.Base.Checksum, Format: img.Base.Format, Size: img.Base.SizeText, SizeBytes: img.Base.Size},
		KernelArgs: append([]string{}, img.Kernel.Args...),
		Validation: ValidationRef{Script: img.Validation.Script, ServicesActive: nonNil(img.Validation.ServicesActive),
			FilesExist: nonNil(img.Validation.FilesExist), Checks: img.Validation.Commands,
			DefaultProfile: img.Validation.DefaultProfile, DefaultStage: img.Validation.DefaultStage, Stages: manifest.Stages,
			CollectorWaitSeconds: int(img.Validation.CollectorWait.Seconds()), GPU: img.Validation.GPU,
			Profiles: append([]manifest.Profile{}, img.Validation.Profiles...)},
		Bundles: []BundleRef{},
		Source:  r,
	}
	if p.Validation.Checks == nil {
		p.Validation.Checks = []recipes.Check{}
	}
	p.Waivers = []manifest.Waiver{}
	for _, w := range img.Waivers {
		p.Waivers = append(p.Waivers, manifest.Waiver{Check: w.Check, Reason: w.Reason})
	}
	switch {
	case opts.Version != "":
		p.Image.Version, p.Image.VersionFrom = opts.Version, "--version"
	case img.Version == "":
		now := time.Now
		if opts.Now != nil {
			now = opts.Now
		}
		p.Image.Version, p.Image.VersionFrom = now().UTC().Format("20060102.150405"), "generated"
	}
	// The name and version name the build's files and store paths: they
	// are held to the manifest's rule here, so every caller gets the
	// check whoever gave them (PlanOptions.Version is build --version).
	if err := manifest.CheckImageName(img.Name); err != nil {
		return nil, fmt.Errorf("planning: image name: %w", err)
	}
	if err := manifest.CheckVersion(p.Image.Version); err != nil {
		if p.Image.VersionFrom == "--version" {
			return nil, fmt.Errorf("--version: %w", err)
		}
		return nil, fmt.Errorf("planning %s: version: %w", img.Name, err)
	}

	for _, v := range r.Variables {
		pv := PlanVariable{Name: v.Name, Source: v.Source, Sensitive: v.Sensitive}
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

	compiled, err := compile.Image(img)
	if err != nil {
		return nil, err
	}
	parent := img.Base.Checksum
	for _, l := range compiled {
		pl := &PlanLayer{Name: l.Name, Description: l.Description, File: l.File, FileDigest: l.FileDigest,
			Enabled: l.Enabled, Digest: l.Digest, Unresolved: l.Unresolved, Steps: l.Steps}
		if l.Enabled {
			// A key chains what is known: none after an unresolved layer.
			if l.Unresolved {
				parent = ""
			}
			if parent != "" {
				pl.Key = chainKey(parent, l.Digest)
			}
			parent = pl.Key
		}
		p.Layers = append(p.Layers, pl)
	}

	if n := img.Netdata; n != nil {
		p.Netdata = &NetdataRef{Enabled: n.Enabled, Bind: n.Bind, RetentionMB: n.RetentionMB, UpdateEvery: n.UpdateEvery, Collectors: nonNil(n.Collectors)}
	}
	if n := img.Network; n != nil {
		p.Network = &NetworkRef{WaitOnlineTimeoutSeconds: int(n.WaitOnlineTimeout.Seconds()), WaitOnlineAny: n.WaitOnlineAny}
	}
	for _, b := range img.Bundles {
		br := BundleRef{Name: b.Name, Source: b.Source, Destination: b.Destination, Entrypoint: b.Entrypoint, Digest: b.Digest,
			Unresolved: b.Unresolved != "", Reason: b.Unresolved}
		for _, e := range b.Entries {
			if e.Type == "file" {
				br.Files++
				br.Bytes += e.Size
			}
		}
		p.Bundles = append(p.Bundles, br)
	}

	files := manifest.FilesFor(img.Name, p.Image.Version)
	p.Artifacts = Artifacts{
		Directory:              img.Artifact.Directory,
		Tarball:                files.Tarball,
		Manifest:               files.Manifest,
		Signature:              files.TarballSignature,
		SigstoreBundle:         files.TarballBundle,
		ManifestSignature:      files.ManifestSignature,
		ManifestSigstoreBundle: files.ManifestBundle,
		ValidationScript:       files.ValidationScript,
		SBOM:                   files.SBOM,
		SBOMAttestation:        files.SBOMAttestation,
		Provenance:             files.Provenance,
		ProvenanceAttestation:  files.ProvenanceAttestation,
		CycloneDX:              files.CycloneDX,
		CycloneDXAttestation:   files.CycloneDXAttestation,
		CompressionLevel:       img.Artifact.CompressionLevel,
		SignKey:                img.Artifact.SignKey,
	}
	if opts.SignKey != "" {
		p.Artifacts.SignKey = opts.SignKey
	}
	if m := img.MAAS; m != nil {
		vn := manifest.VersionedName(m.Name, p.Image.Version)
		p.MAAS = &MAASTarget{Name: m.Name, VersionedName: vn, DistroSeries: manifest.DistroSeries(vn), Title: m.Title + " " + p.Image.Version,
			Architecture: img.Architecture, Filetype: m.Filetype, BaseImage: m.BaseImage, Site: m.Site}
	}
	return p, nil
}

// Resolved says why the plan cannot be built, naming each unresolved
// bundle, or returns nil when it can: a dry run's plan may show bundles it
// could not read (recipes.Options.DryRun), which a build refuses before
// anything runs.
func (p *Plan) Resolved() error {
	var missing []string
	for _, b := range p.Bundles {
		if b.Unresolved {
			missing = append(missing, fmt.Sprintf("bundle %s is unresolved (%s)", b.Name, b.Reason))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cannot build %s: %s", p.Image.Name, strings.Join(missing, "; "))
	}
	return nil
}

func chainKey(parent, layer string) string {
	return digest.Bytes([]byte(parent + "\n" + layer)).String()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
