package smoke

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/gpuaas/imagectl/builder/firstboot"
	"github.com/gpuaas/imagectl/internal/shell"
	"github.com/gpuaas/imagectl/manifest"
)

// guestPlan is what the booted guest does besides booting: the validation
// script and the profile and stage it checks, and at stage converged the
// site bootstrap that converges the host first, as MAAS deploy user-data
// would.
type guestPlan struct {
	validation string // the validation script's path in the image
	profile    string
	stage      string
	bootstrap  *bootstrapSpec // nil: none runs
	// emulated: the boot runs under TCG, 10-30x slower than the hardware
	// the image is for (emulatedAllowance).
	emulated bool
	// login is the user the seed creates with authorized keys (nil: none).
	login *guestLogin
	// keepUp: the smoke script does not power off once done
	// (Options.WhileUp).
	keepUp bool
	// firstBoot is the first-boot script the seed runs before any
	// bootstrap (the first-boot path of a comparison; nil: none).
	firstBoot *firstboot.Result
}

// bootstrapSpec is a site bootstrap to run at first boot: a bundle's
// entrypoint, in the bundle's directory, with the profile's environment.
type bootstrapSpec struct {
	bundle     string
	dir        string // the bundle's destination in the image
	entrypoint string // absolute, in the image
	env        map[string]string
}

// CheckProfileStage refuses a profile or stage imagectl does not know. An
// empty one is allowed: it means the manifest's default.
func CheckProfileStage(profile, stage string) error {
	if profile != "" && !slices.Contains(manifest.Profiles, profile) {
		return fmt.Errorf("profile %q is not one of %s", profile, strings.Join(manifest.Profiles, ", "))
	}
	if stage != "" && !slices.Contains(manifest.Stages, stage) {
		return fmt.Errorf("stage %q is not one of %s", stage, strings.Join(manifest.Stages, ", "))
	}
	return nil
}

// planGuest resolves the profile and stage (the options', else the
// manifest's defaults, else bare-metal and image) and the bootstrap the
// stage needs, refusing what cannot run: an unknown profile or stage, a
// profile the image does not serve, a bootstrap bundle the manifest lacks
// or that has no entrypoint.
func planGuest(m *manifest.Manifest, profile, stage string) (guestPlan, error) {
	p := guestPlan{
		validation: m.Validation.Script,
		profile:    cmp.Or(profile, m.Validation.DefaultProfile, manifest.ProfileBareMetal),
		stage:      cmp.Or(stage, m.Validation.DefaultStage, manifest.StageImage),
	}
	if err := CheckProfileStage(p.profile, p.stage); err != nil {
		return p, err
	}
	prof, err := findProfile(m, p.profile)
	if err != nil || prof == nil || p.stage != manifest.StageConverged || prof.Bootstrap == "" {
		return p, err
	}
	p.bootstrap, err = bootstrapFor(m, prof)
	return p, err
}

// findProfile is the manifest's entry for a profile: nil when the manifest
// lists no profiles (then every profile is served, with nothing extra), an
// error when it lists others only.
func findProfile(m *manifest.Manifest, name string) (*manifest.Profile, error) {
	if len(m.Validation.Profiles) == 0 {
		return nil, nil
	}
	var names []string
	for i, p := range m.Validation.Profiles {
		if p.Name == name {
			return &m.Validation.Profiles[i], nil
		}
		names = append(names, p.Name)
	}
	return nil, fmt.Errorf("profile %q: image %s serves only %s", name, m.Image.Name, strings.Join(names, ", "))
}

func bootstrapFor(m *manifest.Manifest, prof *manifest.Profile) (*bootstrapSpec, error) {
	i := slices.IndexFunc(m.Bundles, func(b manifest.Bundle) bool { return b.Name == prof.Bootstrap })
	if i < 0 {
		var names []string
		for _, b := range m.Bundles {
			names = append(names, b.Name)
		}
		have := "none"
		if len(names) > 0 {
			have = strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("profile %q bootstraps with bundle %q, which the manifest does not have (bundles: %s)", prof.Name, prof.Bootstrap, have)
	}
	b := m.Bundles[i]
	if b.Entrypoint == "" {
		return nil, fmt.Errorf("profile %q bootstraps with bundle %q, which has no entrypoint to run", prof.Name, b.Name)
	}
	for k := range prof.BootstrapEnv {
		if !shell.IsName(k) {
			return nil, fmt.Errorf("profile %q: bootstrap environment variable %q is not a valid name", prof.Name, k)
		}
	}
	return &bootstrapSpec{bundle: b.Name, dir: b.Destination, entrypoint: path.Join(b.Destination, b.Entrypoint),
		env: prof.BootstrapEnv}, nil
}

// envAssignments are the bootstrap's environment as sorted, shell-quoted
// NAME='value' words.
func (b *bootstrapSpec) envAssignments() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(b.env)) {
		out = append(out, k+"="+shell.Quote(b.env[k]))
	}
	return out
}
