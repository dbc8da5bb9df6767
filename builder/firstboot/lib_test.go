package firstboot

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// libShell runs sh/lib.sh's functions, then body, in dir, and returns the
// output and the exit status.
func libShell(t *testing.T, dir, body string) (string, int) {
	t.Helper()
	script := "set -eu\nPREFIX=" + Prefix + "\nSTATE_DIR=" + filepath.Join(dir, "state") + "\nSTEPS=1\nmkdir -p \"$STATE_DIR/done\"\n" +
		lib + "\n" + body
	// update-grub, where a test calls it, counts its calls.
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "update-grub"), []byte("#!/bin/sh\necho x >>"+filepath.Join(dir, "update-grub.calls")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestKernelArgs: the shell edit of /etc/default/grub does what the build's
// does (builder/apply's addKernelArgs): the args missing from the last
// GRUB_CMDLINE_LINUX assignment are appended, the variable added when
// there is none, nothing duplicated on a rerun; update-grub runs and a
// reboot is said to be needed.
func TestKernelArgs(t *testing.T) {
	for _, tc := range []struct{ before, want string }{
		{"", `GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt"` + "\n"},
		{"GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"quiet iommu=pt\"\n", "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"quiet iommu=pt intel_iommu=on\"\n"},
		{"GRUB_CMDLINE_LINUX=\"a\"\n#x\nGRUB_CMDLINE_LINUX='b'\n", "GRUB_CMDLINE_LINUX=\"a\"\n#x\nGRUB_CMDLINE_LINUX=\"b intel_iommu=on iommu=pt\"\n"},
		{"GRUB_CMDLINE_LINUX=\n", "GRUB_CMDLINE_LINUX=\"intel_iommu=on iommu=pt\"\n"},
	} {
		dir := t.TempDir()
		grub := filepath.Join(dir, "grub")
		if tc.before != "" {
			if err := os.WriteFile(grub, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, code := libShell(t, dir, "GRUB_DEFAULT_FILE="+grub+"\nkernel_args intel_iommu=on iommu=pt\nkernel_args intel_iommu=on iommu=pt\necho \"calls=$(wc -l <update-grub.calls) reboot=$REBOOT\"\n")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		got, _ := os.ReadFile(grub)
		if string(got) != tc.want {
			t.Errorf("%q: got %q, want %q", tc.before, got, tc.want)
		}
		if !strings.Contains(out, "calls=2 reboot=yes") || !strings.Contains(out, "take effect after a reboot") {
			t.Errorf("%q: %s", tc.before, out)
		}
	}
}

// TestPutFile: a file appears whole with its mode; content that is not
// what the plan hashed fails the step and leaves nothing behind.
func TestPutFile(t *testing.T) {
	testenv.Root(t, "chown files to root")
	dir := t.TempDir()
	p := filepath.Join(dir, "sub dir", "it's")
	out, code := libShell(t, dir, "put_file '"+strings.ReplaceAll(p, "'", `'\''`)+"' 0640 root:root "+sha([]byte("a\nb"))+" text 'a\nb'\n")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if b, _ := os.ReadFile(p); string(b) != "a\nb" {
		t.Errorf("content %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	out, code = libShell(t, dir, "put_file "+filepath.Join(dir, "x")+" 0644 root:root "+sha([]byte("other"))+" base64 YQ==\n")
	if code != 1 || !strings.Contains(out, "its content has sha256 "+sha([]byte("a"))+", the plan's is "+sha([]byte("other"))) {
		t.Errorf("exit %d: %s", code, out)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "sub dir" && e.Name() != "state" && e.Name() != "bin" {
			t.Errorf("left %s behind", e.Name())
		}
	}
}

// TestPutKey: an armored key fetched by URL is dearmored in shell into
// the binary keyring the build writes (the Go dearmor's bytes), checked
// against a pinned sha256, and refused when it differs.
func TestPutKey(t *testing.T) {
	testenv.Root(t, "chown files to root")
	testenv.Tool(t, "curl", "apt-get install curl")
	// A real armored key, and the same with an armor header and CRLF line ends.
	arm, err := os.ReadFile("../../testdata/recipes/valid/keys/test-repo.asc")
	if err != nil {
		t.Fatal(err)
	}
	want, err := dearmor(arm)
	if err != nil || len(want) == 0 || want[0]&0x80 == 0 {
		t.Fatalf("Go's dearmor: %v", err)
	}
	dir := t.TempDir()
	src, crlf := filepath.Join(dir, "key.asc"), filepath.Join(dir, "crlf.asc")
	if err := os.WriteFile(src, arm, 0o644); err != nil {
		t.Fatal(err)
	}
	withHeader := strings.Replace(string(arm), "BLOCK-----\n", "BLOCK-----\nComment: an armor header\n", 1)
	if err := os.WriteFile(crlf, []byte(strings.ReplaceAll(withHeader, "\n", "\r\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(dir, "keyrings", "k.gpg")
	for i, pin := range []string{"", sha(want), sha(want)} {
		if i == 2 {
			src = crlf
		}
		os.Remove(keyring)
		out, code := libShell(t, dir, "put_key file://"+src+" "+keyring+" '"+pin+"'\n")
		if code != 0 {
			t.Fatalf("pin %q: exit %d: %s", pin, code, out)
		}
		if got, _ := os.ReadFile(keyring); !bytes.Equal(got, want) {
			t.Errorf("pin %q: the keyring differs from the build's", pin)
		}
		if (pin == "") != strings.Contains(out, "not pinned") {
			t.Errorf("pin %q: %s", pin, out)
		}
	}
	out, code := libShell(t, dir, "put_key file://"+src+" "+keyring+" "+sha([]byte("x"))+"\n")
	if code != 1 || !strings.Contains(out, "the build's was "+sha([]byte("x"))) {
		t.Errorf("a wrong pin: exit %d: %s", code, out)
	}
}

var resultRE = regexp.MustCompile(`(?m)^` + Prefix + ` result (.*)$`)

// TestScriptStopsAndReruns runs a whole generated script as root (its
// files under a temporary directory): it stops at the first failing step
// with a failed result line naming the step, leaves the later steps
// undone, and a rerun skips the steps done before and finishes, writing the
// milestones, the done marker and the ok result line.
func TestScriptStopsAndReruns(t *testing.T) {
	testenv.Root(t, "run a first-boot script")
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	count, gate := filepath.Join(dir, "count"), filepath.Join(dir, "gate")
	list := []steps.Step{
		file(filepath.Join(dir, "a"), "a\n"),
		steps.Run{Command: "echo x >>" + count},
		steps.Run{Command: "test -e " + gate},
		file(filepath.Join(dir, "b"), "b\n"),
	}
	script, err := Script(context.Background(), layerOf(list...), sampleManifest(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	shellcheck(t, script)
	p := filepath.Join(dir, "firstboot.sh")
	if err := os.WriteFile(p, script, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() (string, int) {
		cmd := exec.Command("/bin/sh", p)
		cmd.Env = append(os.Environ(), StateDirEnv+"="+state)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := run()
	res := resultRE.FindStringSubmatch(out)
	if code == 0 || res == nil || !strings.HasPrefix(res[1], "status=failed steps=4 ran=2 already_done=0 not_at_first_boot=0 failed_step=3 download_bytes=0 ") {
		t.Fatalf("first run: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); err == nil {
		t.Error("the step after the failing one ran")
	}
	if !strings.Contains(out, "step=1/4 time=") || !strings.Contains(out, "start l: write "+filepath.Join(dir, "a")) {
		t.Errorf("no step log line with a time and the summary:\n%s", out)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run()
	res = resultRE.FindStringSubmatch(out)
	if code != 0 || res == nil || !strings.HasPrefix(res[1], "status=ok steps=4 ran=2 already_done=2 not_at_first_boot=0 download_bytes=0 archive_bytes=0 index_bytes=0 missing_optional=- reboot_required=no seconds=") {
		t.Fatalf("rerun: exit %d:\n%s", code, out)
	}
	if b, _ := os.ReadFile(count); string(b) != "x\n" {
		t.Errorf("the step done before ran again: %q", b)
	}
	for _, want := range []string{"time " + MilestoneStart + "=", "time " + MilestoneDone + "=", "already-done l: run: echo x"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(state, DoneMarker)); err != nil {
		t.Error(err)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "result")); string(b) != "result "+res[1]+"\n" {
		t.Errorf("state's result %q, the line %q", b, res[1])
	}
}
