package release_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/sites"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/upload/maas"
	"github.com/gpuaas/imagectl/upload/maassim"
)

var ctx = context.Background()

type fixture struct {
	sim    *maassim.Server
	store  *store.Dir
	signer *signing.Signer
	opts   release.Options
}

func quick(c *maas.Config) {
	c.ChunkSize, c.PollInterval, c.StallTimeout = 32<<10, time.Millisecond, time.Second
	c.Backoff = func(int) time.Duration { return time.Millisecond }
}

// newFixture starts a simulated MAAS and a store, and publishes the given
// versions of image demo, signed.
func newFixture(t testing.TB, versions ...string) *fixture {
	t.Helper()
	return newFixtureSim(t, maassim.Options{CompleteAfterGets: -1}, versions...)
}

// newFixtureSim is newFixture with a MAAS simulated with so.
func newFixtureSim(t testing.TB, so maassim.Options, versions ...string) *fixture {
	t.Helper()
	sim := maassim.New(so)
	t.Cleanup(sim.Close)
	signer, pub := storetest.Keys(t, t.TempDir())
	v, err := signing.LoadPublicKeyFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{sim: sim, store: store.NewDir(t.TempDir()), signer: signer}
	site := &sites.Site{Name: "sim", URL: sim.URL, APIKeyEnv: "SIM_KEY", Architecture: "amd64/generic",
		Timeout: 5 * time.Second, LastChunkTimeout: 5 * time.Second, CompleteTimeout: 5 * time.Second}
	f.opts = release.Options{Store: f.store, Site: site, Env: []string{"SIM_KEY=" + sim.AdminKey}, Verifier: v,
		By: "alice", Configure: quick}
	for i, ver := range versions {
		f.publish(t, "demo", ver, storetest.Options{Signer: signer}, time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC))
	}
	return f
}

// promote promotes demo's versions, in order, at the fixture's site.
func (f *fixture) promote(t testing.TB, versions ...string) {
	t.Helper()
	for _, v := range versions {
		if _, err := release.Promote(ctx, "demo", v, f.opts); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) publish(t testing.TB, image, version string, o storetest.Options, at time.Time) {
	t.Helper()
	tgz, man := storetest.Artifact(t, t.TempDir(), image, version, o)
	if _, err := f.store.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: man}, store.PublishOptions{Now: func() time.Time { return at }}); err != nil {
		t.Fatal(err)
	}
}

// names are the uploaded resources MAAS holds.
func names(sim *maassim.Server) []string {
	var out []string
	for _, r := range sim.Resources() {
		if r.Type == "Uploaded" {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TestPromoteByUser: without By, the promotion is recorded as Env's $USER.
func TestPromoteByUser(t *testing.T) {
	f := newFixture(t, "1.0.0")
	f.opts.By = ""
	f.opts.Env = append(f.opts.Env, "USER=bob")
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Promotion == nil || res.Promotion.By != "bob" {
		t.Fatalf("promotion %+v", res.Promotion)
	}
}

func TestPromoteAndRollback(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	res, err := release.Promote(ctx, "demo", "1.0.0", f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.DistroSeries != "custom/demo-1-0-0" || res.Promotion == nil || res.Promotion.Previous != "" || res.Promotion.By != "alice" ||
		!res.Verified || res.Upload.Skipped {
		t.Fatalf("first promotion %+v %+v", res, res.Promotion)
	}
	f.opts.Reason = "fixes the NIC firmware"
	res, err = release.Promote(ctx, "demo", "1.1.0", f.opts)
	if err != nil || res.Promotion.Previous != "1.0.0" || res.Promotion.Reason != "fixes the NIC firmware" {
		t.Fatalf("second promotion %+v %v", res, err)
	}
	if got := strings.Join(names(f.sim), " "); got != "demo-1-0-0 demo-1-1-0" {
		t.Errorf("MAAS holds %s", got)
	}
	// The current version again: checked, nothing uploaded or recorded.
	res, err = release.Promote(ctx, "demo", "1.1.0", f.opts)
	if err != nil || !res.AlreadyCurrent || res.Promotion != nil || !res.Upload.Skipped {
		t.Fatalf("promoting the current version: %+v %v", res, err)
	}
	res, err = release.Rollback(ctx, "demo", f.opts)
	if err != nil || res.Version != "1.0.0" || !res.Promotion.Rollback || res.Promotion.Previous != "1.1.0" || !res.Upload.Skipped {
		t.Fatalf("rollback %+v %v", res, err)
	}
	if n := f.sim.Count(maassim.OpCreate); n != 2 {
		t.Errorf("%d boot resources created, want 2", n)
	}
	h, _ := f.store.History(ctx, "sim", "demo")
	if len(h) != 3 || h[2].Version != "1.0.0" || h[2].DistroSeries != "custom/demo-1-0-0" {
		t.Errorf("history %+v", h)
	}
	if _, err := release.Rollback(ctx, "demo", f.opts); err == nil || !strings.Contains(err.Error(), "1.0.0 is the first version promoted there") {
		t.Errorf("second rollback: %v", err)
	}
	if _, err := release.Rollback(ctx, "other", f.opts); err == nil || !strings.Contains(err.Error(), "never promoted there") {
		t.Errorf("rollback of an image never promoted: %v", err)
	}
	// MAAS lost the version rolled back to: promoting uploads it again.
	for _, r := range f.sim.Resources() {
		if r.Name == "demo-1-1-0" {
			c, _ := maas.New(maas.Config{URL: f.sim.URL, APIKey: f.sim.AdminKey})
			if err := c.Delete(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res, err := release.Promote(ctx, "demo", "1.1.0", f.opts); err != nil || res.Upload.Skipped {
		t.Fatalf("promoting a version MAAS lost: %+v %v", res, err)
	}
}

func TestPromoteRefuses(t *testing.T) {
	f := newFixture(t, "1.0.0")
	f.publish(t, "demo", "2.0.0-unsigned", storetest.Options{}, time.Now())
	f.publish(t, "demo", "3.0.0-broken", storetest.Options{Signer: f.signer,
		Deploy: []manifest.DeployFinding{{Check: "kernel", Severity: "error", Message: "no kernel under /boot"}, {Check: "x", Severity: "warning"}}}, time.Now())
	_, otherPub := storetest.Keys(t, t.TempDir())
	other, _ := signing.LoadPublicKeyFile(otherPub)
	tamper := func() {
		v, _ := f.store.Version(ctx, "demo", "1.0.0")
		fh, _ := os.OpenFile(v.Tarball, os.O_RDWR, 0)
		b := []byte{0}
		fh.ReadAt(b, 20)
		fh.WriteAt([]byte{b[0] ^ 0xff}, 20)
		fh.Close()
	}
	for _, tc := range []struct {
		name    string
		version string
		adjust  func(*release.Options)
		setup   func()
		want    string
	}{
		{name: "unsigned", version: "2.0.0-unsigned", want: "is not signed"},
		{name: "deploy error", version: "3.0.0-broken", want: "failed its deployability check (imagectl check says why and how to fix it):\n  kernel: no kernel under /boot"},
		{name: "no key", version: "1.0.0", adjust: func(o *release.Options) { o.Verifier = nil }, want: release.ErrNoVerifyKey.Error()},
		{name: "other key", version: "1.0.0", adjust: func(o *release.Options) { o.Verifier = other }, want: "signature does not match"},
		{name: "not in store", version: "9.9.9", want: "is not in the store"},
		{name: "old build filed as a new version", version: "4.0.0", setup: func() { refile(t, f.store.Root, "demo", "1.0.0", "4.0.0") },
			want: "the store's demo 4.0.0 holds the manifest of demo 1.0.0: refusing it"},
		// The tgz streams from the store, its reads checked against the
		// version's sha256: the last byte is never sent, and the
		// incomplete resource is deleted.
		{name: "tampered", version: "1.0.0", setup: tamper, want: "refusing its last bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.opts
			if tc.adjust != nil {
				tc.adjust(&o)
			}
			if tc.setup != nil {
				tc.setup()
			}
			_, err := release.Promote(ctx, "demo", tc.version, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			ops := []maassim.Op{maassim.OpList, maassim.OpCreate, maassim.OpChunk, maassim.OpLastChunk}
			if tc.name == "tampered" {
				// The last chunk's request starts, but its body fails.
				ops = nil
				if got := names(f.sim); len(got) != 0 {
					t.Errorf("MAAS left holding %v", got)
				}
			}
			for _, op := range ops {
				if n := f.sim.Count(op); n != 0 {
					t.Errorf("%d %s requests reached MAAS", n, op)
				}
			}
			if h, _ := f.store.History(ctx, "sim", "demo"); len(h) != 0 {
				t.Errorf("recorded %+v", h)
			}
		})
	}
	// Unsigned goes through only when verification is skipped explicitly.
	o := f.opts
	o.Verifier, o.InsecureSkipVerify = nil, true
	res, err := release.Promote(ctx, "demo", "2.0.0-unsigned", o)
	if err != nil || res.Verified || res.DistroSeries != "custom/demo-2-0-0-unsigned" {
		t.Fatalf("insecure: %+v %v", res, err)
	}
}

// directUpload puts a random file into MAAS under a name, bypassing the
// store, as someone with the site's key could.
func directUpload(t *testing.T, sim *maassim.Server, name string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.tgz")
	b := make([]byte, 1000)
	rand.Read(b)
	os.WriteFile(p, b, 0o644)
	sum := sha256.Sum256(b)
	c, err := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx, maas.Image{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: 1000, Name: name, Title: name,
		Architecture: "amd64/generic", BaseImage: "ubuntu/noble", Filetype: "tgz"}, nil); err != nil {
		t.Fatal(err)
	}
}

func deleteNamed(t *testing.T, sim *maassim.Server, name string) {
	t.Helper()
	c, _ := maas.New(maas.Config{URL: sim.URL, APIKey: sim.AdminKey})
	for _, r := range sim.Resources() {
		if r.Name == name {
			if err := c.Delete(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func kinds(st *release.SiteStatus) string {
	var out []string
	for _, img := range st.Images {
		for _, d := range img.Drift {
			out = append(out, img.Image+":"+d.Kind)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestStatus(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	f.publish(t, "other", "1", storetest.Options{Signer: f.signer}, time.Now())
	f.promote(t, "1.0.0", "1.1.0")
	st, err := release.Status(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Drift || len(st.Images) != 1 {
		t.Fatalf("status %+v", st)
	}
	img := st.Images[0]
	if img.Image != "demo" || img.Promoted != "1.1.0" || img.PromotedBy != "alice" || img.DistroSeries != "custom/demo-1-1-0" || len(img.MAAS) != 2 ||
		!img.MAAS[1].Promoted || !img.MAAS[1].Matches || !img.MAAS[1].Complete || img.MAAS[0].Promoted {
		t.Fatalf("demo: %+v", img)
	}

	// Drift made behind imagectl's back.
	deleteNamed(t, f.sim, "demo-1-1-0")
	deleteNamed(t, f.sim, "demo-1-0-0")
	directUpload(t, f.sim, "demo-1-0-0")   // other bytes under a version's name
	directUpload(t, f.sim, "demo-7-7-7")   // a version the store does not know
	directUpload(t, f.sim, "other-1")      // other bytes of an image never promoted here
	directUpload(t, f.sim, "unrelated-42") // not one of the store's images
	st, err = release.Status(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(st), "demo:missing demo:sha256-mismatch demo:unknown other:sha256-mismatch"; !st.Drift || got != want {
		t.Errorf("drift %q, want %q\n%+v", got, want, st)
	}
	for _, img := range st.Images {
		for _, h := range img.MAAS {
			if h.Name == "unrelated-42" {
				t.Error("status reports a resource of no stored image")
			}
		}
	}

	// An upload that never completed.
	deleteNamed(t, f.sim, "demo-1-0-0")
	f.sim.Inject(maassim.Fault{On: maassim.OpLastChunk, Kind: maassim.Unavailable, Times: -1})
	if _, err := release.Upload(ctx, "demo", "1.1.0", f.opts); err == nil {
		t.Fatal("upload through 503s succeeded")
	}
	f.sim.ClearFaults()
	st, err = release.Status(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(st); !strings.Contains(got, "demo:incomplete") {
		t.Errorf("drift %q lacks the incomplete upload\n%+v", got, st)
	}
}

// gcLists are the versions res deletes, and what it keeps, each as
// kept says it.
func gcLists(res *release.GCResult, kept func(release.Kept) string) (del, keep []string) {
	for _, h := range res.Delete {
		del = append(del, h.Version)
	}
	for _, k := range res.Kept {
		keep = append(keep, kept(k))
	}
	return del, keep
}

func TestGC(t *testing.T) {
	f := newFixture(t, "1", "2", "3", "4", "5")
	f.promote(t, "1", "2", "3", "4", "5")
	for i := 0; i < 2; i++ { // back to 3
		if _, err := release.Rollback(ctx, "demo", f.opts); err != nil {
			t.Fatal(err)
		}
	}
	directUpload(t, f.sim, "demo-0-0-1")
	res, err := release.GC(ctx, 1, false, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	del, kept := gcLists(res, func(k release.Kept) string { return k.Name + "=" + k.Why })
	sort.Strings(del)
	sort.Strings(kept)
	// After promoting 1..5 and rolling back twice, 3 is promoted and a
	// rollback would bring back 2: both stay.
	if strings.Join(del, " ") != "1 4" || strings.Join(kept, ", ") != "demo-0-0-1=not a version in the store, demo-2=what a rollback would promote, demo-3=promoted, demo-5=among the 1 newest" {
		t.Fatalf("dry run: delete %v, keep %v", del, kept)
	}
	if n := f.sim.Count(maassim.OpDelete); n != 0 || !res.DryRun {
		t.Fatalf("a dry run deleted %d", n)
	}
	if _, err := release.GC(ctx, 1, true, f.opts); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(f.sim), " "); got != "demo-0-0-1 demo-2 demo-3 demo-5" {
		t.Errorf("after gc MAAS holds %s", got)
	}
	// keep 0: only the promoted version and the rollback target stay.
	if _, err := release.GC(ctx, 0, true, f.opts); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(f.sim), " "); got != "demo-0-0-1 demo-2 demo-3" {
		t.Errorf("after gc --keep 0 MAAS holds %s", got)
	}
	if _, err := release.GC(ctx, -1, false, f.opts); err == nil {
		t.Error("negative keep accepted")
	}
}

// refile copies a stored version's directory under another version, with
// its index edited to match: what someone with write access to the store
// could do to pass a validly signed old build off as a new version.
func refile(t *testing.T, root, image, from, to string) {
	t.Helper()
	src, dst := filepath.Join(root, image, from), filepath.Join(root, image, to)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dst, "version.json")
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"version": "`+from+`"`), []byte(`"version": "`+to+`"`), 1)
	if err := os.WriteFile(idx, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
