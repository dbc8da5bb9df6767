package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestGoldenFirstbootScripts pins, byte for byte, the first-boot script
// imagectl firstboot writes for the demo recipe and the Debian stand-in,
// and lints each with shellcheck. Run with -update to rewrite them after
// an intended change. The goldens are .txt, as the validation scripts'
// are: data to compare (the script's shell is builder/firstboot/sh).
func TestGoldenFirstbootScripts(t *testing.T) {
	checkGoldens(t, ".firstboot.txt", "go test ./cmd/imagectl -run TestGoldenFirstbootScripts -update", []goldenCase{
		{"h200-debian", append([]string{"firstboot", "testdata/h200-debian.hcl"}, goldenBase...)},
		{"demo", append([]string{"firstboot", "examples/demo.hcl"}, goldenBase...)},
	}, func(t *testing.T, out string) {
		sc, err := exec.LookPath("shellcheck")
		if err != nil {
			testenv.Missing(t, "shellcheck is not installed (make deps installs it)")
		}
		p := filepath.Join(t.TempDir(), "firstboot.sh")
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if lint, err := exec.Command(sc, "-s", "sh", p).CombinedOutput(); err != nil {
			t.Errorf("shellcheck: %s", lint)
		}
	})
}

// TestFirstbootFiles: --out writes the script, --user-data the cloud-config
// carrying it; a script with a sensitive variable's value is never printed
// and its file is its owner's alone.
func TestFirstbootFiles(t *testing.T) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "s.hcl")
	src := `variable "token" {
  type      = string
  default   = "hunter2-secret"
  sensitive = true
}
image "s" {
  title   = "s"
  version = "1"
  base {
    source   = "b.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "l" {
    packages = ["jq"]
    run      = ["register --token ${var.token}"]
  }
  layer "f" {
    file "/etc/token" {
      content = "token=${var.token}\r\n"
      mode    = "0600"
    }
  }
}`
	if err := os.WriteFile(recipe, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--user-data"}, {"-var", "token=s3cr'et-value"}, {"-var", "token=hunter2\r"}} {
		out, errs, code := imagectl(t, nil, append([]string{"firstboot", recipe}, args...)...)
		if code != 1 || strings.Contains(out+errs, "hunter2") || strings.Contains(out+errs, "s3cr") || !strings.Contains(errs, "carries a sensitive variable's value: write it to a file with --out") {
			t.Errorf("to stdout %q: exit %d\n%s\n%s", args, code, out, errs)
		}
	}
	for _, tc := range []struct {
		args []string
		mode os.FileMode
		want string
	}{
		{nil, 0o700, "run_command 'register --token hunter2-secret'"},
		{[]string{"--user-data"}, 0o600, "#cloud-config\n"},
		{[]string{"-var", "token=", "--user-data"}, 0o644, "#cloud-config\n"},
		{[]string{"-var", "token="}, 0o755, "#!/bin/sh\n"},
	} {
		p := filepath.Join(dir, "out")
		os.Remove(p)
		_, errs, code := imagectl(t, nil, append([]string{"firstboot", recipe, "--out", p}, tc.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errs)
		}
		b, _ := os.ReadFile(p)
		if tc.args == nil && (strings.Count(string(b), "hunter2") != 1 || !strings.Contains(string(b), "'l: run: register --token (sensitive)'")) {
			t.Errorf("the sensitive value is not run once and logged redacted:\n%s", b[len(b)-400:])
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != tc.mode || !strings.Contains(string(b), tc.want) {
			t.Errorf("%v: %v %v, want %v with %q", tc.args, err, fi.Mode(), tc.mode, tc.want)
		}
	}
}

// TestFirstbootFromBuild: with --manifest the script installs the build's
// validation script (its package versions pinned) and its marker; a
// manifest of another image, another version or other layers is refused,
// and --version names the build's version as build --version does.
func TestFirstbootFromBuild(t *testing.T) {
	base := []string{"-var", "base_image=/var/cache/base.qcow2", "-var", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
	// A build of the recipe as it is: the fixture's build record with the
	// plan's layers (their digests).
	planned, errs, code := imagectl(t, nil, append([]string{"build", "examples/demo.hcl", "--dry-run", "--output", "json"}, base...)...)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errs)
	}
	var plan map[string]any
	if err := json.Unmarshal([]byte(planned), &plan); err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("testdata/manifests/demo-0.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, edit func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(fixture, &m); err != nil {
			t.Fatal(err)
		}
		m["layers"] = plan["layers"]
		if edit != nil {
			edit(m)
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	build := write("build.json", nil)
	out, errs, code := imagectl(t, nil, append([]string{"firstboot", "examples/demo.hcl", "--manifest", build}, base...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want, _, _ := imagectl(t, nil, "validate-script", build)
	line := "check_package 'jq' '"
	if !strings.Contains(want, line) || !strings.Contains(out, strings.ReplaceAll(want[strings.Index(want, line):strings.Index(want, line)+60], "'", `'\''`)) {
		t.Errorf("the script does not carry the build's validation script with pinned versions")
	}
	if !strings.Contains(out, `"packages": [`) {
		t.Errorf("the marker is not the build's, with its packages")
	}
	layer := func(m map[string]any) map[string]any { return m["layers"].([]any)[0].(map[string]any) }
	for _, tc := range []struct {
		manifest string
		args     []string
		want     string
	}{
		{write("other.json", func(m map[string]any) { m["image"].(map[string]any)["name"] = "other-image" }), nil, "is a build of other-image, not of imagectl-demo"},
		{build, []string{"--version", "9.9.9"}, "is a build of imagectl-demo 0.1.0, the plan's version is 9.9.9"},
		{write("v2.json", func(m map[string]any) { m["image"].(map[string]any)["version"] = "0.2.0" }), []string{"--version", "0.2.0"}, ""},
		{write("layer.json", func(m map[string]any) { layer(m)["digest"] = "sha256:" + strings.Repeat("cd", 32) }), nil, "layer tools of the build of imagectl-demo 0.1.0 has digest sha256:cdcd"},
		{testdataManifest, nil, "layers"},
		{build, []string{"--version", "not a version"}, "--version:"},
	} {
		_, errs, code = imagectl(t, nil, append(append([]string{"firstboot", "examples/demo.hcl", "--manifest", tc.manifest}, tc.args...), base...)...)
		if (code == 0) != (tc.want == "") || !strings.Contains(errs, tc.want) {
			t.Errorf("%s %v: exit %d: %s", filepath.Base(tc.manifest), tc.args, code, errs)
		}
	}
}

// testdataManifest is a build of the demo recipe as it was: its layers
// are not the plan's now.
const testdataManifest = "testdata/manifests/demo-0.1.0.json"
