//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuaas/imagectl/internal/hclkit"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// The tests of this file feed imagectl what a careless or hostile user
// could: input that used to crash it (a stack overflow is no panic: no
// recover catches it, the process dies), hang it past Ctrl-C, or flood the
// terminal. Those that could take a process down run imagectl as a process
// of its own.

// startImagectl starts imagectl (this test binary, see TestMain) in the
// repository root with args and extra environment.
func startImagectl(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, stdout, stderr *output) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), "IMAGECTL_TEST_MAIN=1"), env...)
	stdout, stderr = &output{}, &output{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, stdout, stderr
}

// output is what a child process prints, safe to read while it prints.
type output struct{ testenv.Buffer }

// waitFor waits at most limit for the output to hold s.
func (o *output) waitFor(t *testing.T, s string, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); !strings.Contains(o.String(), s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q after %s; the output:\n%s", s, limit, o)
		}
	}
}

// waitExit waits at most limit for imagectl to end and returns its exit
// status (-1 when a signal killed it).
func waitExit(t *testing.T, cmd *exec.Cmd, stderr *output, limit time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("imagectl %s was still running after %s; stderr:\n%s", strings.Join(cmd.Args[1:], " "), limit, stderr)
	}
	return cmd.ProcessState.ExitCode()
}

// runImagectl runs imagectl as a process and returns what it printed and
// its exit status.
func runImagectl(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd, stdout, stderr := startImagectl(t, env, args...)
	code := waitExit(t, cmd, stderr, time.Minute)
	return stdout.String(), stderr.String(), code
}

// checkPrintable fails when out holds a control character other than
// newline and tab, a C1 control or invalid UTF-8: input must not reach the
// terminal as it is.
func checkPrintable(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not valid UTF-8", what)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			t.Errorf("%s holds control character %U at byte %d: %q", what, r, i, out[max(0, i-40):min(len(out), i+40)])
			return
		}
	}
}

const hostileRecipe = `variable "extra" {
  type    = list(list(string))
  default = []
}

image "hostile" {
  title = "Hostile"
  base {
    source   = "base.qcow2"
    checksum = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
  }
  layer "tools" {
    source = "layer.hcl"
  }
}
`

// hostileTree writes hostileRecipe, its layer file and the given files
// into a temporary directory and returns it.
func hostileTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{"recipe.hcl": hostileRecipe, "layer.hcl": "packages = [\"curl\"]\n"}
	for name, content := range files {
		all[name] = content
	}
	for name, content := range all {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHostileInputFailsCleanly: nesting that used to overflow hclsyntax's
// stack (60,000 brackets: fatal error, exit 2, a 30 KB goroutine dump), by
// every way bytes reach a parser, input over the size limit, and random
// bytes (3,606 errors in 1.6 MB, raw escape sequences included) each end
// in a short report and exit status 1.
func TestHostileInputFailsCleanly(t *testing.T) {
	deep := strings.Repeat("[", 60000) + strings.Repeat("]", 60000)
	garbage := make([]byte, 100<<10)
	rand.New(rand.NewSource(1)).Read(garbage)
	for _, tc := range []struct {
		name  string
		files map[string]string
		args  []string
		env   []string
		want  []string
	}{
		{name: "deep recipe", files: map[string]string{"recipe.hcl": "image \"x\" {\n  title = " + deep + "\n}\n"},
			args: []string{"validate", "recipe.hcl"}, want: []string{"recipe.hcl:2:", "Nested too deeply", "256 levels"}},
		{name: "deep recipe, build", files: map[string]string{"recipe.hcl": "image \"x\" {\n  title = " + deep + "\n}\n"},
			args: []string{"build", "recipe.hcl", "--dry-run"}, want: []string{"Nested too deeply"}},
		{name: "deep layer file", files: map[string]string{"layer.hcl": "packages = " + deep + "\n"},
			args: []string{"validate", "recipe.hcl"}, want: []string{"layer.hcl:1:", "Nested too deeply"}},
		{name: "deep var file", files: map[string]string{"vars.hcl": "extra = " + deep + "\n"},
			args: []string{"validate", "recipe.hcl", "-var-file", "vars.hcl"}, want: []string{"vars.hcl:1:", "Nested too deeply"}},
		{name: "deep -var", args: []string{"validate", "recipe.hcl", "-var", "extra=" + deep},
			want: []string{`The value for "extra" from -var`, "is nested more than 256 levels deep"}},
		{name: "deep environment", args: []string{"validate", "recipe.hcl"}, env: []string{"IMAGECTL_VAR_extra=" + deep},
			want: []string{"from env IMAGECTL_VAR_extra", "is nested more than 256 levels deep"}},
		{name: "recipe too large", files: map[string]string{"recipe.hcl": hostileRecipe + "# " + strings.Repeat("x", hclkit.MaxInputSize) + "\n"},
			args: []string{"validate", "recipe.hcl"}, want: []string{"Cannot read recipe", "larger than 1048576 bytes"}},
		{name: "random bytes", files: map[string]string{"recipe.hcl": string(garbage)},
			args: []string{"validate", "recipe.hcl"}, want: []string{"more errors not shown (imagectl shows 50)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := hostileTree(t, tc.files)
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				if strings.HasSuffix(a, ".hcl") {
					args[i] = filepath.Join(dir, a)
				}
			}
			stdout, stderr, code := runImagectl(t, tc.env, args...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%.3000s", want, stderr)
				}
			}
			if strings.Contains(stderr, "goroutine ") || len(stdout)+len(stderr) > 32<<10 {
				t.Errorf("printed %d bytes:\n%.3000s", len(stdout)+len(stderr), stderr)
			}
			if n := len(regexp.MustCompile(`(?m)^\S+: error: `).FindAllString(stderr, -1)); n > hclkit.MaxDiagnostics {
				t.Errorf("printed %d diagnostics, more than %d", n, hclkit.MaxDiagnostics)
			}
			checkPrintable(t, "stderr", stderr)
			checkPrintable(t, "stdout", stdout)
		})
	}
}

// TestValidateHelpStatesLimits: the input limits are documented where
// users look, with the values the code enforces.
func TestValidateHelpStatesLimits(t *testing.T) {
	out, _, code := imagectl(t, nil, "validate", "--help")
	for _, want := range []string{fmt.Sprintf("most %d bytes (1 MiB)", hclkit.MaxInputSize), fmt.Sprintf("nested at most %d levels deep", hclkit.MaxNesting),
		fmt.Sprintf("prints the first %d diagnostics", hclkit.MaxDiagnostics), "exit status 130"} {
		if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("validate --help lacks %q:\n%s", want, out)
		}
	}
}

// TestRandomBytesJSON: --output json shows MaxDiagnostics diagnostics and
// one that counts the rest, with the input's control characters escaped in
// the decoded strings too.
func TestRandomBytesJSON(t *testing.T) {
	garbage := make([]byte, 100<<10)
	rand.New(rand.NewSource(2)).Read(garbage)
	dir := hostileTree(t, map[string]string{"recipe.hcl": string(garbage)})
	stdout, _, code := imagectl(t, nil, "validate", filepath.Join(dir, "recipe.hcl"), "--output", "json")
	if code != 1 {
		t.Errorf("exit status %d", code)
	}
	var res struct {
		Diagnostics []hclkit.JSONDiagnostic
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	n := len(res.Diagnostics)
	if n != hclkit.MaxDiagnostics+1 || res.Diagnostics[n-1].Summary != "Too many diagnostics" || !strings.Contains(res.Diagnostics[n-1].Detail, "more errors") {
		t.Fatalf("%d diagnostics, the last %+v", n, res.Diagnostics[n-1])
	}
	checkPrintable(t, "the JSON", stdout)
	for _, d := range res.Diagnostics {
		checkPrintable(t, "a decoded summary", d.Summary)
		checkPrintable(t, "a decoded detail", d.Detail)
	}
}

// TestInterruptStopsLoading: a recipe, var file or layer file that is a
// FIFO nobody writes blocked imagectl, and SIGINT and SIGTERM were ignored
// while a recipe loaded: only SIGKILL stopped it. Now the signal ends it
// at once, with status 130 and a message.
func TestInterruptStopsLoading(t *testing.T) {
	for _, tc := range []struct {
		name string
		fifo string
		args []string
		sig  syscall.Signal
	}{
		{"recipe", "recipe.hcl", []string{"validate", "recipe.hcl"}, syscall.SIGINT},
		{"var file", "vars.hcl", []string{"validate", "recipe.hcl", "-var-file", "vars.hcl"}, syscall.SIGTERM},
		{"layer file", "layer.hcl", []string{"build", "recipe.hcl", "--dry-run"}, syscall.SIGINT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := hostileTree(t, nil)
			fifo := filepath.Join(dir, tc.fifo)
			if err := os.Remove(fifo); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			testenv.Mkfifo(t, fifo)
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				if strings.HasSuffix(a, ".hcl") {
					args[i] = filepath.Join(dir, a)
				}
			}
			cmd, _, stderr := startImagectl(t, nil, args...)
			testenv.WaitForReader(t, fifo)
			start := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, cmd, stderr, 10*time.Second)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s to stop", took)
			}
			name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[tc.sig]
			if code != exitInterrupted || !strings.Contains(stderr.String(), "imagectl: loading recipe ") || !strings.Contains(stderr.String(), "interrupted by "+name) {
				t.Errorf("exit status %d, stderr:\n%s", code, stderr)
			}
		})
	}
}

// TestSecondSignalExitsAtOnce: imagectl fmt reads its files without
// looking at the context, so a FIFO keeps it past the first SIGINT; the
// second ends it, whatever it is doing.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "x.hcl")
	testenv.Mkfifo(t, fifo)
	cmd, _, stderr := startImagectl(t, nil, "fmt", fifo)
	testenv.WaitForReader(t, fifo)
	// The second only once the first was taken: two signals sent close
	// together may reach the process as one.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	stderr.waitFor(t, "SIGINT: stopping (send it again", 10*time.Second)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd, stderr, 10*time.Second)
	if code != exitInterrupted || !strings.Contains(stderr.String(), "SIGINT again: exiting at once with status 130") {
		t.Errorf("exit status %d, stderr:\n%s", code, stderr)
	}
}

// TestInterruptContext checks the signal handling main installs, in this
// process: the first signal cancels the context with the signal as its
// cause, the second exits with 130.
func TestInterruptContext(t *testing.T) {
	var stderr bytes.Buffer
	exited := make(chan int, 1)
	ctx, stop := interruptContext(&stderr, func(code int) { exited <- code })
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGTERM did not cancel the context")
	}
	var ie interruptError
	if cause := context.Cause(ctx); !errors.As(cause, &ie) || cause.Error() != "interrupted by SIGTERM" {
		t.Errorf("cause %v", cause)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit status %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not exit")
	}
	if want := "imagectl: SIGTERM: stopping (send it again to exit at once)\nimagectl: SIGINT again: exiting at once with status 130, without cleaning up\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
