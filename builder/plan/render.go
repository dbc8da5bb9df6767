package plan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
)

// WriteJSON writes the plan as indented, stable JSON.
func (p *Plan) WriteJSON(w io.Writer) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return err
	}
	return p.redacted(w, buf.Bytes())
}

// The plan's JSON form (schema_version 1, what build --dry-run --output
// json prints) is a rendering of the plan: its shape predates the plan
// holding the manifest, and stays what scripts read. Each type below is
// one of its sections.
type (
	jsonImage struct {
		Name         string `json:"name"`
		Title        string `json:"title"`
		Version      string `json:"version"`
		VersionFrom  string `json:"version_from"`
		Architecture string `json:"architecture"`
		BuildMarker  string `json:"build_marker"`
	}
	jsonBase struct {
		Source    string `json:"source"`
		Checksum  string `json:"checksum"`
		Format    string `json:"format"`
		Size      string `json:"size,omitempty"`
		SizeBytes int64  `json:"size_bytes,omitempty"`
	}
	jsonLayer struct {
		Name        string            `json:"name"`
		Description string            `json:"description,omitempty"`
		File        string            `json:"file,omitempty"`
		FileDigest  string            `json:"file_digest,omitempty"`
		Enabled     bool              `json:"enabled"`
		Digest      string            `json:"digest,omitempty"`
		Key         string            `json:"key,omitempty"`
		Unresolved  bool              `json:"unresolved,omitempty"`
		Steps       []json.RawMessage `json:"steps"`
	}
	jsonBundle struct {
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
	jsonValidation struct {
		Script               string             `json:"script"`
		ServicesActive       []string           `json:"services_active"`
		FilesExist           []string           `json:"files_exist"`
		Checks               []manifest.Check   `json:"checks"`
		DefaultProfile       string             `json:"default_profile"`
		DefaultStage         string             `json:"default_stage"`
		Stages               []string           `json:"stages"`
		CollectorWaitSeconds int                `json:"collector_wait_seconds"`
		GPU                  *manifest.GPU      `json:"gpu"`
		Profiles             []manifest.Profile `json:"profiles"`
	}
	jsonArtifacts struct {
		Directory              string `json:"directory"`
		Tarball                string `json:"tarball"`
		Manifest               string `json:"manifest"`
		Signature              string `json:"signature"`
		SigstoreBundle         string `json:"sigstore_bundle"`
		ManifestSignature      string `json:"manifest_signature"`
		ManifestSigstoreBundle string `json:"manifest_sigstore_bundle"`
		ValidationScript       string `json:"validation_script"`
		SBOM                   string `json:"sbom"`
		SBOMAttestation        string `json:"sbom_attestation"`
		Provenance             string `json:"provenance"`
		ProvenanceAttestation  string `json:"provenance_attestation"`
		CycloneDX              string `json:"cyclonedx"`
		CycloneDXAttestation   string `json:"cyclonedx_attestation"`
		CompressionLevel       int    `json:"compression_level"`
		SignKey                string `json:"sign_key,omitempty"`
	}
	jsonMAAS struct {
		Name          string `json:"name"`
		VersionedName string `json:"versioned_name"`
		DistroSeries  string `json:"distro_series"`
		Title         string `json:"title"`
		Architecture  string `json:"architecture"`
		Filetype      string `json:"filetype"`
		BaseImage     string `json:"base_image"`
		Site          string `json:"site,omitempty"`
	}
	jsonPlan struct {
		SchemaVersion  int               `json:"schema_version"`
		BuilderVersion string            `json:"builder_version"`
		Recipe         manifest.Recipe   `json:"recipe"`
		Variables      []Variable        `json:"variables"`
		Image          jsonImage         `json:"image"`
		Base           jsonBase          `json:"base"`
		Layers         []jsonLayer       `json:"layers"`
		KernelArgs     []string          `json:"kernel_args"`
		Netdata        *manifest.Netdata `json:"netdata"`
		Network        *manifest.Network `json:"network"`
		Bundles        []jsonBundle      `json:"bundles"`
		Validation     jsonValidation    `json:"validation"`
		Waivers        []manifest.Waiver `json:"deploy_waivers"`
		Artifacts      jsonArtifacts     `json:"artifacts"`
		MAAS           *jsonMAAS         `json:"maas"`
	}
)

// MarshalJSON writes the plan's JSON form.
func (p *Plan) MarshalJSON() ([]byte, error) {
	m, f, v := p.Manifest, p.Output.Files, p.Manifest.Validation
	j := jsonPlan{
		SchemaVersion: SchemaVersion, BuilderVersion: m.Builder.Version, Recipe: m.Recipe, Variables: p.Variables,
		Image: jsonImage{Name: m.Image.Name, Title: m.Image.Title, Version: m.Image.Version, VersionFrom: p.VersionFrom,
			Architecture: m.Image.Architecture, BuildMarker: v.Marker},
		Base:       jsonBase{Source: m.Base.Source, Checksum: p.BaseChecksum(), Format: m.Base.Format, Size: p.Inputs.BaseSize, SizeBytes: m.Base.Size},
		KernelArgs: m.KernelArgs, Netdata: m.Netdata, Network: m.Network, Bundles: []jsonBundle{},
		Validation: jsonValidation{Script: v.Script, ServicesActive: v.ServicesActive, FilesExist: v.FilesExist, Checks: v.Checks,
			DefaultProfile: v.DefaultProfile, DefaultStage: v.DefaultStage, Stages: manifest.Stages,
			CollectorWaitSeconds: v.CollectorWaitSeconds, GPU: v.GPU, Profiles: v.Profiles},
		Waivers: m.DeployWaivers,
		Artifacts: jsonArtifacts{Directory: p.Output.Directory, Tarball: f.Tarball, Manifest: f.Manifest,
			Signature: f.TarballSignature, SigstoreBundle: f.TarballBundle, ManifestSignature: f.ManifestSignature, ManifestSigstoreBundle: f.ManifestBundle,
			ValidationScript: f.ValidationScript, SBOM: f.SBOM, SBOMAttestation: f.SBOMAttestation, Provenance: f.Provenance, ProvenanceAttestation: f.ProvenanceAttestation,
			CycloneDX: f.CycloneDX, CycloneDXAttestation: f.CycloneDXAttestation, CompressionLevel: p.Output.CompressionLevel, SignKey: p.Output.SignKey},
	}
	if j.Validation.Profiles == nil {
		j.Validation.Profiles = []manifest.Profile{}
	}
	if j.Waivers == nil {
		j.Waivers = []manifest.Waiver{}
	}
	for _, l := range p.Layers {
		jl := jsonLayer{Name: l.Name, Description: l.Description, File: l.File, FileDigest: l.FileDigest, Enabled: l.Enabled,
			Digest: l.Digest, Key: l.Key, Unresolved: l.Unresolved, Steps: make([]json.RawMessage, 0, len(l.Steps))}
		for _, s := range l.Steps {
			b, err := encodeStep(s)
			if err != nil {
				return nil, err
			}
			jl.Steps = append(jl.Steps, b)
		}
		j.Layers = append(j.Layers, jl)
	}
	for _, b := range p.bundles() {
		j.Bundles = append(j.Bundles, bundleSummary(b))
	}
	if t := m.MAAS; t != nil {
		j.MAAS = &jsonMAAS{Name: t.Name, VersionedName: t.VersionedName, DistroSeries: t.DistroSeries, Title: t.Title,
			Architecture: m.Image.Architecture, Filetype: t.Filetype, BaseImage: t.BaseImage, Site: t.Site}
	}
	return json.Marshal(j)
}

// encodeStep is a step's JSON with its first-boot verdict added
// ("first_boot": {"runs": "yes|partly|no", "why": ..., "reboot": true}):
// what imagectl firstboot's script does with it.
func encodeStep(s steps.Step) (json.RawMessage, error) {
	b, err := steps.Encode(s)
	if err != nil {
		return nil, err
	}
	v, err := json.Marshal(firstboot.At(s))
	if err != nil {
		return nil, err
	}
	return json.RawMessage(string(b[:len(b)-1]) + `,"first_boot":` + string(v) + "}"), nil
}

// bundleSummary is a staged bundle without its entries (they are in its
// step): how many files, how many bytes.
func bundleSummary(b steps.StageBundle) jsonBundle {
	s := jsonBundle{Name: b.Name, Source: b.Source, Destination: b.Destination, Entrypoint: b.Entrypoint, Digest: b.Digest,
		Unresolved: b.Unresolved, Reason: b.Reason}
	for _, e := range b.Entries {
		if e.Type == "file" {
			s.Files++
			s.Bytes += e.Size
		}
	}
	return s
}

// redacted writes b with the values of sensitive variables replaced.
func (p *Plan) redacted(w io.Writer, b []byte) error {
	_, err := w.Write(p.Redact(b))
	return err
}

// Redact replaces the values of sensitive variables in b, as they are and
// as JSON, Go quoting and the terminal's escaping write them: whatever a
// build writes from the plan (SBOMs, provenance) goes through it.
func (p *Plan) Redact(b []byte) []byte { return redact.Values(b, p.secrets, "(sensitive)") }

// WriteText writes the plan for a person to read before a build. What the
// recipe holds (a title, a description, names, paths) is escaped
// (textsafe.Terminal): it can neither drive the terminal nor start a line.
func (p *Plan) WriteText(w io.Writer) error {
	var buf bytes.Buffer
	if err := p.writeText(&buf); err != nil {
		return err
	}
	return p.redacted(w, buf.Bytes())
}

func (p *Plan) writeText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	pf := func(format string, args ...any) { textsafe.Fprintf(bw, format, args...) }

	m := p.Manifest
	pf("Plan for image %s %s (%s)\n", m.Image.Name, m.Image.Version, m.Image.Architecture)
	pf("  title:        %s\n", m.Image.Title)
	pf("  version from: %s\n", p.VersionFrom)
	pf("  recipe:       %s %s\n", m.Recipe.Path, m.Recipe.Digest)
	pf("  builder:      imagectl %s\n", m.Builder.Version)

	if len(p.Variables) > 0 {
		pf("\nVariables\n")
		width := 0
		for _, v := range p.Variables {
			width = max(width, len(v.Name))
		}
		for _, v := range p.Variables {
			pf("  %-*s = %s  (%s)\n", width, v.Name, string(v.Value), v.Source)
		}
	}

	pf("\nBase image\n")
	pf("  source:   %s\n", m.Base.Source)
	pf("  checksum: %s\n", p.BaseChecksum())
	pf("  format:   %s\n", m.Base.Format)
	if p.Inputs.BaseSize != "" {
		pf("  grow to:  %s (%d bytes)\n", p.Inputs.BaseSize, m.Base.Size)
	}

	pf("\nLayers (applied in order, in one appliance session)\n")
	n := 0
	for _, l := range p.Layers {
		from := ""
		if l.File != "" {
			from = "  from " + l.File
		}
		if !l.Enabled {
			pf("  -  %s: disabled%s\n", l.Name, from)
			continue
		}
		n++
		pf("  %d. %s%s\n", n, l.Name, from)
		if l.Description != "" {
			pf("     %s\n", l.Description)
		}
		switch {
		case l.Unresolved:
			pf("     digest unresolved (a bundle is unresolved)\n")
		case l.Key == "":
			pf("     digest %s\n     key    unresolved (a layer below is unresolved)\n", l.Digest)
		default:
			pf("     digest %s\n     key    %s\n", l.Digest, l.Key)
		}
		for _, s := range l.Steps {
			writeStep(bw, s)
		}
	}

	pf("\nKernel args:  %s\n", orNone(strings.Join(m.KernelArgs, " ")))
	if nd := m.Netdata; nd != nil {
		if nd.Enabled {
			pf("Netdata:      bind %s, dbengine %d MB, every %ds, collectors %s\n", nd.Bind, nd.RetentionMB, nd.UpdateEvery, orNone(strings.Join(nd.Collectors, " ")))
		} else {
			pf("Netdata:      disabled\n")
		}
	}
	if nw := m.Network; nw != nil {
		any := ""
		if nw.WaitOnlineAny {
			any = ", any interface"
		}
		pf("Network:      wait-online bounded to %ds%s\n", nw.WaitOnlineTimeoutSeconds, any)
	}
	for _, st := range p.bundles() {
		b := bundleSummary(st)
		if b.Unresolved {
			pf("Bundle:       %s: %s -> %s UNRESOLVED: %s; entrypoint %s\n", b.Name, b.Source, b.Destination, b.Reason, b.Entrypoint)
			continue
		}
		pf("Bundle:       %s: %s -> %s (%d files, %d bytes, %s), entrypoint %s\n", b.Name, b.Source, b.Destination, b.Files, b.Bytes, b.Digest, b.Entrypoint)
	}
	pf("Validation:   %s", m.Validation.Script)
	if k := len(m.Validation.ServicesActive) + len(m.Validation.FilesExist) + len(m.Validation.Checks); k > 0 {
		pf(" (+%d recipe checks)", k)
	}
	pf("\n")
	v := m.Validation
	pf("  default:    --profile %s --stage %s (stages: %s)\n", v.DefaultProfile, v.DefaultStage, strings.Join(manifest.Stages, ", "))
	if g := v.GPU; g != nil {
		pf("  GPUs:       %s\n", gpuSummary(g))
	}
	for _, pr := range v.Profiles {
		pf("  profile %s:\n", pr.Name)
		for _, line := range profileSummary(pr) {
			pf("    %s\n", line)
		}
	}
	for _, w := range m.DeployWaivers {
		pf("Waived check: %s (%s)\n", w.Check, w.Reason)
	}

	a, f := p.Output, p.Output.Files
	pf("\nArtifacts in %s/\n", a.Directory)
	pf("  %s  (gzip level %d)\n", f.Tarball, a.CompressionLevel)
	pf("  %s\n", f.Manifest)
	pf("  %s\n", f.ValidationScript)
	pf("  %s  (SBOM, SPDX 2.3)\n", f.SBOM)
	pf("  %s  (SBOM, CycloneDX 1.6)\n", f.CycloneDX)
	pf("  %s  (SLSA v1 provenance)\n", f.Provenance)
	if a.SignKey != "" {
		pf("  signing: key %s\n", a.SignKey)
		pf("    %s, %s\n    %s, %s\n", f.TarballSignature, f.TarballBundle, f.ManifestSignature, f.ManifestBundle)
		pf("    %s, %s, %s  (attestations)\n", f.ProvenanceAttestation, f.SBOMAttestation, f.CycloneDXAttestation)
	} else {
		pf("  signing: none (no sign_key or --sign-key)\n")
	}

	if t := m.MAAS; t != nil {
		pf("\nMAAS target\n")
		pf("  name:          %s (versioned: %s)\n", t.Name, t.VersionedName)
		pf("  distro_series: %s\n", t.DistroSeries)
		pf("  title:         %s\n", t.Title)
		pf("  architecture:  %s, filetype %s, base_image %s\n", m.Image.Architecture, t.Filetype, t.BaseImage)
		if t.Site != "" {
			pf("  site:          %s\n", t.Site)
		}
	}
	return bw.Flush()
}

func writeStep(w io.Writer, s steps.Step) {
	textsafe.Fprintf(w, "     - %s\n", s.Summary())
	textsafe.Fprintf(w, "       first boot: %s\n", firstboot.At(s))
	if b, ok := s.(steps.StageBundle); ok {
		for _, e := range b.Entries {
			switch e.Type {
			case "file":
				textsafe.Fprintf(w, "         %s %s %s (%d bytes)\n", steps.ModeString(e.Mode), e.SHA256[:12], path.Join(b.Destination, e.Path), e.Size)
			case "symlink":
				textsafe.Fprintf(w, "         %s -> %s\n", path.Join(b.Destination, e.Path), e.Target)
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// gpuSummary is the gpu block in one line.
func gpuSummary(g *manifest.GPU) string {
	s := fmt.Sprintf("%d x %q", g.Count, g.Model)
	if g.DriverBranch != "" {
		s += ", driver " + g.DriverBranch
	}
	var want []string
	if g.PersistenceMode {
		want = append(want, "persistence mode")
	}
	if g.ECC {
		want = append(want, "ECC on, no uncorrected errors, no pending remaps or retired pages")
	}
	link := "PCIe link at its maximum"
	if g.PCIeGen > 0 || g.PCIeWidth > 0 {
		link = fmt.Sprintf("PCIe link at least gen %d x%d", g.PCIeGen, g.PCIeWidth)
	}
	want = append(want, link)
	if g.NVSwitch {
		want = append(want, "nvidia-fabricmanager active")
	}
	return s + "; " + strings.Join(want, ", ")
}

// profileSummary describes what a profile adds at each stage.
func profileSummary(p manifest.Profile) []string {
	var image []string
	if len(p.ServicesActive) > 0 {
		image = append(image, "active "+strings.Join(p.ServicesActive, " "))
	}
	if p.Name == manifest.ProfileSlice {
		image = append(image, "/dev/kvm, IOMMU groups, kernel args in /proc/cmdline")
	}
	if len(p.VFIOModules) > 0 {
		image = append(image, "modules "+strings.Join(p.VFIOModules, " "))
	}
	if p.Name == manifest.ProfileSlice {
		image = append(image, "GPUs WARN without NVML")
	}
	out := []string{"stage image:     " + orNone(strings.Join(image, "; "))}
	if p.Bootstrap != "" {
		env := make([]string, 0, len(p.BootstrapEnv))
		for k, v := range p.BootstrapEnv {
			env = append(env, k+"="+v)
		}
		sort.Strings(env)
		out = append(out, "bootstrap:       "+strings.TrimSpace(strings.Join(env, " ")+" bundle "+p.Bootstrap))
	}
	c := p.Converged
	if c == nil {
		return append(out, "stage converged: (no baseline in the recipe)")
	}
	var conv []string
	if len(c.ServicesActive) > 0 {
		conv = append(conv, "active "+strings.Join(c.ServicesActive, " "))
	}
	if len(c.FilesExist) > 0 {
		conv = append(conv, "files "+strings.Join(c.FilesExist, " "))
	}
	if len(c.DoneMarkers) > 0 {
		conv = append(conv, "done "+strings.Join(c.DoneMarkers, " "))
	}
	if f := c.Fabric; f != nil {
		s := fmt.Sprintf("fabric %s in %s with its route", f.Interface, f.Subnet)
		if f.Netplan != "" {
			s += ", " + f.Netplan
		}
		conv = append(conv, s)
	}
	for _, b := range c.Bridges {
		conv = append(conv, fmt.Sprintf("bridge %s %s", b.Name, b.Address))
	}
	if d := c.DHCP; d != nil {
		conv = append(conv, fmt.Sprintf("dhcp %s with %s", d.Service, d.SubnetFile))
	}
	return append(out, "stage converged: "+orNone(strings.Join(conv, "; ")))
}
