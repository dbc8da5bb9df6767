package gitcatalog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/filelock"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/gitcatalog/gittest"
	"github.com/gpuaas/imagectl/store/storetest"
)

// holdFirstPush makes c's next push wait until n writes in all have been
// handed in since, as they are when a rollout's goroutines record while
// a push is in flight.
func holdFirstPush(t *testing.T, c *Catalog, n int) {
	n += int(c.handedIn.Load())
	pushes := 0
	c.beforePush = func() {
		if pushes++; pushes != 1 {
			return
		}
		for {
			if int(c.handedIn.Load()) >= n {
				return
			}
			if t.Context().Err() != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// racedOnce opens a catalog of bare holding imga 1, whose first push
// another machine beats with a promotion of its own (imgz 1): that push is
// refused, and the write is tried again.
func racedOnce(t *testing.T, bare string, env []string) *Catalog {
	t.Helper()
	c, other := open(t, bare, env), open(t, bare, env)
	record(t, c, "lab", prom("imga", "1", "", "alice", ""))
	beforeFirstPush(c, func() { record(t, other, "lab", prom("imgz", "1", "", "bob", "first")) })
	return c
}

// TestGroupCommit records from many goroutines through one Catalog, as a
// rollout does: the writes that arrive while a push is in flight go in
// one commit, each with its own compare-and-swap, and all land.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	eachRemote(t, func(t *testing.T, remote, bare string, env []string) {
		c := open(t, remote, env)
		record(t, c, "site0", prom("imga", "1", "", "alice", "the canary"))
		const n = 8
		holdFirstPush(t, c, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			site := fmt.Sprintf("site%d", i+1)
			wg.Go(func() { errs[i] = c.Record(ctx, site, prom("imga", "1", "", "alice", "the rollout")) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("site%d: %v", i+1, err)
			}
		}
		commits := strings.Count(gittest.Run(t, bare, nil, "log", "--format=%H", "main"), "\n") - 1
		if commits >= n || commits < 1 {
			t.Errorf("%d commits for %d promotions through one catalog, want fewer (and some)", commits, n)
		}
		r := open(t, remote, env)
		for i := range n {
			if h, err := r.History(ctx, fmt.Sprintf("site%d", i+1), "imga"); err != nil || versions(h) != "1" {
				t.Errorf("site%d: %s %v", i+1, versions(h), err)
			}
		}
		// A batch's commit says every promotion in it.
		log := gittest.Run(t, bare, nil, "log", "--format=%B", "main")
		for i := range n {
			if !strings.Contains(log, fmt.Sprintf("promote imga 1 at site%d\n", i+1)) {
				t.Errorf("no commit says site%d's promotion:\n%s", i+1, log)
			}
		}
	})
}

// TestGroupCommitConflict: one write of a batch fails its compare-and-swap;
// it alone gets ErrConflict, the others land in the batch's commit.
func TestGroupCommitConflict(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	record(t, c, "lab", prom("imga", "1", "", "alice", ""))
	holdFirstPush(t, c, 4)
	var wg sync.WaitGroup
	var first, stale, other, third error
	wg.Go(func() { first = c.Record(ctx, "lab", prom("imgz", "1", "", "alice", "")) })
	// Queued behind the first push, in whatever order: two that hold,
	// one whose Previous is not what lab runs.
	wg.Go(func() { stale = c.Record(ctx, "lab", prom("imga", "3", "2", "bob <bob@example.com>", "")) })
	wg.Go(func() { other = c.Record(ctx, "lab", prom("imga", "2", "1", "carol", "")) })
	wg.Go(func() { third = c.Record(ctx, "lab", prom("imgb", "1", "", "dave", "")) })
	wg.Wait()
	if first != nil || other != nil || third != nil {
		t.Fatalf("the writes that hold: %v; %v; %v", first, other, third)
	}
	// imga 2 may have landed before imga 3 was applied (then 3 holds) or
	// after (then 3 conflicts): what matters is that each got its own
	// outcome and nothing was lost.
	h, err := open(t, bare, env).History(ctx, "lab", "imga")
	switch {
	case err != nil:
		t.Fatal(err)
	case stale == nil && versions(h) != "1 2 3":
		t.Errorf("imga 3 held, history %s", versions(h))
	case stale != nil && (!errors.Is(stale, store.ErrConflict) || versions(h) != "1 2"):
		t.Errorf("imga 3: %v, history %s", stale, versions(h))
	}
	if h, err := open(t, bare, env).History(ctx, "lab", "imgb"); err != nil || versions(h) != "1" {
		t.Errorf("imgb: %s %v", versions(h), err)
	}
	if log := gittest.Run(t, bare, nil, "log", "--format=%B", "main"); !strings.Contains(log, "\nCo-authored-by: ") {
		// Whichever write was pushed alone, two of different authors
		// were batched after it.
		t.Errorf("no co-author in the batch's commit:\n%s", log)
	}
}

// TestRetryBound: a push refused because the branch moved is retried on
// the new tip until Options.RetryFor, then given up with what happened.
func TestRetryBound(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	other := open(t, bare, env)
	record(t, other, "lab", prom("imga", "1", "", "alice", ""))
	c, err := Open(ctx, bare, Options{CacheDir: filepath.Join(t.TempDir(), "clone"), Env: env, RetryFor: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	n := 1
	c.beforePush = func() {
		n++
		record(t, other, "lab", prom("imga", fmt.Sprint(n), fmt.Sprint(n-1), "alice", "always first"))
	}
	err = c.Record(ctx, "lab", prom("imgb", "1", "", "bob", ""))
	if err == nil || !strings.Contains(err.Error(), "the branch main moved under each of 1 attempts") {
		t.Fatalf("got %v", err)
	}
	// With time to retry, the moving branch is re-read and the write
	// lands, however many attempts that takes (more than the 10 an
	// earlier imagectl gave up after; the waits shortened).
	c.retryFor = DefaultRetryFor
	c.waitBase, c.waitCeiling = time.Millisecond, 10*time.Millisecond
	pushes := 0
	c.beforePush = func() {
		if pushes++; pushes <= 12 {
			n++
			record(t, other, "lab", prom("imga", fmt.Sprint(n), fmt.Sprint(n-1), "alice", "first again"))
		}
	}
	record(t, c, "lab", prom("imgb", "1", "", "bob", ""))
	if pushes != 13 {
		t.Errorf("%d pushes, want 13", pushes)
	}
	cat, err := open(t, bare, env).Catalog(ctx, "lab")
	if err != nil || len(cat["imga"]) != n || versions(cat["imgb"]) != "1" {
		t.Errorf("catalog %v %v", cat, err)
	}
}

// TestCancelOneOfABatch: a writer whose context ends leaves its batch; the
// others' writes still land.
func TestCancelOneOfABatch(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	record(t, c, "lab", prom("imga", "1", "", "alice", ""))
	gone, cancel := context.WithCancel(ctx)
	cancel()
	var wg sync.WaitGroup
	var errGone, errKept error
	holdFirstPush(t, c, 2)
	wg.Go(func() { errKept = c.Record(ctx, "lab", prom("imgb", "1", "", "alice", "")) })
	wg.Go(func() { errGone = c.Record(gone, "lab", prom("imgc", "1", "", "alice", "")) })
	wg.Wait()
	if errKept != nil {
		t.Errorf("the kept write: %v", errKept)
	}
	cat, err := open(t, bare, env).Catalog(ctx, "lab")
	if err != nil || versions(cat["imgb"]) != "1" {
		t.Fatalf("catalog %v %v", cat, err)
	}
	// The cancelled one never landed, or landed and said so.
	if (errGone == nil) != (len(cat["imgc"]) == 1) || (errGone != nil && !errors.Is(errGone, context.Canceled)) {
		t.Errorf("the cancelled write: %v, imgc %s", errGone, versions(cat["imgc"]))
	}
}

// TestCancelWhileQueued: a write queued behind a batch whose push is in
// flight returns when its context ends, without waiting for that batch,
// and is not committed.
func TestCancelWhileQueued(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	record(t, c, "lab", prom("imga", "1", "", "alice", ""))
	release, pushing := make(chan struct{}), make(chan struct{})
	first := true
	c.beforePush = func() {
		if first {
			first = false
			close(pushing)
			<-release
		}
	}
	held := make(chan error, 1)
	go func() { held <- c.Record(ctx, "lab", prom("imgb", "1", "", "alice", "")) }()
	<-pushing
	queued, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	base := c.handedIn.Load()
	go func() { gone <- c.Record(queued, "lab", prom("imgc", "1", "", "alice", "")) }()
	for c.handedIn.Load() == base {
		time.Sleep(time.Millisecond)
	}
	cancel()
	// It returns while the batch ahead of it is still held.
	if err := <-gone; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "recording imgc 1 at site lab") {
		t.Errorf("the cancelled write: %v", err)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	record(t, c, "lab", prom("imgd", "1", "", "alice", ""))
	cat, err := open(t, bare, env).Catalog(ctx, "lab")
	if err != nil || len(cat) != 3 || cat["imgc"] != nil {
		t.Errorf("catalog %v %v", cat, err)
	}
}

// TestOverrideInCommit: a promotion made despite its site's policy says
// so in its commit, with the reason and what was missing, as git
// trailers.
func TestOverrideInCommit(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := open(t, bare, env)
	p := prom("imga", "2", "", "alice", "hotfix for the fleet")
	p.Gate = &store.Gate{Missing: []string{"canary: 0 of 2 passing hosts for h200", "soak ends\n2026-11-25"}, Override: "outage, approved by\nbob"}
	record(t, c, "fleet", p)
	tr := gittest.Run(t, bare, nil, "log", "-1", "--format=%(trailers:only,unfold)", "main")
	want := "Policy: overridden\nPolicy-Override: outage, approved by bob\nPolicy-Missing: canary: 0 of 2 passing hosts for h200\nPolicy-Missing: soak ends 2026-11-25\n\n"
	if tr != want {
		t.Errorf("trailers:\n%q\nwant\n%q", tr, want)
	}
	h, err := c.History(ctx, "fleet", "imga")
	if err != nil || len(h) != 1 || h[0].Gate == nil || h[0].Gate.Override != p.Gate.Override {
		t.Errorf("history %+v %v", h, err)
	}
	p = prom("imga", "3", "2", "alice", "")
	p.Gate = &store.Gate{Met: true}
	record(t, c, "fleet", p)
	if tr := gittest.Run(t, bare, nil, "log", "-1", "--format=%(trailers:key=Policy,valueonly)", "main"); strings.TrimSpace(tr) != "met" {
		t.Errorf("a met policy: %q", tr)
	}
}

// TestRevokeLandsBeforePush: a revocation pushed from another machine
// while a promotion of the version is being pushed wins the race; the
// promotion, applied again at the new tip, reads it there and is refused
// (store.ErrRevoked), a rollback to a revoked version too.
func TestRevokeLandsBeforePush(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c, other := open(t, bare, env), open(t, bare, env)
	record(t, c, "lab", prom("imga", "1", "", "alice", ""))
	record(t, c, "lab", prom("imga", "2", "1", "alice", ""))
	pushes := beforeFirstPush(c, func() {
		if err := other.Revoke(ctx, store.Revocation{Image: "imga", Version: "3", Reason: "bad NIC firmware", By: "bob"}); err != nil {
			t.Error(err)
		}
	})
	err := c.Record(ctx, "lab", prom("imga", "3", "2", "alice", "the canary"))
	if !errors.Is(err, store.ErrRevoked) || !strings.Contains(err.Error(), "bad NIC firmware") || *pushes != 1 {
		t.Fatalf("promoting a version revoked meanwhile: %v (%d pushes)", err, *pushes)
	}
	c.beforePush = nil
	if err := other.Revoke(ctx, store.Revocation{Image: "imga", Version: "1", Reason: "kernel panic", By: "bob"}); err != nil {
		t.Fatal(err)
	}
	back := prom("imga", "1", "2", "alice", "")
	back.Rollback = true
	if err := c.Record(ctx, "lab", back); !errors.Is(err, store.ErrRevoked) {
		t.Errorf("rolling back to a revoked version: %v", err)
	}
	if h, err := c.History(ctx, "lab", "imga"); err != nil || versions(h) != "1 2" {
		t.Errorf("history %s %v", versions(h), err)
	}
	// Undone, it may be promoted.
	if err := other.Revoke(ctx, store.Revocation{Image: "imga", Version: "3", Reason: "a false alarm", By: "bob", Undo: true}); err != nil {
		t.Fatal(err)
	}
	record(t, c, "lab", prom("imga", "3", "2", "alice", ""))
}

// TestLockReleasedForBackoff: between the attempts of a write whose push
// was refused, the clone's lock is free for the readers sharing it.
func TestLockReleasedForBackoff(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := racedOnce(t, bare, env)
	sleeps, free := 0, false
	c.sleep = func(ctx context.Context, d time.Duration) error {
		sleeps++
		unlock, ok, err := filelock.Lock(c.lockPath(), true, false)
		if err != nil {
			return err
		}
		if free = ok; ok {
			unlock()
		}
		return nil
	}
	record(t, c, "lab", prom("imgb", "1", "", "alice", ""))
	if sleeps != 1 || !free {
		t.Errorf("%d waits between attempts; the clone's lock free during them: %v", sleeps, free)
	}
}

// TestLockWaitBounded: a write waits for the clone's lock no longer than
// Options.RetryFor.
func TestLockWaitBounded(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c, err := Open(ctx, bare, Options{CacheDir: filepath.Join(t.TempDir(), "clone"), Env: env, RetryFor: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Another process sharing the clone holds its lock throughout.
	unlock, ok, err := filelock.Lock(c.lockPath(), true, false)
	if err != nil || !ok {
		t.Fatalf("locking the clone: %v %v", ok, err)
	}
	defer unlock()
	done := make(chan error, 1)
	go func() { done <- c.Record(ctx, "lab", prom("imga", "1", "", "alice", "")) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		// Not a bound on speed: without one, the write waits for as long
		// as the lock is held.
		unlock()
		t.Fatalf("the write still waits for the clone's lock a minute on (RetryFor 50ms): %v", <-done)
	}
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "held it past the 50ms a write waits and retries for") {
		t.Errorf("got %v", err)
	}
}

// TestJoinEndedBatch: a write handed in after every writer of a batch
// gave up (the batch's context ended) does not join that batch, whose
// next attempt would fail with its context: it is the next batch, and
// lands.
func TestJoinEndedBatch(t *testing.T) {
	t.Parallel()
	bare, env := gittest.Bare(t), gittest.Env(t)
	c := racedOnce(t, bare, env)
	gone, cancel := context.WithCancel(ctx)
	late := make(chan error, 1)
	c.sleep = func(batch context.Context, d time.Duration) error {
		// The wait is over; then the only writer gives up, and another
		// hands in a write before the next attempt begins.
		cancel()
		<-batch.Done()
		base := c.handedIn.Load()
		go func() { late <- c.Record(ctx, "lab", prom("imgc", "1", "", "carol", "")) }()
		for c.handedIn.Load() == base {
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	if err := c.Record(gone, "lab", prom("imgb", "1", "", "alice", "")); !errors.Is(err, context.Canceled) {
		t.Errorf("the write that gave up: %v", err)
	}
	if err := <-late; err != nil {
		t.Fatalf("the write handed in after: %v", err)
	}
	cat, err := open(t, bare, env).Catalog(ctx, "lab")
	if err != nil || versions(cat["imgc"]) != "1" || cat["imgb"] != nil {
		t.Errorf("catalog %v %v", cat, err)
	}
}

// TestNoOpOnBatchWritesFollowsPush: a change that writes nothing because
// an earlier change of its batch wrote the same (two callers recording
// one comparison) is not done before the batch's push: when that push
// fails for good, both callers hear it; when it lands, both are done and
// the commit is the writer's alone.
func TestNoOpOnBatchWritesFollowsPush(t *testing.T) {
	t.Parallel()
	for _, lands := range []bool{false, true} {
		bare, env := gittest.Bare(t), gittest.Env(t)
		other := open(t, bare, env)
		record(t, other, "lab", prom("imga", "1", "", "alice", ""))
		c, err := Open(ctx, bare, Options{CacheDir: filepath.Join(t.TempDir(), "clone"), Env: env, RetryFor: time.Nanosecond, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		n := int(c.handedIn.Load()) + 3
		pushes := 0
		c.beforePush = func() {
			switch pushes++; pushes {
			case 1: // the first write's push waits until both others are queued
				for int(c.handedIn.Load()) < n && t.Context().Err() == nil {
					time.Sleep(time.Millisecond)
				}
			case 2: // the batch of both is beaten, and has no time to retry
				if !lands {
					record(t, other, "lab", prom("imgz", "1", "", "bob", "first"))
				}
			}
		}
		bc := storetest.Comparison("img", "1", "tcg", false, t0)
		var wg sync.WaitGroup
		var first, a, b error
		wg.Go(func() { first = c.Record(ctx, "lab", prom("imgb", "1", "", "carol", "")) })
		for int(c.handedIn.Load()) < n-2 {
			time.Sleep(time.Millisecond)
		}
		wg.Go(func() { a = c.AddBootComparison(ctx, bc) })
		wg.Go(func() { b = c.AddBootComparison(ctx, bc) })
		wg.Wait()
		if first != nil {
			t.Fatal(first)
		}
		if pushes != 2 {
			t.Fatalf("lands %v: %d pushes, want 2 (the two comparisons not in one batch)", lands, pushes)
		}
		if !lands {
			if a == nil || b == nil || !strings.Contains(a.Error()+b.Error(), "moved under each of 1 attempts") {
				t.Errorf("a failed push: the callers heard %v; %v", a, b)
			}
			if cs, err := open(t, bare, env).BootComparisons(ctx, "img", "1"); err != nil || len(cs) != 0 {
				t.Errorf("recorded: %+v %v", cs, err)
			}
			continue
		}
		if a != nil || b != nil {
			t.Errorf("a push that landed: %v; %v", a, b)
		}
		if log := gittest.Run(t, bare, nil, "log", "-1", "--format=%s", "main"); strings.TrimSpace(log) != "record a boot comparison of img 1 (slice/converged, tcg)" {
			t.Errorf("the batch's commit: %s", log)
		}
	}
}
