//go:build guestfs

package smoke

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/guestfs"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/event"
	"github.com/gpuaas/imagectl/internal/testbase"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/recipes"
)

// packageDifferences are the packages whose presence may differ between
// the baked host and the first-boot host, each with why (docs/smoke.md
// lists them for operators). Versions are compared too: a package both
// hosts have must have the same version.
var packageDifferences = map[string]string{}

// TestCompareFirstBoot is CI's smoke comparison: the small recipe
// (testdata/compare-small.hcl: two small packages and a file) built once,
// then compared at bare-metal/image with its first boot. Both paths pass,
// with a ratio; the first boot downloaded something; the validation script
// (the build's, on both) reports the same checks with the same statuses;
// and the dpkg package sets of the two booted hosts, read over ssh while
// each VM is up, are the same but for packageDifferences.
func TestCompareFirstBoot(t *testing.T) {
	vars := testbase.Vars(t)
	start := time.Now()
	dir := t.TempDir()
	r, tgz := buildSmall(t, vars, dir)
	ssh := newSSHClient(t)
	var mu sync.Mutex
	pkgs := map[string]map[string]string{}
	var events []string
	work := t.TempDir()
	c, err := Compare(context.Background(), tgz, CompareOptions{
		Options: Options{Profile: manifest.ProfileBareMetal, Stage: manifest.StageImage, AuthorizedKeys: []string{ssh.pub}, WorkDir: work,
			Events: func(e event.Event) {
				if e.Type == "log" || (e.Type == "phase" && e.Status != "start") {
					mu.Lock()
					events = append(events, fmt.Sprintf("%s %s %s %.0fs %s", e.Type, e.Phase, e.Status, e.Seconds, firstLine(e.Message)))
					mu.Unlock()
				}
			}},
		Recipe: r, BaseCache: filepath.Join(dir, "cache", cachedir.Base),
		WhileEachUp: func(ctx context.Context, path string, ep SSH) error {
			if err := checkSSH(ctx, ssh, ep); err != nil {
				return err
			}
			out, errs, code := ssh.run(ctx, ep, `dpkg-query -W -f '${db:Status-Abbrev} ${Package}:${Architecture} ${Version}\n'`)
			if code != 0 {
				return fmt.Errorf("dpkg-query on the %s host: exit %d: %s", path, code, errs)
			}
			set := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(l); len(f) == 3 && f[0] == "ii" {
					set[f[1]] = f[2]
				}
			}
			pkgs[path] = set
			return nil
		},
	})
	for _, e := range events {
		t.Log(e)
	}
	if c == nil {
		t.Fatal(err)
	}
	t.Logf("compared in %s (build included)\n%s", time.Since(start).Round(time.Second), c.Text())
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		t.Errorf("scratch files left in %s: %v", work, entries)
	}
	if !c.Baked.Passed || !c.FirstBoot.Passed || c.Ratio == nil || *c.Ratio <= 0 {
		t.Fatalf("baked %+v, first boot %+v, ratio %v", c.Baked, c.FirstBoot, c.Ratio)
	}
	if c.FirstBoot.DownloadBytes <= 0 || c.FirstBoot.ArchiveBytes <= 0 || c.Baked.DownloadBytes != 0 {
		t.Errorf("downloads: first boot %d (archives %d), baked %d", c.FirstBoot.DownloadBytes, c.FirstBoot.ArchiveBytes, c.Baked.DownloadBytes)
	}
	// What was measured: the bytes each guest received (the first boot's
	// at least its packages' archives), each path's deploy, the tgz's
	// digest; and on the small recipe the first boot did all the work but
	// the clean-up's part a live host keeps (machine-id, logs, ...), which
	// runs in part by design.
	if c.Baked.ReceivedBytes == nil || c.FirstBoot.ReceivedBytes == nil || *c.FirstBoot.ReceivedBytes < c.FirstBoot.ArchiveBytes {
		t.Errorf("received bytes: baked %v, first boot %v (archives %d)", c.Baked.ReceivedBytes, c.FirstBoot.ReceivedBytes, c.FirstBoot.ArchiveBytes)
	}
	if c.Baked.DeploySeconds == nil || c.FirstBoot.DeploySeconds == nil || !strings.HasPrefix(c.ArtifactSHA256, "sha256:") {
		t.Errorf("deploy seconds baked %v, first boot %v; artifact %q", c.Baked.DeploySeconds, c.FirstBoot.DeploySeconds, c.ArtifactSHA256)
	}
	for _, d := range c.Differences {
		if !strings.HasPrefix(d, "in part at first boot: ") || !strings.Contains(d, "not on a live host: machine-id") {
			t.Errorf("a difference beyond the clean-up's: %s", d)
		}
	}
	// No kernel args: no reboot.
	if c.FirstBoot.Reboot == nil || *c.FirstBoot.Reboot {
		t.Errorf("first boot rebooted: %v", c.FirstBoot.Reboot)
	}
	files := manifest.FilesBeside(tgz)
	if c.File != files.SmokeCompare || c.FirstBoot.ConsoleLog != files.FirstBootSmokeLog || c.FirstBoot.TimelineFile != files.FirstBootSmokeTimeline ||
		c.Baked.ConsoleLog != files.SmokeLog || c.Baked.TimelineFile != files.SmokeTimeline {
		t.Errorf("files: %s %+v %+v", c.File, c.Baked, c.FirstBoot)
	}
	if back, err := ReadComparison(c.File); err != nil || *back.Ratio != *c.Ratio {
		t.Errorf("the comparison file: %v", err)
	}
	fbTimeline := c.FirstBootResult.Timeline
	if fbTimeline.Find(MilestoneFirstBootStart) == nil || fbTimeline.Find(MilestoneFirstBootDone) == nil {
		t.Errorf("the first-boot path's timeline lacks the script's milestones: %+v", fbTimeline.Milestones)
	}
	if c.BakedResult.Timeline.Find(MilestoneFirstBootStart) != nil {
		t.Error("the baked path's timeline has a first boot")
	}

	// The same validation script, the same checks, the same statuses.
	statuses := func(r *Result) []string {
		var out []string
		for _, l := range r.Lines {
			out = append(out, l.Check+"="+l.Status)
		}
		slices.Sort(out)
		return out
	}
	if b, f := statuses(c.BakedResult), statuses(c.FirstBootResult); !slices.Equal(b, f) || len(b) == 0 {
		t.Errorf("checks differ:\nbaked      %v\nfirst boot %v", b, f)
	}

	// The same packages, at the same versions, but the explained ones.
	baked, first := pkgs[PathBaked], pkgs[PathFirstBoot]
	if len(baked) == 0 || len(first) == 0 {
		t.Fatalf("package sets: baked %d, first boot %d", len(baked), len(first))
	}
	for _, name := range slices.Sorted(maps.Keys(baked)) {
		if _, explained := packageDifferences[strings.Split(name, ":")[0]]; explained {
			continue
		}
		if v, ok := first[name]; !ok {
			t.Errorf("package %s %s is on the baked host only", name, baked[name])
		} else if v != baked[name] {
			t.Errorf("package %s: %s baked, %s at first boot", name, baked[name], v)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(first)) {
		if _, explained := packageDifferences[strings.Split(name, ":")[0]]; !explained && baked[name] == "" {
			t.Errorf("package %s %s is on the first-boot host only", name, first[name])
		}
	}
	for _, p := range []string{"hello:amd64", "tree:amd64"} {
		if baked[p] == "" || first[p] == "" {
			t.Errorf("%s: baked %q, first boot %q", p, baked[p], first[p])
		}
	}
}

// buildSmall builds testdata/compare-small.hcl into dir with the run's
// package cache and returns the loaded recipe and the tgz.
func buildSmall(t *testing.T, vars, dir string) (*recipes.Recipe, string) {
	t.Helper()
	r, diags := recipes.NewParser().LoadFile("../testdata/compare-small.hcl", recipes.Options{
		Inputs: recipes.Inputs{Files: []string{vars}},
	})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	p, err := plan.New(r, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := builder.Build(context.Background(), p, builder.BuildOptions{Executor: guestfs.Executor{},
		CacheDir: filepath.Join(dir, "cache", cachedir.Base), WorkDir: dir, OutputDir: out,
		PackageCache: testenv.PackageCache(t), Env: os.Environ()})
	if err != nil {
		t.Fatalf("building %s: %v", "testdata/compare-small.hcl", err)
	}
	t.Logf("the small recipe built in %s", time.Since(start).Round(time.Second))
	return r, res.Files.Tarball
}
