package compile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/recipes"
)

// grubLines sources what /etc/default/grub says (GRUB_CMDLINE_LINUX="..."
// as the build writes it, before) and then the drop-in with args, as
// grub-mkconfig does, in an empty directory with no PATH: it returns the
// resulting GRUB_CMDLINE_LINUX and fails the test when the shell printed
// anything else, failed, or left a file behind.
func grubLines(t testing.TB, before string, args []string) string {
	t.Helper()
	dir := t.TempDir()
	dropIn := filepath.Join(dir, "99-imagectl.cfg")
	if err := os.WriteFile(dropIn, []byte(GrubDropInContent(args)), 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "cwd")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "GRUB_CMDLINE_LINUX=\"" + before + "\"\n. \"$1\"\nprintf '%s' \"$GRUB_CMDLINE_LINUX\"\n"
	cmd := exec.Command("/bin/sh", "-c", script, "sh", dropIn)
	cmd.Dir, cmd.Env = work, []string{"PATH=/nonexistent", "HOME=" + work}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("sourcing the drop-in of %q: %v\n%s\n%s", args, err, stderr.String(), GrubDropInContent(args))
	}
	if entries, _ := os.ReadDir(work); len(entries) > 0 {
		t.Fatalf("sourcing the drop-in of %q created %s", args, entries[0].Name())
	}
	return stdout.String()
}

// wantLine is GRUB_CMDLINE_LINUX after the drop-in: before, with each
// argument not in it yet appended.
func wantLine(before string, args []string) string {
	line := before
	for _, a := range args {
		if !strings.Contains(" "+line+" ", " "+a+" ") {
			line = strings.TrimPrefix(line+" "+a, " ")
		}
	}
	return line
}

// TestGrubDropInQuotesArgs: the probe of issue 20. Arguments that used to
// become shell code in update-grub (a for loop broken out of, a file
// created as root), an argument that did not parse, and a glob are data:
// sourcing the drop-in yields exactly them and runs nothing.
func TestGrubDropInQuotesArgs(t *testing.T) {
	for _, args := range [][]string{
		{"intel_iommu=on;", "do", ":;", "done;", "touch", "pwned;", "for", "x", "in", "y"},
		{"nvidia.NVreg_RegistryDwords=A=1;B=0"},
		{"$(touch pwned)", "`touch pwned`", "a|touch pwned", "a&&touch pwned", ">pwned", "<x"},
		{"*", "/*", "[a]", "?", "~", "~root", "#comment", "it's", `back\slash`, `"quoted"`},
	} {
		if got, want := grubLines(t, "quiet", args), wantLine("quiet", args); got != want {
			t.Errorf("args %q: GRUB_CMDLINE_LINUX=%q, want %q", args, got, want)
		}
	}
}

// TestGrubDropInLegalArgs: arguments the rule accepts that the shell would
// have expanded or read as syntax unquoted (a lone ~ is $HOME, reserved
// words) are carried as they are, and the drop-in passes shellcheck.
func TestGrubDropInLegalArgs(t *testing.T) {
	args := []string{"~", "~root", "done", "do", "esac", "memmap=100M!4G", "memmap=1G#2G", "crashkernel=1G-4G:192M,4G-:256M",
		"console=ttyS0,115200n8", "vfio-pci.ids=10de:2330,10de:22a3", "a=b=c", "%x", "@y", "--", "-n", "isolcpus=1-3,5", "x~y"}
	for _, a := range args {
		if err := recipes.CheckKernelArg(a); err != nil {
			t.Fatalf("the rule refuses %q, which the drop-in can carry: %v", a, err)
		}
	}
	if got, want := grubLines(t, "", args), strings.Join(args, " "); got != want {
		t.Errorf("GRUB_CMDLINE_LINUX=%q, want %q", got, want)
	}
	dropIn := filepath.Join(t.TempDir(), "99-imagectl.cfg")
	if err := os.WriteFile(dropIn, []byte(GrubDropInContent(args)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(requireShellcheck(t), "-s", "sh", "-e", "SC2034", dropIn).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// TestCompileRefusesKernelArgs: a recipe image built by hand (not decoded)
// with an argument GRUB's linux line cannot carry does not compile.
func TestCompileRefusesKernelArgs(t *testing.T) {
	img := &recipes.Image{Name: "x", Kernel: recipes.Kernel{Args: []string{"iommu=pt", "nvidia.NVreg_RegistryDwords=A=1;B=0"}}}
	_, err := Image(img)
	if err == nil || !strings.Contains(err.Error(), "NVreg_RegistryDwords") {
		t.Fatalf("compiling a kernel arg with ';': %v", err)
	}
}

// FuzzGrubDropIn: whatever the kernel-argument rule accepts, sourced from
// /etc/default/grub's double-quoted GRUB_CMDLINE_LINUX (as the build writes
// it) and then through the drop-in, yields exactly those arguments and
// runs nothing else. The input is the arguments of /etc/default/grub and
// those of the recipe, one per line.
func FuzzGrubDropIn(f *testing.F) {
	f.Add("quiet", "intel_iommu=on\niommu=pt")
	f.Add("", "~\n~root\ndone\n#x\nmemmap=1G!2G\nmemmap=1G#2G")
	f.Add("console=tty1 iommu=pt", "iommu=pt\n--\n-n\n%x\n@y")
	f.Add("", "intel_iommu=on;\ndo\n:;\ndone;\ntouch\n/x;")
	f.Add("a", "nvidia.NVreg_RegistryDwords=A=1;B=0\n*\n$HOME\n`id`")
	f.Fuzz(func(t *testing.T, before, list string) {
		accepted := func(s string) []string {
			var out []string
			for _, a := range strings.Split(s, "\n") {
				if recipes.CheckKernelArg(a) == nil {
					out = append(out, a)
				}
			}
			return out
		}
		pre := strings.Join(accepted(strings.ReplaceAll(before, " ", "\n")), " ")
		args := accepted(list)
		if len(args) == 0 {
			return
		}
		if got, want := grubLines(t, pre, args), wantLine(pre, args); got != want {
			t.Errorf("before %q, args %q: GRUB_CMDLINE_LINUX=%q, want %q", pre, args, got, want)
		}
	})
}
