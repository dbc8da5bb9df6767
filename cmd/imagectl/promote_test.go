package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/release"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

func TestPromoteRollbackStatusHistoryGC(t *testing.T) {
	sim, sites, _, env := uploadFixture(t)
	dir, pub := stored(t, "1.0.0", "1.1.0", "1.2.0")
	env = append(env, "IMAGECTL_STORE="+dir, "IMAGECTL_SITES="+sites, "USER=alice")
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return imagectl(t, env, args...)
	}

	// No key: refused before MAAS is asked anything.
	_, errs, code := run("promote", "demo", "1.0.0", "--site", "sim")
	if code == 0 || !strings.Contains(errs, "--insecure-skip-verify sends it unverified") || sim.Count(maassim.OpList) != 0 {
		t.Fatalf("without a key: exit %d\n%s", code, errs)
	}
	out, errs, code := run("promote", "demo", "1.0.0", "--site", "sim", "--key", pub)
	if code != 0 || !strings.Contains(out, "promoted demo 1.0.0 to site sim (uploaded as demo-1-0-0)\ndistro_series: custom/demo-1-0-0\n") {
		t.Fatalf("promote: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = run("promote", "demo", "1.1.0", "--site", "sim", "--key", pub, "--reason", "new driver", "--by", "bob", "-o", "json")
	var res release.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || res.Promotion.Previous != "1.0.0" || res.Promotion.By != "bob" || res.DistroSeries != "custom/demo-1-1-0" {
		t.Fatalf("promote json: exit %d %v %+v\n%s", code, err, res, errs)
	}
	out, _, code = run("status", "--site", "sim")
	if code != 0 || !strings.Contains(out, "demo: 1.1.0 promoted by bob") || !strings.Contains(out, "* demo-1-1-0") || strings.Contains(out, "drift") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}

	// Someone deletes the promoted version in MAAS.
	c, _ := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey})
	for _, r := range sim.Resources() {
		if r.Name == "demo-1-1-0" {
			c.Delete(context.Background(), r.ID)
		}
	}
	out, _, code = run("status", "--site", "sim")
	if code != 1 || !strings.Contains(out, "drift: missing: the promoted demo 1.1.0 is not in MAAS as demo-1-1-0") {
		t.Fatalf("status with drift: exit %d\n%s", code, out)
	}
	out, _, code = run("status", "--site", "sim", "-o", "json")
	var st release.SiteStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 1 || !st.Drift || st.Images[0].Drift[0].Kind != "missing" {
		t.Fatalf("status json: exit %d %v\n%s", code, err, out)
	}

	out, errs, code = run("rollback", "demo", "--site", "sim", "--key", pub, "--reason", "driver hangs")
	if code != 0 || !strings.Contains(out, "rolled demo at site sim back from 1.1.0 to 1.0.0 (MAAS already held it as demo-1-0-0)") {
		t.Fatalf("rollback: exit %d\n%s%s", code, out, errs)
	}
	out, _, code = run("history", "demo", "--site", "sim")
	if code != 0 || !strings.Contains(out, "1.0.0 (rollback)  1.1.0     alice  driver hangs") || !strings.Contains(out, "site sim runs demo 1.0.0") {
		t.Fatalf("history: exit %d\n%s", code, out)
	}
	out, _, _ = run("history", "demo", "--site", "sim", "-o", "json")
	var h []store.Promotion
	if err := json.Unmarshal([]byte(out), &h); err != nil || len(h) != 3 || !h[2].Rollback {
		t.Fatalf("history json: %v %+v", err, h)
	}

	// 1.2.0 promoted then rolled back: MAAS holds 1.0.0 (promoted) and 1.2.0.
	if _, errs, code := run("promote", "demo", "1.2.0", "--site", "sim", "--key", pub); code != 0 {
		t.Fatal(errs)
	}
	if _, errs, code := run("rollback", "demo", "--site", "sim", "--key", pub); code != 0 {
		t.Fatal(errs)
	}
	out, _, code = run("gc", "--site", "sim", "--keep", "0")
	if code != 0 || !strings.Contains(out, "would delete demo-1-2-0") || !strings.Contains(out, "kept demo-1-0-0") || !strings.Contains(out, "dry run: --yes deletes them") ||
		sim.Count(maassim.OpDelete) != 1 { // the one delete above
		t.Fatalf("gc dry run: exit %d, %d deletes\n%s", code, sim.Count(maassim.OpDelete), out)
	}
	out, errs, code = run("gc", "--site", "sim", "--keep", "0", "--yes", "-o", "json")
	var gc release.GCResult
	if err := json.Unmarshal([]byte(out), &gc); err != nil || code != 0 || len(gc.Delete) != 1 || gc.DryRun {
		t.Fatalf("gc: exit %d %v\n%s%s", code, err, out, errs)
	}
	var left []string
	for _, r := range sim.Resources() {
		if r.Type == "Uploaded" {
			left = append(left, r.Name)
		}
	}
	if strings.Join(left, " ") != "demo-1-0-0" {
		t.Errorf("after gc MAAS holds %v", left)
	}
	if strings.Contains(out+errs, secret(sim.AdminKey)) {
		t.Error("the API key was printed")
	}
}
