package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/golden"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestGoldenFirstbootScripts pins, byte for byte, the first-boot script
// imagectl firstboot writes for the demo recipe and the Debian stand-in,
// and lints each with shellcheck. Run with -update to rewrite them after
// an intended change. The goldens are .txt, as the validation scripts'
// are: data to compare (the script's shell is builder/firstboot/sh).
func TestGoldenFirstbootScripts(t *testing.T) {
	golden.NormalizeModes(t, "examples/site-bootstrap", "testdata/bundles")
	base := []string{"-var", "base_image=/var/cache/base.qcow2", "-var", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"h200-debian", append([]string{"firstboot", "testdata/h200-debian.hcl"}, base...)},
		{"demo", append([]string{"firstboot", "examples/demo.hcl"}, base...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := imagectl(t, nil, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			golden.Check(t, "testdata/golden/"+tc.name+".firstboot.txt", []byte(out), "go test ./cmd/imagectl -run TestGoldenFirstbootScripts -update")
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
}`
	if err := os.WriteFile(recipe, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := imagectl(t, nil, "firstboot", recipe)
	if code != 1 || strings.Contains(out+errs, "hunter2") || !strings.Contains(errs, "carries a sensitive variable's value: write it to a file with --out") {
		t.Errorf("to stdout: exit %d\n%s\n%s", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		mode os.FileMode
		want string
	}{
		{nil, 0o700, "sh -c 'register --token hunter2-secret'"},
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
// validation script (its package versions pinned) and its marker, and a
// manifest of another image is refused.
func TestFirstbootFromBuild(t *testing.T) {
	base := []string{"-var", "base_image=/var/cache/base.qcow2", "-var", "base_checksum=sha256:" + strings.Repeat("ab", 32)}
	out, errs, code := imagectl(t, nil, append([]string{"firstboot", "examples/demo.hcl", "--manifest", "testdata/manifests/demo-0.1.0.json"}, base...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want, _, _ := imagectl(t, nil, "validate-script", "testdata/manifests/demo-0.1.0.json")
	line := "check_package 'jq' '"
	if !strings.Contains(want, line) || !strings.Contains(out, strings.ReplaceAll(want[strings.Index(want, line):strings.Index(want, line)+60], "'", `'\''`)) {
		t.Errorf("the script does not carry the build's validation script with pinned versions")
	}
	if !strings.Contains(out, `"packages": [`) {
		t.Errorf("the marker is not the build's, with its packages")
	}
	dir := t.TempDir()
	other := filepath.Join(dir, "m.json")
	b, err := os.ReadFile("testdata/manifests/demo-0.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Replace(string(b), `"name": "imagectl-demo"`, `"name": "other-image"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = imagectl(t, nil, append([]string{"firstboot", "examples/demo.hcl", "--manifest", other}, base...)...)
	if code != 1 || !strings.Contains(errs, "is a build of other-image, not of imagectl-demo") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
