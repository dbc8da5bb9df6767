package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/release"
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
