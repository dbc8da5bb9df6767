package plan

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/golden"
	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/recipes"
)

// rerun rewrites the golden plans under testdata/golden.
const rerun = "go test ./builder/plan -update"

type planCase struct {
	name   string
	recipe string
	inputs recipes.Inputs
	roots  []string
	opts   Options
	dryRun bool
}

var fixedNow = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

var planCases = []planCase{
	{name: "h200", recipe: "recipes/h200.hcl", opts: Options{Now: fixedNow},
		inputs: recipes.Inputs{Flags: []string{"site_bootstrap_dir=testdata/bundles"}}},
	{name: "h200-doca", recipe: "recipes/h200.hcl", opts: Options{Version: "1.4.0"},
		inputs: recipes.Inputs{Flags: []string{"site_bootstrap_dir=testdata/bundles", "enable_doca_repos=true", "install_packages=ipmitool,fio"}}},
	{name: "h200-debian", recipe: "testdata/h200-debian.hcl",
		inputs: recipes.Inputs{Flags: []string{"base_image=/var/cache/base.qcow2", "base_checksum=sha256:" + strings.Repeat("ab", 32)}}},
	{name: "demo", recipe: "examples/demo.hcl",
		inputs: recipes.Inputs{Flags: []string{"base_image=/var/cache/base.qcow2", "base_checksum=sha256:" + strings.Repeat("ab", 32)}}},
	{name: "full", recipe: "testdata/recipes/valid/full.hcl", roots: []string{"testdata"}},
	// The design's own example on a fresh clone: no site_bootstrap_dir, so
	// the bundles are unresolved, without digests, as is the layer that
	// stages them and every key from there on.
	{name: "h200-unresolved", recipe: "recipes/h200.hcl", opts: Options{Now: fixedNow}, dryRun: true},
}

// chdirRoot runs the test from the repository root, so that recipe paths in
// plans read as a user typing them there would see them, and makes file
// modes in bundle directories what a git checkout with umask 022 gives.
func chdirRoot(t testing.TB) {
	t.Chdir("../..")
	golden.NormalizeModes(t, "examples/site-bootstrap", "testdata/bundles")
}

func loadPlan(t testing.TB, tc planCase) *Plan {
	t.Helper()
	p := recipes.NewParser()
	r, diags := p.LoadFile(tc.recipe, recipes.Options{Inputs: tc.inputs, Roots: tc.roots, DryRun: tc.dryRun})
	if diags.HasErrors() {
		var buf bytes.Buffer
		_ = hclkit.WriteDiagnostics(&buf, p.Files(), diags, false)
		t.Fatalf("%s:\n%s", tc.recipe, buf.String())
	}
	plan, err := New(r, tc.opts)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// render is the plan as --dry-run prints it, as text and as JSON.
func render(t *testing.T, p *Plan) (text, js string) {
	t.Helper()
	var tb, jb bytes.Buffer
	if err := p.WriteText(&tb); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteJSON(&jb); err != nil {
		t.Fatal(err)
	}
	return tb.String(), jb.String()
}

// TestGoldenPlans pins the plan of each shipped recipe and fixture, as text
// and as JSON. Run with -update to rewrite them after an intended change.
func TestGoldenPlans(t *testing.T) {
	chdirRoot(t)
	for _, tc := range planCases {
		t.Run(tc.name, func(t *testing.T) {
			text, js := render(t, loadPlan(t, tc))
			if !json.Valid([]byte(js)) {
				t.Fatal("invalid JSON")
			}
			golden.Check(t, "testdata/golden/"+tc.name+".plan.txt", []byte(text), rerun)
			golden.Check(t, "testdata/golden/"+tc.name+".plan.json", []byte(js), rerun)
		})
	}
}

// TestPlanIsDeterministic plans the same recipe twice, in separate parsers.
func TestPlanIsDeterministic(t *testing.T) {
	chdirRoot(t)
	var outs [2]bytes.Buffer
	for i := range outs {
		if err := loadPlan(t, planCases[0]).WriteJSON(&outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) {
		t.Error("two plans of the same recipe differ")
	}
}

// TestLayerDigestsFollowContent checks that a layer's digest changes with
// what it installs or writes and with nothing else, and that keys chain.
func TestLayerDigestsFollowContent(t *testing.T) {
	chdirRoot(t)
	base := loadPlan(t, planCases[0])
	changed := loadPlan(t, planCase{name: "x", recipe: "recipes/h200.hcl", opts: Options{Version: "9.9.9"}, roots: planCases[0].roots,
		inputs: recipes.Inputs{Flags: append([]string{"netdata_retention_mb=512", "artifact_dir=elsewhere"}, planCases[0].inputs.Flags...)}})
	afterConfig := false
	for i, l := range base.Layers {
		c := changed.Layers[i]
		switch {
		case l.Name == "@config":
			afterConfig = true
			if l.Digest == c.Digest || l.Key == c.Key {
				t.Error("@config digest or key did not change with the Netdata retention")
			}
		case l.Digest != c.Digest:
			t.Errorf("layer %s changed with a version, artifact directory or Netdata setting", l.Name)
		case afterConfig && l.Key == c.Key:
			t.Errorf("layer %s keeps its key although a layer below it changed", l.Name)
		case !afterConfig && l.Key != c.Key:
			t.Errorf("layer %s changed its key although nothing below it changed", l.Name)
		}
	}
	if base.Layers[0].Key == base.Layers[0].Digest {
		t.Error("the first key is not chained to the base image")
	}
}

func TestSensitiveValuesStayOutOfPlans(t *testing.T) {
	dir := t.TempDir()
	src := `variable "token" {
  type      = string
  default   = "hunter2-secret"
  sensitive = true
}
image "s" {
  title = "s"
  base {
    source   = "b.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "l" {
    run = ["register --token ${var.token}"]
  }
}`
	path := filepath.Join(dir, "s.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	text, js := render(t, loadPlan(t, planCase{recipe: path, opts: Options{Version: "1"}}))
	for _, out := range []string{text, js} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("a sensitive value leaked into the plan:\n%s", out)
		}
	}
	if !strings.Contains(text, "register --token (sensitive)") {
		t.Error("the redacted command is missing from the plan")
	}
}

// BenchmarkPlanH200 measures what imagectl build recipes/h200.hcl --dry-run
// costs before printing: parsing the recipe and its layer files, resolving
// variables, reading bundles, compiling and digesting every layer.
func BenchmarkPlanH200(b *testing.B) {
	chdirRoot(b)
	for b.Loop() {
		loadPlan(b, planCases[0])
	}
}

// TestAptProxy: the recipe's apt proxy reaches the build with its
// credentials, the manifest without them, the plan's renderings not at
// all, and no layer key: a build-time proxy changes no layer.
func TestAptProxy(t *testing.T) {
	dir := t.TempDir()
	src := func(proxy string) string {
		return `image "p" {
  title = "p"
  ` + proxy + `
  base {
    source   = "b.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "l" {
    packages = ["jq"]
  }
}`
	}
	load := func(name, proxy string) *Plan {
		path := filepath.Join(dir, name+".hcl")
		if err := os.WriteFile(path, []byte(src(proxy)), 0o644); err != nil {
			t.Fatal(err)
		}
		return loadPlan(t, planCase{recipe: path, opts: Options{Version: "1"}})
	}
	with := load("with", `apt_proxy = "http://site:pw-secret-1@apt-cacher.example:3142"`)
	without := load("without", "")
	if with.AptProxy() != "http://site:pw-secret-1@apt-cacher.example:3142" || without.AptProxy() != "" {
		t.Errorf("AptProxy() = %q, %q", with.AptProxy(), without.AptProxy())
	}
	if got := with.Manifest.Builder.AptProxy; got != "http://apt-cacher.example:3142" {
		t.Errorf("the manifest records the apt proxy as %q", got)
	}
	for i := range with.Manifest.Layers {
		if with.Manifest.Layers[i].Key != without.Manifest.Layers[i].Key || with.Manifest.Layers[i].Digest != without.Manifest.Layers[i].Digest {
			t.Errorf("layer %s: the apt proxy changed its key or digest", with.Manifest.Layers[i].Name)
		}
	}
	text, js := render(t, with)
	m, err := json.Marshal(with.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text, js, string(m)} {
		if strings.Contains(out, "pw-secret") {
			t.Errorf("the apt proxy's password leaked:\n%s", out)
		}
	}
}
