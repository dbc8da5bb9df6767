package gitcatalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/backoff"
	"github.com/gpuaas/imagectl/store"
)

const schemaVersion = 1

// maxAttempts bounds Record's pushes when other machines keep moving the
// branch (or holding its lock).
const maxAttempts = 10

// file is one site and image's promotion history, sites/SITE/IMAGE.json.
type file struct {
	SchemaVersion int               `json:"schema_version"`
	Site          string            `json:"site"`
	Image         string            `json:"image"`
	Promotions    []store.Promotion `json:"promotions"`
}

func filePath(site, image string) string { return path.Join("sites", site, image+".json") }

const readme = `# imagectl promotion catalog

This repository is the promotion catalog of imagectl: which image version
each site runs, who promoted it, when and why, and what a rollback returns
to. imagectl writes it (store/gitcatalog); review, blame and revert it like
any other change.

- sites/<site>/<image>.json is an image's promotion history at a site,
  oldest first.
- Every promotion is one commit, authored by whoever promoted, with the
  reason in its message.

imagectl pushes without force and retries when the branch moved under it;
do not force-push or rewrite this branch's history.
`

// History implements store.Promotions: it fetches and reads the file from
// the remote branch.
func (c *Catalog) History(ctx context.Context, site, image string) ([]store.Promotion, error) {
	if err := errors.Join(store.CheckKey("site", site), store.CheckKey("image", image)); err != nil {
		return nil, fmt.Errorf("reading a promotion history from %s: %w", c.Location(), err)
	}
	tip, err := c.lockedFetch(ctx)
	if err != nil {
		return nil, err
	}
	h, err := c.readHistory(ctx, tip, site, image)
	if err != nil {
		return nil, err
	}
	if h == nil {
		h = []store.Promotion{}
	}
	return h, nil
}

// Catalog implements store.Promotions: it fetches and reads every image's
// file of the site from the remote branch, at one commit.
func (c *Catalog) Catalog(ctx context.Context, site string) (map[string][]store.Promotion, error) {
	if err := store.CheckKey("site", site); err != nil {
		return nil, fmt.Errorf("reading a site's catalog from %s: %w", c.Location(), err)
	}
	tip, err := c.lockedFetch(ctx)
	if err != nil {
		return nil, err
	}
	cat := map[string][]store.Promotion{}
	if tip == "" {
		return cat, nil
	}
	dir := path.Join("sites", site) + "/"
	out, err := c.git(ctx, nil, "ls-tree", "-z", "--name-only", tip, "--", dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", dir, c.Location(), err)
	}
	for _, name := range strings.Split(string(out), "\x00") {
		image, ok := strings.CutSuffix(path.Base(name), ".json")
		if name == "" || !ok {
			continue
		}
		if err := store.CheckKey("image", image); err != nil {
			return nil, fmt.Errorf("reading %s in %s: %w", name, c.Location(), err)
		}
		h, err := c.readHistory(ctx, tip, site, image)
		if err != nil {
			return nil, err
		}
		cat[image] = h
	}
	return cat, nil
}

// lockedFetch fetches under the clone's lock (two fetches in one clone
// would fight over its refs) and returns the remote branch's commit.
func (c *Catalog) lockedFetch(ctx context.Context) (string, error) {
	unlock, err := c.lock(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the catalog %s: %w", c.Location(), err)
	}
	defer unlock()
	return c.fetch(ctx)
}

// readHistory reads a site and image's file at commit (nil when the file
// or the commit is not there), strictly: no unknown fields, the schema
// version this package writes, and the site and image of its path.
func (c *Catalog) readHistory(ctx context.Context, commit, site, image string) ([]store.Promotion, error) {
	if commit == "" {
		return nil, nil
	}
	p := filePath(site, image)
	out, err := c.git(ctx, nil, "ls-tree", "-z", "--name-only", commit, "--", p)
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", p, c.Location(), err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	b, err := c.git(ctx, nil, "cat-file", "blob", commit+":"+p)
	if err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", p, c.Location(), err)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", p, c.Location(), err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return nil, fmt.Errorf("reading %s in %s: more than one JSON value", p, c.Location())
	}
	if f.SchemaVersion != schemaVersion {
		return nil, fmt.Errorf("reading %s in %s: schema version %d, this imagectl reads %d", p, c.Location(), f.SchemaVersion, schemaVersion)
	}
	if f.Site != site || f.Image != image {
		return nil, fmt.Errorf("reading %s in %s: it holds site %q and image %q", p, c.Location(), f.Site, f.Image)
	}
	for i, pr := range f.Promotions {
		if pr.Image != image {
			return nil, fmt.Errorf("reading %s in %s: promotion %d is of image %q", p, c.Location(), i+1, pr.Image)
		}
	}
	return f.Promotions, nil
}

// Record implements store.Promotions: under the clone's lock it fetches,
// checks p.Previous against the remote branch, commits the appended file
// on the remote tip and pushes, retrying on a new tip when another machine
// pushed first (see the package doc).
func (c *Catalog) Record(ctx context.Context, site string, p store.Promotion) error {
	what := fmt.Sprintf("recording %s %s at site %s in %s", p.Image, p.Version, site, c.Location())
	if err := errors.Join(store.CheckKey("site", site), store.CheckKey("image", p.Image), store.CheckKey("version", p.Version)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	name, email, err := author(p.By)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if p.At.IsZero() {
		p.At = c.now()
	}
	p.At = p.At.UTC()
	unlock, err := c.lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()

	fp := filePath(site, p.Image)
	var hist []store.Promotion
	var pushErr error
	base := ""
	for attempt := 1; ; attempt++ {
		tip, err := c.fetch(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if attempt > 1 && tip == base && !lockContended(pushErr) {
			// Rejected, yet nothing moved: not a race we can retry. (A
			// push that lost the remote's ref lock to another push that
			// then failed too sees nothing moved either: that one is
			// retried.)
			return fmt.Errorf("%s: pushing to %s: %w", what, c.Location(), pushErr)
		}
		recheck := attempt == 1 || base == "" || tip == ""
		if !recheck {
			changed, err := c.git(ctx, nil, "diff", "--name-only", "-z", base, tip)
			if err != nil {
				return fmt.Errorf("%s: looking at what changed in %s: %w", what, c.Location(), err)
			}
			recheck = contains(strings.Split(string(changed), "\x00"), fp)
		}
		if recheck {
			if hist, err = c.readHistory(ctx, tip, site, p.Image); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if cur, _ := store.State(hist); cur != p.Previous {
				return fmt.Errorf("%s: %w: it runs %s now, not %s: %s", what, store.ErrConflict,
					orNone(cur), orNone(p.Previous), describe(changedBy(hist, p.Previous)))
			}
		}
		base = tip
		if err := c.commit(ctx, tip, site, p, hist, name, email); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if c.beforePush != nil {
			c.beforePush()
		}
		_, pushErr = c.git(ctx, nil, "push", "-q", "origin", "HEAD:refs/heads/"+c.branch)
		if pushErr == nil {
			return nil
		}
		var ge *gitError
		if ctx.Err() != nil || !errors.As(pushErr, &ge) || !rejected(ge.stderr) {
			return fmt.Errorf("%s: pushing to %s: %w", what, c.Location(), pushErr)
		}
		if attempt == maxAttempts {
			if lockContended(pushErr) {
				return fmt.Errorf("%s: pushing to %s: the remote's lock on the branch %s was held at the last of %d attempts, giving up (a push that crashed leaves refs/heads/%s.lock behind on the remote): %w",
					what, c.Location(), c.branch, attempt, c.branch, pushErr)
			}
			return fmt.Errorf("%s: pushing to %s: the branch %s moved under each of %d attempts, giving up: %w", what, c.Location(), c.branch, attempt, pushErr)
		}
		// Full jitter over a quarter of the default schedule: up to 250 ms,
		// 500 ms, 1 s, … 7.5 s, so that racing machines spread out.
		if err := backoff.Sleep(ctx, rand.N(backoff.Default(attempt)/4)); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
}

// commit makes the local branch the remote tip (or an empty branch when
// there is none) plus one commit appending p to hist.
func (c *Catalog) commit(ctx context.Context, tip, site string, p store.Promotion, hist []store.Promotion, name, email string) error {
	fp := filePath(site, p.Image)
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
		for _, p := range []string{"sites", "README.md"} {
			if err := os.RemoveAll(filepath.Join(c.dir, p)); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(c.dir, "README.md"), []byte(readme), 0o644); err != nil {
			return fmt.Errorf("writing the catalog's README.md in %s: %w", c.dir, err)
		}
	}
	f := file{SchemaVersion: schemaVersion, Site: site, Image: p.Image, Promotions: append(append([]store.Promotion{}, hist...), p)}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	abs := filepath.Join(c.dir, filepath.FromSlash(fp))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return fmt.Errorf("writing %s in the clone %s: %w", fp, c.dir, err)
	}
	if err := os.WriteFile(abs, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s in the clone %s: %w", fp, c.dir, err)
	}
	add := []string{"add", "--", fp}
	if tip == "" {
		add = append(add, "README.md")
	}
	if _, err := c.git(ctx, nil, add...); err != nil {
		return fmt.Errorf("committing %s in the clone %s: %w", fp, c.dir, err)
	}
	now := c.now().UTC()
	env := []string{
		"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, fmt.Sprintf("GIT_AUTHOR_DATE=%d +0000", p.At.Unix()),
		"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email, fmt.Sprintf("GIT_COMMITTER_DATE=%d +0000", now.Unix()),
	}
	if _, err := c.gitEnv(ctx, env, []byte(message(site, p)), "commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", "-"); err != nil {
		return fmt.Errorf("committing %s in the clone %s: %w", fp, c.dir, err)
	}
	return nil
}

// message is a promotion's commit message: what, why, and trailers.
func message(site string, p store.Promotion) string {
	var b strings.Builder
	if p.Rollback {
		fmt.Fprintf(&b, "roll back %s to %s at %s\n", p.Image, p.Version, site)
	} else {
		fmt.Fprintf(&b, "promote %s %s at %s\n", p.Image, p.Version, site)
	}
	if r := strings.TrimSpace(p.Reason); r != "" {
		b.WriteString("\n" + r + "\n")
	}
	var trailers []string
	if p.Previous != "" {
		trailers = append(trailers, "Previous-Version: "+p.Previous)
	}
	if p.SHA256 != "" {
		trailers = append(trailers, "Image-SHA256: "+p.SHA256)
	}
	if len(trailers) > 0 {
		b.WriteString("\n" + strings.Join(trailers, "\n") + "\n")
	}
	return b.String()
}

var (
	reNameEmail = regexp.MustCompile(`^([^<>]*?)\s*<([^<>\s]+)>$`)
	reEmailJunk = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)
)

// author is the commit author of a promotion's By: "Name <email>", or a
// bare name that gets <name>@imagectl.invalid.
func author(by string) (name, email string, err error) {
	by = strings.TrimSpace(by)
	if m := reNameEmail.FindStringSubmatch(by); m != nil {
		name, email = m[1], m[2]
	} else {
		name = by
		email = strings.Trim(reEmailJunk.ReplaceAllString(by, "-"), "-.") + "@imagectl.invalid"
	}
	if name == "" || strings.ContainsAny(name, "<>\n") {
		return "", "", fmt.Errorf("%q is not who promotes: want a name or \"Name <email>\"", by)
	}
	return name, email, nil
}

// rejected reports whether git push's stderr says the remote branch moved
// (another push got there first), rather than another failure.
func rejected(stderr string) bool {
	for _, s := range []string{"[rejected]", "non-fast-forward", "fetch first", "stale info",
		"cannot lock ref", "failed to update ref", "incorrect old value", "failed to push some refs"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// lockContended is whether a push was refused because another push held
// the remote's ref lock at that moment: transient, unlike a refusal by a
// hook or a protected branch.
func lockContended(err error) bool {
	var ge *gitError
	if !errors.As(err, &ge) {
		return false
	}
	// git's lock error is "cannot lock ref 'R': Unable to create
	// 'R.lock': STRERROR"; only EEXIST is another holder, where EACCES or a
	// name clash would not pass with a retry.
	return strings.Contains(ge.stderr, ".lock': File exists")
}

// changedBy are the promotions at the end of hist since the image last ran
// previous (the last three when it never did).
func changedBy(hist []store.Promotion, previous string) []store.Promotion {
	for i := len(hist) - 1; i >= 0; i-- {
		if cur, _ := store.State(hist[:i]); cur == previous {
			return hist[i:]
		}
	}
	return hist[max(len(hist)-3, 0):]
}

func describe(ps []store.Promotion) string {
	if len(ps) == 0 {
		return "the site has no promotion of it"
	}
	var parts []string
	for _, p := range ps {
		verb := "promoted"
		if p.Rollback {
			verb = "rolled back to"
		}
		s := fmt.Sprintf("%s %s by %s at %s", verb, p.Version, p.By, p.At.UTC().Format(time.RFC3339))
		if p.Reason != "" {
			s += fmt.Sprintf(" (%s)", p.Reason)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func orNone(v string) string {
	if v == "" {
		return "no version"
	}
	return v
}
