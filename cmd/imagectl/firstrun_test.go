package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// The first five minutes of a new user, from the repository root of a fresh
// clone: the design's own dry-run example, then the bundles from a path
// relative to where they stand.

// oneWarning checks that stderr holds exactly one diagnostic, a warning
// that says what a real build needs.
func oneWarning(t *testing.T, stderr string) {
	t.Helper()
	if n := strings.Count(stderr, ": warning: "); n != 1 || strings.Contains(stderr, ": error: ") {
		t.Errorf("want one warning and no error on stderr, got %d warnings:\n%s", n, stderr)
	}
	testenv.Holds(t, "the warning", stderr, `No value for variable "site_bootstrap_dir"`, "-var site_bootstrap_dir=", "IMAGECTL_VAR_site_bootstrap_dir", `"h200-ib", "h200-slice-vm"`, "0 errors, 1 warning")
	checkPrintable(t, "stderr", stderr)
}

func TestFirstRunDryRunText(t *testing.T) {
	out, errs, code := imagectl(t, nil, "build", "recipes/h200.hcl", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	oneWarning(t, errs)
	testenv.Holds(t, "the plan", out,
		"Plan for image gpuaas-h200-host-ubuntu2404",
		"site_bootstrap_dir     = null  (unset)",
		"Bundle:       h200-ib: ${var.site_bootstrap_dir}/h200-ib -> /usr/local/share/gpuaas/site-bootstrap/h200-ib/ UNRESOLVED: its source needs var.site_bootstrap_dir",
		"Bundle:       h200-slice-vm: ${var.site_bootstrap_dir}/h200-slice-vm -> /usr/local/share/gpuaas/site-bootstrap/h200-slice-vm/ UNRESOLVED",
		"digest unresolved (a bundle is unresolved)",
		"MAAS target")
}

func TestFirstRunDryRunJSON(t *testing.T) {
	out, errs, code := imagectl(t, nil, "build", "recipes/h200.hcl", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	oneWarning(t, errs)
	var plan struct {
		Bundles []map[string]any `json:"bundles"`
		Layers  []map[string]any `json:"layers"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("the plan is not JSON: %v\n%s", err, out)
	}
	if len(plan.Bundles) != 2 {
		t.Fatalf("want the recipe's 2 bundles, got %d", len(plan.Bundles))
	}
	for _, b := range plan.Bundles {
		reason, _ := b["reason"].(string)
		if b["unresolved"] != true || !strings.Contains(reason, "var.site_bootstrap_dir") {
			t.Errorf("bundle %v is not marked unresolved with its reason", b["name"])
		}
		if _, ok := b["digest"]; ok {
			t.Errorf("unresolved bundle %v has a digest: %v", b["name"], b["digest"])
		}
	}
	stages := 0
	for _, l := range plan.Layers {
		if l["name"] != "@config" {
			continue
		}
		if _, ok := l["digest"]; ok || l["unresolved"] != true {
			t.Errorf("the layer that stages the bundles has a digest or is not unresolved: %v", l)
		}
		steps, _ := l["steps"].([]any)
		for _, s := range steps {
			if s, _ := s.(map[string]any); s["kind"] == "bundle" {
				stages++
				if _, ok := s["digest"]; ok || s["unresolved"] != true {
					t.Errorf("bundle step %v has a digest or is not unresolved", s["name"])
				}
			}
		}
	}
	if stages != 2 {
		t.Errorf("the plan stages %d bundles, want 2", stages)
	}
}

// TestFirstRunRelativeBundles gives the bundles as a path relative to the
// working directory, as -var, var file and environment, without --root.
func TestFirstRunRelativeBundles(t *testing.T) {
	vars := filepath.Join(t.TempDir(), "site.hcl")
	if err := os.WriteFile(vars, []byte(`site_bootstrap_dir = "testdata/bundles"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"-var", nil, []string{"-var", "site_bootstrap_dir=testdata/bundles"}},
		{"var file", nil, []string{"-var-file", vars}},
		{"environment", []string{"IMAGECTL_VAR_site_bootstrap_dir=testdata/bundles"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"build", "recipes/h200.hcl", "--dry-run"}, tc.args...)
			out, errs, code := imagectl(t, tc.env, args...)
			if code != 0 || errs != "" {
				t.Fatalf("exit %d:\n%s", code, errs)
			}
			testenv.Holds(t, "the plan", out,
				"Bundle:       h200-ib: testdata/bundles/h200-ib -> /usr/local/share/gpuaas/site-bootstrap/h200-ib/ (4 files, 2188 bytes, sha256:",
				"Bundle:       h200-slice-vm: testdata/bundles/h200-slice-vm -> ")
			if strings.Contains(out, "unresolved") {
				t.Error("a plan with its bundles given still shows something unresolved")
			}
		})
	}
}

// TestFirstRunBuildRefuses checks that without --dry-run the recipe still
// needs its bundles: build and validate fail at the recipe, naming the
// variable, before anything is planned or launched.
func TestFirstRunBuildRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"build", "recipes/h200.hcl"},
		{"build", "recipes/h200.hcl", "-o", "json"},
		{"validate", "recipes/h200.hcl"},
	} {
		out, errs, code := imagectl(t, nil, args...)
		all := out + errs
		// (JSON escapes the quotes.)
		named := strings.Contains(all, `No value for variable "site_bootstrap_dir"`) || strings.Contains(all, `No value for variable \"site_bootstrap_dir\"`)
		if code != 1 || !named {
			t.Errorf("%v: exit %d, want 1 naming site_bootstrap_dir:\n%s", args, code, all)
		}
		for _, not := range []string{"Plan for image", "no executor", "unresolved"} {
			if strings.Contains(all, not) {
				t.Errorf("%v went on past the recipe (%q):\n%s", args, not, all)
			}
		}
	}
}
