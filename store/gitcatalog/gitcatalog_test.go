package gitcatalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/gitcatalog/gittest"
)

var ctx = context.Background()

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// open opens a catalog of remote in its own cache directory: another
// machine.
func open(t *testing.T, remote string, env []string) *Catalog {
	t.Helper()
	c, err := Open(ctx, remote, Options{CacheDir: filepath.Join(t.TempDir(), "clone"), Env: env, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func prom(image, version, previous, by, reason string) store.Promotion {
	return store.Promotion{Image: image, Version: version, Previous: previous, By: by, Reason: reason}
}

func record(t *testing.T, c *Catalog, site string, p store.Promotion) {
	t.Helper()
	if err := c.Record(ctx, site, p); err != nil {
		t.Fatal(err)
	}
}

// beforeFirstPush runs f once, just before c's first push (another
// machine pushing between c's check and its push), and returns the count
// of the pushes c tries.
func beforeFirstPush(c *Catalog, f func()) *int {
	pushes := new(int)
	c.beforePush = func() {
		if *pushes++; *pushes == 1 {
			f()
		}
	}
	return pushes
}

func versions(h []store.Promotion) string {
	var v []string
	for _, p := range h {
		v = append(v, p.Version)
	}
	return strings.Join(v, " ")
}

// remotes are the kinds of remote tests run against: each makes an empty
// one and returns its URL, the bare repository behind it and the
// environment git reaches it with.
var remotes = []struct {
	name   string
	remote func(t *testing.T) (remote, bare string, env []string)
}{
	{"file", func(t *testing.T) (string, string, []string) {
		b := gittest.Bare(t)
		return b, b, gittest.Env(t)
	}},
	{"daemon", func(t *testing.T) (string, string, []string) {
		root := t.TempDir()
		b := gittest.BareIn(t, root, "catalog.git")
		return gittest.Daemon(t, root) + "catalog.git", b, gittest.Env(t)
	}},
	{"http", func(t *testing.T) (string, string, []string) {
		base, b := httpCatalog(t)
		return base + "catalog.git", b, gittest.Credentials(t, base, "alice", "s3cret")
	}},
}

// httpCatalog serves an empty catalog.git over HTTP to user alice with
// password s3cret: the server's base URL and the bare repository.
func httpCatalog(t *testing.T) (base, bare string) {
	t.Helper()
	root := t.TempDir()
	bare = gittest.BareIn(t, root, "catalog.git")
	return gittest.HTTP(t, root, "alice", "s3cret"), bare
}

// withUser is the URL of base's catalog.git with userinfo (user or
// user:password) in it.
func withUser(base, userinfo string) string {
	return strings.Replace(base, "://", "://"+userinfo+"@", 1) + "catalog.git"
}

// eachRemote runs f, in parallel, against a fresh remote of each kind.
func eachRemote(t *testing.T, f func(t *testing.T, remote, bare string, env []string)) {
	t.Helper()
	for _, tc := range remotes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			remote, bare, env := tc.remote(t)
			f(t, remote, bare, env)
		})
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	eachRemote(t, func(t *testing.T, remote, bare string, env []string) {
		c := open(t, remote, env)
		if h, err := c.History(ctx, "lab", "demo"); err != nil || h == nil || len(h) != 0 {
			t.Fatalf("History of an empty remote: %v %v", h, err)
		}
		if cat, err := c.Catalog(ctx, "lab"); err != nil || cat == nil || len(cat) != 0 {
			t.Fatalf("Catalog of an empty remote: %v %v", cat, err)
		}
		p1 := prom("demo", "1.0.0", "", "Alice Admin <alice@example.com>", "first rollout")
		p1.SHA256 = strings.Repeat("ab", 32)
		record(t, c, "lab", p1)
		record(t, c, "lab", prom("other", "20261122.1", "", "bob", ""))
		record(t, c, "lab", prom("demo", "1.1.0", "1.0.0", "carol", "fixes CVE-1"))
		record(t, c, "prod", prom("demo", "1.0.0", "", "dave", "prod too"))

		h, err := c.History(ctx, "lab", "demo")
		if err != nil || versions(h) != "1.0.0 1.1.0" || h[0].By != p1.By || !h[0].At.Equal(t0) || h[0].At.Location() != time.UTC || h[0].SHA256 != p1.SHA256 {
			t.Fatalf("History: %+v %v", h, err)
		}
		cat, err := c.Catalog(ctx, "lab")
		if err != nil || len(cat) != 2 || versions(cat["demo"]) != "1.0.0 1.1.0" || versions(cat["other"]) != "20261122.1" {
			t.Fatalf("Catalog: %+v %v", cat, err)
		}

		// The layout, read from the bare repository itself.
		var f map[string]any
		raw := gittest.Run(t, bare, nil, "show", "main:sites/lab/demo.json")
		if err := json.Unmarshal([]byte(raw), &f); err != nil || f["schema_version"] != 1.0 || f["site"] != "lab" || f["image"] != "demo" ||
			len(f["promotions"].([]any)) != 2 || !strings.HasSuffix(raw, "}\n") || !strings.Contains(raw, "\n  \"promotions\": [") {
			t.Fatalf("sites/lab/demo.json: %v\n%s", err, raw)
		}
		if readme := gittest.Run(t, bare, nil, "show", "main:README.md"); !strings.Contains(readme, "promotion catalog of imagectl") {
			t.Errorf("README.md: %s", readme)
		}
		if files := gittest.Run(t, bare, nil, "ls-tree", "-r", "--name-only", "main"); files != "README.md\nsites/lab/demo.json\nsites/lab/other.json\nsites/prod/demo.json\n" {
			t.Errorf("files: %q", files)
		}

		// Author and message from By and Reason.
		log := gittest.Run(t, bare, nil, "log", "--reverse", "--format=%an <%ae>|%cn|%aI|%B%x00", "main")
		want := []string{
			"Alice Admin <alice@example.com>|Alice Admin|2026-11-23T10:00:00+00:00|promote demo 1.0.0 at lab\n\nfirst rollout\n\nImage-SHA256: " + p1.SHA256 + "\n",
			"bob <bob@imagectl.invalid>|bob|2026-11-23T10:00:00+00:00|promote other 20261122.1 at lab\n",
			"carol <carol@imagectl.invalid>|carol|2026-11-23T10:00:00+00:00|promote demo 1.1.0 at lab\n\nfixes CVE-1\n\nPrevious-Version: 1.0.0\n",
			"dave <dave@imagectl.invalid>|dave|2026-11-23T10:00:00+00:00|promote demo 1.0.0 at prod\n\nprod too\n",
		}
		got := strings.Split(strings.TrimSuffix(strings.TrimSpace(log), "\x00"), "\x00")
		for i := range got {
			got[i] = strings.TrimLeft(got[i], "\n")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("git log:\n%q\nwant\n%q", got, want)
		}
		if tr := gittest.Run(t, bare, nil, "log", "-1", "--skip=1", "--format=%(trailers:key=Previous-Version,valueonly)", "main"); strings.TrimSpace(tr) != "1.0.0" {
			t.Errorf("Previous-Version trailer: %q", tr)
		}
	})
}

func TestHTTPCredentials(t *testing.T) {
	t.Parallel()
	base, _ := httpCatalog(t)
	for name, env := range map[string][]string{
		"wrong password": gittest.Credentials(t, base, "alice", "wrong"),
		"none":           gittest.Env(t),
	} {
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := Open(ctx, base+"catalog.git", Options{CacheDir: t.TempDir(), Env: env})
		cancel()
		if err == nil || time.Since(start) > 30*time.Second || errors.Is(err, context.DeadlineExceeded) ||
			!strings.Contains(err.Error(), base+"catalog.git") ||
			!strings.Contains(err.Error(), "Authentication failed") && !strings.Contains(err.Error(), "terminal prompts disabled") {
			t.Errorf("%s: %v after %v", name, err, time.Since(start))
		}
		t.Logf("%s: %v", name, err)
	}
	// A password in the URL stays out of messages.
	if c := (&Catalog{remote: "https://bob:hunter2@example.com/c.git"}); c.Location() != "https://bob:xxxxx@example.com/c.git" {
		t.Errorf("Location: %s", c.Location())
	}

	// Credentials in the URL (a CI token) work, and stay out of the clone's
	// config and of git's command lines; a rotated token reuses the clone.
	cache := t.TempDir()
	withCreds := withUser(base, "alice:s3cret")
	c, err := Open(ctx, withCreds, Options{CacheDir: CloneDir(cache, withCreds), Env: gittest.Env(t), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatalf("credentials in the URL: %v", err)
	}
	record(t, c, "lab", prom("demo", "1.0.0", "", "alice", ""))
	if cfg, err := os.ReadFile(filepath.Join(c.Dir(), ".git", "config")); err != nil || strings.Contains(string(cfg), "s3cret") || !strings.Contains(string(cfg), base+"catalog.git") {
		t.Errorf("the clone's config keeps the credentials or not the remote: %v\n%s", err, cfg)
	}
	// The clone an earlier imagectl kept under the whole URL's hash, token
	// in its config, goes.
	sum := sha256.Sum256([]byte(withCreds))
	legacy := filepath.Join(cache, "catalogs", hex.EncodeToString(sum[:])[:16])
	gittest.Run(t, t.TempDir(), nil, "init", "-q", legacy)
	gittest.Run(t, legacy, nil, "remote", "add", "origin", withCreds)
	if _, err := Open(ctx, withCreds, Options{CacheDir: CloneDir(cache, withCreds), Env: gittest.Env(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("the legacy clone %s with the token is still there: %v", legacy, err)
	}
	rotated := withUser(base, "alice:wrong")
	if CloneDir(cache, rotated) != c.Dir() {
		t.Errorf("another token, another clone: %s, %s", CloneDir(cache, rotated), c.Dir())
	}
	_, err = Open(ctx, rotated, Options{CacheDir: CloneDir(cache, rotated), Env: gittest.Env(t)})
	if err == nil || strings.Contains(err.Error(), "wrong") {
		t.Errorf("a wrong password in the URL: %v", err)
	}
}

// The clone made by an earlier imagectl, with credentials in its config
// (an older token), loses them on the next open; a user alone in the URL
// is git's credential helpers' to complete, and stays.
func TestStoredCredentialsRemoved(t *testing.T) {
	t.Parallel()
	base, _ := httpCatalog(t)
	withCreds := withUser(base, "alice:s3cret")
	dir := t.TempDir()
	env := gittest.Env(t)
	gittest.Run(t, dir, env, "init", "-q")
	gittest.Run(t, dir, env, "remote", "add", "origin", strings.Replace(withCreds, "s3cret", "old-token", 1))
	if _, err := Open(ctx, withCreds, Options{CacheDir: dir, Env: env}); err != nil {
		t.Fatal(err)
	}
	if url := strings.TrimSpace(gittest.Run(t, dir, env, "config", "--get", "remote.origin.url")); url != base+"catalog.git" {
		t.Errorf("origin is %s", url)
	}
	userOnly := withUser(base, "alice")
	if storedRemote(userOnly) != userOnly || credentialEnv(userOnly, nil) != nil {
		t.Errorf("a user without a password: stored %s, env %v", storedRemote(userOnly), credentialEnv(userOnly, nil))
	}
	if _, err := Open(ctx, userOnly, Options{CacheDir: t.TempDir(), Env: gittest.Credentials(t, base, "alice", "s3cret")}); err != nil {
		t.Errorf("a user in the URL, the password from git's credential helper: %v", err)
	}
}

func TestConflict(t *testing.T) {
	t.Parallel()
	bare := gittest.Bare(t)
	env := gittest.Env(t)
	a, b := open(t, bare, env), open(t, bare, env)
	record(t, a, "lab", prom("demo", "1.0.0", "", "alice", "first"))
	record(t, a, "lab", prom("demo", "2.0.0", "1.0.0", "alice", "the new kernel"))
	err := b.Record(ctx, "lab", prom("demo", "1.5.0", "1.0.0", "bob", ""))
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "it runs 2.0.0 now, not 1.0.0") ||
		!strings.Contains(err.Error(), "promoted 2.0.0 by alice at 2026-11-23T10:00:00Z (the new kernel)") || !strings.Contains(err.Error(), bare) {
		t.Fatalf("stale Previous: %v", err)
	}
	if err := b.Record(ctx, "lab", prom("new", "1", "0.9", "bob", "")); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "it runs no version now, not 0.9") {
		t.Errorf("Previous of an image never promoted: %v", err)
	}

	// Opening an existing clone again fetches; another remote's clone is
	// refused.
	again, err := Open(ctx, bare, Options{CacheDir: b.Dir(), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := again.History(ctx, "lab", "demo"); err != nil || versions(h) != "1.0.0 2.0.0" {
		t.Fatalf("History in the reopened clone: %v %v", versions(h), err)
	}
	if _, err := Open(ctx, gittest.Bare(t), Options{CacheDir: b.Dir(), Env: env}); err == nil || !strings.Contains(err.Error(), "is a clone of "+bare) {
		t.Errorf("another remote's clone: %v", err)
	}

	// Rollbacks, across clones.
	record(t, b, "lab", prom("demo", "3.0.0", "2.0.0", "bob", ""))
	rb := prom("demo", "2.0.0", "3.0.0", "bob", "3.0.0 breaks nvidia")
	rb.Rollback = true
	record(t, b, "lab", rb)
	h, err := a.History(ctx, "lab", "demo")
	if cur, back := store.State(h); err != nil || cur != "2.0.0" || back != "1.0.0" {
		t.Fatalf("state after the rollback: %s %s %v", cur, back, err)
	}
	rb = prom("demo", "1.0.0", "2.0.0", "alice", "")
	rb.Rollback = true
	record(t, a, "lab", rb)
	h, err = b.History(ctx, "lab", "demo")
	if cur, back := store.State(h); err != nil || cur != "1.0.0" || back != "" {
		t.Fatalf("state after two rollbacks: %s %s %v", cur, back, err)
	}
	if s := gittest.Run(t, bare, nil, "log", "-2", "--format=%s", "main"); s != "roll back demo to 1.0.0 at lab\nroll back demo to 2.0.0 at lab\n" {
		t.Errorf("rollback subjects: %q", s)
	}

	// Bad input.
	for _, p := range []store.Promotion{prom("Demo", "1", "", "x", ""), prom("demo", "../x", "", "x", ""), prom("demo", "4", "1.0.0", "", ""), prom("demo", "4", "1.0.0", "a <b", "")} {
		if err := a.Record(ctx, "lab", p); err == nil || errors.Is(err, store.ErrConflict) {
			t.Errorf("Record(%+v): %v", p, err)
		}
	}
	if _, err := a.History(ctx, "../lab", "demo"); err == nil {
		t.Error("History of a bad site")
	}
}

// TestPushRace makes another machine push between a Record's check and
// its push, so that its push is rejected.
func TestPushRace(t *testing.T) {
	t.Parallel()
	eachRemote(t, func(t *testing.T, remote, bare string, env []string) {
		testPushRace(t, remote, bare, env)
	})
}

func testPushRace(t *testing.T, remote, bare string, env []string) {
	a, b := open(t, remote, env), open(t, remote, env)
	record(t, a, "lab", prom("imga", "1", "", "alice", ""))
	record(t, a, "lab", prom("imgb", "1", "", "alice", ""))

	// Another image: rebuilt on the new tip, both land.
	pushes := beforeFirstPush(b, func() { record(t, a, "lab", prom("imga", "2", "1", "alice", "a's")) })
	record(t, b, "lab", prom("imgb", "2", "1", "bob", "b's"))
	if *pushes != 2 {
		t.Errorf("%d pushes, want 2", *pushes)
	}
	if log := gittest.Run(t, bare, nil, "log", "--format=%s", "main"); log != "promote imgb 2 at lab\npromote imga 2 at lab\npromote imgb 1 at lab\npromote imga 1 at lab\n" ||
		gittest.Run(t, bare, nil, "rev-list", "--merges", "main") != "" {
		t.Errorf("history not linear:\n%s", log)
	}
	cat, err := open(t, remote, env).Catalog(ctx, "lab")
	if err != nil || versions(cat["imga"]) != "1 2" || versions(cat["imgb"]) != "1 2" {
		t.Fatalf("catalog %v %v", cat, err)
	}

	// The same image: the recheck fails.
	pushes = beforeFirstPush(b, func() { record(t, a, "lab", prom("imga", "3", "2", "alice", "got there first")) })
	err = b.Record(ctx, "lab", prom("imga", "4", "2", "bob", ""))
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "promoted 3 by alice") || *pushes != 1 {
		t.Fatalf("same image: %v (%d pushes)", err, *pushes)
	}
	if h, _ := a.History(ctx, "lab", "imga"); versions(h) != "1 2 3" {
		t.Errorf("imga: %s", versions(h))
	}
}

// TestPushLockContended holds the remote's ref lock during a Record's
// first push, as another push does while the remote updates the branch:
// nothing moved, yet the refusal is transient, and the next push lands.
func TestPushLockContended(t *testing.T) {
	t.Parallel()
	eachRemote(t, func(t *testing.T, remote, bare string, env []string) {
		a := open(t, remote, env)
		record(t, a, "lab", prom("imga", "1", "", "alice", ""))
		lock := filepath.Join(bare, "refs", "heads", "main.lock")
		pushes := 0
		a.beforePush = func() {
			switch pushes++; pushes {
			case 1:
				if err := os.WriteFile(lock, nil, 0o644); err != nil {
					t.Error(err)
				}
			case 2:
				if err := os.Remove(lock); err != nil {
					t.Error(err)
				}
			}
		}
		record(t, a, "lab", prom("imga", "2", "1", "alice", ""))
		if pushes != 2 {
			t.Errorf("%d pushes, want 2", pushes)
		}
		if h, err := open(t, remote, env).History(ctx, "lab", "imga"); err != nil || versions(h) != "1 2" {
			t.Errorf("history %s %v", versions(h), err)
		}
	})
}

// TestRecordProcesses races imagectl processes on separate clones (other
// machines): six promote chains of their own image, two race on one
// image, retrying on ErrConflict.
func TestRecordProcesses(t *testing.T) {
	if os.Getenv("GITCATALOG_HELPER") != "" {
		t.Skip("helper process")
	}
	t.Parallel()
	gittest.Git(t)
	bare := gittest.Bare(t)
	env := gittest.Env(t)
	const chains, racers, n = 6, 2, chainLen
	runHelpers(t, chains+racers, env, func(i int) []string {
		who, image := "chain"+string(rune('a'+i)), "img"+string(rune('a'+i))
		if i >= chains {
			who, image = "racer"+string(rune('a'+i)), "shared"
		}
		return []string{"GITCATALOG_HELPER=1", "GITCATALOG_REMOTE=" + bare, "GITCATALOG_CACHE=" + t.TempDir(),
			"GITCATALOG_WHO=" + who, "GITCATALOG_IMAGE=" + image}
	})
	c := open(t, bare, env)
	cat, err := c.Catalog(ctx, "lab")
	if err != nil || len(cat) != chains+1 {
		t.Fatalf("catalog: %v %v", cat, err)
	}
	for image, h := range cat {
		want := n
		if image == "shared" {
			want = racers * n
		}
		prev := ""
		for _, p := range h {
			if p.Previous != prev {
				t.Errorf("%s: %s follows %q, not %q", image, p.Version, prev, p.Previous)
			}
			prev = p.Version
		}
		if len(h) != want {
			t.Errorf("%s: %d promotions, want %d: %s", image, len(h), want, versions(h))
		}
	}
	// One commit per promotion, authored by its By.
	log := strings.Split(strings.TrimSpace(gittest.Run(t, bare, nil, "log", "--format=%an|%s", "main")), "\n")
	if len(log) != chains*n+racers*n {
		t.Errorf("%d commits, want %d", len(log), chains*n+racers*n)
	}
	for _, l := range log {
		an, s, _ := strings.Cut(l, "|")
		if f := strings.Fields(s); len(f) != 5 || !strings.HasPrefix(f[2], an+".") {
			t.Errorf("commit %q by %s", s, an)
		}
	}
	if merges := gittest.Run(t, bare, nil, "rev-list", "--merges", "main"); merges != "" {
		t.Errorf("merges: %s", merges)
	}
	// A reader on a third clone sees the same.
	for image := range cat {
		h, err := open(t, bare, env).History(ctx, "lab", image)
		if err != nil || !reflect.DeepEqual(h, cat[image]) {
			t.Errorf("%s from a third clone: %v %v", image, h, err)
		}
	}
}

func execSelf(t *testing.T, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// runHelpers runs n helper processes at once, process i with the
// environment helperEnv(i) and git's env, and fails the test, with its
// output, when one fails.
func runHelpers(t *testing.T, n int, env []string, helperEnv func(i int) []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([][]byte, n)
	for i := range n {
		cmd := execSelf(t, helperEnv(i)...)
		cmd.Env = append(cmd.Env, env...)
		wg.Go(func() { outs[i], errs[i] = cmd.CombinedOutput() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
	}
}

// chainLen is how many versions each helper process promotes.
const chainLen = 3

func TestHelperProcess(t *testing.T) {
	if os.Getenv("GITCATALOG_HELPER") == "" {
		t.Skip("run by TestRecordProcesses and TestEvidenceProcesses")
	}
	c, err := Open(ctx, os.Getenv("GITCATALOG_REMOTE"), Options{CacheDir: os.Getenv("GITCATALOG_CACHE")})
	if err != nil {
		t.Fatal(err)
	}
	who, image := os.Getenv("GITCATALOG_WHO"), os.Getenv("GITCATALOG_IMAGE")
	if os.Getenv("GITCATALOG_HELPER") == "evidence" {
		evidenceHelper(t, c, who)
		return
	}
	for i := 1; i <= chainLen; i++ {
		v := who + "." + string(rune('0'+i))
		for try := 1; ; try++ {
			h, err := c.History(ctx, "lab", image)
			if err != nil {
				t.Fatal(err)
			}
			cur, _ := store.State(h)
			err = c.Record(ctx, "lab", prom(image, v, cur, who, "step "+v))
			if err == nil {
				break
			}
			if !errors.Is(err, store.ErrConflict) || try == 20 {
				t.Fatal(err)
			}
			t.Logf("try %d: %v", try, err)
		}
	}
}

// blackhole forwards connections to a git daemon until held is set, then
// accepts them and never answers.
type blackhole struct {
	addr  string
	held  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newBlackhole(t *testing.T, target string) *blackhole {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bh := &blackhole{addr: l.Addr().String()}
	t.Cleanup(func() {
		l.Close()
		bh.mu.Lock()
		for _, c := range bh.conns {
			c.Close()
		}
		bh.mu.Unlock()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			bh.mu.Lock()
			bh.conns = append(bh.conns, c)
			bh.mu.Unlock()
			if bh.held.Load() {
				continue
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			bh.mu.Lock()
			bh.conns = append(bh.conns, d)
			bh.mu.Unlock()
			go func() { io.Copy(d, c); d.(*net.TCPConn).CloseWrite() }()
			go func() { io.Copy(c, d); c.(*net.TCPConn).CloseWrite() }()
		}
	}()
	return bh
}

func TestCancel(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	gittest.BareIn(t, root, "catalog.git")
	daemon := gittest.Daemon(t, root)
	bh := newBlackhole(t, strings.TrimSuffix(strings.TrimPrefix(daemon, "git://"), "/"))
	c := open(t, "git://"+bh.addr+"/catalog.git", gittest.Env(t))
	record(t, c, "lab", prom("demo", "1", "", "alice", ""))

	// A remote that accepts and never answers.
	bh.held.Store(true)
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	err := c.Record(tctx, "lab", prom("demo", "2", "1", "alice", ""))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Fatalf("Record against a hung remote: %v after %v", err, time.Since(start))
	}
	t.Logf("%v after %v", err, time.Since(start))
	f, err := os.Open(c.lockPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("the clone stayed locked: %v", err)
	}
	f.Close()

	// A cancelled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Record(cctx, "lab", prom("demo", "2", "1", "alice", "")); !errors.Is(err, context.Canceled) {
		t.Errorf("Record with a cancelled context: %v", err)
	}

	// The clone still works, even with the lock files a killed git may
	// leave.
	for _, p := range []string{".git/index.lock", ".git/refs/remotes/origin/main.lock"} {
		if err := os.WriteFile(filepath.Join(c.Dir(), p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bh.held.Store(false)
	record(t, c, "lab", prom("demo", "2", "1", "alice", ""))
	if h, err := c.History(ctx, "lab", "demo"); err != nil || versions(h) != "1 2" {
		t.Errorf("History: %v %v", versions(h), err)
	}
}

func TestDecodeStrictly(t *testing.T) {
	t.Parallel()
	bare := gittest.Bare(t)
	env := gittest.Env(t)
	work := t.TempDir()
	gittest.Run(t, work, env, "clone", "-q", bare, ".")
	for name, content := range map[string]string{
		"sites/lab/unknown.json": `{"schema_version":1,"site":"lab","image":"unknown","promotions":[],"extra":1}`,
		"sites/lab/schema.json":  `{"schema_version":2,"site":"lab","image":"schema","promotions":[]}`,
		"sites/lab/moved.json":   `{"schema_version":1,"site":"lab","image":"other","promotions":[]}`,
	} {
		os.MkdirAll(filepath.Join(work, "sites/lab"), 0o755)
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Run(t, work, env, "add", ".")
	gittest.Run(t, work, env, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "bad files")
	gittest.Run(t, work, env, "push", "-q", "origin", "HEAD:main")
	c := open(t, bare, env)
	for image, want := range map[string]string{"unknown": `unknown field "extra"`, "schema": "schema version 2", "moved": `image "other"`} {
		_, err := c.History(ctx, "lab", image)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "sites/lab/"+image+".json in "+bare) {
			t.Errorf("%s: %v", image, err)
		}
	}
	if _, err := c.Catalog(ctx, "lab"); err == nil {
		t.Error("Catalog read bad files")
	}
}

// TestCallerEnvCannotRedirectGit gives the catalog the environment of a
// git hook in another repository, in another language (the CLI passes its
// whole environment): git still works on the clone, in English, and the
// other repository is untouched.
func TestCallerEnvCannotRedirectGit(t *testing.T) {
	bare := gittest.Bare(t)
	other := t.TempDir()
	gittest.Run(t, other, nil, "init", "-q")
	env := append(gittest.Env(t), "GIT_DIR="+filepath.Join(other, ".git"), "GIT_WORK_TREE="+other, "LC_ALL=de_DE.UTF-8", "LANGUAGE=de")
	c := open(t, bare, env)
	record(t, c, "east", prom("img", "1.0", "", "alice", "first"))
	h, err := c.History(ctx, "east", "img")
	if err != nil || versions(h) != "1.0" {
		t.Fatalf("history %v %v", h, err)
	}
	if out := gittest.Run(t, other, nil, "status", "--porcelain"); out != "" {
		t.Errorf("the other repository changed:\n%s", out)
	}
}

// A catalog named by a relative path has the clone of the directory it
// names: the same as its absolute path's, another one from another
// working directory.
func TestCloneDirOfRelativeRemote(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/catalog", "b/catalog"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join(root, "a"))
	fromA := CloneDir("/cache", "catalog")
	if abs := CloneDir("/cache", filepath.Join(root, "a", "catalog")); fromA != abs {
		t.Errorf("clone of ./catalog %s, of its absolute path %s", fromA, abs)
	}
	t.Chdir(filepath.Join(root, "b"))
	if fromB := CloneDir("/cache", "catalog"); fromB == fromA {
		t.Errorf("two catalogs named ./catalog share the clone %s", fromB)
	}
	if CloneDir("/cache", "ssh://git@example/c.git") == CloneDir("/cache", "ssh://git@example/d.git") {
		t.Error("two remotes share a clone")
	}
}

// TestDefaultCloneDir: without CacheDir, the clone lives under the cache
// directory the environment names, as the other caches do.
func TestDefaultCloneDir(t *testing.T) {
	remote := gittest.Bare(t)
	cache := t.TempDir()
	env := append(gittest.Env(t), "IMAGECTL_CACHE_DIR="+cache)
	if _, err := Open(ctx, remote, Options{Env: env}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(CloneDir(cache, remote), ".git")); err != nil {
		t.Errorf("no clone under $IMAGECTL_CACHE_DIR: %v", err)
	}
}
