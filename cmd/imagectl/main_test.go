package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// imagectl runs the CLI in-process from the repository root.
// h200 names the shipped H200 recipe as an operator does, with the
// site-bootstrap bundles (here the test ones) and the --root that allows them.
func h200(args ...string) []string {
	bundles, err := filepath.Abs("testdata/bundles")
	if err != nil {
		panic(err)
	}
	return append([]string{args[0], "recipes/h200.hcl", "--root", bundles, "-var", "site_bootstrap_dir=" + bundles}, args[1:]...)
}

func imagectl(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, streams{in: strings.NewReader(""), out: &out, err: &errb}, env)
	return out.String(), errb.String(), code
}

// TestMain runs the tests from the repository root. With
// IMAGECTL_TEST_MAIN=1 the test binary is imagectl itself (main, signals
// and exit status included): the tests that need a real process start it
// so (see startImagectl).
//
// With IMAGECTL_TEST_PEAK=FILE too, it writes its peak memory (VmHWM, in
// KiB) to FILE as it exits: the peak of its own memory since it started,
// which rusage's does not give (Linux counts in a child's peak the memory
// its parent had when it forked, hundreds of MiB for a test binary).
func TestMain(m *testing.M) {
	if os.Getenv("IMAGECTL_TEST_MAIN") == "1" {
		peak := os.Getenv("IMAGECTL_TEST_PEAK")
		if peak == "" {
			main()
			return
		}
		ctx, stop := interruptContext(os.Stderr, os.Exit)
		code := run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Environ())
		stop()
		if err := writePeak(peak); err != nil {
			fmt.Fprintf(os.Stderr, "imagectl test: %v\n", err)
			code = 3
		}
		os.Exit(code)
	}
	if err := os.Chdir("../.."); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

func TestBuildDryRun(t *testing.T) {
	out, errs, code := imagectl(t, nil, h200("build", "--dry-run", "-var", "version=2.0.0")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	testenv.Holds(t, "the plan", out,
		"Plan for image gpuaas-h200-host-ubuntu2404 2.0.0",
		"sha256:834af9cd766d1fd86eca156db7dff34c3713fbbc7f5507a3269be2a72d2d1820",
		"intel_iommu=on iommu=pt",
		"gpuaas-h200-host-ubuntu2404-2.0.0.tgz",
		"custom/gpuaas-h200-host-ubuntu2404-2-0-0",
		"/usr/local/share/gpuaas/site-bootstrap/h200-ib/")
}

func TestBuildDryRunJSON(t *testing.T) {
	env := []string{"IMAGECTL_VAR_enable_doca_repos=1"}
	out, errs, code := imagectl(t, env, h200("build", "--dry-run", "--output", "json", "--version", "3.1.0")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var plan struct {
		Image  struct{ Version string }
		Layers []struct {
			Name    string
			Enabled bool
			Steps   []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if plan.Image.Version != "3.1.0" {
		t.Errorf("version %q", plan.Image.Version)
	}
	found := false
	for _, l := range plan.Layers {
		if l.Name == "doca" {
			found = l.Enabled && len(l.Steps) > 0 && l.Steps[0]["kind"] == "apt-repository"
		}
	}
	if !found {
		t.Error("IMAGECTL_VAR_enable_doca_repos=1 did not enable the doca layer with its repository")
	}
	// Every key is snake_case (validation checks had Name and Command),
	// but those of maps that hold data (bootstrap_env).
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z0-9_]+$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if !snake.MatchString(k) {
					t.Errorf("key %s/%s is not snake_case", path, k)
				}
				if !strings.HasSuffix(k, "_env") {
					walk(path+"/"+k, e)
				}
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("", doc)
	if !strings.Contains(out, `"name": "docker-compose"`) {
		t.Error("the plan lacks the docker-compose check")
	}
}

// TestVariableValueMessages: values from -var and the environment that
// are not what the variable takes say what it takes.
func TestVariableValueMessages(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{nil, []string{"-var", "size=80"}, 1, `"80" has no unit, which would make it 80 bytes: write a unit, such as "80G"`},
		{nil, []string{"-var", "size=80g"}, 0, "valid (image"},
		{nil, []string{"-var", "size=80GiB"}, 0, "valid (image"},
		{[]string{"IMAGECTL_VAR_netdata_retention_mb=abc"}, nil, 1,
			`The value for "netdata_retention_mb" from env IMAGECTL_VAR_netdata_retention_mb is not a valid number: "abc" is not a number (such as 512 or 1.5).`},
		{nil, []string{"-var", "enable_doca_repos=maybe"}, 1, `"maybe" is not true or false (accepted, in any case: true, false, 1, 0, yes, no, on, off)`},
	} {
		out, errs, code := imagectl(t, tc.env, h200(append([]string{"validate"}, tc.args...)...)...)
		if code != tc.code || !strings.Contains(out+errs, tc.want) || strings.Contains(errs, "not allowed") {
			t.Errorf("%v %v: exit %d, want %d and %q:\n%s%s", tc.env, tc.args, code, tc.code, tc.want, out, errs)
		}
	}
}

// TestValidateLayerFile: validating a layer file printed an error per
// layer attribute; now it says what the file is.
func TestValidateLayerFile(t *testing.T) {
	_, errs, code := imagectl(t, nil, "validate", "layers/docker.hcl")
	if code != 1 || !strings.Contains(errs, "layers/docker.hcl:3:1: error: This is a layer file") ||
		!strings.Contains(errs, "Layer files are validated through the recipe that uses them") || !strings.HasSuffix(errs, "1 error, 0 warnings\n") {
		t.Errorf("exit %d:\n%s", code, errs)
	}
}

// brokenCopy copies the H200 recipe and its layer files into a temporary
// tree and breaks the recipe in three places.
func brokenCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"recipes", "layers"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob("layers/*.hcl")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile("recipes/h200.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"h200-ib", "h200-slice-vm"} {
		if err := os.CopyFS(filepath.Join(dir, "recipes/site-bootstrap", b), os.DirFS("testdata/bundles/"+b)); err != nil {
			t.Fatal(err)
		}
	}
	s := string(src)
	for old, repl := range map[string]string{
		`variable "site_bootstrap_dir" {`: `variable "site_bootstrap_dir" {` + "\n  default = \"site-bootstrap\"",
		`size     = var.size`:             `size     = "80 gigs"`,
		`update_every = 5`:                `update_evry = 5`,
		`"nvidia_smi", "docker"`:          `"nvidia-smi", "docker"`,
		`source = "../layers/rdma.hcl"`:   `source = "../layers/rdma2.hcl"`,
	} {
		if !strings.Contains(s, old) {
			t.Fatalf("recipe no longer contains %q", old)
		}
		s = strings.Replace(s, old, repl, 1)
	}
	path := filepath.Join(dir, "recipes/h200.hcl")
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBrokenRecipeReportsEveryError(t *testing.T) {
	path := brokenCopy(t)
	for _, cmd := range [][]string{{"validate", path}, {"build", path, "--dry-run"}} {
		out, errs, code := imagectl(t, nil, cmd...)
		if code != 1 {
			t.Errorf("%v: exit %d", cmd, code)
		}
		if out != "" {
			t.Errorf("%v: printed a plan or result despite errors: %s", cmd, out)
		}
		testenv.Holds(t, fmt.Sprintf("%v: stderr", cmd), errs, path+":", "Invalid size", `Did you mean "update_every"?`, `Did you mean "nvidia_smi"?`,
			"Missing layer file", "4 errors, 0 warnings")
	}
}

func TestBrokenRecipeJSON(t *testing.T) {
	path := brokenCopy(t)
	out, _, code := imagectl(t, nil, "validate", path, "-output=json")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	var res struct {
		Valid       bool
		Diagnostics []struct {
			Severity, Summary string
			Range             *struct {
				Filename  string
				StartLine int `json:"start_line"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if res.Valid || len(res.Diagnostics) != 4 {
		t.Fatalf("got %+v", res)
	}
	for _, d := range res.Diagnostics {
		if d.Range == nil || d.Range.StartLine == 0 || d.Range.Filename != path {
			t.Errorf("diagnostic %q has no usable range", d.Summary)
		}
	}
}

func TestValidate(t *testing.T) {
	out, errs, code := imagectl(t, nil, h200("validate")...)
	if code != 0 || !strings.Contains(out, "valid (image gpuaas-h200-host-ubuntu2404") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
}

func TestFmt(t *testing.T) {
	_, errs, code := imagectl(t, nil, "fmt", "-check", "recipes", "layers", "examples", "testdata/recipes/valid")
	if code != 0 {
		t.Errorf("shipped files are not formatted: exit %d %s", code, errs)
	}
	dir := t.TempDir()
	ugly := filepath.Join(dir, "ugly.hcl")
	if err := os.WriteFile(ugly, []byte("image \"x\" {\ntitle=\"x\"\n  base {\n source = \"b\"\n}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := imagectl(t, nil, "fmt", "--check", dir)
	if code != 1 || !strings.Contains(out, "ugly.hcl") {
		t.Errorf("--check: exit %d, %q", code, out)
	}
	if _, _, code := imagectl(t, nil, "fmt", ugly); code != 0 {
		t.Errorf("fmt: exit %d", code)
	}
	b, _ := os.ReadFile(ugly)
	if !strings.Contains(string(b), "  title = \"x\"") {
		t.Errorf("not formatted:\n%s", b)
	}
	if st, _ := os.Stat(ugly); st.Mode().Perm() != 0o600 {
		t.Errorf("fmt changed the mode to %v", st.Mode())
	}
	broken := filepath.Join(dir, "broken.hcl")
	if err := os.WriteFile(broken, []byte("image {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code = imagectl(t, nil, "fmt", broken)
	if code != 1 || !strings.Contains(errs, "broken.hcl:") {
		t.Errorf("broken file: exit %d, %q", code, errs)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	out, _, code := imagectl(t, nil, "version", "--output", "json")
	var v map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["version"] == "" {
		t.Errorf("version: exit %d %q", code, out)
	}
	out, _, code = imagectl(t, nil, "completion", "bash")
	if code != 0 || !strings.Contains(out, "imagectl") {
		t.Errorf("completion: exit %d", code)
	}
}

func TestHelpShowsExamples(t *testing.T) {
	for _, cmd := range []string{"build", "validate", "fmt", "diff", "validate-script", "check", "version"} {
		out, _, code := imagectl(t, nil, cmd, "--help")
		if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "imagectl "+cmd) {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, out)
		}
	}
}

func TestDiff(t *testing.T) {
	a, b := "testdata/manifests/demo-0.1.0.json", "testdata/manifests/demo-0.1.1.json"
	out, _, code := imagectl(t, nil, "diff", a, b)
	if code != 1 || !strings.Contains(out, "+ hugepages 2.24-1") || !strings.Contains(out, "↑ jq") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if _, _, code := imagectl(t, nil, "diff", a, a); code != 0 {
		t.Errorf("equal manifests: exit %d", code)
	}
	out, _, code = imagectl(t, nil, "diff", a, b, "--output", "markdown")
	if code != 1 || !strings.HasPrefix(out, "## imagectl-demo 0.1.0 → 0.1.1") {
		t.Errorf("markdown: exit %d\n%s", code, out)
	}
	_, errs, code := imagectl(t, nil, "diff", a, "testdata/manifests/nope.json")
	if code != 2 || !strings.Contains(errs, "nope.json") {
		t.Errorf("missing manifest: exit %d %q", code, errs)
	}
}

func TestValidateScript(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{h200("validate-script"), {"validate-script", "testdata/manifests/demo-0.1.0.json"}} {
		src := args[1]
		out := filepath.Join(dir, filepath.Base(src)+".sh")
		if _, errs, code := imagectl(t, nil, append(args, "--out", out)...); code != 0 {
			t.Fatalf("%s: exit %d %s", src, code, errs)
		}
		st, err := os.Stat(out)
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %v %v", out, err, st)
		}
		b, _ := os.ReadFile(out)
		testenv.Holds(t, src, string(b), "check_marker", "check_package", "check_kernel_arg 'iommu=pt'", "check_file")
	}
}

// writePeak writes this process's VmHWM (its resident memory's peak, in
// KiB) to path.
func writePeak(path string) error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return os.WriteFile(path, []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))), 0o600)
		}
	}
	return errors.New("no VmHWM in /proc/self/status")
}
