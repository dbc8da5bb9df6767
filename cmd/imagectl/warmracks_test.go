package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/cache"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/hashstamp"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// racksSites is a simulated MAAS with racks, a sites file naming it (its
// racks' port as rack_port) and a store holding demo 1.0.0.
func racksSites(t *testing.T, extra string, specs ...maassim.RackSpec) (sim *maassim.Server, env []string, pub string) {
	t.Helper()
	sim = maassim.New(maassim.Options{CompleteAfterGets: -1, Racks: specs})
	t.Cleanup(sim.Close)
	sites := filepath.Join(t.TempDir(), "sites.hcl")
	src := fmt.Sprintf("site \"sim\" {\n  maas_url    = %q\n  api_key_env = \"SIM_MAAS_KEY\"\n  rack_port   = %d\n%s}\n", sim.URL, sim.RackPort(), extra)
	if err := os.WriteFile(sites, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, pub := stored(t, "1.0.0")
	return sim, []string{"SIM_MAAS_KEY=" + sim.AdminKey, "IMAGECTL_STORE=" + dir, "IMAGECTL_SITES=" + sites, "USER=alice",
		"IMAGECTL_CACHE_DIR=" + filepath.Join(t.TempDir(), "cache")}, pub
}

func TestWarmRacksCommand(t *testing.T) {
	sim, env, pub := racksSites(t, "", maassim.RackSpec{Hostname: "r1"}, maassim.RackSpec{Hostname: "r2"})
	// Not in MAAS yet: an error, not a verdict.
	_, errs, code := imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim")
	if code != 1 || !strings.Contains(errs, "MAAS holds no boot resource demo-1-0-0") {
		t.Fatalf("before upload: exit %d\n%s", code, errs)
	}
	out, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub, "--warm-racks")
	if code != 0 || !strings.Contains(out, "rack r1: passed (rack r1 serves it (its cache was cold and is filled now))") {
		t.Fatalf("promote --warm-racks: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim")
	// The store is a directory: the racks' bytes are compared with its tgz.
	if code != 0 || !strings.Contains(out, "racks: passed") || !strings.Contains(errs, "passed: rack r2 serves it (its cache had it)") ||
		!strings.Contains(out, "(each rack's bytes compared with the store's tgz)") {
		t.Fatalf("warm-racks: exit %d\n%s%s", code, out, errs)
	}
	// Compared with a local copy, no rack is held for another: HELD is "-".
	if !regexp.MustCompile(`(?m)^RACK +VERDICT +CACHE +BYTES +TIME +HELD +MB/S +DETAIL$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^r2 +passed +\S+ +\d+ +\S+ +- +\S+ +rack r2 serves it`).MatchString(out) {
		t.Errorf("warm-racks' table has no HELD column, or r2 was held:\n%s", out)
	}
	out, _, code = imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim", "-o", "json")
	var res release.RacksResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || len(res.Racks) != 2 || res.Racks[0].Cache != "hit" || res.Site != "sim" {
		t.Fatalf("json: exit %d, %v\n%s", code, err, out)
	}

	if err := sim.Racks()[1].SetState(maassim.RackUnreachable); err != nil {
		t.Fatal(err)
	}
	_, errs, code = imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim")
	if code != exitNotYet || !strings.Contains(errs, "unknown is not passed") {
		t.Fatalf("unreachable rack: exit %d\n%s", code, errs)
	}
	if err := sim.Racks()[1].SetState(maassim.RackOtherBytes); err != nil {
		t.Fatal(err)
	}
	out, _, code = imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim")
	if code != 1 || !strings.Contains(out, "rack r2 serves other bytes") || !strings.Contains(out, "racks: failed") {
		t.Fatalf("other bytes: exit %d\n%s", code, out)
	}
	if _, errs, code := imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim", "--parallel", "0"); code != 1 || !strings.Contains(errs, "--parallel 0") {
		t.Fatalf("--parallel 0: exit %d %s", code, errs)
	}
}

// The racks check records the store's tgz it hashed in the cache
// directory, and the next check of it, unchanged, says it did not hash it.
func TestWarmRacksHashesAnUnchangedTgzOnce(t *testing.T) {
	_, env, pub := racksSites(t, "", maassim.RackSpec{Hostname: "r1"})
	if out, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub, "--warm-racks"); code != 0 {
		t.Fatalf("promote --warm-racks: exit %d\n%s%s", code, out, errs)
	}
	// A tgz changed less than hashstamp.Settle ago is not recorded (a
	// change of its status moves its change time, however long the
	// promotion took); one changed that long ago is.
	var tgzs []string
	err := filepath.WalkDir(environ.Get(env, "IMAGECTL_STORE"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".tgz") {
			tgzs = append(tgzs, p)
		}
		return err
	})
	if err != nil || len(tgzs) != 1 {
		t.Fatalf("the store's tgz: %v %v", tgzs, err)
	}
	if err := os.Chmod(tgzs[0], 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hashstamp.Settle)
	for i, want := range []string{"(each rack's bytes compared with the store's tgz)", "unchanged since an earlier check hashed it)"} {
		out, errs, code := imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim")
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("check %d: exit %d, want %q\n%s%s", i+1, code, want, out, errs)
		}
	}
	recs, err := os.ReadDir(filepath.Join(environ.Get(env, cachedir.Env), cachedir.Hashed))
	if err != nil || len(recs) != 1 {
		t.Fatalf("records in the cache directory: %v %v", recs, err)
	}
	// cache ls lists the record; a prune keeps it while the tgz is
	// unchanged, and removes it once the tgz has changed.
	if out, errs, code := imagectl(t, env, "cache", "ls"); code != 0 || !strings.Contains(out, "1 hash records (1 of unchanged tgzs)") {
		t.Fatalf("cache ls: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := imagectl(t, env, "cache", "prune", "--older-than", "1h"); code != 0 || !strings.Contains(out, "0 hash records") {
		t.Fatalf("cache prune: exit %d\n%s%s", code, out, errs)
	}
	if err := os.Chmod(tgzs[0], 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := imagectl(t, env, "cache", "ls", "-o", "json")
	var c cache.Contents
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || len(c.Hashed) != 1 || c.Hashed[0].Current || c.Hashed[0].Path != tgzs[0] {
		t.Fatalf("cache ls -o json after the tgz changed: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := imagectl(t, env, "cache", "prune", "--older-than", "1h"); code != 0 || !strings.Contains(out, "1 hash records") {
		t.Fatalf("cache prune after the tgz changed: exit %d\n%s%s", code, out, errs)
	}
	if recs, err := os.ReadDir(filepath.Join(environ.Get(env, cachedir.Env), cachedir.Hashed)); err != nil || len(recs) != 0 {
		t.Fatalf("records left: %v %v", recs, err)
	}
}

func TestPromoteStopsAtUnknownRacksUnlessAllowed(t *testing.T) {
	_, env, pub := racksSites(t, "  warm_racks  = true\n", maassim.RackSpec{Hostname: "near"}, maassim.RackSpec{Hostname: "far", State: maassim.RackUnreachable})
	_, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub)
	if code != exitNotYet || !strings.Contains(errs, "rack far cannot be reached") || !strings.Contains(errs, "--allow-unknown-racks") {
		t.Fatalf("unknown rack: exit %d\n%s", code, errs)
	}
	out, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub, "--allow-unknown-racks")
	if code != 0 || !strings.Contains(out, "rack far: unknown") || !strings.Contains(out, "promoted demo 1.0.0 to site sim") {
		t.Fatalf("allowed: exit %d\n%s%s", code, out, errs)
	}
}

func TestPromoteWarmRacksFalseTurnsTheSiteSettingOff(t *testing.T) {
	_, env, pub := racksSites(t, "  warm_racks  = true\n", maassim.RackSpec{Hostname: "far", State: maassim.RackUnreachable})
	out, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub, "--warm-racks=false")
	if code != 0 || strings.Contains(out, "rack far") || !strings.Contains(out, "promoted demo 1.0.0 to site sim") {
		t.Fatalf("--warm-racks=false: exit %d\n%s%s", code, out, errs)
	}
}

func TestPromoteRacksFlagsAndProgress(t *testing.T) {
	_, env, pub := racksSites(t, "", maassim.RackSpec{Hostname: "r1"}, maassim.RackSpec{Hostname: "r2"})
	if _, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub, "--warm-racks", "--racks-parallel", "0"); code != 1 || !strings.Contains(errs, "--racks-parallel 0") {
		t.Fatalf("--racks-parallel 0: exit %d %s", code, errs)
	}
	_, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub, "--warm-racks", "--racks-parallel", "1", "--racks-timeout", "1m")
	if code != 0 || !strings.Contains(errs, "passed: rack r1 serves it") || !strings.Contains(errs, "passed: rack r2 serves it") {
		t.Fatalf("progress: exit %d\n%s", code, errs)
	}
}

func TestWarmRacksIsWhatStatusAndPredeployRead(t *testing.T) {
	_, env, pub := racksSites(t, "", maassim.RackSpec{Hostname: "r1"})
	if out, errs, code := imagectl(t, env, "promote", "demo", "1.0.0", "--site", "sim", "--key", pub); code != 0 {
		t.Fatalf("promote: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ := imagectl(t, env, "status", "--site", "sim")
	if strings.Contains(out, "rack r1") {
		t.Fatalf("status before any racks check:\n%s", out)
	}
	if out, errs, code := imagectl(t, env, "warm-racks", "demo", "1.0.0", "--site", "sim"); code != 0 {
		t.Fatalf("warm-racks: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ = imagectl(t, env, "status", "--site", "sim")
	if !strings.Contains(out, "rack r1: passed at") || !strings.Contains(out, "(warm-racks's racks check)") {
		t.Fatalf("status after warm-racks:\n%s", out)
	}
}
