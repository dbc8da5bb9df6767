//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/signing/signingtest"
)

// The limits every file input of every command is held to: given
// /dev/zero, a FIFO nobody writes or a 2 GB sparse file in place of any
// one input, imagectl ends with a clear error within inputDeadline and
// inputMemory. Before, /dev/zero as a key or manifest took all the memory
// there was (23 GB, then the OOM killer), a FIFO hung until a second
// signal, and a large file was read whole.
const (
	inputDeadline = 10 * time.Second
	inputMemory   = 512 << 20
)

// inputsFixture writes a directory holding, valid, every file the commands
// read: a recipe, its layer file and a var file; a signed artifact (tgz,
// manifest, .sig, .sigstore.json) and its key pair; a sites file whose
// site reads its API key from a file and whose deploy profile reads its
// token from a file; a directory store holding the artifact and a site's
// catalog; a smoke timeline.
func inputsFixture(t *testing.T) string {
	t.Helper()
	dir := hostileTree(t, map[string]string{"vars.hcl": "extra = []\n"})
	key, _ := keyPair(t, dir)
	tgz, _ := signingtest.Artifact(t, dir, "demo-0.1.0")
	if _, errs, code := imagectl(t, pwEnv, "sign", tgz, "--key", key); code != 0 {
		t.Fatalf("sign: %s", errs)
	}
	files := map[string]string{
		"sites.hcl": `site "lab" {
  maas_url     = "http://127.0.0.1:1/MAAS"
  api_key_file = "lab.key"

  deploy_profile {
    api_url    = "http://127.0.0.1:1"
    site_id    = "site-7"
    profile_id = "p"
    token_file = "admin.token"
    image      = "demo"
  }
}
`,
		"lab.key":                "aaaaaaaaaaaaaaaaaa:bbbbbbbbbbbbbbbbbb:cccccccccccccccccccccccccccccccc\n",
		"admin.token":            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMifQ.c2ln\n",
		"timeline.json":          `{"schema_version": 1, "image": "demo", "version": "0.1.0", "milestones": []}` + "\n",
		"demo-0.1.0-validate.sh": "#!/bin/sh\nexit 0\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store := filepath.Join(dir, "store")
	if _, errs, code := imagectl(t, nil, "publish", tgz, "--store", store); code != 0 {
		t.Fatalf("publish: %s", errs)
	}
	if err := os.MkdirAll(filepath.Join(store, ".sites"), 0o755); err != nil {
		t.Fatal(err)
	}
	catalog := `{"schema_version": 1, "site": "lab", "images": {}}` + "\n"
	if err := os.WriteFile(filepath.Join(store, ".sites", "lab.json"), []byte(catalog), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hostileKinds replace the file at p with what the kind is.
var hostileKinds = []struct {
	name string
	make func(p string) error
	// want is in the error when the input is refused for what it is.
	want []string
}{
	{"dev-zero", func(p string) error { return os.Symlink("/dev/zero", p) }, []string{"not a regular file (a character device)"}},
	{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, []string{"not a regular file (a FIFO)", "a FIFO not written in time"}},
	{"sparse-2GB", func(p string) error {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Truncate(2 << 30)
	}, nil},
}

// inputCase is one input of one command: target (relative to the
// fixture's directory) is replaced by each hostile kind in turn.
type inputCase struct {
	name   string
	target string
	args   func(dir string) []string
	env    []string
	// sparse is in the output for the sparse file, which is a regular
	// file: refused by its size, or read and found not to be what it
	// should be.
	sparse []string
}

func inputCases() []inputCase {
	p := filepath.Join
	tgz := func(d string) string { return p(d, "demo-0.1.0.tgz") }
	sites := func(d string) []string {
		return []string{"--site", "lab", "--sites", p(d, "sites.hcl"), "--store", p(d, "store")}
	}
	upload := func(d string, more ...string) []string {
		return append(append([]string{"upload", tgz(d), "--base-image", "ubuntu/noble"}, more...), sites(d)...)
	}
	tooLarge := []string{"file larger than its limit", "larger than"}
	return []inputCase{
		{name: "validate recipe", target: "recipe.hcl", args: func(d string) []string { return []string{"validate", p(d, "recipe.hcl")} }, sparse: tooLarge},
		{name: "validate -var-file", target: "vars.hcl", args: func(d string) []string {
			return []string{"validate", p(d, "recipe.hcl"), "-var-file", p(d, "vars.hcl")}
		}, sparse: tooLarge},
		{name: "validate layer file", target: "layer.hcl", args: func(d string) []string { return []string{"validate", p(d, "recipe.hcl")} }, sparse: tooLarge},
		{name: "build --dry-run recipe", target: "recipe.hcl", args: func(d string) []string { return []string{"build", p(d, "recipe.hcl"), "--dry-run"} }, sparse: tooLarge},
		{name: "build --sign-key", target: "k.key", env: pwEnv, args: func(d string) []string {
			return []string{"build", p(d, "recipe.hcl"), "--sign-key", p(d, "k.key"), "--output-dir", p(d, "out")}
		}, sparse: tooLarge},
		{name: "fmt", target: "recipe.hcl", args: func(d string) []string { return []string{"fmt", "--check", p(d, "recipe.hcl")} }, sparse: tooLarge},
		{name: "validate-script recipe", target: "recipe.hcl", args: func(d string) []string { return []string{"validate-script", p(d, "recipe.hcl")} }, sparse: tooLarge},
		{name: "validate-script manifest", target: "demo-0.1.0.manifest.json", args: func(d string) []string {
			return []string{"validate-script", p(d, "demo-0.1.0.manifest.json")}
		}, sparse: tooLarge},
		{name: "diff first manifest", target: "demo-0.1.0.manifest.json", args: func(d string) []string {
			return []string{"diff", p(d, "demo-0.1.0.manifest.json"), "testdata/manifests/demo-0.1.0.json"}
		}, sparse: tooLarge},
		{name: "diff second manifest", target: "demo-0.1.0.manifest.json", args: func(d string) []string {
			return []string{"diff", "testdata/manifests/demo-0.1.0.json", p(d, "demo-0.1.0.manifest.json")}
		}, sparse: tooLarge},
		{name: "diff SBOM", target: "x.spdx.json", args: func(d string) []string {
			return []string{"diff", "sbom/testdata/syft-debian.spdx.json", p(d, "x.spdx.json")}
		}, sparse: tooLarge},
		{name: "check tgz", target: "demo-0.1.0.tgz", args: func(d string) []string { return []string{"check", tgz(d)} }, sparse: []string{"is not gzip"}},
		{name: "check --manifest", target: "m.json", args: func(d string) []string { return []string{"check", tgz(d), "--manifest", p(d, "m.json")} }, sparse: tooLarge},
		{name: "check manifest beside", target: "demo-0.1.0.manifest.json", args: func(d string) []string { return []string{"check", tgz(d)} }, sparse: tooLarge},
		{name: "sign --key", target: "k.key", env: pwEnv, args: func(d string) []string { return []string{"sign", tgz(d), "--key", p(d, "k.key")} }, sparse: tooLarge},
		{name: "sign tgz", target: "demo-0.1.0.tgz", env: pwEnv, args: func(d string) []string { return []string{"sign", tgz(d), "--key", p(d, "k.key")} },
			sparse: []string{"refusing to sign"}},
		{name: "sign --manifest", target: "m.json", env: pwEnv, args: func(d string) []string {
			return []string{"sign", tgz(d), "--key", p(d, "k.key"), "--manifest", p(d, "m.json")}
		}, sparse: tooLarge},
		{name: "verify --key", target: "k.pub", args: func(d string) []string { return []string{"verify", tgz(d), "--key", p(d, "k.pub")} }, sparse: tooLarge},
		{name: "verify tgz", target: "demo-0.1.0.tgz", args: func(d string) []string { return []string{"verify", tgz(d), "--key", p(d, "k.pub")} },
			sparse: []string{"does not match"}},
		{name: "verify .sig", target: "demo-0.1.0.tgz.sig", args: func(d string) []string { return []string{"verify", tgz(d), "--key", p(d, "k.pub")} },
			sparse: []string{"larger than 1048576 bytes: not a signature"}},
		{name: "verify bundle", target: "demo-0.1.0.tgz.sigstore.json", args: func(d string) []string { return []string{"verify", tgz(d), "--key", p(d, "k.pub")} },
			sparse: []string{"larger than 1048576 bytes: not a signature"}},
		{name: "verify manifest", target: "demo-0.1.0.manifest.json", args: func(d string) []string { return []string{"verify", tgz(d), "--key", p(d, "k.pub")} },
			sparse: tooLarge},
		{name: "upload --sites", target: "sites.hcl", args: func(d string) []string {
			return upload(d, "--insecure-skip-verify")
		}, sparse: tooLarge},
		{name: "upload api_key_file", target: "lab.key", args: func(d string) []string {
			return upload(d, "--insecure-skip-verify")
		}, sparse: tooLarge},
		{name: "upload tgz", target: "demo-0.1.0.tgz", args: func(d string) []string {
			return upload(d, "--insecure-skip-verify")
		}, sparse: []string{"its manifest says"}},
		{name: "upload --manifest", target: "m.json", args: func(d string) []string {
			return upload(d, "--insecure-skip-verify", "--manifest", p(d, "m.json"))
		}, sparse: tooLarge},
		{name: "upload --key", target: "k.pub", args: func(d string) []string {
			return upload(d, "--key", p(d, "k.pub"))
		}, sparse: tooLarge},
		{name: "status --sites", target: "sites.hcl", args: func(d string) []string { return append([]string{"status"}, sites(d)...) }, sparse: tooLarge},
		{name: "status api_key_file", target: "lab.key", args: func(d string) []string { return append([]string{"status"}, sites(d)...) }, sparse: tooLarge},
		{name: "publish tgz", target: "demo-0.1.0.tgz", args: func(d string) []string { return []string{"publish", tgz(d), "--store", p(d, "store2")} },
			sparse: []string{"manifest"}},
		{name: "publish --manifest", target: "m.json", args: func(d string) []string {
			return []string{"publish", tgz(d), "--store", p(d, "store2"), "--manifest", p(d, "m.json")}
		}, sparse: tooLarge},
		{name: "publish validation script", target: "demo-0.1.0-validate.sh", args: func(d string) []string {
			return []string{"publish", tgz(d), "--store", p(d, "store2")}
		}, sparse: []string{"more than the 256 MiB a version's validation-script may have"}},
		{name: "publish --sign-key", target: "k.key", env: pwEnv, args: func(d string) []string {
			return []string{"publish", tgz(d), "--store", "oci://127.0.0.1:1/x", "--sign-key", p(d, "k.key")}
		}, sparse: tooLarge},
		{name: "images --registry-ca", target: "ca.pem", args: func(d string) []string {
			return []string{"images", "--store", "oci://127.0.0.1:1/x", "--registry-ca", p(d, "ca.pem")}
		}, sparse: tooLarge},
		{name: "show version.json", target: "store/imagectl-demo/0.1.0/version.json", args: func(d string) []string {
			return []string{"show", "imagectl-demo", "0.1.0", "--store", p(d, "store")}
		}, sparse: tooLarge},
		{name: "history catalog", target: "store/.sites/lab.json", args: func(d string) []string {
			return []string{"history", "imagectl-demo", "--site", "lab", "--store", p(d, "store")}
		}, sparse: tooLarge},
		{name: "smoke --baseline", target: "timeline.json", args: func(d string) []string { return []string{"smoke", tgz(d), "--baseline", p(d, "timeline.json")} },
			sparse: tooLarge},
	}
}

// inputRun is what one run of imagectl did.
type inputRun struct {
	args     []string
	out      string
	code     int
	took     time.Duration
	maxRSS   int64 // bytes
	hung     bool
	setupErr error
}

// runLimited runs imagectl (this test binary, see TestMain) as a process
// of its own, in a process group of its own, and kills the group past
// inputDeadline (with a margin, so that a run just past it is reported
// as such).
func runLimited(env []string, args []string) inputRun {
	r := inputRun{args: args}
	exe, err := os.Executable()
	if err != nil {
		r.setupErr = err
		return r
	}
	peak, err := os.CreateTemp("", "imagectl-peak-*")
	if err != nil {
		r.setupErr = err
		return r
	}
	peak.Close()
	defer os.Remove(peak.Name())
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), "IMAGECTL_TEST_MAIN=1", "IMAGECTL_TEST_PEAK="+peak.Name()), env...)
	var out output
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		r.setupErr = err
		return r
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(inputDeadline + 5*time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		r.hung = true
	}
	r.took = time.Since(start)
	r.out = out.String()
	if cmd.ProcessState == nil {
		r.setupErr = errors.New("no exit status")
		return r
	}
	r.code = cmd.ProcessState.ExitCode()
	if r.hung {
		return r
	}
	// imagectl's own peak, as it wrote it (see TestMain): rusage's would
	// count the memory this test process had at the fork.
	b, err := os.ReadFile(peak.Name())
	kib, perr := strconv.ParseInt(string(b), 10, 64)
	if err != nil || perr != nil {
		r.setupErr = fmt.Errorf("imagectl %s wrote no peak memory (%q: %v %v); its output:\n%.2000s", strings.Join(args, " "), b, err, perr, r.out)
		return r
	}
	r.maxRSS = kib << 10
	return r
}

// TestEveryInputBounded runs every command that reads a file with each of
// its inputs in turn replaced by /dev/zero (a symlink to it), a FIFO that
// nobody writes and a 2 GB sparse file: each must end within 10 s, using
// at most 512 MiB, with an error that names the input and says what is
// wrong with it, and no Go runtime dump.
func TestEveryInputBounded(t *testing.T) {
	base := inputsFixture(t)
	type result struct {
		c    inputCase
		kind int
		path string
		run  inputRun
	}
	cases := inputCases()
	results := make([]result, 0, len(cases)*len(hostileKinds))
	for _, c := range cases {
		for k := range hostileKinds {
			results = append(results, result{c: c, kind: k})
		}
	}
	dirs := make([]string, len(results))
	for i := range results {
		r := &results[i]
		dirs[i] = t.TempDir()
		copyTree(t, base, dirs[i])
		r.path = filepath.Join(dirs[i], r.c.target)
		if err := os.Remove(r.path); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := hostileKinds[r.kind].make(r.path); err != nil {
			t.Fatalf("making %s: %v", r.path, err)
		}
	}
	// Most runs end at once or wait (a FIFO given as an HCL file, 5 s):
	// several run together. Those given the sparse file may hash its
	// 2 GB (verify, sign): one at a time, so that they do not share the
	// CPU with each other.
	waiting, hashing := make(chan struct{}, 8), make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i := range results {
		r := &results[i]
		sem := waiting
		if hostileKinds[r.kind].want == nil {
			sem = hashing
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r.run = runLimited(r.c.env, r.c.args(dirs[i]))
		}()
	}
	wg.Wait()
	for _, r := range results {
		kind := hostileKinds[r.kind]
		t.Run(r.c.name+"/"+kind.name, func(t *testing.T) {
			run := r.run
			if run.setupErr != nil {
				t.Fatal(run.setupErr)
			}
			show := fmt.Sprintf("imagectl %s\nexit %d after %s, max RSS %d MiB; output:\n%.3000s", strings.Join(run.args, " "), run.code, run.took.Round(time.Millisecond), run.maxRSS>>20, run.out)
			switch {
			case run.hung:
				t.Fatalf("still running after %s: %s", inputDeadline+5*time.Second, show)
			case run.took > inputDeadline:
				t.Errorf("took more than %s: %s", inputDeadline, show)
			}
			if run.code == 0 || run.code == exitInterrupted || run.code < 0 {
				t.Errorf("not a clean failure: %s", show)
			}
			if run.maxRSS > inputMemory {
				t.Errorf("used more than %d MiB: %s", inputMemory>>20, show)
			}
			if !strings.Contains(run.out, filepath.Base(r.path)) {
				t.Errorf("the output does not name %s: %s", filepath.Base(r.path), show)
			}
			want := kind.want
			if want == nil {
				want = r.c.sparse
			}
			found := false
			for _, w := range want {
				found = found || strings.Contains(run.out, w)
			}
			if !found {
				t.Errorf("the output says none of %q: %s", want, show)
			}
			if strings.Contains(run.out, "goroutine ") || strings.Contains(run.out, "panic:") {
				t.Errorf("a Go runtime dump: %s", show)
			}
			checkPrintable(t, "the output", run.out)
			if testing.Verbose() {
				t.Log(show)
			}
		})
	}
}

// TestIssueProbes: the probes of the issue as they were written, with
// /dev/zero itself named: each used to exhaust memory.
func TestIssueProbes(t *testing.T) {
	dir := inputsFixture(t)
	tgz := filepath.Join(dir, "demo-0.1.0.tgz")
	for _, args := range [][]string{
		{"sign", tgz, "--key", "/dev/zero"},
		{"verify", tgz, "--key", "/dev/zero"},
		{"diff", "/dev/zero", "/dev/zero"},
	} {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			run := runLimited(pwEnv, args)
			if run.hung || run.took > inputDeadline || run.code == 0 || run.maxRSS > inputMemory ||
				!strings.Contains(run.out, "/dev/zero: not a regular file (a character device)") {
				t.Errorf("imagectl %s: exit %d after %s, max RSS %d MiB:\n%s", strings.Join(args, " "), run.code, run.took, run.maxRSS>>20, run.out)
			}
		})
	}
}
