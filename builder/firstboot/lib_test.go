package firstboot

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
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
		out, code := libShell(t, dir, "GRUB_DEFAULT_FILE="+grub+"\nkernel_args intel_iommu=on iommu=pt\nkernel_args intel_iommu=on iommu=pt\necho \"calls=$(wc -l <update-grub.calls) reboot=$(reboot_required)\"\n")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		got, _ := os.ReadFile(grub)
		if string(got) != tc.want {
			t.Errorf("%q: got %q, want %q", tc.before, got, tc.want)
		}
		if !strings.Contains(out, "calls=2 reboot=yes") || !strings.Contains(out, "takes effect after a reboot: kernel args intel_iommu=on iommu=pt") {
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
// the binary keyring the build writes (steps.Keyring's bytes), checked
// against a pinned sha256, and refused when it differs.
func TestPutKey(t *testing.T) {
	testenv.Root(t, "chown files to root")
	testenv.Tool(t, "curl", "apt-get install curl")
	// A real armored key, and the same with an armor header and CRLF line ends.
	arm, err := os.ReadFile("../../testdata/recipes/valid/keys/test-repo.asc")
	if err != nil {
		t.Fatal(err)
	}
	want, err := steps.Keyring(arm)
	if err != nil || len(want) == 0 || want[0]&0x80 == 0 {
		t.Fatalf("steps.Keyring: %v", err)
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
		out, code := libShell(t, dir, "put_key r file://"+src+" "+keyring+" '"+pin+"'\n")
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
	out, code := libShell(t, dir, "put_key r file://"+src+" "+keyring+" "+sha([]byte("x"))+"\n")
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
	script, err := scriptBytes(Script(context.Background(), layerOf(list...), sampleManifest(), Options{}))
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

// TestBundleEntriesStayInside: a bundle's entries are never staged through
// a symlink below its destination (one the host has, or one an earlier
// entry made), a symlink never replaces a real directory (nor deletes what
// it holds), a directory entry never chmods through a link, and an
// existing destination keeps its mode.
func TestBundleEntriesStayInside(t *testing.T) {
	testenv.Root(t, "chown files to root")
	dir := t.TempDir()
	dest, victim := filepath.Join(dir, "dest"), filepath.Join(dir, "victim")
	for _, d := range []string{filepath.Join(victim, "keep"), dest} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(victim, "keep", "x"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dest, 0o750); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	for _, tc := range []struct{ name, body, want string }{
		{"the destination kept", "bundle_dest " + q(dest) + "\necho staged\n", "staged"},
		{"a link made, then a file through it", "bundle_dest " + q(dest) + "\nin_bundle " + q(dest) + " a\nput_link " + q(dest+"/a") + " " + q(victim) +
			"\nin_bundle " + q(dest) + " a/pwned\nput_file " + q(dest+"/a/pwned") + " 0644 root:root " + sha([]byte("p")) + " text p\n", "on the way to the bundle's entry a/pwned, is not a directory"},
		{"a deeper link", "in_bundle " + q(dest) + " a/b/c\n", "on the way to the bundle's entry a/b/c"},
		{"a link over a real directory", "put_link " + q(filepath.Join(victim, "keep")) + " x\n", "is a directory: a symlink does not replace it"},
		{"a directory through a link", "put_dir " + q(dest+"/a") + " 0777\n", "is a symlink, not a directory"},
	} {
		out, code := libShell(t, dir, tc.body)
		if !strings.Contains(out, tc.want) || (code == 0) != (tc.want == "staged") {
			t.Errorf("%s: exit %d: %s", tc.name, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(victim, "pwned")); err == nil {
		t.Error("a file was written through the bundle's symlink")
	}
	if b, err := os.ReadFile(filepath.Join(victim, "keep", "x")); err != nil || string(b) != "x" {
		t.Errorf("the real directory's content is gone: %v", err)
	}
	for p, mode := range map[string]os.FileMode{dest: 0o750, victim: 0o750} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want %v", p, err, fi.Mode(), mode)
		}
	}
}

// TestPutFileOverADirectory: a file whose path is a directory fails the
// step (the build fails there too), the directory and what it holds kept,
// no temporary file left; a chown that fails leaves no temporary file.
func TestPutFileOverADirectory(t *testing.T) {
	testenv.Root(t, "chown files to root")
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	if err := os.MkdirAll(filepath.Join(p, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := libShell(t, dir, "put_file "+p+" 0644 root:root "+sha([]byte("a"))+" text a\n")
	if code == 0 || !strings.Contains(out, p+" is a directory, not a file") {
		t.Errorf("exit %d: %s", code, out)
	}
	if entries, _ := os.ReadDir(p); len(entries) != 1 || entries[0].Name() != "inside" {
		t.Errorf("the directory changed: %v", entries)
	}
	out, code = libShell(t, dir, "put_file "+filepath.Join(dir, "y")+" 0644 no-such-user-imagectl:root "+sha([]byte("a"))+" text a\n")
	if code == 0 || !strings.Contains(out, "chown no-such-user-imagectl:root") {
		t.Errorf("exit %d: %s", code, out)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".imagectl") || e.Name() == "y" {
			t.Errorf("left %s behind", e.Name())
		}
	}
}

// TestRebootRequiredKept: a rerun in the same boot after the kernel-args
// step still says a reboot is required (the state directory keeps it); a
// failing update-grub is logged, not fatal, as in the build.
func TestRebootRequiredKept(t *testing.T) {
	dir := t.TempDir()
	grub, failing := filepath.Join(dir, "grub"), filepath.Join(dir, "failing")
	if err := os.MkdirAll(failing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(failing, "update-grub"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := libShell(t, dir, "PATH="+failing+":$PATH\nGRUB_DEFAULT_FILE="+grub+"\nkernel_args iommu=pt\n")
	if code != 0 || !strings.Contains(out, "WARN update-grub failed") {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, code = libShell(t, dir, "echo \"reboot=$(reboot_required)\"\n")
	if code != 0 || !strings.Contains(out, "reboot=yes") {
		t.Errorf("rerun: exit %d: %s", code, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "state", "reboot-required"), []byte("another-boot\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := libShell(t, dir, "echo \"reboot=$(reboot_required)\"\n"); !strings.Contains(out, "reboot=no") {
		t.Errorf("after a reboot: %s", out)
	}
}

// TestFetchBounded: a key download over 1 MiB (the build's bound) fails
// the step and leaves no download behind; the log names the repository,
// never the URL (it may carry a token).
func TestFetchBounded(t *testing.T) {
	testenv.Tool(t, "curl", "apt-get install curl")
	dir := t.TempDir()
	big := filepath.Join(dir, "token=s3cret")
	if err := os.WriteFile(big, bytes.Repeat([]byte{0x99}, 1<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := libShell(t, dir, "put_key repo-name file://"+big+" "+filepath.Join(dir, "k.gpg")+" ''\n")
	if code == 0 || !strings.Contains(out, "fetching the apt key of repository repo-name") || strings.Contains(out, "s3cret") {
		t.Errorf("exit %d: %s", code, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "state")); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestNoCandidate: an optional package is recorded as missing only when
// apt has no version of it to install (apt-cache policy, here on this
// host's own apt): one apt has, installed or in its archives, is not
// missing, and its failure to install fails the step.
func TestNoCandidate(t *testing.T) {
	testenv.Tool(t, "apt-cache", "a Debian or Ubuntu host")
	dir := t.TempDir()
	out, code := libShell(t, dir, "no_candidate no-such-package-imagectl && echo missing\nno_candidate apt || echo has-it\n")
	if code != 0 || !strings.Contains(out, "missing") || !strings.Contains(out, "has-it") {
		t.Errorf("exit %d: %s", code, out)
	}
}

// TestAptUpdateTranslations: apt_update runs apt-get update once, without
// the Translation indexes when APT_NO_TRANSLATIONS=yes (the script's
// clean-up removes apt's lists) and with them otherwise, counting what apt
// says it fetched; an unset APT_NO_TRANSLATIONS (lib.sh run without the
// generated header) keeps them.
func TestAptUpdateTranslations(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"APT_NO_TRANSLATIONS=yes", "-o DPkg::Lock::Timeout=600 -o Acquire::Languages=none update -q"},
		{"APT_NO_TRANSLATIONS=no", "-o DPkg::Lock::Timeout=600 update -q"},
		{"", "-o DPkg::Lock::Timeout=600 update -q"},
	} {
		t.Run(c.set, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			calls := filepath.Join(dir, "apt-get.calls")
			stub := "#!/bin/sh\necho \"$*\" >>" + calls + "\necho 'Fetched 1,234 B in 0s (10.0 kB/s)'\n"
			if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			out, code := libShell(t, dir, c.set+"\napt_update\napt_update\necho index=$INDEX_BYTES\n")
			b, _ := os.ReadFile(calls)
			if code != 0 || string(b) != c.want+"\n" || !strings.Contains(out, "index=1234") {
				t.Errorf("exit %d, apt-get called with %q (want %q once): %s", code, b, c.want, out)
			}
		})
	}
}

// TestServicesHeldWhilePackagesInstall: apt installs with a policy-rc.d
// that refuses every start (exit 101, as the build's) and lets a running
// service restart, removed after apt ends, failed or not, and when the
// script fails or is killed by a signal; a policy-rc.d the host has of its
// own is left as it is, one a killed run left is taken back. apt-get is a
// stand-in here that records what the policy said (the chroot test runs
// the real apt with it).
func TestServicesHeldWhilePackagesInstall(t *testing.T) {
	dir := t.TempDir()
	bin, policy, seen := filepath.Join(dir, "apt"), filepath.Join(dir, "policy-rc.d"), filepath.Join(dir, "seen")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The stand-in answers --print-uris with nothing; an install records
	// what the policy says of a start and of a restart, and exits as
	// $APT_EXIT says.
	apt := "#!/bin/sh\ncase \"$*\" in *--print-uris*) exit 0 ;; esac\n" +
		"if [ -x " + policy + " ]; then " + policy + " --quiet docker.service start; s=$?; " + policy + " docker.service restart; echo \"start=$s restart=$?\" >>" + seen +
		"; else echo none >>" + seen + "; fi\nexit ${APT_EXIT:-0}\n"
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(apt), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(body string) (string, int) {
		os.Remove(seen)
		return libShell(t, dir, "PATH="+bin+":$PATH\nPOLICY_RC="+policy+"\nIMAGE=i VERSION=v MILESTONE_START=s MILESTONE_DONE=d DONE_MARKER=m\n"+body)
	}
	saw := func() string {
		b, _ := os.ReadFile(seen)
		return strings.TrimSpace(string(b))
	}
	gone := func(when string) {
		t.Helper()
		if _, err := os.Lstat(policy); !os.IsNotExist(err) {
			t.Errorf("%s: the policy-rc.d is still there (%v)", when, err)
		}
	}
	const held = "start=101 restart=0"

	if out, code := run("apt_install - docker.io\n"); code != 0 || saw() != held {
		t.Fatalf("install: exit %d, the policy said %q: %s", code, saw(), out)
	}
	gone("after an install")
	if out, code := run("APT_EXIT=100; export APT_EXIT\napt_install - docker.io || echo failed\n"); code != 0 || saw() != held || !strings.Contains(out, "failed") {
		t.Fatalf("failed install: exit %d, the policy said %q: %s", code, saw(), out)
	}
	gone("after a failed install")
	// A run step is held too, and released.
	if out, code := run("run_command \"apt-get install docker.io\"\n"); code != 0 || saw() != held {
		t.Fatalf("run step: exit %d, the policy said %q: %s", code, saw(), out)
	}
	gone("after a run step")
	// A step that fails while services are held: finish releases them.
	if out, code := run("begin\nhold_services\nfail broken\n"); code == 0 {
		t.Fatalf("a failing step exited 0: %s", out)
	}
	gone("after a failed step")
	// So does a signal (sh runs no EXIT trap when a signal ends it). A
	// signal this process was started ignoring (nohup's HUP) stays
	// ignored in sh, which may not trap it: the script runs on, holding
	// nothing it does not release.
	for sig, num := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP} {
		if signal.Ignored(num) {
			t.Logf("SIG%s is ignored here: not sent", sig)
			continue
		}
		if out, code := run("begin\nhold_services\nkill -" + sig + " $$\nsleep 5\necho not-killed\n"); code == 0 || strings.Contains(out, "not-killed") {
			t.Fatalf("SIG%s: exit %d: %s", sig, code, out)
		}
		gone("after SIG" + sig)
	}

	// A run killed by KILL leaves its policy: the next run's begin takes
	// it away, and an install holds and releases as before.
	if out, code := run("hold_services\n"); code != 0 {
		t.Fatalf("hold: exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(policy); err != nil || !strings.Contains(string(b), "exit 101") {
		t.Fatalf("the killed run's policy-rc.d: %q %v", b, err)
	}
	if out, code := run("begin\ntrap - EXIT\n"); code != 0 {
		t.Fatalf("begin: exit %d: %s", code, out)
	}
	gone("after begin over a leftover policy")

	// The host's own policy stays, and is what apt sees.
	own := "#!/bin/sh\n# the site's own\nexit 0\n"
	if err := os.WriteFile(policy, []byte(own), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := run("begin\napt_install - docker.io\ntrap - EXIT\n"); code != 0 || saw() != "start=0 restart=0" {
		t.Fatalf("host's policy: exit %d, the policy said %q: %s", code, saw(), out)
	}
	if b, err := os.ReadFile(policy); err != nil || string(b) != own {
		t.Errorf("the host's policy-rc.d was changed: %q %v", b, err)
	}
}

// TestEndStartsWhatTheBootStarts: the script's end starts the default
// target without waiting (what the image's boot starts); a failure is a
// warning. systemctl is a stand-in that records its arguments.
func TestEndStartsWhatTheBootStarts(t *testing.T) {
	dir := t.TempDir()
	bin, calls := filepath.Join(dir, "systemd"), filepath.Join(dir, "calls")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$*\" >>"+calls+"\nexit ${SYSTEMCTL_EXIT:-0}\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "PATH=" + bin + ":$PATH\nIMAGE=i VERSION=v MILESTONE_START=s MILESTONE_DONE=d DONE_MARKER=m\nbegin\nend\n"
	out, code := libShell(t, dir, body)
	if b, _ := os.ReadFile(calls); code != 0 || strings.TrimSpace(string(b)) != "start --no-block default.target" {
		t.Fatalf("exit %d, systemctl %q: %s", code, b, out)
	}
	out, code = libShell(t, dir, "SYSTEMCTL_EXIT=1; export SYSTEMCTL_EXIT\n"+body)
	if code != 0 || !strings.Contains(out, "WARN starting default.target failed") || !strings.Contains(out, "result status=ok") {
		t.Fatalf("a failing start: exit %d: %s", code, out)
	}
}
