package gitcatalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpuaas/imagectl/internal/backoff"
	"github.com/gpuaas/imagectl/store"
)

// DefaultRetryFor is how long a write keeps retrying a push refused
// because the branch moved (Options.RetryFor).
const DefaultRetryFor = 2 * time.Minute

// The full-jitter schedule between pushes: up to 250 ms, 500 ms, 1 s, …
// 5 s (internal/backoff.Jitter).
const (
	retryBase    = 250 * time.Millisecond
	retryCeiling = 5 * time.Second
)

// A change is one writer's mutation of the catalog's files. apply reads
// what it changes at the tip through t and writes the new contents, or
// returns why it cannot (store.ErrConflict when its compare-and-swap
// fails). It runs again at every tip a retry builds on, so a concurrent
// writer's change is read, never overwritten. One that writes nothing
// (what it records is there already) is done without a commit when the
// tip holds it, and with its batch's push when an earlier change of the
// batch wrote it.
type change struct {
	what        string // what the writer does, the prefix of its errors
	apply       func(ctx context.Context, t *tree) error
	msg         string // its commit message: what, why, trailers
	name, email string // its author
	at          time.Time

	ctx  context.Context
	done chan error
	stop func() bool // stops the batch context's watch of ctx
}

func (ch *change) finish(err error) {
	if err != nil {
		err = fmt.Errorf("%s: %w", ch.what, err)
	}
	ch.done <- err
}

// tree is the catalog's files at a tip as a batch of changes rewrites
// them: what the earlier changes of the batch wrote, then the tip's.
type tree struct {
	c      *Catalog
	tip    string
	files  map[string][]byte // written by the changes applied so far
	staged map[string][]byte // written by the change being applied
	// batchRead are the paths the change being applied read as an
	// earlier change of the batch wrote them, not as the tip has them.
	batchRead map[string]bool
}

// read is the file at path (false when there is none), read within limit
// bytes.
func (t *tree) read(ctx context.Context, path string, limit int64) ([]byte, bool, error) {
	if b, ok := t.staged[path]; ok {
		return b, true, nil
	}
	if b, ok := t.files[path]; ok {
		t.batchRead[path] = true
		return b, true, nil
	}
	return t.c.readBlob(ctx, t.tip, path, limit)
}

// atTip says whether every file the change being applied read from the
// batch's earlier writes is the tip's as it is: a change that wrote
// nothing is then done, what it records is in the remote already;
// otherwise what it records lands with the batch's push, or not.
func (t *tree) atTip(ctx context.Context) (bool, error) {
	for p := range t.batchRead {
		b, ok, err := t.c.readBlob(ctx, t.tip, p, store.MaxRecords)
		if err != nil {
			return false, err
		}
		if !ok || !bytes.Equal(b, t.files[p]) {
			return false, nil
		}
	}
	return true, nil
}

func (t *tree) write(path string, b []byte) { t.staged[path] = b }

// update commits ch on the remote tip and pushes it, with the changes
// other goroutines of this process hand in while a push is in flight
// (one commit, one push for all of them; each keeps its own
// compare-and-swap and its own error). It returns ch's outcome.
func (c *Catalog) update(ctx context.Context, ch *change) error {
	ch.ctx, ch.done = ctx, make(chan error, 1)
	c.mu.Lock()
	c.queue = append(c.queue, ch)
	c.handedIn.Add(1)
	if !c.draining {
		c.draining = true
		go c.drain()
	}
	c.mu.Unlock()
	select {
	case err := <-ch.done:
		return err
	case <-ctx.Done():
	}
	// Still queued behind another batch: it leaves without waiting for
	// that batch. Taken into a batch: the batch says whether it landed.
	c.mu.Lock()
	for i, q := range c.queue {
		if q == ch {
			c.queue = append(c.queue[:i:i], c.queue[i+1:]...)
			c.mu.Unlock()
			return fmt.Errorf("%s: %w", ch.what, ctx.Err())
		}
	}
	c.mu.Unlock()
	return <-ch.done
}

// drain commits the queued changes, a batch at a time, until none is
// left.
func (c *Catalog) drain() {
	for {
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		if len(batch) == 0 {
			c.draining = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.commitBatch(batch)
	}
}

// members is a batch's context: it ends when every change still in the
// batch has had its own context end (a Ctrl-C), or has its outcome, not
// when one has. A batch whose context ended takes no more changes (join):
// one handed in since waits for the next batch, which starts with a live
// context.
type members struct {
	mu     sync.Mutex
	live   int
	ended  bool
	cancel context.CancelFunc
}

// start makes batch the first members: all are counted before any
// context is watched, so that one already cancelled cannot end the batch
// before the others are in it.
func (m *members) start(batch []*change) {
	m.mu.Lock()
	m.live += len(batch)
	m.mu.Unlock()
	for _, ch := range batch {
		ch.stop = context.AfterFunc(ch.ctx, m.leave)
	}
}

// join adds ch to the batch, unless the batch's context has ended.
func (m *members) join(ch *change) bool {
	m.mu.Lock()
	if m.ended {
		m.mu.Unlock()
		return false
	}
	m.live++
	m.mu.Unlock()
	ch.stop = context.AfterFunc(ch.ctx, m.leave)
	return true
}

func (m *members) leave() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live--; m.live == 0 {
		m.ended = true
		m.cancel()
	}
}

// done finishes ch with err, out of the batch.
func (m *members) done(ch *change, err error) {
	if ch.stop() {
		m.leave()
	}
	ch.finish(err)
}

// commitBatch is the update loop: each attempt, under the clone's lock,
// fetches, applies each change at the tip, commits what applied and
// pushes without force (attempt). A push refused because the branch moved
// (or its lock was held) is retried on the new tip, every change applied
// afresh, after a full-jitter wait, until Options.RetryFor has passed.
// The lock is not held through the wait, so that the readers sharing the
// clone (History, Evidence, Revocations, here and in other processes) get
// in between attempts; the waits for it count against RetryFor.
func (c *Catalog) commitBatch(batch []*change) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &members{cancel: cancel}
	m.start(batch)
	failAll := func(err error) {
		for _, ch := range batch {
			if ctx.Err() != nil && ch.ctx.Err() != nil {
				m.done(ch, ch.ctx.Err())
			} else {
				m.done(ch, err)
			}
		}
	}

	start := time.Now()
	var pushErr error
	base := ""
	for attempt := 1; ; attempt++ {
		// Writers that came since join, while the batch's context lives;
		// those that gave up leave.
		if attempt > 1 {
			c.mu.Lock()
			var waiting []*change
			for _, ch := range c.queue {
				if m.join(ch) {
					batch = append(batch, ch)
				} else {
					waiting = append(waiting, ch)
				}
			}
			c.queue = waiting
			c.mu.Unlock()
		}
		kept := batch[:0]
		for _, ch := range batch {
			if err := ch.ctx.Err(); err != nil {
				m.done(ch, err)
			} else {
				kept = append(kept, ch)
			}
		}
		batch = kept
		if len(batch) == 0 {
			return
		}
		unlock, err := c.lockWithin(ctx, start)
		if err != nil {
			failAll(err)
			return
		}
		var tip string
		batch, tip, pushErr, err = c.attempt(ctx, m, batch, attempt, base, pushErr)
		unlock()
		base = tip
		if err != nil {
			failAll(err)
			return
		}
		if len(batch) == 0 {
			return
		}
		if pushErr == nil {
			for _, ch := range batch {
				m.done(ch, nil)
			}
			return
		}
		var ge *gitError
		if ctx.Err() != nil || !errors.As(pushErr, &ge) || !rejected(ge.stderr) {
			failAll(fmt.Errorf("pushing to %s: %w", c.Location(), pushErr))
			return
		}
		wait := backoff.Jitter(attempt, c.waitBase, c.waitCeiling)
		if spent := time.Since(start); spent+wait > c.retryFor {
			if lockContended(pushErr) {
				failAll(fmt.Errorf("pushing to %s: the remote's lock on the branch %s was held at the last of %d attempts in %s, giving up (a push that crashed leaves refs/heads/%s.lock behind on the remote): %w",
					c.Location(), c.branch, attempt, spent.Round(time.Second), c.branch, pushErr))
			} else {
				failAll(fmt.Errorf("pushing to %s: the branch %s moved under each of %d attempts in %s, giving up: %w",
					c.Location(), c.branch, attempt, spent.Round(time.Second), pushErr))
			}
			return
		}
		if err := c.sleep(ctx, wait); err != nil {
			failAll(err)
			return
		}
	}
}

// lockWithin takes the clone's lock for an attempt of a batch that started
// at start, waiting no longer than the batch's Options.RetryFor allows.
func (c *Catalog) lockWithin(ctx context.Context, start time.Time) (func(), error) {
	lctx, cancel := context.WithDeadline(ctx, start.Add(c.retryFor))
	defer cancel()
	unlock, err := c.lock(lctx)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("waiting for the lock of the clone %s: another imagectl sharing the clone held it past the %s a write waits and retries for, giving up", c.dir, c.retryFor)
	}
	return unlock, err
}

// attempt is one try of the update loop, under the clone's lock: it
// fetches the tip, applies each change of batch at it (one whose apply
// fails is done with that error), commits what applied and pushes. It
// returns the changes in the commit, the tip, and the push's error; err
// fails the whole batch. lastPush is the previous attempt's push error,
// base its tip.
func (c *Catalog) attempt(ctx context.Context, m *members, batch []*change, attempt int, base string, lastPush error) (applied []*change, tip string, pushErr, err error) {
	tip, err = c.fetch(ctx)
	if err != nil {
		return batch, tip, nil, err
	}
	if attempt > 1 && tip == base && !lockContended(lastPush) {
		// Rejected, yet nothing moved: not a race we can retry. (A push
		// that lost the remote's ref lock to another push that then failed
		// too sees nothing moved either: that one is retried.)
		return batch, tip, nil, fmt.Errorf("pushing to %s: %w", c.Location(), lastPush)
	}
	t := &tree{c: c, tip: tip, files: map[string][]byte{}}
	applied = batch[:0]
	var writers []*change
	for _, ch := range batch {
		t.staged, t.batchRead = map[string][]byte{}, map[string]bool{}
		if err := ch.apply(ctx, t); err != nil {
			m.done(ch, err)
			continue
		}
		if len(t.staged) == 0 {
			// Nothing to change: a record there already. At the tip, it is
			// done; as an earlier change of the batch wrote it, it is in
			// the commit (with nothing of its own) and its outcome is the
			// push's.
			switch at, err := t.atTip(ctx); {
			case err != nil:
				m.done(ch, err)
			case at:
				m.done(ch, nil)
			default:
				applied = append(applied, ch)
			}
			continue
		}
		for p, b := range t.staged {
			t.files[p] = b
		}
		applied = append(applied, ch)
		writers = append(writers, ch)
	}
	if len(writers) == 0 {
		// Nothing written, so no change relies on the batch's writes.
		for _, ch := range applied {
			m.done(ch, nil)
		}
		return applied[:0], tip, nil, nil
	}
	if err := c.commit(ctx, tip, t.files, writers); err != nil {
		return applied, tip, nil, err
	}
	if c.beforePush != nil {
		c.beforePush()
	}
	_, pushErr = c.git(ctx, nil, "push", "-q", "origin", "HEAD:refs/heads/"+c.branch)
	return applied, tip, pushErr, nil
}

// commit makes the local branch the remote tip (or an empty branch with
// the README when there is none) plus one commit writing files, with the
// batch's message and author.
func (c *Catalog) commit(ctx context.Context, tip string, files map[string][]byte, batch []*change) error {
	add := []string{"add", "--"}
	if tip != "" {
		if _, err := c.git(ctx, nil, "checkout", "-q", "-f", "-B", c.branch, tip); err != nil {
			return fmt.Errorf("resetting the clone %s to %s: %w", c.dir, c.Location(), err)
		}
	} else {
		// The first commit: an unborn branch and an empty tree.
		if _, err := c.git(ctx, nil, "symbolic-ref", "HEAD", "refs/heads/"+c.branch); err != nil {
			return err
		}
		c.git(ctx, nil, "update-ref", "-d", "refs/heads/"+c.branch) // there may be none
		if _, err := c.git(ctx, nil, "read-tree", "--empty"); err != nil {
			return err
		}
		for _, p := range []string{"sites", "revocations", "comparisons", "README.md"} {
			if err := os.RemoveAll(filepath.Join(c.dir, p)); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(c.dir, "README.md"), []byte(readme), 0o644); err != nil {
			return fmt.Errorf("writing the catalog's README.md in %s: %w", c.dir, err)
		}
		add = append(add, "README.md")
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		abs := filepath.Join(c.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return fmt.Errorf("writing %s in the clone %s: %w", p, c.dir, err)
		}
		if err := os.WriteFile(abs, files[p], 0o644); err != nil {
			return fmt.Errorf("writing %s in the clone %s: %w", p, c.dir, err)
		}
	}
	if _, err := c.git(ctx, nil, append(add, paths...)...); err != nil {
		return fmt.Errorf("committing %s in the clone %s: %w", strings.Join(paths, ", "), c.dir, err)
	}
	first := batch[0]
	now := c.now().UTC()
	env := []string{
		"GIT_AUTHOR_NAME=" + first.name, "GIT_AUTHOR_EMAIL=" + first.email, fmt.Sprintf("GIT_AUTHOR_DATE=%d +0000", first.at.Unix()),
		"GIT_COMMITTER_NAME=" + first.name, "GIT_COMMITTER_EMAIL=" + first.email, fmt.Sprintf("GIT_COMMITTER_DATE=%d +0000", now.Unix()),
	}
	if _, err := c.gitEnv(ctx, env, []byte(batchMessage(batch)), "commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", "-"); err != nil {
		return fmt.Errorf("committing %s in the clone %s: %w", strings.Join(paths, ", "), c.dir, err)
	}
	return nil
}

// batchMessage is the commit message of a batch: a change's own, or for
// several their subjects in one line (or the first and a count), every
// message in the body, and a Co-authored-by trailer for each author
// besides the first.
func batchMessage(batch []*change) string {
	if len(batch) == 1 {
		return batch[0].msg
	}
	var subjects []string
	for _, ch := range batch {
		s, _, _ := strings.Cut(ch.msg, "\n")
		subjects = append(subjects, s)
	}
	subject := strings.Join(subjects, "; ")
	if len(subject) > 72 {
		subject = fmt.Sprintf("%s and %d more", subjects[0], len(batch)-1)
	}
	var b strings.Builder
	b.WriteString(subject + "\n")
	for _, ch := range batch {
		b.WriteString("\n" + strings.TrimRight(ch.msg, "\n") + "\n")
	}
	seen := map[string]bool{batch[0].name + " <" + batch[0].email + ">": true}
	var coauthors []string
	for _, ch := range batch[1:] {
		if a := ch.name + " <" + ch.email + ">"; !seen[a] {
			seen[a] = true
			coauthors = append(coauthors, "Co-authored-by: "+a)
		}
	}
	if len(coauthors) > 0 {
		b.WriteString("\n" + strings.Join(coauthors, "\n") + "\n")
	}
	return b.String()
}
