package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store/oci/ocitest"
	"github.com/gpuaas/imagectl/store/storetest"
)

// The user's view of a revocation: revoke, then status exits 1 naming it,
// predeploy fails, promote refuses, images and show mark it, rollback
// skips it; --undo lets promote take it again.
func TestRevokeCommand(t *testing.T) {
	sim, _, _, env := uploadFixture(t)
	sites, ps := profileSites(t, sim)
	dir, pub := stored(t, "1.0.0", "1.1.0", "1.2.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites, "USER=alice", "ADMIN_TOKEN="+ps.Token)
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return imagectl(t, env, args...)
	}
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		if out, errs, code := run("promote", "demo", v, "--site", "sim", "--key", pub); code != 0 {
			t.Fatalf("promote %s: exit %d\n%s%s", v, code, out, errs)
		}
	}
	out, errs, code := run("predeploy", "--site", "sim")
	if code != 0 || !strings.Contains(out, "site sim is ready to deploy") {
		t.Fatalf("predeploy before: exit %d\n%s%s", code, out, errs)
	}
	// What predeploy cannot read (no MAAS API key here) is a failing
	// condition: the deploy workflow gets the document, and exit 1.
	var noKey []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SIM_MAAS_KEY=") {
			noKey = append(noKey, kv)
		}
	}
	out, errs, code = imagectl(t, noKey, "predeploy", "--site", "sim", "-o", "json")
	var unread release.PredeployResult
	if err := json.Unmarshal([]byte(out), &unread); err != nil || code != 1 || unread.Ready || len(unread.Images) != 1 ||
		!strings.Contains(out, "connecting to site sim") {
		t.Fatalf("predeploy without the MAAS key: exit %d %v\n%s%s", code, err, out, errs)
	}

	if _, errs, code := run("revoke", "demo", "1.2.0"); code == 0 || !strings.Contains(errs, `"reason" not set`) {
		t.Errorf("revoke without a reason: exit %d\n%s", code, errs)
	}
	if _, errs, code := run("revoke", "demo", "9.9.9", "--reason", "x"); code != 1 || !strings.Contains(errs, "9.9.9") {
		t.Errorf("revoking a version not in the store: exit %d\n%s", code, errs)
	}
	out, errs, code = run("revoke", "demo", "1.2.0", "--reason", "NCCL hangs", "--by", "rita")
	if code != 0 || !strings.Contains(out, "revoked demo 1.2.0 at every site (by rita at ") || !strings.Contains(out, ": NCCL hangs)\n") {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = run("revoke", "demo", "1.1.0", "--reason", "same bug", "-o", "json")
	var rr release.RevokeResult
	if err := json.Unmarshal([]byte(out), &rr); err != nil || rr.Revocation == nil || rr.Revocation.By != "alice" || rr.Unchanged {
		t.Fatalf("revoke json: %v %+v\n%s", err, rr, out)
	}

	out, _, code = run("status", "--site", "sim")
	if code != 1 || !strings.Contains(out, "drift: revoked: site sim runs demo 1.2.0, which is revoked (by rita at ") ||
		!strings.Contains(out, "NCCL hangs): imagectl rollback demo --site sim returns it to the version before") {
		t.Fatalf("status of a revoked version: exit %d\n%s", code, out)
	}
	out, _, code = run("predeploy", "--site", "sim", "-o", "json")
	var pr release.PredeployResult
	if err := json.Unmarshal([]byte(out), &pr); err != nil || code != 1 || pr.Ready || len(pr.Images) != 1 {
		t.Fatalf("predeploy json: exit %d %v\n%s", code, err, out)
	}
	for _, c := range pr.Images[0].Conditions {
		if c.OK != (c.Name != release.CondNotRevoked) || !c.OK && c.Fix != "imagectl rollback demo --site sim" {
			t.Errorf("predeploy condition %+v", c)
		}
	}
	_, errs, code = run("promote", "demo", "1.1.0", "--site", "sim", "--key", pub)
	if code != 1 || !strings.Contains(errs, "demo 1.1.0 is revoked (by alice at ") || !strings.Contains(errs, "same bug") {
		t.Errorf("promote of a revoked version: exit %d\n%s", code, errs)
	}
	out, _, _ = run("images")
	if !strings.Contains(out, "REVOKED") || strings.Count(out, " by ") != 2 {
		t.Errorf("images:\n%s", out)
	}
	out, _, _ = run("images", "-o", "json")
	var imgs []release.ListedImage
	if err := json.Unmarshal([]byte(out), &imgs); err != nil || len(imgs) != 1 || imgs[0].Versions[0].Revoked != nil ||
		imgs[0].Versions[2].Revoked == nil || imgs[0].Versions[2].Revoked.Reason != "NCCL hangs" || imgs[0].Versions[2].SHA256 == "" {
		t.Errorf("images json: %v\n%s", err, out)
	}
	out, _, _ = run("show", "demo", "1.2.0")
	if !strings.Contains(out, "REVOKED by rita at ") {
		t.Errorf("show:\n%s", out)
	}
	if out, _, _ = run("show", "demo", "1.0.0", "-o", "json"); !strings.Contains(out, `"revoked": null`) {
		t.Errorf("show json of a version not revoked:\n%s", out)
	}

	out, errs, code = run("rollback", "demo", "--site", "sim", "--key", pub, "-o", "json")
	var res release.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Version != "1.0.0" || strings.Join(res.SkippedRevoked, ",") != "1.1.0" {
		t.Fatalf("rollback: exit %d %v %+v\n%s", code, err, res, errs)
	}
	if out, errs, code := run("status", "--site", "sim"); code != 0 {
		t.Errorf("status after the rollback: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := run("predeploy", "--site", "sim", "--profile", "h200-bare-metal"); code != 0 {
		t.Errorf("predeploy after the rollback: exit %d\n%s%s", code, out, errs)
	}

	out, errs, code = run("revoke", "--undo", "demo", "1.1.0", "--reason", "it was the switch")
	if code != 0 || !strings.Contains(out, "demo 1.1.0 may run again (by alice at ") {
		t.Fatalf("undo: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := run("promote", "demo", "1.1.0", "--site", "sim", "--key", pub); code != 0 {
		t.Errorf("promote after the undo: exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out+errs, ps.Token) || strings.Contains(out+errs, sim.AdminKey) {
		t.Error("a secret was printed")
	}
}

// TestRevokeRegistryGitCatalog revokes a version through the git catalog
// (served over http) of a registry store, from another machine than the
// one that promoted it: status exits 1 at each site that runs it and
// nowhere else, the registry's channel tags of those sites leave it for
// the version before, a rollout of it is refused, rollback skips it; the
// undo lets it be promoted again.
func TestRevokeRegistryGitCatalog(t *testing.T) {
	reg := ocitest.Start(t)
	catalog, gitCreds := httpCatalog(t)
	keys := t.TempDir()
	signer, pub := storetest.Keys(t, keys)
	common := []string{"DOCKER_CONFIG=" + reg.DockerConfig(t, t.TempDir()), "IMAGECTL_REGISTRY_CA=" + reg.CAFile,
		"IMAGECTL_STORE=oci://" + reg.Host + "/imagectl/ci"}
	ci := machine(t, append(common, "COSIGN_PASSWORD=pw")...)
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		tgz, _ := storetest.Artifact(t, t.TempDir(), "demo", v, storetest.Options{Signer: signer})
		if out, errs, code := imagectl(t, ci, "publish", tgz, "--sign-key", filepath.Join(keys, "cosign.key")); code != 0 {
			t.Fatalf("publish %s: exit %d\n%s%s", v, code, out, errs)
		}
	}
	_, sites, keyEnv := groupSites(t, "_MAAS_KEY", "east", "west", "north")
	shared := append(append(append(common, keyEnv...), gitCreds...), "IMAGECTL_SITES="+sites, "IMAGECTL_CATALOG="+catalog)
	rel := machine(t, append(shared, "USER=rita")...)
	for _, p := range [][]string{{"1.0.0", "all"}, {"1.1.0", "all"}, {"1.2.0", "east", "west"}} {
		args := []string{"promote", "demo", p[0], "--key", pub}
		for _, s := range p[1:] {
			args = append(args, "--site", s)
		}
		if out, errs, code := imagectl(t, rel, args...); code != 0 {
			t.Fatalf("promote %s: exit %d\n%s%s", p[0], code, out, errs)
		}
	}

	// The on-call engineer revokes it from their own machine.
	op := machine(t, append(shared, "USER=olga")...)
	out, errs, code := imagectl(t, op, "revoke", "demo", "1.2.0", "--reason", "kernel panics under load (INC-77)")
	if code != 0 || !strings.Contains(out, "revoked demo 1.2.0 at every site (by olga at ") ||
		!strings.Contains(out, "channel of site east: 1.2.0 -> 1.1.0\n") || !strings.Contains(out, "channel of site west: 1.2.0 -> 1.1.0\n") ||
		strings.Contains(out, "north") || strings.Contains(out, "warning") {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errs)
	}
	status := func(env []string, site string) (release.SiteStatus, int) {
		t.Helper()
		out, errs, code := imagectl(t, env, "status", "--site", site, "-o", "json")
		var st release.SiteStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status %s: exit %d %v\n%s%s", site, code, err, out, errs)
		}
		return st, code
	}
	for _, s := range []string{"east", "west"} {
		st, code := status(rel, s)
		if code != 1 || len(st.Images) != 1 || st.Images[0].Revoked == nil || st.Images[0].Revoked.Reason != "kernel panics under load (INC-77)" ||
			len(st.Images[0].Drift) != 1 || st.Images[0].Drift[0].Kind != "revoked" {
			t.Errorf("status %s after the revocation: exit %d %+v", s, code, st.Images)
		}
	}
	if st, code := status(rel, "north"); code != 0 || st.Drift {
		t.Errorf("status north (runs 1.1.0): exit %d %+v", code, st.Images)
	}
	out, errs, code = imagectl(t, rel, "promote", "demo", "1.2.0", "--site", "all", "--key", pub)
	if code != 1 || !strings.Contains(errs, "demo 1.2.0 is revoked (by olga at ") || strings.Contains(out, "ok") {
		t.Errorf("rollout of the revoked version: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = imagectl(t, rel, "rollback", "demo", "--site", "east", "--key", pub, "--reason", "INC-77")
	if code != 0 || !strings.Contains(out, "back from 1.2.0 to 1.1.0") {
		t.Fatalf("rollback east: exit %d\n%s%s", code, out, errs)
	}
	if st, code := status(op, "east"); code != 0 || st.Drift || st.Images[0].Promoted != "1.1.0" {
		t.Errorf("status east after the rollback: exit %d %+v", code, st.Images)
	}

	out, errs, code = imagectl(t, op, "revoke", "--undo", "demo", "1.2.0", "--reason", "INC-77 was the BMC")
	if code != 0 || !strings.Contains(out, "channel of site west: 1.1.0 -> 1.2.0\n") || strings.Contains(out, "east") {
		t.Fatalf("undo: exit %d\n%s%s", code, out, errs)
	}
	if st, code := status(rel, "west"); code != 0 || st.Drift {
		t.Errorf("status west after the undo: exit %d %+v", code, st.Images)
	}
	if out, errs, code := imagectl(t, rel, "promote", "demo", "1.2.0", "--site", "all", "--key", pub); code != 0 {
		t.Errorf("rollout after the undo: exit %d\n%s%s", code, out, errs)
	}
}
