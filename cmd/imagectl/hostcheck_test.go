package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/hostcheck/sshdtest"
	"github.com/gpuaas/imagectl/internal/testenv"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/validate"
)

// hostcheckFixture is a directory store holding demo 1.0.0, whose
// validation script is a stand-in (sshdtest.ResultScript) at an absolute
// path its manifest names, which the "hosts" (this machine) run, promoted
// to site canary; a sites
// file with sites canary and lab. It returns the env naming them and the
// script's sha256.
func hostcheckFixture(t *testing.T) (env []string, sum string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "validate.sh")
	body := sshdtest.ResultScript("demo", "1.0.0", sshdtest.Hosts[1])
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	tgz, man := storetest.Artifact(t, t.TempDir(), "demo", "1.0.0", storetest.Options{})
	m, err := manifest.Read(man)
	if err != nil {
		t.Fatal(err)
	}
	m.Validation.Script = script
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(man, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest.FilesBeside(tgz).ValidationScript, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(dir, "store")
	st := store.NewDir(storeDir)
	if _, err := st.Publish(context.Background(), manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Record(context.Background(), "canary", store.Promotion{Image: "demo", Version: "1.0.0", By: "alice", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sitesFile := filepath.Join(dir, "sites.hcl")
	src := "site \"canary\" {\n  maas_url    = \"http://canary.invalid/MAAS\"\n  api_key_env = \"CANARY_KEY\"\n}\n\nsite \"lab\" {\n  maas_url    = \"http://lab.invalid/MAAS\"\n  api_key_env = \"LAB_KEY\"\n}\n"
	if err := os.WriteFile(sitesFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256([]byte(body))
	return []string{"IMAGECTL_STORE=" + storeDir, "IMAGECTL_SITES=" + sitesFile, "USER=alice"}, hex.EncodeToString(s[:])
}

// hostcheck against a passing, a failing and an unreachable host over the
// real OpenSSH client and server: the failing host's check is printed with
// its remediation, both results are recorded, the unreachable host is
// reported; evidence lists them.
func TestHostcheckCommand(t *testing.T) {
	srv := sshdtest.Start(t)
	env, _ := hostcheckFixture(t)
	args := []string{"hostcheck", sshdtest.Hosts[0], sshdtest.Hosts[1], sshdtest.Unreachable, "--site", "canary", "--stage", "converged", "--user", srv.User}
	for _, o := range srv.Options {
		args = append(args, "--ssh-option", o)
	}
	out, errs, code := imagectl(t, env, args...)
	for _, want := range []string{
		"127.0.0.1: PASS demo 1.0.0, bare-metal at stage converged, host host-127.0.0.1: 1 checks, 0 failed, 0 warnings (recorded)\n",
		"127.0.0.2: FAIL demo 1.0.0, bare-metal at stage converged, host host-127.0.0.2: 2 checks, 1 failed, 0 warnings (recorded)\n  FAIL service:netdata: inactive\n       fix: systemctl enable --now netdata\n",
		"127.0.0.3: NOT CHECKED: checking host 127.0.0.3: ssh could not run the script (exit status 255): ",
		"recorded 2 of 3 hosts' results at site canary (demo 1.0.0's script ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("hostcheck: exit %d, no %q in\n%s%s", code, want, out, errs)
		}
	}
	if code != 1 || !strings.Contains(errs, "hostcheck: 127.0.0.3: no result (") || !strings.Contains(errs, " of 3)\n") {
		t.Errorf("hostcheck exits %d, want 1, with progress on stderr:\n%s", code, errs)
	}

	out, errs, code = imagectl(t, env, "evidence", "demo", "1.0.0", "--site", "canary")
	for _, want := range []string{"site canary: 2 results for demo 1.0.0, 1 passed\n", "host-127.0.0.1  bare-metal  converged  PASS", "host-127.0.0.2  bare-metal  converged  FAIL (1)",
		"alice (hostcheck)", "    FAIL service:netdata: inactive\n         fix: systemctl enable --now netdata\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("evidence: exit %d, no %q in\n%s%s", code, want, out, errs)
		}
	}
	out, errs, code = imagectl(t, env, "evidence", "demo", "1.0.0", "-o", "json")
	var evs []release.SiteEvidence
	if err := json.Unmarshal([]byte(out), &evs); err != nil || code != 0 || len(evs) != 2 || evs[0].Site != "canary" || len(evs[0].Evidence) != 2 || evs[1].Site != "lab" || len(evs[1].Evidence) != 0 {
		t.Errorf("evidence json: exit %d %v %+v\n%s", code, err, evs, errs)
	}

	// A host that ssh would read as an option is refused before anything runs.
	_, errs, code = imagectl(t, env, "hostcheck", "--site", "canary", "--", "-oProxyCommand=touch /tmp/x")
	if code == 0 || !strings.Contains(errs, "starts with '-'") {
		t.Errorf("an option as host: exit %d\n%s", code, errs)
	}
}

// hostcheck's JSON: every host, whether it was recorded.
func TestHostcheckJSON(t *testing.T) {
	srv := sshdtest.Start(t)
	env, _ := hostcheckFixture(t)
	args := []string{"hostcheck", sshdtest.Hosts[0], "--site", "canary", "--user", srv.User, "-o", "json"}
	for _, o := range srv.Options {
		args = append(args, "--ssh-option", o)
	}
	out, errs, code := imagectl(t, env, args...)
	var res release.HostcheckResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Recorded != 1 || len(res.Hosts) != 1 || !res.Hosts[0].Recorded ||
		res.Hosts[0].Result.Stage != "image" || res.Target.Image != "demo" {
		t.Fatalf("hostcheck json: exit %d %v %+v\n%s%s", code, err, res, out, errs)
	}
}

// evidence add records what is whole and for a stored version run with
// its script, and refuses the rest, each saying why.
func TestEvidenceAdd(t *testing.T) {
	env, sum := hostcheckFixture(t)
	dir := t.TempDir()
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	doc := func(name, version, sha string) string {
		r := validate.Result{Schema: validate.ResultSchema, Image: "demo", Version: version, Profile: "slice", Stage: "converged", Host: name,
			Live: true, Started: at, Finished: at.Add(time.Minute), ScriptSHA256: sha,
			Checks: []validate.Check{{Status: validate.StatusPass, Name: "build-marker"}}, Counts: validate.Counts{Checks: 1}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := doc("node-01", "1.0.0", sum)
	unknown := doc("node-02", "2.0.0", sum)
	wrong := doc("node-03", "1.0.0", strings.Repeat("ab", 32))
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"schema": "imagectl.validate.result/v1", "image": `), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	testenv.Sparse(t, huge, validate.MaxResult+1)

	out, errs, code := imagectl(t, env, "evidence", "add", good, unknown, wrong, bad, huge, "--site", "canary")
	for _, want := range []string{
		"recorded PASS demo 1.0.0, slice at stage converged, host node-01: 1 checks, 0 failed, 0 warnings (at site canary)\n",
		"refused " + unknown + ": demo 2.0.0 is not a version of the store",
		"refused " + wrong + ": its script_sha256 " + strings.Repeat("ab", 32) + " is not the sha256 of demo 1.0.0's validation script (" + sum + "): the host ran another script\n",
		"refused " + bad + ": not a validation result: unexpected EOF\n",
		"refused " + huge + ": " + huge + ": file larger than its limit (4 MiB)\n",
		"recorded 1 of 5 results at site canary\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("evidence add: exit %d, no %q in\n%s%s", code, want, out, errs)
		}
	}
	if code != 1 {
		t.Errorf("evidence add exits %d, want 1", code)
	}

	// Standard input, and an unknown site.
	var stdout, stderr bytes.Buffer
	b, _ := os.ReadFile(good)
	code = run(context.Background(), []string{"evidence", "add", "-", "--site", "lab", "-o", "json"}, streams{in: bytes.NewReader(b), out: &stdout, err: &stderr}, env)
	var rec release.Recorded
	if err := json.Unmarshal(stdout.Bytes(), &rec); err != nil || code != 0 || len(rec.Recorded) != 1 || rec.Recorded[0].Via != release.ViaAdd || rec.Recorded[0].RecordedBy != "alice" {
		t.Errorf("evidence add -: exit %d %v %+v\n%s", code, err, rec, stderr.String())
	}
	_, errs, code = imagectl(t, env, "evidence", "add", good, "--site", "nowhere")
	if code == 0 || !strings.Contains(errs, "nowhere") {
		t.Errorf("an unknown site: exit %d\n%s", code, errs)
	}
	out, _, _ = imagectl(t, env, "evidence", "demo", "1.0.0")
	if !strings.Contains(out, "site canary: 1 results for demo 1.0.0, 1 passed") || !strings.Contains(out, "site lab: 1 results") || !strings.Contains(out, "alice (evidence add)") {
		t.Errorf("evidence after add:\n%s", out)
	}
}
