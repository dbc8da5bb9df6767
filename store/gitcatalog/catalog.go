package gitcatalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/store"
)

const schemaVersion = 1

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
to; what hosts deployed with a version found when they checked it; and
which versions must not run anywhere. imagectl writes it
(store/gitcatalog); review, blame and revert it like any other change.

- sites/<site>/<image>.json is an image's promotion history at a site,
  oldest first (a promotion made despite its site's policy says what was
  missing and why it went ahead).
- sites/<site>/evidence/<image>/<version>.json are the validation results
  of the hosts at the site that run the version, oldest first: each host's
  checks, pass or fail, and who recorded it, when and how.
- sites/<site>/racks/<image>/<version>.json are the site's rack
  controllers' verdicts of whether they serve the version (imagectl
  warm-racks, promote or rollback --warm-racks), oldest first.
- comparisons/<image>/<version>.json are the version's boot comparisons
  (imagectl evidence add-comparison): how long its baked tgz took to
  validate against the same work done at first boot, of no site.
- revocations/<image>.json is an image's revocations, oldest first: the
  versions that must not run at any site, why, and their undoing.
- Every promotion and revocation is a commit, authored by whoever made it,
  with the reason in its message; a host check's results are one commit.
  Writes one imagectl makes at the same moment (a rollout's sites) may
  share a commit that names each.

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
	return store.ViewFetch(ctx, c.viewKey(), func() (string, error) { return c.fetch(ctx) })
}

// viewKey is the catalog's key in a store.OneView view.
func (c *Catalog) viewKey() string { return c.remote + "\x00" + c.branch }

// maxHistory bounds the promotion history file read: a promotion is a
// few hundred bytes, and a site's history of tens of thousands fits (the
// directory store's bound on a site's catalog).
const maxHistory = 16 << 20

// readBlob is the file at path in commit (false when the file or the
// commit is not there), refused unbuffered when it is over limit bytes:
// its size is read from the tree before its content.
func (c *Catalog) readBlob(ctx context.Context, commit, p string, limit int64) ([]byte, bool, error) {
	if commit == "" {
		return nil, false, nil
	}
	out, err := c.git(ctx, nil, "ls-tree", "-l", "-z", commit, "--", p)
	if err != nil {
		return nil, false, fmt.Errorf("reading %s in %s: %w", p, c.Location(), err)
	}
	if len(out) == 0 {
		return nil, false, nil
	}
	// "MODE TYPE OBJECT SIZE\tPATH\x00", SIZE padded on the left.
	meta, _, _ := strings.Cut(string(out), "\t")
	f := strings.Fields(meta)
	if len(f) != 4 || f[1] != "blob" {
		return nil, false, fmt.Errorf("reading %s in %s: it is not a file (%s)", p, c.Location(), meta)
	}
	size, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return nil, false, fmt.Errorf("reading %s in %s: its size %q: %w", p, c.Location(), f[3], err)
	}
	if size > limit {
		return nil, false, fmt.Errorf("reading %s in %s: it is %d bytes, more than the %d this imagectl reads", p, c.Location(), size, limit)
	}
	b, err := c.git(ctx, nil, "cat-file", "blob", f[2])
	if err != nil {
		return nil, false, fmt.Errorf("reading %s in %s: %w", p, c.Location(), err)
	}
	if int64(len(b)) != size {
		return nil, false, fmt.Errorf("reading %s in %s: %d bytes, its tree says %d", p, c.Location(), len(b), size)
	}
	return b, true, nil
}

// decodeStrictly decodes b, the file p, into v: one JSON value, no
// unknown fields.
func (c *Catalog) decodeStrictly(p string, b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("reading %s in %s: %w", p, c.Location(), err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return fmt.Errorf("reading %s in %s: more than one JSON value", p, c.Location())
	}
	return nil
}

// checkSchema refuses a file of another schema version than this
// package writes.
func (c *Catalog) checkSchema(p string, v int) error {
	if v != schemaVersion {
		return fmt.Errorf("reading %s in %s: schema version %d, this imagectl reads %d", p, c.Location(), v, schemaVersion)
	}
	return nil
}

// readHistory reads a site and image's file at commit (nil when the file
// or the commit is not there).
func (c *Catalog) readHistory(ctx context.Context, commit, site, image string) ([]store.Promotion, error) {
	p := filePath(site, image)
	b, ok, err := c.readBlob(ctx, commit, p, maxHistory)
	if err != nil || !ok {
		return nil, err
	}
	return c.decodeHistory(site, image, b)
}

// decodeHistory decodes a site and image's file strictly: no unknown
// fields, the schema version this package writes, and the site and image
// of its path.
func (c *Catalog) decodeHistory(site, image string, b []byte) ([]store.Promotion, error) {
	p := filePath(site, image)
	var f file
	if err := c.decodeStrictly(p, b, &f); err != nil {
		return nil, err
	}
	if err := c.checkSchema(p, f.SchemaVersion); err != nil {
		return nil, err
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

// Record implements store.Promotions: it re-reads the site and image's
// file at the remote tip, checks p.Previous against it (store.ErrConflict
// otherwise, naming the promotions that changed it), reads the image's
// revocations at the same tip and refuses a revoked p.Version
// (store.ErrRevoked, a rollback's too), and commits the
// appended file on the tip, through the update loop (update): retried on
// every new tip until Options.RetryFor, batched with the other writes of
// this process that arrive while a push is in flight.
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
	fp := filePath(site, p.Image)
	return c.update(ctx, &change{
		what: what, msg: message(site, p), name: name, email: email, at: p.At,
		apply: func(ctx context.Context, t *tree) error {
			var hist []store.Promotion
			b, ok, err := t.read(ctx, fp, maxHistory)
			if err == nil && ok {
				hist, err = c.decodeHistory(site, p.Image, b)
			}
			if err != nil {
				return err
			}
			if cur, _ := store.State(hist); cur != p.Previous {
				return fmt.Errorf("%w: it runs %s now, not %s: %s", store.ErrConflict,
					orNone(cur), orNone(p.Previous), describe(changedBy(hist, p.Previous)))
			}
			var revs []store.Revocation
			b, ok, err = t.read(ctx, revocationPath(p.Image), store.MaxRecords)
			if err == nil && ok {
				revs, err = c.decodeRevocations(p.Image, b)
			}
			if err != nil {
				return err
			}
			if err := store.RefuseRevoked(revs, p.Image, p.Version); err != nil {
				return err
			}
			f := file{SchemaVersion: schemaVersion, Site: site, Image: p.Image, Promotions: append(append([]store.Promotion{}, hist...), p)}
			out, err := json.MarshalIndent(f, "", "  ")
			if err != nil {
				return err
			}
			t.write(fp, append(out, '\n'))
			return nil
		},
	})
}

// message is a promotion's commit message: what, why, and trailers.
func message(site string, p store.Promotion) string {
	var b strings.Builder
	if p.Rollback {
		fmt.Fprintf(&b, "roll back %s to %s at %s\n", p.Image, p.Version, site)
	} else {
		fmt.Fprintf(&b, "promote %s %s at %s\n", p.Image, p.Version, site)
	}
	// Every value goes in on one line: a line break in it could end the
	// body and forge trailers.
	if r := oneLine(p.Reason); r != "" {
		b.WriteString("\n" + r + "\n")
	}
	var trailers []string
	if p.Previous != "" {
		trailers = append(trailers, "Previous-Version: "+oneLine(p.Previous))
	}
	if p.SHA256 != "" {
		trailers = append(trailers, "Image-SHA256: "+oneLine(p.SHA256))
	}
	// The site's policy: met, or overridden with what it lacked.
	if g := p.Gate; g != nil {
		switch {
		case g.Met:
			trailers = append(trailers, "Policy: met")
		case g.Override != "":
			trailers = append(trailers, "Policy: overridden", "Policy-Override: "+oneLine(g.Override))
			for _, m := range g.Missing {
				trailers = append(trailers, "Policy-Missing: "+oneLine(m))
			}
		}
	}
	if len(trailers) > 0 {
		b.WriteString("\n" + strings.Join(trailers, "\n") + "\n")
	}
	return b.String()
}

// oneLine is s with its runs of white space (line breaks among them) made
// one space, for a value a commit message embeds.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
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
