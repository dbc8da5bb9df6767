package release_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/validate"
)

// countingStore counts the AddEvidence calls made to the real store.
type countingStore struct {
	store.Store
	adds int
}

func (c *countingStore) AddEvidence(ctx context.Context, evs []store.Evidence) error {
	c.adds++
	return c.Store.AddEvidence(ctx, evs)
}

// evidenceFixture is a directory store holding demo 1.0.0 and 1.1.0, and
// options for site canary.
func evidenceFixture(t *testing.T) (*countingStore, release.Options, map[string]string) {
	t.Helper()
	d := store.NewDir(t.TempDir())
	sums := map[string]string{}
	for _, v := range []string{"1.0.0", "1.1.0"} {
		tgz, man := storetest.Artifact(t, t.TempDir(), "demo", v, storetest.Options{})
		pub, err := d.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(pub.ValidationScript)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		sums[v] = hex.EncodeToString(sum[:])
	}
	cs := &countingStore{Store: d}
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	return cs, release.Options{Store: cs, Site: &sites.Site{Name: "canary"}, By: "alice", Now: func() time.Time { return at }}, sums
}

func result(host, version, sum string, fail bool) *validate.Result {
	at := time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)
	r := &validate.Result{Schema: validate.ResultSchema, Image: "demo", Version: version, Profile: "bare-metal", Stage: "converged",
		Host: host, Live: true, Started: at, Finished: at.Add(time.Minute), ScriptSHA256: sum,
		Checks: []validate.Check{{Status: validate.StatusPass, Name: "build-marker"}}, Counts: validate.Counts{Checks: 1}}
	if fail {
		r.Checks = append(r.Checks, validate.Check{Status: validate.StatusFail, Name: "service:netdata", Detail: "inactive", Remediation: "systemctl enable --now netdata"})
		r.Counts = validate.Counts{Checks: 2, Failures: 1}
	}
	return r
}

// Passing and failing results of versions the store holds are recorded in
// one AddEvidence call; the others are refused, each saying why.
func TestRecordEvidence(t *testing.T) {
	cs, o, sums := evidenceFixture(t)
	badProfile := result("h5", "1.0.0", sums["1.0.0"], false)
	badProfile.Profile = "gpu-cloud"
	badStage := result("h6", "1.0.0", sums["1.0.0"], false)
	badStage.Stage = "later"
	notWhole := result("h7", "1.0.0", sums["1.0.0"], false)
	notWhole.Host = ""
	offered := []release.Offered{
		{From: "h1", Result: result("h1", "1.0.0", sums["1.0.0"], false)},
		{From: "h2", Result: result("h2", "1.0.0", sums["1.0.0"], true)},
		{From: "h3", Result: result("h3", "1.1.0", sums["1.1.0"], false)},
		{From: "unknown.json", Result: result("h4", "9.9.9", sums["1.0.0"], false)},
		{From: "wronghash.json", Result: result("h4", "1.1.0", sums["1.0.0"], false)},
		{From: "h5", Result: badProfile},
		{From: "h6", Result: badStage},
		{From: "h7", Result: notWhole},
		{From: "h8"},
	}
	rec, err := release.Record(ctx, offered, release.ViaHostcheck, o)
	if err != nil {
		t.Fatal(err)
	}
	if cs.adds != 1 || len(rec.Recorded) != 3 {
		t.Fatalf("%d AddEvidence calls recording %d results, want 1 recording 3: %+v", cs.adds, len(rec.Recorded), rec)
	}
	want := map[string]string{
		"unknown.json":   "demo 9.9.9 is not a version of the store",
		"wronghash.json": "is not the sha256 of demo 1.1.0's validation script",
		"h5":             `profile "gpu-cloud" is not one of demo 1.0.0's (bare-metal, slice)`,
		"h6":             `stage "later" is not one of image, converged`,
		"h7":             "no host",
		"h8":             "no validation result",
	}
	if len(rec.Refused) != len(want) {
		t.Errorf("refused %+v, want %d", rec.Refused, len(want))
	}
	for _, r := range rec.Refused {
		if !strings.Contains(r.Reason, want[r.From]) {
			t.Errorf("%s refused for %q, want %q", r.From, r.Reason, want[r.From])
		}
	}
	evs, err := cs.Evidence(ctx, "canary", "demo", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].RecordedBy != "alice" || evs[0].Via != release.ViaHostcheck || evs[1].Result.Passed() || evs[0].Site != "canary" {
		t.Errorf("demo 1.0.0's evidence at canary: %+v", evs)
	}
	got, err := release.EvidenceAt(ctx, cs, []string{"canary", "other"}, "demo", "1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0].Evidence) != 1 || got[0].Evidence[0].Result.Host != "h3" || len(got[1].Evidence) != 0 {
		t.Errorf("demo 1.1.0's evidence: %+v", got)
	}
}

// Nothing to record makes no update at all.
func TestRecordNothing(t *testing.T) {
	cs, o, _ := evidenceFixture(t)
	rec, err := release.Record(ctx, []release.Offered{{From: "x", Result: result("h", "9.9.9", strings.Repeat("0", 64), false)}}, release.ViaAdd, o)
	if err != nil {
		t.Fatal(err)
	}
	if cs.adds != 0 || len(rec.Recorded) != 0 || len(rec.Refused) != 1 {
		t.Errorf("%d AddEvidence calls, %+v", cs.adds, rec)
	}
}

// The script hostcheck runs is the manifest's, of the version the site
// runs, else the latest; which image, the one the site runs.
func TestHostcheckTarget(t *testing.T) {
	cs, o, _ := evidenceFixture(t)
	if _, err := release.HostcheckTarget(ctx, "", o); err == nil || !strings.Contains(err.Error(), "runs no image") {
		t.Errorf("no image at the site: %v", err)
	}
	tg, err := release.HostcheckTarget(ctx, "demo", o)
	if err != nil || tg.Version != "1.1.0" || tg.Script != "/usr/local/sbin/imagectl-demo-validate.sh" {
		t.Fatalf("the latest: %+v %v", tg, err)
	}
	if err := cs.Record(ctx, "canary", store.Promotion{Image: "demo", Version: "1.0.0", By: "a", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if tg, err = release.HostcheckTarget(ctx, "", o); err != nil || tg.Image != "demo" || tg.Version != "1.0.0" {
		t.Fatalf("the site's: %+v %v", tg, err)
	}
	tgz, man := storetest.Artifact(t, t.TempDir(), "other", "1", storetest.Options{})
	if _, err := cs.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Record(ctx, "canary", store.Promotion{Image: "other", Version: "1", By: "a", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := release.HostcheckTarget(ctx, "", o); err == nil || !strings.Contains(err.Error(), "several images (demo, other): name one with --image") {
		t.Errorf("two images: %v", err)
	}
	if _, err := release.HostcheckTarget(ctx, "nothere", o); err == nil || !strings.Contains(err.Error(), "holds no version of nothere") {
		t.Errorf("an unknown image: %v", err)
	}
}
