package attest

import (
	"reflect"
	"testing"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/provenance"
	"github.com/gpuaas/imagectl/sbom"
)

// The provenance lists each apt repository once: one the recipe added is
// not listed again from the sources file it wrote into the image, and the
// image's other repositories are listed with where they are configured.
func TestProvenanceAptRepositoriesOnce(t *testing.T) {
	pl := &plan.Plan{
		Manifest: &manifest.Manifest{Builder: manifest.Builder{Version: "test"},
			Recipe:  manifest.Recipe{Path: "h200.hcl", Digest: "sha256:" + sixtyFour("a")},
			Base:    manifest.Base{Source: "https://user:secret@images.example/base.img", SHA256: sixtyFour("b")},
			Lineage: manifest.Lineage{BaseDigest: "sha256:" + sixtyFour("b")}},
		Layers: []*compile.Layer{{Name: "cuda", Enabled: true, Steps: []steps.Step{
			steps.AptRepository{Name: "cuda", URI: "https://developer.download.example/compute/cuda/repos/ubuntu2404/x86_64/",
				Suite: "/", KeySHA256: sixtyFour("c")},
		}}},
	}
	inv := &sbom.Inventory{AptSources: []sbom.AptSource{
		{File: "/etc/apt/sources.list.d/cuda.sources", URIs: []string{"https://developer.download.example/compute/cuda/repos/ubuntu2404/x86_64"},
			Suites: []string{"/"}},
		{File: "/etc/apt/sources.list.d/ubuntu.sources", URIs: []string{"http://mirror:token@archive.ubuntu.com/ubuntu/"},
			Suites: []string{"noble", "noble-updates"}, Components: []string{"main"}},
	}}
	b := provenanceOf(pl, &manifest.Manifest{Artifact: &manifest.Artifact{SHA256: sixtyFour("d")}}, inv, "pgzip")
	var got []provenance.AptRepository
	got = append(got, b.AptRepositories...)
	want := []provenance.AptRepository{
		{Name: "cuda", URI: "https://developer.download.example/compute/cuda/repos/ubuntu2404/x86_64/", Suite: "/",
			KeySHA256: sixtyFour("c"), ConfiguredIn: "recipe layer cuda"},
		{Name: "ubuntu.sources", URI: "http://archive.ubuntu.com/ubuntu/", Suite: "noble", Components: []string{"main"},
			ConfiguredIn: "/etc/apt/sources.list.d/ubuntu.sources"},
		{Name: "ubuntu.sources", URI: "http://archive.ubuntu.com/ubuntu/", Suite: "noble-updates", Components: []string{"main"},
			ConfiguredIn: "/etc/apt/sources.list.d/ubuntu.sources"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("apt repositories\n%+v\nwant\n%+v", got, want)
	}
	if b.Base.URI != "https://images.example/base.img" { // and the mirror's token above
		t.Errorf("base URI %q: credentials kept", b.Base.URI)
	}
}

func sixtyFour(c string) string {
	s := ""
	for len(s) < 64 {
		s += c
	}
	return s
}
