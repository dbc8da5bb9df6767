package validate

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/compile"
	"github.com/gpuaas/imagectl/manifest"
)

func sampleManifest() *manifest.Manifest {
	return &manifest.Manifest{
		SchemaVersion:    manifest.SchemaVersion,
		Image:            manifest.Image{Name: "demo", Version: "1.0.0"},
		Packages:         []manifest.Package{{Name: "jq", Version: "1.6-2.1", Architecture: "amd64"}},
		RequiredPackages: []string{"jq=1.6-2.1"},
		KernelArgs:       []string{"iommu=pt"},
		Netdata:          &manifest.Netdata{Enabled: true, Bind: "127.0.0.1:19998", RetentionMB: 64},
		Network:          &manifest.Network{WaitOnlineTimeoutSeconds: 20},
		Services:         manifest.Services{Enabled: []string{"chrony"}},
		Files:            []manifest.File{{Path: "/etc/motd", SHA256: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", Mode: "0644"}},
		Bundles: []manifest.Bundle{{Name: "b", Destination: "/usr/local/share/b/", Entries: []manifest.BundleEntry{
			{Path: "run.sh", Type: "file", Mode: "0755", SHA256: "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"}}}},
		Validation: manifest.Validation{Script: "/usr/local/sbin/demo-validate.sh", Marker: "/etc/imagectl/build.json",
			ServicesActive: []string{"chrony"}, FilesExist: []string{"/etc/motd"},
			Checks: []manifest.Check{{Name: "it's quoted", Command: "echo 'hi there'"}}},
		Lineage: manifest.Lineage{TopKey: "sha256:abc"},
	}
}

// fakeRoot lays out a root filesystem that satisfies sampleManifest.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, content string, mode os.FileMode) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(full, mode)
	}
	write("var/lib/dpkg/status", "Package: jq\nStatus: install ok installed\nVersion: 1.6-2.1\nArchitecture: amd64\n\n", 0o644)
	write("etc/default/grub", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\n", 0o644)
	write("etc/default/grub.d/99-imagectl-kernel-args.cfg", compile.GrubDropInContent([]string{"iommu=pt"}), 0o644)
	write("etc/netdata/netdata.conf", "[db]\n    dbengine multihost disk space MB = 64\n[web]\n    bind to = 127.0.0.1:19998\n", 0o644)
	write("etc/systemd/system/systemd-networkd-wait-online.service.d/10-imagectl-timeout.conf", "ExecStart=/x --timeout=20 --any\n", 0o644)
	write("etc/motd", "hello\n", 0o644)
	write("usr/local/share/b/run.sh", "hello\n", 0o755)
	write("etc/imagectl/build.json", "{\n  \"version\": \"1.0.0\",\n  \"top_key\": \"sha256:abc\"\n}\n", 0o644)
	if err := os.MkdirAll(filepath.Join(root, "etc/systemd/system/multi-user.target.wants"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/lib/systemd/system/chrony.service", filepath.Join(root, "etc/systemd/system/multi-user.target.wants/chrony.service")); err != nil {
		t.Fatal(err)
	}
	return root
}

// runScript runs the script offline on root, with the machine's own PATH.
func runScript(t *testing.T, m *manifest.Manifest, root string) (string, int) {
	t.Helper()
	script, err := Script(m)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "validate.sh")
	if err := os.WriteFile(p, script, 0o755); err != nil {
		t.Fatal(err)
	}
	shellcheck(t, p, script)
	out, err := exec.Command("sh", p, "--root", root).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	(&outcome{out: string(out), code: code}).parse(t)
	return string(out), code
}

func TestScriptPassesOnAMatchingRoot(t *testing.T) {
	out, code := runScript(t, sampleManifest(), fakeRoot(t))
	if code != 0 || strings.Contains(out, "status=FAIL") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"status=PASS check=build-marker",
		"status=PASS check=package:jq detail=1.6-2.1",
		"status=PASS check=kernel-arg:iommu=pt:default-grub",
		"status=PASS check=kernel-arg:iommu=pt:grub-d",
		"status=WARN check=kernel-arg:iommu=pt:cmdline",
		"status=PASS check=netdata-config",
		"status=PASS check=wait-online",
		"status=PASS check=service-enabled:chrony",
		"status=PASS check=file:/etc/motd",
		"status=PASS check=file:/usr/local/share/b/run.sh",
		"status=WARN check=service-active:chrony",
		"status=PASS check=exists:/etc/motd",
		"status=WARN check=command:it's%20quoted",
		"IMAGECTL_VALIDATE summary profile=bare-metal stage=image checks=14 failures=0 warnings=4",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestScriptFailsOnBrokenRoot(t *testing.T) {
	for name, breakIt := range map[string]func(root string){
		"kernel arg missing from grub.d": func(root string) {
			os.WriteFile(filepath.Join(root, "etc/default/grub.d/99-imagectl-kernel-args.cfg"), []byte("# nothing\n"), 0o644)
		},
		"file changed": func(root string) { os.WriteFile(filepath.Join(root, "etc/motd"), []byte("changed\n"), 0o644) },
		"mode changed": func(root string) { os.Chmod(filepath.Join(root, "usr/local/share/b/run.sh"), 0o644) },
		"marker gone":  func(root string) { os.Remove(filepath.Join(root, "etc/imagectl/build.json")) },
		"package gone": func(root string) { os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644) },
		"service not enabled": func(root string) {
			os.Remove(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/chrony.service"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := fakeRoot(t)
			breakIt(root)
			out, code := runScript(t, sampleManifest(), root)
			if code != 1 || !strings.Contains(out, "status=FAIL") || !strings.Contains(out, "failures=1 ") ||
				!strings.Contains(out, " remediation=") {
				t.Errorf("exit %d:\n%s", code, out)
			}
		})
	}
}
