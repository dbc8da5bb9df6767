package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// uploadFixture starts a simulated MAAS and writes a sites file for it and
// a built artifact (random tgz bytes and their manifest).
func uploadFixture(t *testing.T) (sim *maassim.Server, sites, tgz string, env []string) {
	t.Helper()
	// No sync lag: the client's real 2 s poll would slow the tests.
	sim = maassim.New(maassim.Options{CompleteAfterGets: -1})
	t.Cleanup(sim.Close)
	dir := t.TempDir()
	sites = filepath.Join(dir, "sites.hcl")
	src := fmt.Sprintf("site \"sim\" {\n  maas_url    = %q\n  api_key_env = \"SIM_MAAS_KEY\"\n}\n\nsite \"lab\" {\n  maas_url     = \"http://lab.invalid/MAAS\"\n  api_key_file = \"lab.key\"\n}\n", sim.URL)
	if err := os.WriteFile(sites, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tgz = storetest.Random(t, dir, 9<<20+5) // three chunks
	return sim, sites, tgz, []string{"SIM_MAAS_KEY=" + sim.AdminKey}
}

func secret(key string) string { return strings.SplitN(key, ":", 3)[2] }

func TestUploadCommand(t *testing.T) {
	sim, sites, tgz, env := uploadFixture(t)
	out, errs, code := imagectl(t, env, "upload", tgz, "--site", "sim", "--sites", sites, "--base-image", "ubuntu/noble", "--insecure-skip-verify")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "uploaded "+tgz+" to site sim as demo-1-2-0") || !strings.Contains(out, "distro_series: custom/demo-1-2-0") ||
		!strings.Contains(out, `"Demo 1.2.0"`) {
		t.Errorf("stdout:\n%s", out)
	}
	for _, phase := range []string{"verify", "lookup", "create", "upload", "complete"} {
		if !strings.Contains(errs, "ok   "+phase) {
			t.Errorf("stderr lacks phase %s:\n%s", phase, errs)
		}
	}
	if n := sim.Count(maassim.OpChunk) + sim.Count(maassim.OpLastChunk); n != 3 {
		t.Errorf("%d chunks, want 3 of 4 MiB", n)
	}
	if strings.Contains(out+errs, secret(sim.AdminKey)) {
		t.Error("the API key was printed")
	}
	// Again: MAAS holds it, nothing is sent.
	out, errs, code = imagectl(t, env, "upload", tgz, "--site", "sim", "--sites", sites, "--base-image", "ubuntu/noble", "--insecure-skip-verify")
	if code != 0 || !strings.Contains(out, "already held") || sim.Count(maassim.OpCreate) != 1 {
		t.Errorf("second upload: exit %d, creates %d\n%s%s", code, sim.Count(maassim.OpCreate), out, errs)
	}
}

func TestUploadCommandJSON(t *testing.T) {
	sim, sites, tgz, env := uploadFixture(t)
	env = append(env, "IMAGECTL_SITES="+sites)
	out, errs, code := imagectl(t, env, "upload", tgz, "--site", "sim", "--base-image", "ubuntu/noble", "--output", "json", "--insecure-skip-verify")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	progress := 0
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if e["type"] == "progress" && e["phase"] == "upload" {
			progress++
		}
	}
	var res struct {
		Type, Name   string
		DistroSeries string `json:"distro_series"`
		Skipped      bool
		Size         int64
	}
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &res)
	if res.Type != "result" || res.DistroSeries != "custom/demo-1-2-0" || res.Size != 9<<20+5 || res.Skipped || progress != 3 {
		t.Errorf("result %+v, %d upload progress events\n%s", res, progress, out)
	}
	if strings.Contains(out+errs, secret(sim.AdminKey)) {
		t.Error("the API key was printed")
	}
}

func TestUploadCommandRefuses(t *testing.T) {
	sim, sites, tgz, env := uploadFixture(t)
	clear := filepath.Join(t.TempDir(), "clear.hcl")
	os.WriteFile(clear, []byte("site \"sim\" {\n  maas_url = \"http://x/MAAS\"\n  api_key  = \""+sim.AdminKey+"\"\n}\n"), 0o644)
	for _, tc := range []struct {
		name  string
		setup func()
		args  []string
		env   []string
		want  string
	}{
		{name: "key in clear", args: []string{"--sites", clear}, want: clear + ":3:3: error: API key written in clear"},
		{name: "unknown site", args: []string{"--sites", sites, "--site", "simm"}, want: `no site "simm" in the sites file (sites: lab, sim). Did you mean "sim"?`},
		{name: "no key", args: []string{"--sites", sites}, env: []string{}, want: "SIM_MAAS_KEY (its api_key_env) is not set"},
		{name: "no verify key", args: []string{"--sites", sites}, want: "no key to verify the artifact's signatures with: give --key cosign.pub, set $IMAGECTL_VERIFY_KEY, or set verify_key in site sim's block of the sites file (--insecure-skip-verify sends it unverified)"},
		{name: "unsigned", args: []string{"--sites", sites, "--key", "-"}, want: "is not signed"},
		{name: "no sites file", args: []string{"--sites", "/nonexistent/sites.hcl"}, want: "Cannot read sites file"},
		{name: "tampered", setup: func() {
			// Flip a byte: a fixed one matched the random content one run in 256.
			f, _ := os.OpenFile(tgz, os.O_RDWR, 0)
			b := []byte{0}
			f.ReadAt(b, 4<<20)
			f.WriteAt([]byte{b[0] ^ 0xff}, 4<<20)
			f.Close()
		}, args: []string{"--sites", sites}, want: "its manifest says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			args := append([]string{"upload", tgz, "--site", "sim", "--base-image", "ubuntu/noble"}, tc.args...)
			switch {
			case tc.name == "no verify key":
			case len(args) > 0 && args[len(args)-1] == "-":
				_, pub := storetest.Keys(t, t.TempDir())
				args[len(args)-1] = pub
			default:
				args = append(args, "--insecure-skip-verify")
			}
			e := env
			if tc.env != nil {
				e = tc.env
			}
			out, errs, code := imagectl(t, e, args...)
			if code == 0 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, errs, tc.want)
			}
			if strings.Contains(out+errs, secret(sim.AdminKey)) {
				t.Errorf("the API key was printed:\n%s", errs)
			}
			if n := sim.Count(maassim.OpCreate) + sim.Count(maassim.OpList); n != 0 {
				t.Errorf("%d requests reached MAAS", n)
			}
		})
	}
}

// A signed artifact goes with the key from --key, $IMAGECTL_VERIFY_KEY or
// the site's verify_key; another key is refused before a byte is sent.
func TestUploadCommandVerifies(t *testing.T) {
	sim, sites, _, env := uploadFixture(t)
	dir := t.TempDir()
	signer, pub := storetest.Keys(t, dir)
	tgz, _ := storetest.Artifact(t, dir, "demo", "2.0.0", storetest.Options{Signer: signer})
	_, otherPub := storetest.Keys(t, t.TempDir())
	_, errs, code := imagectl(t, env, "upload", tgz, "--site", "sim", "--sites", sites, "--key", otherPub)
	if code == 0 || !strings.Contains(errs, "did not verify") || sim.Count(maassim.OpList) != 0 {
		t.Fatalf("other key: exit %d, %d lists\n%s", code, sim.Count(maassim.OpList), errs)
	}
	_, errs, code = imagectl(t, env, "upload", tgz, "--site", "sim", "--sites", sites, "--key", pub, "--insecure-skip-verify")
	if code == 0 || !strings.Contains(errs, "contradict") {
		t.Errorf("--key with --insecure-skip-verify: exit %d\n%s", code, errs)
	}
	// The base image comes from the manifest's maas section.
	out, errs, code := imagectl(t, append(env, "IMAGECTL_VERIFY_KEY="+pub), "upload", tgz, "--site", "sim", "--sites", sites)
	if code != 0 || !strings.Contains(out, "distro_series: custom/demo-2-0-0") {
		t.Fatalf("IMAGECTL_VERIFY_KEY: exit %d\n%s%s", code, out, errs)
	}
	// verify_key in the sites file, relative to it.
	src, _ := os.ReadFile(sites)
	withKey := filepath.Join(dir, "sites.hcl")
	os.WriteFile(withKey, []byte(strings.Replace(string(src), `api_key_env = "SIM_MAAS_KEY"`, `api_key_env = "SIM_MAAS_KEY"`+"\n  verify_key = \"cosign.pub\"", 1)), 0o644)
	out, errs, code = imagectl(t, env, "upload", tgz, "--site", "sim", "--sites", withKey, "--output", "json")
	if code != 0 || !strings.Contains(out, `"verified":true`) || !strings.Contains(out, `"skipped":true`) {
		t.Fatalf("verify_key: exit %d\n%s%s", code, out, errs)
	}
}
