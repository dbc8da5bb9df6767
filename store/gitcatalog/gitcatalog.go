// Package gitcatalog owns the promotion catalog kept in a git repository:
// a store.Promotions whose history can be reviewed, blamed and reverted
// like any other GitOps change, and shared by every machine that can push
// to the repository.
//
// Layout. The branch (Options.Branch, "main" by default) holds one JSON
// file per site and image, sites/<site>/<image>.json:
//
//	{"schema_version": 1, "site": SITE, "image": IMAGE, "promotions": [...]}
//
// the host results recorded for a version at a site,
// sites/<site>/evidence/<image>/<version>.json ({"schema_version", "site",
// "image", "version", "evidence": [...]}), the rack proofs of a version at
// a site, sites/<site>/racks/<image>/<version>.json ({"schema_version",
// "site", "image", "version", "rack_proofs": [...]}), a version's boot
// comparisons, of no site, comparisons/<image>/<version>.json
// ({"schema_version", "image", "version", "boot_comparisons": [...]}),
// an image's revocations,
// revocations/<image>.json ({"schema_version", "image", "revocations":
// [...]}), each indented, with a trailing newline, oldest first, and a
// README.md written with the first commit saying what the repository is.
// A file is read strictly (no unknown fields, this schema version, the
// keys of its path in it and in its records) and within a bound checked
// from the blob's size before its content. One file per site and image
// means that promotions of other images never touch the same file. A
// promotion is one commit, authored by its By ("Name <email>", or a bare
// name that gets <name>@imagectl.invalid), with the message "promote
// IMAGE VERSION at SITE" (or "roll back IMAGE to VERSION at SITE"), the
// reason, and Previous-Version and Image-SHA256 trailers (and Policy: met,
// or Policy: overridden with Policy-Override and a Policy-Missing a line
// it lacked, when it carries its site's gate); an AddEvidence
// call, of any number of hosts and sites, is one commit naming each host's
// outcome; a racks check's proofs are one commit, and so is a boot
// comparison (none when the same is there already); a revocation is one
// commit with its reason.
//
// Git. The package runs the git CLI, so it uses the user's git
// credentials as they are configured (credential helpers, ssh-agent and
// ~/.ssh/config, http.extraHeader, GIT_SSH_COMMAND) for ssh, https and file
// remotes. Git runs with GIT_TERMINAL_PROMPT=0 and without a controlling
// terminal, so that a missing credential is an error rather than a prompt
// that hangs; with the caller's context (cancelling it kills git and what
// it started); and with -c settings that keep the user's global config
// (commit signing, hooks, autocrlf) out of the catalog's commits.
//
// The working clone lives in a cache directory (Options.CacheDir). It is
// only a cache: it never holds unpushed work, every read fetches and reads
// the remote branch's tree, and every write starts from the remote tip.
// An flock on the clone serializes the processes of one machine that share
// it.
//
// Writes. Every write (Record, AddEvidence, AddRackProofs,
// AddBootComparison, Revoke) is a change over the
// tip's files that the update loop applies: under the clone's lock it
// fetches, has each change read what it changes at the remote tip and
// write the new contents (Record checks that p.Previous is the image's
// current version at the site, store.ErrConflict otherwise, naming the
// promotions that changed it), commits them on the tip and pushes
// without force. A push refused because the branch moved (another
// machine pushed first), or because another push held the remote's ref
// lock, is the swap failing: the loop fetches again and applies every
// change afresh at the new tip, so a concurrent writer's change is read,
// never lost, after a full-jitter wait that grows with each attempt (the
// clone's lock released for it, so that reads get in), until
// Options.RetryFor (DefaultRetryFor, 2 minutes) has passed or ctx ends;
// the waits for the clone's lock count against it too. Record also reads
// the image's revocations at the tip it applies at and refuses a revoked
// version (store.ErrRevoked), so a revocation that lands while a
// promotion uploads stops it.
//
// Group commit. The writes other goroutines of this process hand in while
// a push is in flight (a rollout promoting sites in parallel) are
// committed together, one commit and one push for the lot, each with its
// own check and its own error: one that conflicts leaves the batch, the
// others land. A batch's commit message is its changes' messages, its
// subject theirs joined (or the first and a count), its author the first
// change's, with Co-authored-by trailers for the others.
package gitcatalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpuaas/imagectl/internal/backoff"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/filelock"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/store"
)

// Options adjust Open.
type Options struct {
	// Branch holds the catalog; "main" by default.
	Branch string
	// CacheDir is where the working clone lives; by default CloneDir
	// under the cache directory the environment names (internal/cachedir):
	// catalogs/<the first 16 hex digits of the remote's sha256>.
	CacheDir string
	// Env is added to git's environment (after the process's own).
	Env []string
	// Now is the clock for promotions without At; time.Now when nil.
	Now func() time.Time
	// RetryFor bounds how long a write retries a push refused because
	// the branch moved (or its lock was held): DefaultRetryFor when 0.
	RetryFor time.Duration
}

// CloneDir is where the working clone of remote lives under an imagectl
// cache directory: catalogs/<the first 16 hex digits of the remote's
// sha256>.
func CloneDir(cacheRoot, remote string) string {
	sum := sha256.Sum256([]byte(storedRemote(absRemote(remote))))
	return filepath.Join(cacheRoot, cachedir.Catalogs, hex.EncodeToString(sum[:])[:16])
}

// dropLegacyClone removes the clone an earlier imagectl kept for a remote
// with credentials under the hash of the whole URL, token included, with
// the token in its config: the clone is now under the hash of the URL
// without them (CloneDir), and that token must not rest in the cache. Only
// a clone dir CloneDir chose is looked beside; a failure leaves it.
func dropLegacyClone(dir, remote string) {
	stored := storedRemote(remote)
	if stored == remote {
		return
	}
	root := filepath.Dir(filepath.Dir(dir))
	if CloneDir(root, remote) != dir {
		return
	}
	sum := sha256.Sum256([]byte(remote))
	legacy := filepath.Join(root, cachedir.Catalogs, hex.EncodeToString(sum[:])[:16])
	if legacy != dir {
		os.RemoveAll(legacy)
	}
}

// absRemote makes a remote that is a relative path to a directory
// absolute: git would take it relative to the clone, and two working
// directories must not share one clone for two catalogs.
func absRemote(remote string) string {
	if strings.Contains(remote, "://") || filepath.IsAbs(remote) {
		return remote
	}
	if st, err := os.Stat(remote); err == nil && st.IsDir() {
		if abs, err := filepath.Abs(remote); err == nil {
			return abs
		}
	}
	return remote
}

// Catalog is a site promotion catalog kept in a git repository.
type Catalog struct {
	remote string
	branch string
	dir    string // the working clone
	env    []string
	now    func() time.Time

	retryFor time.Duration
	// The full-jitter schedule's first and longest wait (retryBase and
	// retryCeiling; a test's shorter).
	waitBase, waitCeiling time.Duration

	// The writes handed in and not yet pushed, and whether a goroutine
	// is committing them (update).
	mu       sync.Mutex
	queue    []*change
	draining bool
	handedIn atomic.Int64 // writes handed in, for tests

	beforePush func() // a test's hook, to make another push win the race
	// sleep is the wait between attempts of a write: backoff.Sleep, or a
	// test's hook.
	sleep func(ctx context.Context, d time.Duration) error
}

var _ store.Promotions = (*Catalog)(nil)

// Open makes or refreshes the working clone of remote's catalog: it
// clones, or fetches when the clone is already there. A remote with no
// commits, or without the branch yet, is an empty catalog; the first
// Record creates the branch.
func Open(ctx context.Context, remote string, opts Options) (*Catalog, error) {
	if remote == "" {
		return nil, errors.New("opening a git catalog: no remote given")
	}
	remote = absRemote(remote)
	// Its credentials are kept out of every output, whatever quotes them
	// (git's messages included).
	redact.RegisterURL(remote)
	c := &Catalog{remote: remote, branch: opts.Branch, dir: opts.CacheDir, env: opts.Env, now: opts.Now, retryFor: opts.RetryFor}
	if c.retryFor <= 0 {
		c.retryFor = DefaultRetryFor
	}
	c.waitBase, c.waitCeiling = retryBase, retryCeiling
	c.sleep = backoff.Sleep
	if c.branch == "" {
		c.branch = "main"
	}
	if c.now == nil {
		c.now = time.Now
	}
	what := "opening the git catalog " + c.Location()
	if c.dir == "" {
		root, err := cachedir.Default(append(os.Environ(), c.env...))
		if err != nil {
			return nil, fmt.Errorf("%s: finding the cache directory: %w", what, err)
		}
		c.dir = CloneDir(root, remote)
	}
	dropLegacyClone(c.dir, remote)
	unlock, err := c.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	if err := c.initClone(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := store.ViewFetch(ctx, c.viewKey(), func() (string, error) { return c.fetch(ctx) }); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return c, nil
}

// Location names the remote in messages, with any password in it
// redacted.
func (c *Catalog) Location() string { return redact.URL(c.remote) }

// Dir is the working clone's directory.
func (c *Catalog) Dir() string { return c.dir }

// initClone makes the cache directory a clone of the remote (git init and
// the origin remote: the fetch that follows fills it), or checks that the
// one there is.
func (c *Catalog) initClone(ctx context.Context) error {
	if _, err := c.git(ctx, nil, "init", "-q", "--initial-branch="+c.branch); err != nil {
		return fmt.Errorf("making the clone %s: %w", c.dir, err)
	}
	out, err := c.git(ctx, nil, "config", "--get", "remote.origin.url")
	stored := storedRemote(c.remote)
	switch url := strings.TrimSpace(string(out)); {
	case err != nil || url == "":
		if _, err := c.git(ctx, nil, "remote", "add", "origin", stored); err != nil {
			return fmt.Errorf("making the clone %s: %w", c.dir, err)
		}
	case url != stored && storedRemote(url) == stored:
		// A clone an earlier imagectl made with the credentials (these or
		// a rotated token) in its config: they go.
		if _, err := c.git(ctx, nil, "remote", "set-url", "origin", stored); err != nil {
			return fmt.Errorf("removing the credentials from the clone %s: %w", c.dir, err)
		}
	case url != stored:
		return fmt.Errorf("the cache directory %s is a clone of %s, not of this catalog", c.dir, redact.URL(url))
	}
	return nil
}

// storedRemote is the remote as the clone's config keeps it: an http(s)
// URL without its user and password (a token in the URL must not rest in
// the cache; credentialEnv hands it to each git that talks to the remote),
// any other as given (an ssh user is not a secret).
func storedRemote(remote string) string {
	u, ok := credentialURL(remote)
	if !ok {
		return remote
	}
	u.User = nil
	return u.String()
}

// credentialURL parses an http(s) remote that carries a password (a user
// alone is left to git's credential helpers and .netrc, which a header
// would override).
func credentialURL(remote string) (*url.URL, bool) {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User == nil {
		return nil, false
	}
	if _, ok := u.User.Password(); !ok {
		return nil, false
	}
	return u, true
}

// credentialEnv is the environment that gives git the credentials of an
// http(s) remote's URL, as an Authorization header set through git's
// GIT_CONFIG_* variables (after any the environment env has): not in the
// clone's config, not in a command line another user can read. Nil for a
// remote without them.
func credentialEnv(remote string, env []string) []string {
	u, ok := credentialURL(remote)
	if !ok {
		return nil
	}
	pass, _ := u.User.Password()
	n := 0
	if c, err := strconv.Atoi(environ.Get(env, "GIT_CONFIG_COUNT")); err == nil && c > 0 {
		n = c
	}
	header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	return []string{
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", n+1),
		fmt.Sprintf("GIT_CONFIG_KEY_%d=http.%s.extraHeader", n, storedRemote(remote)),
		fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, header),
	}
}

// fetch brings the remote branch into refs/remotes/origin/BRANCH and
// returns its commit, "" when the remote has no such branch.
func (c *Catalog) fetch(ctx context.Context) (string, error) {
	ref := "refs/remotes/origin/" + c.branch
	_, err := c.git(ctx, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", "origin", "+refs/heads/"+c.branch+":"+ref)
	var ge *gitError
	if errors.As(err, &ge) && strings.Contains(ge.stderr, "couldn't find remote ref") {
		// An empty repository, or one without the branch yet.
		if _, err := c.git(ctx, nil, "update-ref", "-d", ref); err != nil {
			return "", err
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("fetching %s from %s: %w", c.branch, c.Location(), err)
	}
	out, err := c.git(ctx, nil, "rev-parse", "--verify", "-q", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("reading the fetched %s of %s: %w", c.branch, c.Location(), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// gitConfig are the settings every git command runs with, so that the
// user's global config cannot sign, hook or rewrite the catalog's commits
// or make git's messages (which Record parses) another language's.
var gitConfig = []string{
	"-c", "commit.gpgsign=false",
	"-c", "tag.gpgsign=false",
	"-c", "push.gpgsign=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.autocrlf=false",
	"-c", "core.safecrlf=false",
	"-c", "core.fsmonitor=false",
	"-c", "core.quotePath=false",
	"-c", "gc.auto=0",
	"-c", "advice.detachedHead=false",
	"-c", "init.defaultBranch=main",
	"-c", "fetch.recurseSubmodules=false",
	"-c", "push.recurseSubmodules=no",
}

// repoEnv are variables that would point git at another repository than
// the clone (set, say, when imagectl runs from a git hook).
var repoEnv = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX"}

// gitError is a git command that failed, with what it said.
type gitError struct {
	cmd    string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	if e.stderr == "" {
		return fmt.Sprintf("git %s: %v", e.cmd, e.err)
	}
	return fmt.Sprintf("git %s: %v: %s", e.cmd, e.err, e.stderr)
}

func (e *gitError) Unwrap() error { return e.err }

// maxStderr bounds how much of git's stderr an error quotes (its end,
// where git says what failed).
const maxStderr = 2048

// git runs git in the clone with stdin (nil for none) and extra env
// (key=value, last), returning its stdout.
func (c *Catalog) git(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return c.gitEnv(ctx, nil, stdin, args...)
}

func (c *Catalog) gitEnv(ctx context.Context, env []string, stdin []byte, args ...string) ([]byte, error) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "git", append(append([]string{"-C", c.dir}, gitConfig...), args...)...)
	// The caller's environment (the CLI passes the whole of its own) may
	// add credentials and ssh settings, but never point git at another
	// repository (a hook's GIT_DIR) or change its language, which the
	// push-rejection check reads: those are removed from all of it, and
	// the forced settings come last.
	for _, kv := range append(append(os.Environ(), c.env...), env...) {
		k, _, _ := strings.Cut(kv, "=")
		if !contains(repoEnv, k) && k != "LC_ALL" && k != "LANGUAGE" && k != "GIT_TERMINAL_PROMPT" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, credentialEnv(c.remote, cmd.Env)...)
	cmd.Env = append(cmd.Env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "LANGUAGE=")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Its own session: no terminal to prompt on, and one process group to
	// kill with what git started (ssh, git-remote-http) when ctx ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > maxStderr {
			msg = "…" + msg[len(msg)-maxStderr:]
		}
		return stdout.Bytes(), &gitError{cmd: args[0], stderr: msg, err: err}
	}
	return stdout.Bytes(), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lock takes the clone's flock (on .imagectl.lock beside .git, which holds
// between processes and between open files of one process), waiting until
// it is free or ctx ends. Closing the file releases it, as does the end of
// the process, so a killed imagectl never leaves the clone locked.
func (c *Catalog) lock(ctx context.Context) (func(), error) {
	unlock, err := filelock.WaitContext(ctx, c.lockPath(), "the clone "+c.dir)
	if err != nil {
		return nil, err
	}
	c.removeStaleGitLocks()
	return unlock, nil
}

// removeStaleGitLocks removes the lock files a git killed with its
// context left in the clone (index.lock, refs/…/main.lock): under the
// clone's lock no other git runs in it, so any there is stale.
func (c *Catalog) removeStaleGitLocks() {
	gitDir := filepath.Join(c.dir, ".git")
	stale, _ := filepath.Glob(filepath.Join(gitDir, "*.lock"))
	filepath.WalkDir(filepath.Join(gitDir, "refs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			stale = append(stale, p)
		}
		return nil
	})
	for _, p := range stale {
		os.Remove(p)
	}
}

func (c *Catalog) lockPath() string { return filepath.Join(c.dir, ".imagectl.lock") }
