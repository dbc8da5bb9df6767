package builder

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

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

// redacted writes b with the values of sensitive variables replaced.
func (p *Plan) redacted(w io.Writer, b []byte) error {
	_, err := w.Write(p.redact(b))
	return err
}

// redact replaces the values of sensitive variables in b, as they are and
// as JSON, Go quoting and the terminal's escaping write them.
func (p *Plan) redact(b []byte) []byte { return redact.Values(b, p.secrets, "(sensitive)") }

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

	pf("Plan for image %s %s (%s)\n", p.Image.Name, p.Image.Version, p.Image.Architecture)
	pf("  title:        %s\n", p.Image.Title)
	pf("  version from: %s\n", p.Image.VersionFrom)
	pf("  recipe:       %s %s\n", p.Recipe.Path, p.Recipe.Digest)
	pf("  builder:      imagectl %s\n", p.BuilderVersion)

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
	pf("  source:   %s\n", p.Base.Source)
	pf("  checksum: %s\n", p.Base.Checksum)
	pf("  format:   %s\n", p.Base.Format)
	if p.Base.Size != "" {
		pf("  grow to:  %s (%d bytes)\n", p.Base.Size, p.Base.SizeBytes)
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

	pf("\nKernel args:  %s\n", orNone(strings.Join(p.KernelArgs, " ")))
	if nd := p.Netdata; nd != nil {
		if nd.Enabled {
			pf("Netdata:      bind %s, dbengine %d MB, every %ds, collectors %s\n", nd.Bind, nd.RetentionMB, nd.UpdateEvery, orNone(strings.Join(nd.Collectors, " ")))
		} else {
			pf("Netdata:      disabled\n")
		}
	}
	if nw := p.Network; nw != nil {
		any := ""
		if nw.WaitOnlineAny {
			any = ", any interface"
		}
		pf("Network:      wait-online bounded to %ds%s\n", nw.WaitOnlineTimeoutSeconds, any)
	}
	for _, b := range p.Bundles {
		if b.Unresolved {
			pf("Bundle:       %s: %s -> %s UNRESOLVED: %s; entrypoint %s\n", b.Name, b.Source, b.Destination, b.Reason, b.Entrypoint)
			continue
		}
		pf("Bundle:       %s: %s -> %s (%d files, %d bytes, %s), entrypoint %s\n", b.Name, b.Source, b.Destination, b.Files, b.Bytes, b.Digest, b.Entrypoint)
	}
	pf("Validation:   %s", p.Validation.Script)
	if k := len(p.Validation.ServicesActive) + len(p.Validation.FilesExist) + len(p.Validation.Checks); k > 0 {
		pf(" (+%d recipe checks)", k)
	}
	pf("\n")
	v := p.Validation
	pf("  default:    --profile %s --stage %s (stages: %s)\n", v.DefaultProfile, v.DefaultStage, strings.Join(v.Stages, ", "))
	if g := v.GPU; g != nil {
		pf("  GPUs:       %s\n", gpuSummary(g))
	}
	for _, pr := range v.Profiles {
		pf("  profile %s:\n", pr.Name)
		for _, line := range profileSummary(pr) {
			pf("    %s\n", line)
		}
	}
	for _, w := range p.Waivers {
		pf("Waived check: %s (%s)\n", w.Check, w.Reason)
	}

	a := p.Artifacts
	pf("\nArtifacts in %s/\n", a.Directory)
	pf("  %s  (gzip level %d)\n", a.Tarball, a.CompressionLevel)
	pf("  %s\n", a.Manifest)
	pf("  %s\n", a.ValidationScript)
	pf("  %s  (SBOM, SPDX 2.3)\n", a.SBOM)
	pf("  %s  (SBOM, CycloneDX 1.6)\n", a.CycloneDX)
	pf("  %s  (SLSA v1 provenance)\n", a.Provenance)
	if a.SignKey != "" {
		pf("  signing: key %s\n", a.SignKey)
		pf("    %s, %s\n    %s, %s\n", a.Signature, a.SigstoreBundle, a.ManifestSignature, a.ManifestSigstoreBundle)
		pf("    %s, %s, %s  (attestations)\n", a.ProvenanceAttestation, a.SBOMAttestation, a.CycloneDXAttestation)
	} else {
		pf("  signing: none (no sign_key or --sign-key)\n")
	}

	if m := p.MAAS; m != nil {
		pf("\nMAAS target\n")
		pf("  name:          %s (versioned: %s)\n", m.Name, m.VersionedName)
		pf("  distro_series: %s\n", m.DistroSeries)
		pf("  title:         %s\n", m.Title)
		pf("  architecture:  %s, filetype %s, base_image %s\n", m.Architecture, m.Filetype, m.BaseImage)
		if m.Site != "" {
			pf("  site:          %s\n", m.Site)
		}
	}
	return bw.Flush()
}

func writeStep(w io.Writer, s steps.Step) {
	textsafe.Fprintf(w, "     - %s\n", s.Summary())
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
