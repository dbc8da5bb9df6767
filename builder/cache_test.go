package builder

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/recipes"
)

// TestCacheKeys: the layer cache's keys follow what changes the disk and
// nothing else.
func TestCacheKeys(t *testing.T) {
	chdirRoot(t)
	sourceDate := ""
	demo := func(flags ...string) []string {
		t.Helper()
		base := []string{"base_image=/var/cache/base.qcow2", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
		p := loadPlan(t, "examples/demo.hcl", recipes.Inputs{Flags: append(base, flags...)}, plan.Options{}, false)
		_, keys, volatile, err := cacheKeys(p, sourceDate)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range p.Layers {
			if l.Name == "tools" && !volatile[i] {
				t.Error("the tools layer installs packages but is not volatile")
			}
			if l.Enabled != (keys[i] != "") {
				t.Errorf("layer %s: enabled %v, key %q", l.Name, l.Enabled, keys[i])
			}
		}
		return keys
	}
	names := func() []string {
		p := loadPlan(t, "examples/demo.hcl", recipes.Inputs{Flags: []string{"base_image=/var/cache/base.qcow2", "base_checksum=sha256:" + strings.Repeat("ab", 32)}}, plan.Options{}, false)
		var n []string
		for _, l := range p.Layers {
			n = append(n, l.Name)
		}
		return n
	}()
	same := demo()
	if again := demo(); strings.Join(again, ",") != strings.Join(same, ",") {
		t.Fatal("the same recipe gave other keys")
	}
	// A Netdata setting changes @config and what follows, not the layers before.
	netdata := demo("netdata_retention_mb=65")
	for i, n := range names {
		changed := netdata[i] != same[i]
		want := n == "@config" || n == compile.FinalizeLayer
		if same[i] != "" && changed != want {
			t.Errorf("netdata_retention_mb: layer %s changed %v, want %v", n, changed, want)
		}
	}
	// The version is in the manifest and the marker only: just @finalize,
	// and the tools layer, whose motd and script carry it.
	version := demo("version=9.9.9")
	for i, n := range names {
		if same[i] == "" {
			continue
		}
		changed := version[i] != same[i]
		if n == "tools" && !changed {
			t.Error("the tools layer writes the version but kept its key")
		}
		if n == compile.FinalizeLayer && !changed {
			t.Error("@finalize writes the marker with the version but kept its key")
		}
	}
	// A plan that keeps apt's lists fetches the Translation indexes its
	// snapshots then hold: every key changes.
	p := loadPlan(t, "examples/demo.hcl", recipes.Inputs{Flags: []string{"base_image=/var/cache/base.qcow2", "base_checksum=sha256:" + strings.Repeat("ab", 32)}}, plan.Options{}, false)
	if !compile.RemovesAptLists(p.Layers) {
		t.Fatal("the demo's clean-up does not remove apt's lists")
	}
	for _, l := range p.Layers {
		for i, st := range l.Steps {
			if c, ok := st.(steps.Cleanup); ok {
				l.Steps[i] = steps.Cleanup{Actions: slices.DeleteFunc(slices.Clone(c.Actions), func(a string) bool { return a == steps.CleanAptCache })}
			}
		}
	}
	if compile.RemovesAptLists(p.Layers) {
		t.Fatal("a clean-up without apt-cache removes apt's lists")
	}
	_, kept, _, err := cacheKeys(p, sourceDate)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range kept {
		if same[i] != "" && k == same[i] {
			t.Errorf("apt's lists kept: layer %s kept its key", names[i])
		}
	}
	// A source date from SOURCE_DATE_EPOCH reaches every layer's commands:
	// every key changes.
	sourceDate = "1700000000"
	for i, k := range demo() {
		if same[i] != "" && k == same[i] {
			t.Errorf("SOURCE_DATE_EPOCH: layer %s kept its key", names[i])
		}
	}
}
