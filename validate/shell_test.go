package validate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/manifest"
)

// TestScriptRefusesHostileNames: the image name and version go into the
// script's comment header; one that would end the comment line and start a
// command, or leave the artifact directory, is refused, naming the field.
func TestScriptRefusesHostileNames(t *testing.T) {
	for name, tc := range map[string]struct {
		breakIt func(m *manifest.Manifest)
		want    string
	}{
		"version newline": {func(m *manifest.Manifest) { m.Image.Version = "0.1\ntouch x" }, `image.version: "0.1\ntouch x" is not a valid version`},
		"version path":    {func(m *manifest.Manifest) { m.Image.Version = "../../../../etc/x" }, `image.version: "../../../../etc/x" is not a valid version`},
		"name newline":    {func(m *manifest.Manifest) { m.Image.Name = "demo\nrm -rf /" }, `image.name: "demo\nrm -rf /" is not a valid image name`},
		"NUL in a value":  {func(m *manifest.Manifest) { m.KernelArgs = []string{"a\x00b"} }, "NUL"},
	} {
		m := sampleManifest()
		tc.breakIt(m)
		if _, err := Script(m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

// TestScriptHostileValuesAreData: values a manifest read back may carry
// (the script's path in the header, kernel args, unit names, paths) stay
// data: the header stays comment lines, the script passes shellcheck, and
// running it (--help and a check of a root) creates no file.
func TestScriptHostileValuesAreData(t *testing.T) {
	m := sampleManifest()
	m.Validation.Script = "/usr/local/sbin/x\ntouch pwned-header\n$(touch pwned-subst).sh"
	m.KernelArgs = append(m.KernelArgs, "$(touch pwned-arg)", "a;touch pwned-semicolon", "`touch pwned-tick`", "*")
	m.Services.Enabled = append(m.Services.Enabled, "-Hroot@evil.example", "x'; touch pwned-unit; '")
	m.Validation.FilesExist = append(m.Validation.FilesExist, "/etc/$(touch pwned-file)")
	script, err := Script(m)
	if err != nil {
		t.Fatal(err)
	}
	header, _, ok := strings.Cut(string(script), "\nset -u\n")
	if !ok {
		t.Fatal("no set -u after the header")
	}
	for i, line := range strings.Split(header, "\n") {
		if !strings.HasPrefix(line, "#") {
			t.Errorf("header line %d is not a comment: %q", i+1, line)
		}
	}
	if !strings.Contains(header, `# Usage: x\ntouch pwned-header\n$(touch pwned-subst).sh [--profile`) {
		t.Errorf("the header does not name the script escaped:\n%s", header)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "validate.sh")
	if err := os.WriteFile(p, script, 0o755); err != nil {
		t.Fatal(err)
	}
	shellcheck(t, p, script)
	work := filepath.Join(dir, "cwd")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--help"}, {"--root", fakeRoot(t)}} {
		cmd := exec.Command("sh", append([]string{p}, args...)...)
		cmd.Dir = work
		out, _ := cmd.CombinedOutput()
		if entries, _ := os.ReadDir(work); len(entries) > 0 {
			t.Fatalf("sh validate.sh %s created %s:\n%s", strings.Join(args, " "), entries[0].Name(), out)
		}
		if args[0] == "--root" && !strings.Contains(string(out), "check=kernel-arg:$(touch%20pwned-arg):default-grub") {
			t.Errorf("no check of the hostile kernel arg:\n%s", out)
		}
	}
}

// TestScriptPutsDashDashBeforeUnits: every systemctl call of the script's
// functions ends its options with "--" before the unit, so a unit named
// like an option (-Hroot@evil.example) is a unit.
func TestScriptPutsDashDashBeforeUnits(t *testing.T) {
	for _, lib := range shLibs {
		for _, line := range strings.Split(lib, "\n") {
			for _, sub := range []string{"systemctl is-active", "systemctl is-enabled", "systemctl show"} {
				i := strings.Index(line, "$("+sub)
				if i < 0 {
					continue
				}
				call, _, _ := strings.Cut(line[i:], ")")
				if !strings.Contains(call, " -- ") {
					t.Errorf("systemctl without -- before the unit: %s", strings.TrimSpace(line))
				}
			}
		}
	}
}

// TestScriptCarriesEveryShellFile: a file added under sh/ is in the
// script, not only shellchecked.
func TestScriptCarriesEveryShellFile(t *testing.T) {
	files, err := shFiles.ReadDir("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !slices.Contains(shLibs, shLib(f.Name())) {
			t.Errorf("sh/%s is not in shLibs", f.Name())
		}
	}
	if len(files) != len(shLibs) {
		t.Errorf("%d files under sh/, %d in shLibs", len(files), len(shLibs))
	}
}
