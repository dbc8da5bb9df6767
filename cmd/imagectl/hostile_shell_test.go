//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
)

// The tests of this file are issue 20's probes of the shell imagectl
// generates: values from a recipe, a flag or a manifest read back must
// stay data in the grub.d drop-in, the validation script and systemctl's
// arguments, or be refused where they enter.

// shellRecipe is a valid recipe with the given kernel block and layer
// body, written into a temporary directory.
func shellRecipe(t *testing.T, kernelArgs, layerBody string) string {
	t.Helper()
	src := `image "shell" {
  title = "Shell"
  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "l" {
    packages = ["curl"]
` + layerBody + `
  }
  kernel {
    args = ` + kernelArgs + `
  }
}
`
	p := filepath.Join(t.TempDir(), "recipe.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShellKernelArgsRefused: the args that broke out of the drop-in's
// for loop and ran as root in update-grub, and a real module option that
// made update-grub fail on every deploy, validated; validate, build and
// validate-script now refuse them, naming each and saying where a module
// option goes.
func TestShellKernelArgsRefused(t *testing.T) {
	recipe := shellRecipe(t, `["intel_iommu=on;", "do", ":;", "done;", "touch", "/x;", "nvidia.NVreg_RegistryDwords=A=1;B=0"]`, "")
	for _, args := range [][]string{{"validate", recipe}, {"build", recipe, "--dry-run"}, {"validate-script", recipe}} {
		stdout, stderr, code := runImagectl(t, nil, args...)
		if code != 1 {
			t.Errorf("%s: exit status %d, want 1", args[0], code)
		}
		testenv.Holds(t, args[0]+": stderr", stderr, "Invalid kernel argument", `"intel_iommu=on;" contains ';'`, `":;"`, `"done;"`, `"/x;"`,
			`"nvidia.NVreg_RegistryDwords=A=1;B=0" contains ';'`, "/etc/modprobe.d", "file step", "recipe.hcl:12:")
		if strings.Contains(stdout, "for imagectl_arg") || strings.Contains(stdout, "check_kernel_arg") {
			t.Errorf("%s printed shell with the args:\n%.2000s", args[0], stdout)
		}
		checkPrintable(t, "stderr", stderr)
	}
}

// TestShellDashUnitRefused: a unit named like an option reached systemctl
// (systemctl enable -Hroot@evil.example runs on another host).
func TestShellDashUnitRefused(t *testing.T) {
	recipe := shellRecipe(t, `["iommu=pt"]`, `    services {
      enable = ["-Hroot@evil.example"]
    }`)
	_, stderr, code := runImagectl(t, nil, "validate", recipe)
	if code != 1 || !strings.Contains(stderr, "Invalid service name") || !strings.Contains(stderr, `"-Hroot@evil.example" starts with '-'`) {
		t.Errorf("exit status %d:\n%s", code, stderr)
	}
}

// TestShellVersionFlagRefused: build --version was not checked at all: a
// newline ended the validation script's comment header and started a
// command, ../ put the artifact outside the output directory. Both are
// refused before anything is read or written, naming the flag.
func TestShellVersionFlagRefused(t *testing.T) {
	recipe := shellRecipe(t, `["iommu=pt"]`, "")
	out := t.TempDir()
	for _, v := range []string{"0.1\ntouch x", "../../../../etc/x", "1/2", "..", "$(id)"} {
		for _, args := range [][]string{
			{"build", recipe, "--dry-run", "--version", v},
			{"build", recipe, "--dry-run", "--output", "json", "--version", v},
			{"build", recipe, "--output-dir", out, "--version", v},
			{"build", recipe, "--dry-run", "--store", out, "--version", v},
		} {
			stdout, stderr, code := runImagectl(t, nil, args...)
			if code != 1 || !strings.Contains(stderr, "--version: ") || !strings.Contains(stderr, "is not a valid version") {
				t.Errorf("%q: exit status %d:\n%s", args, code, stderr)
			}
			if strings.Contains(stdout, "touch x") || strings.Contains(stdout, "etc/x") {
				t.Errorf("%q printed a plan with the version:\n%.2000s", args, stdout)
			}
			checkPrintable(t, "stderr", stderr)
		}
	}
	if e, _ := os.ReadDir(out); len(e) > 0 {
		t.Errorf("a refused version wrote %s", e[0].Name())
	}
}

// TestShellHostileManifestRefused: a manifest read back (validate-script,
// diff) whose version would end the script's comment header, or walk out of
// a directory, is refused, naming the field; no script is written.
func TestShellHostileManifestRefused(t *testing.T) {
	dir := t.TempDir()
	for field, img := range map[string]manifest.Image{
		"image.version": {Name: "demo", Version: "0.1\ntouch x"},
		"image.name":    {Name: "../../etc/demo", Version: "1"},
	} {
		p := manifesttest.Write(t, filepath.Join(dir, "hostile.manifest.json"),
			&manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Image: img, KernelArgs: []string{"iommu=pt"}})
		script := filepath.Join(dir, "validate.sh")
		for _, args := range [][]string{{"validate-script", p, "--out", script}, {"validate-script", p}, {"diff", p, p}} {
			stdout, stderr, code := runImagectl(t, nil, args...)
			if code == 0 || !strings.Contains(stderr, field+": ") {
				t.Errorf("%q with a hostile %s: exit status %d:\n%s", args, field, code, stderr)
			}
			if strings.Contains(stdout, "#!/bin/sh") {
				t.Errorf("%q printed a script", args)
			}
			checkPrintable(t, "stderr", stderr)
		}
		if _, err := os.Stat(script); err == nil {
			t.Errorf("a script was written for a hostile %s", field)
		}
	}
}

// TestShellScriptOfOddArgsIsData: arguments the rule accepts that the
// shell would read (a lone ~ is $HOME, reserved words) go into the
// validation script as data: it passes shellcheck and runs nothing.
func TestShellScriptOfOddArgsIsData(t *testing.T) {
	recipe := shellRecipe(t, `["~", "done", "memmap=1G#2G", "memmap=100M!4G", "--"]`, "")
	stdout, stderr, code := runImagectl(t, nil, "validate-script", recipe)
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, stderr)
	}
	testenv.Holds(t, "the script", stdout, "check_kernel_arg '~'", "check_kernel_arg 'done'", "check_kernel_arg 'memmap=1G#2G'")
	sc := testenv.Tool(t, "shellcheck", "make deps installs it")
	p := filepath.Join(t.TempDir(), "validate.sh")
	if err := os.WriteFile(p, []byte(stdout), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sc, "-s", "sh", p).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}
