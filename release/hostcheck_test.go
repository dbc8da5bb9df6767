package release_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/hostcheck"
	"github.com/gpuaas/imagectl/hostcheck/sshdtest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/validate"
)

// Hostcheck over a real sshd: the results of both hosts reached are
// recorded in one AddEvidence call, the unreachable host is reported; a
// host that runs another script than the version's is checked but its
// result refused.
func TestHostcheck(t *testing.T) {
	srv := sshdtest.Start(t)
	body := sshdtest.ResultScript("demo", "1.0.0", sshdtest.Hosts[1])
	cs, o, script := hostcheckFixture(t, body)
	check := hostcheck.Options{User: srv.User, SSHOptions: srv.Options, Stage: "converged"}
	hosts := []string{sshdtest.Hosts[0], sshdtest.Hosts[1], sshdtest.Unreachable}

	res, err := release.Hostcheck(ctx, hosts, "demo", check, o)
	if err != nil {
		t.Fatal(err)
	}
	if cs.adds != 1 || res.Recorded != 2 || res.OK() || res.Target.Script != script || res.Target.Version != "1.0.0" {
		t.Fatalf("%d AddEvidence calls, %+v", cs.adds, res)
	}
	if h := res.Hosts; !h[0].Recorded || !h[0].Result.Passed() || !h[1].Recorded || h[1].Result.Passed() || h[2].Recorded || h[2].Error == "" {
		t.Errorf("hosts: %+v", h)
	}
	evs, err := cs.Evidence(ctx, "canary", "demo", "1.0.0")
	if err != nil || len(evs) != 2 || evs[0].Via != release.ViaHostcheck || evs[0].RecordedBy != "ci" {
		t.Fatalf("evidence: %v %+v", err, evs)
	}

	// The hosts run a script that is not the version's: checked, refused.
	if err := os.WriteFile(script, []byte(body+"# changed on the host\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err = release.Hostcheck(ctx, hosts[:1], "demo", check, o)
	if err != nil {
		t.Fatal(err)
	}
	if cs.adds != 1 || res.Recorded != 0 || res.Hosts[0].Recorded || !strings.Contains(res.Hosts[0].Refused, "the host ran another script") {
		t.Errorf("%d AddEvidence calls, %+v", cs.adds, res.Hosts)
	}
}

// hostcheckFixture is a directory store holding demo 1.0.0 whose
// validation script is body (at script, where the hosts run it).
func hostcheckFixture(t *testing.T, body string) (cs *countingStore, o release.Options, script string) {
	t.Helper()
	script = filepath.Join(t.TempDir(), "validate.sh")
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	tgz, man := storetest.Artifact(t, t.TempDir(), "demo", "1.0.0", storetest.Options{Script: body, ScriptPath: script})
	d := store.NewDir(t.TempDir())
	if _, err := d.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	cs = &countingStore{Store: d}
	return cs, release.Options{Store: cs, Site: &sites.Site{Name: "canary"}, By: "ci"}, script
}

// A store that cannot record: the hosts' results come back all the same,
// none recorded, each saying why, with the store's error.
func TestHostcheckStoreFails(t *testing.T) {
	srv := sshdtest.Start(t)
	cs, o, _ := hostcheckFixture(t, sshdtest.ResultScript("demo", "1.0.0", sshdtest.Hosts[1]))
	cs.fail = errors.New("the catalog's remote refused the push")
	check := hostcheck.Options{User: srv.User, SSHOptions: srv.Options, Stage: "converged"}
	res, err := release.Hostcheck(ctx, sshdtest.Hosts, "demo", check, o)
	if err == nil || !strings.Contains(err.Error(), "refused the push") {
		t.Fatalf("got %v, want the store's error", err)
	}
	if res == nil || len(res.Hosts) != 2 || res.Recorded != 0 || res.OK() {
		t.Fatalf("result: %+v", res)
	}
	for _, h := range res.Hosts {
		if h.Result == nil || h.Recorded || !strings.Contains(h.Refused, "refused the push") {
			t.Errorf("host %s: %+v", h.Host, h)
		}
	}
}

// Interrupted while a host still runs: the result of the host that
// finished is recorded anyway, and returned with the interruption.
func TestHostcheckInterrupted(t *testing.T) {
	srv := sshdtest.Start(t)
	hold := sshdtest.NewHold(t)
	cs, o, _ := hostcheckFixture(t, sshdtest.HoldingScript("demo", "1.0.0", sshdtest.Hosts[1], hold))
	r, err := sshdtest.Interrupt(t, hold, func(ctx context.Context, done func(string)) (*release.HostcheckResult, error) {
		check := hostcheck.Options{User: srv.User, SSHOptions: srv.Options, Stage: "converged", Parallel: 2,
			Done: func(r hostcheck.HostResult) { done(r.Host) }}
		return release.Hostcheck(ctx, sshdtest.Hosts, "demo", check, o)
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 of the 1 results of the hosts that finished were recorded") {
		t.Fatalf("got %v, want the interruption", err)
	}
	if r == nil || r.Recorded != 1 || !r.Hosts[0].Recorded || r.Hosts[1].Result != nil || r.Hosts[1].Error == "" {
		t.Fatalf("result: %+v", r)
	}
	evs, err := cs.Evidence(ctx, "canary", "demo", "1.0.0")
	if err != nil || len(evs) != 1 || evs[0].Result.Host != "host-"+sshdtest.Hosts[0] {
		t.Fatalf("evidence: %v %+v", err, evs)
	}
}

// The real validation script, generated from the version's manifest, run
// live over ssh with its build marker and state directory under a test
// directory (IMAGECTL_VALIDATE_ROOT): its document is read, its
// script_sha256 is the stored script's, and its result is recorded (this
// machine is no host of the image: checks fail, which is evidence too).
func TestHostcheckRealScript(t *testing.T) {
	srv := sshdtest.Start(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	tgz, man := storetest.Artifact(t, t.TempDir(), "demo", "1.0.0", storetest.Options{})
	m, err := manifest.Read(man)
	if err != nil {
		t.Fatal(err)
	}
	m.Validation.Script = filepath.Join(dir, "validate.sh")
	m.Validation.CollectorWaitSeconds = 1
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	script, err := validate.Script(m)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(root, m.Validation.Marker)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		b    []byte
	}{{man, b}, {marker, b}, {m.Validation.Script, script}, {manifest.FilesBeside(tgz).ValidationScript, script}} {
		if err := os.WriteFile(f.path, f.b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := store.NewDir(t.TempDir())
	if _, err := d.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	o := release.Options{Store: d, Site: &sites.Site{Name: "canary"}, By: "ci"}
	check := hostcheck.Options{User: srv.User, Stage: "converged", SSHOptions: append([]string{"SetEnv=IMAGECTL_VALIDATE_ROOT=" + root}, srv.Options...)}
	res, err := release.Hostcheck(ctx, sshdtest.Hosts[:1], "demo", check, o)
	if err != nil {
		t.Fatal(err)
	}
	h := res.Hosts[0]
	if h.Result == nil || !h.Recorded || h.Result.Image != "demo" || h.Result.Version != "1.0.0" || h.Result.Stage != "converged" || !h.Result.Live || len(h.Result.Checks) == 0 {
		t.Fatalf("the real script's result: %+v %+v", h, h.Result)
	}
	if _, err := os.Stat(filepath.Join(root, validate.StateDir, "result.json")); err != nil {
		t.Errorf("the live run kept no result: %v", err)
	}
}
