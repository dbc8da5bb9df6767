package recipes

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestKernelArgRule: what the grub.d drop-in and GRUB's linux line can
// carry is accepted, shipped arguments included; what they cannot is
// refused, naming the argument and the character.
func TestKernelArgRule(t *testing.T) {
	for _, a := range []string{"intel_iommu=on", "iommu=pt", "pci=realloc", "console=ttyS0,115200n8", "vfio-pci.ids=10de:2330,10de:22a3",
		"crashkernel=1G-4G:192M,4G-:256M", "memmap=100M!4G", "memmap=1G#2G", "~", "do", "--", "rd.driver.blacklist=nouveau", "hugepagesz=1G",
		"nvidia.NVreg_EnableGpuFirmware=0", "systemd.unit=multi-user.target"} {
		if msg := checkKernelArg(a); msg != "" {
			t.Errorf("%q refused: %s", a, msg)
		}
	}
	for a, want := range map[string]string{
		"":                     "empty",
		"a b":                  "whitespace",
		"a\tb":                 "whitespace",
		"a\x1bb":               "control or non-ASCII",
		"ünïcode":              "control or non-ASCII",
		"intel_iommu=on;":      `"intel_iommu=on;" contains ';'`,
		"a|b":                  "'|'",
		"a&b":                  "'&'",
		"<a":                   "'<'",
		"a>b":                  "'>'",
		"(a)":                  "'('",
		"a)":                   "')'",
		"{a}":                  "'{'",
		"`id`":                 "'`'",
		"$HOME":                "'$'",
		"it's":                 `'\''`,
		`"a"`:                  `'"'`,
		`a\b`:                  `'\\'`,
		"pci=*":                "'*'",
		"a?":                   "'?'",
		"[a]":                  "'['",
		"a]":                   "']'",
		"#x":                   "comment",
		"modprobe.blacklist=$": "/etc/modprobe.d",
	} {
		msg := checkKernelArg(a)
		if !strings.Contains(msg, want) {
			t.Errorf("checkKernelArg(%q) = %q, want it to say %q", a, msg, want)
		}
	}
}

// TestShellFixtureDetails: the probes of issue 20 in
// testdata/recipes/invalid/shell.hcl are refused with diagnostics that
// name the argument, point at it, and say where a module option goes.
func TestShellFixtureDetails(t *testing.T) {
	p := NewParser()
	_, diags := p.LoadFile(filepath.Join(testdata, "recipes/invalid/shell.hcl"), Options{})
	found := map[string]bool{}
	for _, d := range diags {
		switch {
		case d.Summary == "Invalid kernel argument" && strings.Contains(d.Detail, "NVreg_RegistryDwords"):
			found["nvreg"] = true
			testenv.Holds(t, "the diagnostic of NVreg_RegistryDwords", d.Detail, `"nvidia.NVreg_RegistryDwords=A=1;B=0" contains ';'`, "/etc/modprobe.d", "file step",
				`file "/etc/modprobe.d/nvidia.conf" { content = "options nvidia NVreg_RegistryDwords=\"A=1;B=0\"\n" }`)
			if d.Subject == nil || d.Subject.Start.Line != 28 {
				t.Errorf("the diagnostic of NVreg_RegistryDwords is at %v, not the argument's line 28", d.Subject)
			}
		case d.Summary == "Invalid kernel argument" && strings.Contains(d.Detail, `"intel_iommu=on;"`):
			found["loop"] = true
		case d.Summary == "Invalid service name":
			found["unit"] = true
			if !strings.Contains(d.Detail, `"-Hroot@evil.example" starts with '-'`) {
				t.Errorf("the unit's diagnostic: %s", d.Detail)
			}
		case d.Summary == "Invalid version":
			found["version"] = true
			if !strings.Contains(d.Detail, `"0.1\ntouch x" is not a valid version`) {
				t.Errorf("the version's diagnostic: %s", d.Detail)
			}
		}
	}
	for _, k := range []string{"nvreg", "loop", "unit", "version"} {
		if !found[k] {
			t.Errorf("no %s diagnostic in %v", k, diags)
		}
	}
}
