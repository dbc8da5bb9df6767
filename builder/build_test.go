package builder

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/guest"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// chdirRoot runs the test from the repository root, where recipe paths
// are written from.
func chdirRoot(t testing.TB) { t.Chdir("..") }

// loadPlan plans recipe (a path from the repository root) with inputs.
func loadPlan(t testing.TB, recipe string, inputs recipes.Inputs, opts plan.Options, dryRun bool) *plan.Plan {
	t.Helper()
	p := recipes.NewParser()
	r, diags := p.LoadFile(recipe, recipes.Options{Inputs: inputs, DryRun: dryRun})
	if diags.HasErrors() {
		var buf bytes.Buffer
		_ = hclkit.WriteDiagnostics(&buf, p.Files(), diags, false)
		t.Fatalf("%s:\n%s", recipe, buf.String())
	}
	pl, err := plan.New(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// refusingExecutor fails the test when a build launches an appliance.
type refusingExecutor struct{ t *testing.T }

func (e refusingExecutor) Open(context.Context, string, guest.SessionOptions) (guest.Session, error) {
	e.t.Error("the build launched an appliance")
	return nil, errors.New("no appliance in this test")
}

// refusingTransport fails the test when a build downloads anything.
type refusingTransport struct{ t *testing.T }

func (r refusingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.t.Errorf("the build fetched %s", req.URL)
	return nil, errors.New("no network in this test")
}

// TestBuildRefusesUnresolvedPlan checks that a dry run's plan with
// unresolved bundles is refused by Build before anything runs: no base image
// is looked at, no artifact directory made, no appliance launched.
func TestBuildRefusesUnresolvedPlan(t *testing.T) {
	chdirRoot(t)
	p := loadPlan(t, "recipes/h200.hcl", recipes.Inputs{}, plan.Options{Version: "1"}, true)
	out := filepath.Join(t.TempDir(), "out")
	offline := &http.Client{Transport: refusingTransport{t}}
	_, err := Build(context.Background(), p, BuildOptions{Executor: refusingExecutor{t}, OutputDir: out, CacheDir: t.TempDir(), HTTPClient: offline})
	if err == nil {
		t.Fatal("a plan with unresolved bundles was built")
	}
	testenv.Holds(t, "the refusal", err.Error(), "bundle h200-ib is unresolved", "bundle h200-slice-vm is unresolved", "var.site_bootstrap_dir")
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused build made its artifact directory (%v)", err)
	}
	resolved := loadPlan(t, "recipes/h200.hcl", recipes.Inputs{Flags: []string{"site_bootstrap_dir=testdata/bundles"}}, plan.Options{}, false)
	if err := resolved.Resolved(); err != nil {
		t.Errorf("a plan with every bundle resolved is refused: %v", err)
	}
}

// TestPhases pins the order a build reports its phases in, which the
// phases table alone decides.
func TestPhases(t *testing.T) {
	want := []string{PhaseVerifyBase, PhasePrepare, PhaseRestore, PhaseLaunch, PhaseSnapshot, PhasePack, PhaseCheck, PhaseDescribe, PhaseManifest}
	if got := reportedPhases(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("phases %v, want %v", got, want)
	}
	for _, ph := range phases {
		if (ph.name == "") != (ph.summary == nil) {
			t.Errorf("phase %q: a named phase needs a summary, an unnamed one reports itself", ph.name)
		}
	}
	// Where each phase's time goes in the manifest's timings: the layers
	// (applyLayers, the unnamed phase after launch) count their own, the
	// check and the manifest are not counted.
	wantTiming := []string{"base", "base", "snapshot", "launch", "", "pack", "", "sbom", ""}
	var gotTiming []string
	for _, ph := range phases {
		name := ""
		if ph.timing != nil {
			var probe manifest.Timings
			*ph.timing(&probe) = 1
			for k := range timingFigures(probe) {
				name = k
			}
		}
		gotTiming = append(gotTiming, name)
	}
	if !slices.Equal(gotTiming, wantTiming) {
		t.Errorf("the phases' times count in %q, want %q", gotTiming, wantTiming)
	}
}

// TestVerifyBaseSummaryHidesCredentials: a base image given by a URL
// with credentials reaches the build's events without them.
func TestVerifyBaseSummaryHidesCredentials(t *testing.T) {
	m := &manifest.Manifest{}
	m.Base.Source = "https://builder:s3cret-pw@images.example.invalid/debian.qcow2"
	b := &build{plan: &plan.Plan{Manifest: m}}
	for _, ph := range phases {
		if ph.name != PhaseVerifyBase {
			continue
		}
		got := ph.summary(b)
		if strings.Contains(got, "s3cret-pw") || strings.Contains(got, "builder:") {
			t.Errorf("the %s phase's summary %q shows the URL's credentials", ph.name, got)
		}
		testenv.Holds(t, "the summary", got, "images.example.invalid/debian.qcow2")
		return
	}
	t.Fatalf("no %s phase", PhaseVerifyBase)
}

// TestLayerTimings: a layer's packages figures are what the applier added
// while it ran, and its other steps' time is commands.
func TestLayerTimings(t *testing.T) {
	before := manifest.Timings{Resolve: 1, Install: 10, Download: 4, DownloadBytes: 1000, CachedBytes: 50}
	after := manifest.Timings{Resolve: 3, Install: 40, Download: 9, DownloadBytes: 5000, CachedBytes: 50}
	got := layerTimings(before, after, 47)
	want := manifest.Timings{Resolve: 2, Install: 30, Download: 5, DownloadBytes: 4000, Commands: 10}
	if got != want {
		t.Errorf("layer timings %+v, want %+v", got, want)
	}
	// Rounding cannot make commands negative.
	if got := layerTimings(before, after, 36.9); got.Commands != 0 {
		t.Errorf("commands %v from steps shorter than the packages' time", got.Commands)
	}
	var total manifest.Timings
	total.Add(got)
	total.Add(manifest.Timings{Launch: 3})
	figures := timingFigures(total)
	if figures["install"] != 30 || figures["resolve"] != 2 || figures["launch"] != 3 || figures["download_bytes"] != 4000 {
		t.Errorf("timing figures %v", figures)
	}
	if _, ok := figures["pack"]; ok {
		t.Errorf("a part that did not happen is in the figures: %v", figures)
	}
}
