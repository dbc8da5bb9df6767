package compile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/recipes"
)

// requireShellcheck returns the shellcheck binary, skipping outside CI when
// it is missing (make test installs it; CI must have it).
func requireShellcheck(t *testing.T) string {
	t.Helper()
	return testenv.Tool(t, "shellcheck", "make deps installs it")
}

// TestGrubDropIn sources the generated drop-in the way grub-mkconfig does,
// after /etc/default/grub, and checks the resulting command line.
func TestGrubDropIn(t *testing.T) {
	dir := t.TempDir()
	dropIn := filepath.Join(dir, "99-imagectl.cfg")
	if err := os.WriteFile(dropIn, []byte(GrubDropInContent([]string{"intel_iommu=on", "iommu=pt"})), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ before, want string }{
		{"", "intel_iommu=on iommu=pt"},
		{"console=tty1", "console=tty1 intel_iommu=on iommu=pt"},
		{"iommu=pt quiet", "iommu=pt quiet intel_iommu=on"},
		{"intel_iommu=on iommu=pt", "intel_iommu=on iommu=pt"},
	} {
		script := `GRUB_CMDLINE_LINUX="` + tc.before + `"
GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0 maas_opt"
. "$1"
printf '%s|%s' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"`
		out, err := exec.Command("sh", "-c", script, "sh", dropIn).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		linux, def, _ := strings.Cut(string(out), "|")
		if linux != tc.want {
			t.Errorf("from %q: GRUB_CMDLINE_LINUX=%q, want %q", tc.before, linux, tc.want)
		}
		if def != "console=ttyS0 maas_opt" {
			t.Errorf("the drop-in touched GRUB_CMDLINE_LINUX_DEFAULT: %q", def)
		}
	}
	sc := requireShellcheck(t)
	if out, err := exec.Command(sc, "-s", "sh", "-e", "SC2034", dropIn).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

func TestCompile(t *testing.T) {
	img := &recipes.Image{
		Name: "x",
		Layers: []*recipes.Layer{
			{Name: "a", Enabled: true, Packages: []string{"jq"}, OptionalPackages: []string{"htop"},
				Run: []string{"true"}, Services: recipes.Services{Enable: []string{"chrony"}},
				Files: []*recipes.File{{Path: "/etc/x", Mode: 0o600, Owner: "root:root", Content: []byte("x")}},
				Repositories: []*recipes.AptRepository{
					{Name: "on", URI: "https://r.invalid/", Suite: "stable", Components: []string{"main"}, Enabled: true, Key: recipes.Key{URL: "https://r.invalid/k"}},
					{Name: "off", URI: "https://r.invalid/", Suite: "stable", Enabled: false},
				}},
			{Name: "b", Enabled: false, Packages: []string{"never"}},
		},
		Kernel:     recipes.Kernel{Args: []string{"quiet"}},
		Netdata:    &recipes.Netdata{Enabled: true, Bind: "127.0.0.1:19998", RetentionMB: 256, UpdateEvery: 5, Collectors: []string{"nvidia_smi", "cgroups"}},
		Network:    &recipes.Network{WaitOnlineTimeout: 30 * time.Second, WaitOnlineAny: true},
		Validation: recipes.Validation{Script: "/usr/local/sbin/x-validate.sh"},
	}
	ls, err := Image(img)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, s := range ls[0].Steps {
		kinds = append(kinds, s.Kind())
	}
	if got := strings.Join(kinds, " "); got != "apt-repository packages packages file run services" {
		t.Errorf("layer a steps: %s", got)
	}
	if ls[1].Enabled || ls[1].Steps != nil || ls[1].Digest != "" {
		t.Errorf("disabled layer compiled: %+v", ls[1])
	}
	if len(ls) != 5 || ls[2].Name != BootLayer || ls[3].Name != ConfigLayer || ls[4].Name != FinalizeLayer {
		t.Fatalf("implied layers: %d layers", len(ls))
	}
	files := map[string]string{}
	for _, l := range ls[2:4] {
		for _, s := range l.Steps {
			if f, ok := s.(steps.WriteFile); ok {
				files[f.Path] = string(f.Content)
			}
		}
	}
	if _, ok := files[NetdataConf]; ok && ls[2].Steps[0].Kind() != "kernel-args" {
		t.Error("@boot does not start with the kernel args")
	}
	for path, want := range map[string]string{
		NetdataConf:      "bind to = 127.0.0.1:19998",
		NetdataGoDConf:   "nvidia_smi: yes",
		WaitOnlineDropIn: "systemd-networkd-wait-online --timeout=30 --any",
		GrubDropIn:       "for imagectl_arg in 'quiet'; do",
	} {
		if !strings.Contains(files[path], want) {
			t.Errorf("%s lacks %q:\n%s", path, want, files[path])
		}
	}
	if !strings.Contains(files[NetdataConf], "cgroups = yes") || strings.Contains(files[NetdataGoDConf], "cgroups") {
		t.Error("cgroups is an internal plugin, not a go.d module")
	}
	if !strings.Contains(files[NetdataConf], "dbengine multihost disk space MB = 256") {
		t.Errorf("retention missing:\n%s", files[NetdataConf])
	}

	// Digests follow content only.
	img.Layers[0].Files[0].Content = []byte("y")
	ls2, _ := Image(img)
	if ls2[0].Digest == ls[0].Digest {
		t.Error("changing a file's content did not change the layer digest")
	}
	img.Layers[0].Description = "words"
	ls3, _ := Image(img)
	if ls3[0].Digest != ls2[0].Digest {
		t.Error("a description changed the layer digest")
	}
}

// TestBootLayerOnlyWhenNeeded: without kernel args or a network block there
// is no @boot layer, and a Netdata change leaves @boot's digest alone.
func TestBootLayerOnlyWhenNeeded(t *testing.T) {
	img := &recipes.Image{Name: "x", Netdata: &recipes.Netdata{Enabled: true, Bind: "127.0.0.1:19999", RetentionMB: 64, UpdateEvery: 1},
		Validation: recipes.Validation{Script: "/usr/local/sbin/x-validate.sh"}}
	ls, err := Image(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[0].Name != ConfigLayer {
		t.Fatalf("layers %d, first %s: want @config and @finalize only", len(ls), ls[0].Name)
	}
	img.Kernel.Args = []string{"iommu=pt"}
	a, _ := Image(img)
	img.Netdata.RetentionMB = 128
	b, _ := Image(img)
	if a[0].Name != BootLayer || a[0].Digest != b[0].Digest || a[1].Digest == b[1].Digest {
		t.Errorf("@boot %s/%s, @config %s/%s: a Netdata change must change @config only", a[0].Digest, b[0].Digest, a[1].Digest, b[1].Digest)
	}
}

// TestGoDPluginCheck: go.d modules among the collectors add a step that
// fails the build, saying how to fix it, when the guest has no go.d.plugin
// (Debian's netdata lacks it), and passes when it has one; plugin
// collectors alone need no such step. The check runs under a root of the
// test's own, so this machine's Netdata decides nothing.
func TestGoDPluginCheck(t *testing.T) {
	plugins := []string{"/usr/libexec/netdata/plugins.d/go.d.plugin", "/usr/lib/netdata/plugins.d/go.d.plugin"}
	img := &recipes.Image{Netdata: &recipes.Netdata{Enabled: true, Bind: "127.0.0.1:19998", RetentionMB: 64, UpdateEvery: 5,
		Collectors: []string{"cgroups", "nvidia_smi", "docker"}}}
	var check string
	for _, s := range configSteps(img) {
		if r, ok := s.(steps.Run); ok {
			check = r.Command
		}
	}
	if check == "" {
		t.Fatal("no go.d.plugin check with go.d modules configured")
	}
	for _, p := range plugins {
		if !strings.Contains(check, " "+p+" ") && !strings.Contains(check, " "+p+";") {
			t.Errorf("the check does not look for %s: %s", p, check)
		}
	}
	under := func(root string) string { return strings.ReplaceAll(check, " /usr/", " "+root+"/usr/") }
	out, err := exec.Command("sh", "-c", under(t.TempDir())).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "go.d modules nvidia_smi, docker") || !strings.Contains(string(out), `repository = "netdata"`) {
		t.Errorf("the check: %v: %s", err, out)
	}
	for _, p := range plugins {
		t.Run(strings.TrimPrefix(p, "/"), func(t *testing.T) {
			root := t.TempDir()
			plugin := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(plugin), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("sh", "-c", under(root)).CombinedOutput(); err != nil {
				t.Errorf("the check with %s: %v: %s", p, err, out)
			}
		})
	}
	img.Netdata.Collectors = []string{"cgroups", "apps"}
	for _, s := range configSteps(img) {
		if _, ok := s.(steps.Run); ok {
			t.Error("a go.d.plugin check without go.d modules")
		}
	}
}
