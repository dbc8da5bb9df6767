package apply

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/builder/steps"
	"github.com/gpuaas/imagectl/internal/testenv"
)

// TestBuildSettingsScripts runs the scripts that write and remove the
// build-time dpkg settings with sh on a directory here, as the guest's
// shell runs them on its dpkg.cfg.d: the file is written while the layer
// runs, and afterwards the directory holds what it held, with its
// modification time, unless something else changed it meanwhile.
func TestBuildSettingsScripts(t *testing.T) {
	sh := func(t *testing.T, script string) string {
		t.Helper()
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s\n%s", err, out, script)
		}
		return string(out)
	}
	setUp := func(t *testing.T) (dir string, mtime time.Time) {
		dir = filepath.Join(t.TempDir(), "dpkg.cfg.d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "excludes"), []byte("path-exclude=/usr/share/man/*\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mtime = time.Date(2023, 6, 10, 8, 0, 0, 123456789, time.UTC)
		if err := os.Chtimes(dir, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return dir, mtime
	}
	start := func(t *testing.T, dir string) buildSettings {
		t.Helper()
		f := strings.Fields(sh(t, startSettingsScript(dir)))
		if len(f) != 2 {
			t.Fatalf("start printed %q", f)
		}
		b, err := os.ReadFile(filepath.Join(dir, dpkgBuildFile))
		if err != nil || string(b) != dpkgBuildLines {
			t.Fatalf("the settings file holds %q (%v)", b, err)
		}
		return buildSettings{before: f[0], after: f[1]}
	}
	names := func(t *testing.T, dir string) string {
		t.Helper()
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		return strings.Join(n, " ")
	}
	mtimeOf := func(t *testing.T, dir string) time.Time {
		t.Helper()
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}

	t.Run("restored", func(t *testing.T) {
		dir, mtime := setUp(t)
		s := start(t, dir)
		sh(t, endSettingsScript(dir, s))
		if got := names(t, dir); got != "excludes" {
			t.Errorf("the directory holds %q after the layer", got)
		}
		if got := mtimeOf(t, dir); !got.Equal(mtime) {
			t.Errorf("the directory's time is %v, want %v as before", got, mtime)
		}
	})
	t.Run("changed-meanwhile", func(t *testing.T) {
		dir, mtime := setUp(t)
		s := start(t, dir)
		// A package's own file, written a moment later.
		later := time.Now().Add(time.Hour)
		if err := os.WriteFile(filepath.Join(dir, "pkg"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, later, later); err != nil {
			t.Fatal(err)
		}
		sh(t, endSettingsScript(dir, s))
		if got := names(t, dir); got != "excludes pkg" {
			t.Errorf("the directory holds %q after the layer", got)
		}
		if got := mtimeOf(t, dir); got.Equal(mtime) {
			t.Errorf("the directory's time went back to %v over a package's change", got)
		}
	})
	t.Run("no-directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "absent")
		if out := sh(t, startSettingsScript(dir)); out != "" {
			t.Errorf("start printed %q without the directory", out)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Error("start made the directory")
		}
	})
	t.Run("shellcheck", func(t *testing.T) {
		shellcheck := testenv.Tool(t, "shellcheck", "make deps installs it")
		for name, script := range map[string]string{"start": startSettingsScript(dpkgCfgDir),
			"end": endSettingsScript(dpkgCfgDir, buildSettings{before: "1686384000.123456789", after: "1700000000.000000001"})} {
			p := filepath.Join(t.TempDir(), name+".sh")
			if err := os.WriteFile(p, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(shellcheck, "-s", "sh", p).CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", name, err, out)
			}
		}
	})
}

// TestRunsDpkg: the settings are written for layers with packages steps
// or commands, not for those that only write files or set services.
func TestRunsDpkg(t *testing.T) {
	for _, c := range []struct {
		steps []steps.Step
		want  bool
	}{
		{nil, false},
		{[]steps.Step{steps.WriteFile{Path: "/etc/motd"}, steps.Services{}}, false},
		{[]steps.Step{steps.WriteFile{Path: "/etc/motd"}, steps.Packages{Packages: []string{"jq"}}}, true},
		{[]steps.Step{steps.Run{Command: "dpkg -i /tmp/x.deb"}}, true},
	} {
		if got := RunsDpkg(c.steps); got != c.want {
			t.Errorf("RunsDpkg(%v) = %v, want %v", c.steps, got, c.want)
		}
	}
}
