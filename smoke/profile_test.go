package smoke

import (
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

func profiledManifest() *manifest.Manifest {
	return &manifest.Manifest{
		Image: manifest.Image{Name: "h200"},
		Bundles: []manifest.Bundle{
			{Name: "h200-ib", Destination: "/usr/local/share/gpuaas/site-bootstrap/h200-ib", Entrypoint: "bootstrap.sh"},
			{Name: "payload", Destination: "/opt/payload"},
		},
		Validation: manifest.Validation{
			Script: "/usr/local/sbin/v.sh",
			Profiles: []manifest.Profile{
				{Name: manifest.ProfileBareMetal, Bootstrap: "h200-ib", BootstrapEnv: map[string]string{"H200_ENABLE_NETDATA": "1"}},
				{Name: manifest.ProfileSlice},
			},
		},
	}
}

func TestPlanGuest(t *testing.T) {
	m := profiledManifest()
	for _, tc := range []struct {
		name, profile, stage     string
		defProfile, defStage     string
		wantProfile, wantStage   string
		wantBootstrap, wantEntry string
		wantEnv                  string
	}{
		{name: "defaults", wantProfile: "bare-metal", wantStage: "image"},
		{name: "manifest defaults", defProfile: "slice", defStage: "converged", wantProfile: "slice", wantStage: "converged"},
		{name: "options over defaults", profile: "bare-metal", stage: "image", defProfile: "slice", defStage: "converged",
			wantProfile: "bare-metal", wantStage: "image"},
		{name: "converged runs the bootstrap", stage: "converged", wantProfile: "bare-metal", wantStage: "converged",
			wantBootstrap: "h200-ib", wantEntry: "/usr/local/share/gpuaas/site-bootstrap/h200-ib/bootstrap.sh", wantEnv: "H200_ENABLE_NETDATA='1'"},
		{name: "converged without a bootstrap", profile: "slice", stage: "converged", wantProfile: "slice", wantStage: "converged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m.Validation.DefaultProfile, m.Validation.DefaultStage = tc.defProfile, tc.defStage
			p, err := planGuest(m, tc.profile, tc.stage)
			if err != nil {
				t.Fatal(err)
			}
			if p.profile != tc.wantProfile || p.stage != tc.wantStage || p.validation != "/usr/local/sbin/v.sh" {
				t.Errorf("plan %+v", p)
			}
			if tc.wantBootstrap == "" {
				if p.bootstrap != nil {
					t.Errorf("bootstrap %+v", p.bootstrap)
				}
				return
			}
			b := p.bootstrap
			if b == nil || b.bundle != tc.wantBootstrap || b.entrypoint != tc.wantEntry || strings.Join(b.envAssignments(), " ") != tc.wantEnv {
				t.Errorf("bootstrap %+v", b)
			}
		})
	}
}

func TestPlanGuestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, profile, stage, want string
		edit                       func(m *manifest.Manifest)
	}{
		{name: "unknown profile", profile: "vm", want: `profile "vm" is not one of bare-metal, slice`},
		{name: "unknown stage", stage: "final", want: `stage "final" is not one of image, converged`},
		{name: "bad manifest default", want: `stage "later" is not one of image, converged`,
			edit: func(m *manifest.Manifest) { m.Validation.DefaultStage = "later" }},
		{name: "profile the image does not serve", profile: "slice", want: `profile "slice": image h200 serves only bare-metal`,
			edit: func(m *manifest.Manifest) { m.Validation.Profiles = m.Validation.Profiles[:1] }},
		{name: "bootstrap bundle missing", stage: "converged",
			want: `profile "bare-metal" bootstraps with bundle "h200-ib", which the manifest does not have (bundles: payload)`,
			edit: func(m *manifest.Manifest) { m.Bundles = m.Bundles[1:] }},
		{name: "bootstrap without entrypoint", stage: "converged",
			want: `profile "bare-metal" bootstraps with bundle "payload", which has no entrypoint to run`,
			edit: func(m *manifest.Manifest) { m.Validation.Profiles[0].Bootstrap = "payload" }},
		{name: "bad environment name", stage: "converged", want: `bootstrap environment variable "A-B" is not a valid name`,
			edit: func(m *manifest.Manifest) { m.Validation.Profiles[0].BootstrapEnv = map[string]string{"A-B": "x"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := profiledManifest()
			if tc.edit != nil {
				tc.edit(m)
			}
			if _, err := planGuest(m, tc.profile, tc.stage); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	// At stage image the bootstrap does not run, so a broken one is no
	// reason to refuse.
	m := profiledManifest()
	m.Bundles = nil
	if p, err := planGuest(m, "", "image"); err != nil || p.bootstrap != nil {
		t.Errorf("stage image: %+v, %v", p, err)
	}
}
