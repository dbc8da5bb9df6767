package gitcatalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/store"
)

// evidenceFile is one site, image and version's host results,
// sites/SITE/evidence/IMAGE/VERSION.json, oldest first.
type evidenceFile struct {
	versionFile
	Evidence []store.Evidence `json:"evidence"`
}

// versionFile is the head of a file of one image version's records, at
// a site (evidence, rack proofs) or of no site (boot comparisons: Site
// ""): what it holds, in which schema.
type versionFile struct {
	SchemaVersion int    `json:"schema_version"`
	Site          string `json:"site,omitempty"`
	Image         string `json:"image"`
	Version       string `json:"version"`
}

func (v versionFile) head() versionFile { return v }

// decodeVersionFile decodes the file at p strictly into f, and checks its
// head: the schema version this package writes, and the site, image and
// version of its path.
func (c *Catalog) decodeVersionFile(p, site, image, version string, b []byte, f interface{ head() versionFile }) error {
	if err := c.decodeStrictly(p, b, f); err != nil {
		return err
	}
	h := f.head()
	if err := c.checkSchema(p, h.SchemaVersion); err != nil {
		return err
	}
	if h.Site != site || h.Image != image || h.Version != version {
		return fmt.Errorf("reading %s in %s: it holds site %q, image %q and version %q", p, c.Location(), h.Site, h.Image, h.Version)
	}
	return nil
}

// revocationFile is one image's revocation history,
// revocations/IMAGE.json, oldest first.
type revocationFile struct {
	SchemaVersion int                `json:"schema_version"`
	Image         string             `json:"image"`
	Revocations   []store.Revocation `json:"revocations"`
}

// rackProofFile is one site, image and version's rack proofs,
// sites/SITE/racks/IMAGE/VERSION.json, oldest first.
type rackProofFile struct {
	versionFile
	RackProofs []store.RackProof `json:"rack_proofs"`
}

func rackProofPath(site, image, version string) string {
	return path.Join("sites", site, "racks", image, version+".json")
}

func evidenceDir(site, image string) string { return path.Join("sites", site, "evidence", image) }

func evidencePath(site, image, version string) string {
	return path.Join(evidenceDir(site, image), version+".json")
}

func revocationPath(image string) string { return path.Join("revocations", image+".json") }

// comparisonFile is one image version's boot comparisons,
// comparisons/IMAGE/VERSION.json, oldest recorded first: a version's
// head without a site.
type comparisonFile struct {
	versionFile
	BootComparisons []store.BootComparison `json:"boot_comparisons"`
}

func comparisonPath(image, version string) string {
	return path.Join("comparisons", image, version+".json")
}

// decodeEvidence decodes a version's evidence file strictly: the schema
// version this package writes, and the site, image and version of its
// path, in the file and in every result.
func (c *Catalog) decodeEvidence(site, image, version string, b []byte) ([]store.Evidence, error) {
	p := evidencePath(site, image, version)
	var f evidenceFile
	if err := c.decodeVersionFile(p, site, image, version, b, &f); err != nil {
		return nil, err
	}
	if err := store.CheckEvidenceFile(p+" in "+c.Location(), site, image, version, f.Evidence); err != nil {
		return nil, err
	}
	return f.Evidence, nil
}

// decodeRevocations decodes an image's revocation file strictly: the
// schema version this package writes, and the image of its path, in the
// file and in every revocation.
func (c *Catalog) decodeRevocations(image string, b []byte) ([]store.Revocation, error) {
	p := revocationPath(image)
	var f revocationFile
	if err := c.decodeStrictly(p, b, &f); err != nil {
		return nil, err
	}
	if err := c.checkSchema(p, f.SchemaVersion); err != nil {
		return nil, err
	}
	if f.Image != image {
		return nil, fmt.Errorf("reading %s in %s: it holds image %q", p, c.Location(), f.Image)
	}
	if err := store.CheckRevocationFile(p+" in "+c.Location(), image, f.Revocations); err != nil {
		return nil, err
	}
	return f.Revocations, nil
}

// readRecords reads, at commit tip, the records file (at pathOf(key),
// decoded by decode) of key, or of every key of kind in dir when key is
// "", in key order; a file that is not there holds none.
func readRecords[T any](ctx context.Context, c *Catalog, tip, dir, kind, key string,
	pathOf func(key string) string, decode func(key string, b []byte) ([]T, error)) ([]T, error) {
	keys := []string{key}
	if key == "" {
		var err error
		if keys, err = c.listJSON(ctx, tip, dir, kind); err != nil {
			return nil, err
		}
	}
	out := []T{}
	for _, k := range keys {
		b, ok, err := c.readBlob(ctx, tip, pathOf(k), store.MaxRecords)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		rs, err := decode(k, b)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// rewrite is a change's write of the records file at p in t: the records
// decode reads of it (none when there is no file), made the new file by
// next, encoded within store.MaxRecords (store.EncodeRecords); nothing
// when that is the file as it is.
func rewrite[T any](ctx context.Context, t *tree, p string, decode func(b []byte) ([]T, error), next func(had []T) any) error {
	var had []T
	b, ok, err := t.read(ctx, p, store.MaxRecords)
	if err == nil && ok {
		had, err = decode(b)
	}
	if err != nil {
		return err
	}
	out, err := store.EncodeRecords(p, next(had))
	if err != nil {
		return err
	}
	if !ok || !bytes.Equal(out, b) {
		t.write(p, out)
	}
	return nil
}

// listJSON is the names, less ".json", of the files directly in dir at
// commit whose names are store keys of kind (others are not imagectl's).
func (c *Catalog) listJSON(ctx context.Context, commit, dir, kind string) ([]string, error) {
	if commit == "" {
		return nil, nil
	}
	out, err := c.git(ctx, nil, "ls-tree", "-z", commit, "--", dir+"/")
	if err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", dir, c.Location(), err)
	}
	var names []string
	for _, entry := range strings.Split(string(out), "\x00") {
		meta, name, ok := strings.Cut(entry, "\t")
		if f := strings.Fields(meta); !ok || len(f) != 3 || f[1] != "blob" {
			continue
		}
		if n, ok := strings.CutSuffix(path.Base(name), ".json"); ok && store.CheckKey(kind, n) == nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Evidence implements store.Promotions: it fetches and reads the
// version's file (every version's when version is "") from the remote
// branch, at one commit, oldest result first.
func (c *Catalog) Evidence(ctx context.Context, site, image, version string) ([]store.Evidence, error) {
	what := fmt.Sprintf("reading the evidence of %s at site %s in %s", image, site, c.Location())
	keys := []error{store.CheckKey("site", site), store.CheckKey("image", image)}
	if version != "" {
		keys = append(keys, store.CheckKey("version", version))
	}
	if err := errors.Join(keys...); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	tip, err := c.lockedFetch(ctx)
	if err != nil {
		return nil, err
	}
	out, err := readRecords(ctx, c, tip, evidenceDir(site, image), "version", version,
		func(v string) string { return evidencePath(site, image, v) },
		func(v string, b []byte) ([]store.Evidence, error) { return c.decodeEvidence(site, image, v, b) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].RecordedAt.Before(out[j].RecordedAt) })
	return out, nil
}

// AddEvidence implements store.Promotions: one change, so one commit (and
// one push, with the process's other writes in flight), appending each
// result to its site, image and version's file (store.AppendEvidence: a
// host's latest store.KeepPerHost results), refused whole when a file
// would be over store.MaxRecords.
func (c *Catalog) AddEvidence(ctx context.Context, evs []store.Evidence) error {
	what := fmt.Sprintf("recording %d host results in %s", len(evs), c.Location())
	if len(evs) == 0 {
		return nil
	}
	evs = append([]store.Evidence{}, evs...)
	for i := range evs {
		if err := evs[i].Check(); err != nil {
			return fmt.Errorf("%s: result %d: %w", what, i+1, err)
		}
		if evs[i].RecordedAt.IsZero() {
			evs[i].RecordedAt = c.now()
		}
		evs[i].RecordedAt = evs[i].RecordedAt.UTC()
	}
	name, email, err := author(orImagectl(evs[0].RecordedBy))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	type key struct{ site, image, version string }
	byFile := map[key][]store.Evidence{}
	var keys []key
	for _, e := range evs {
		k := key{e.Site, e.Result.Image, e.Result.Version}
		if _, ok := byFile[k]; !ok {
			keys = append(keys, k)
		}
		byFile[k] = append(byFile[k], e)
	}
	return c.update(ctx, &change{
		what: what, msg: evidenceMessage(evs), name: name, email: email, at: evs[0].RecordedAt,
		apply: func(ctx context.Context, t *tree) error {
			for _, k := range keys {
				err := rewrite(ctx, t, evidencePath(k.site, k.image, k.version),
					func(b []byte) ([]store.Evidence, error) { return c.decodeEvidence(k.site, k.image, k.version, b) },
					func(had []store.Evidence) any {
						return evidenceFile{versionFile: versionFile{SchemaVersion: schemaVersion, Site: k.site, Image: k.image, Version: k.version},
							Evidence: store.AppendEvidence(had, byFile[k])}
					})
				if err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// evidenceMessage says what AddEvidence records: whose results, how many
// passed, and each host's outcome with the checks it failed.
func evidenceMessage(evs []store.Evidence) string {
	type group struct {
		name         string
		hosts, fails int
	}
	var groups []*group
	byName := map[string]*group{}
	var lines []string
	for _, e := range evs {
		n := fmt.Sprintf("%s %s at %s", e.Result.Image, e.Result.Version, e.Site)
		g := byName[n]
		if g == nil {
			g = &group{name: n}
			byName[n] = g
			groups = append(groups, g)
		}
		g.hosts++
		// What the host wrote goes in on one line each: a line break in it
		// could end the body and forge trailers.
		host, run := oneLine(e.Result.Host), oneLine(e.Result.Profile)+"/"+oneLine(e.Result.Stage)
		line := fmt.Sprintf("%s: %s %s passed", n, host, run)
		if !e.Result.Passed() {
			g.fails++
			var failing []string
			for _, ch := range e.Result.Failing() {
				failing = append(failing, oneLine(ch.Name))
			}
			line = fmt.Sprintf("%s: %s %s FAILED %s", n, host, run, strings.Join(failing, ", "))
		}
		lines = append(lines, line)
	}
	var b strings.Builder
	if len(groups) == 1 {
		g := groups[0]
		fmt.Fprintf(&b, "record evidence of %s: %d hosts, %d failing\n", g.name, g.hosts, g.fails)
	} else {
		fails := 0
		for _, g := range groups {
			fails += g.fails
		}
		fmt.Fprintf(&b, "record evidence of %d hosts for %d image versions and sites, %d failing\n", len(evs), len(groups), fails)
	}
	b.WriteString("\n" + strings.Join(lines, "\n") + "\n")
	var trailers []string
	if via := oneLine(evs[0].Via); via != "" {
		trailers = append(trailers, "Recorded-Via: "+via)
	}
	if len(trailers) > 0 {
		b.WriteString("\n" + strings.Join(trailers, "\n") + "\n")
	}
	return b.String()
}

// orImagectl is who a record is authored by when it names no one.
func orImagectl(by string) string {
	if strings.TrimSpace(by) == "" {
		return "imagectl"
	}
	return by
}

// Revocations implements store.Promotions: it fetches and reads the
// image's file (every image's, in name order, when image is "") from the
// remote branch, at one commit.
func (c *Catalog) Revocations(ctx context.Context, image string) ([]store.Revocation, error) {
	what := fmt.Sprintf("reading the revocations in %s", c.Location())
	if image != "" {
		if err := store.CheckKey("image", image); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	tip, err := c.lockedFetch(ctx)
	if err != nil {
		return nil, err
	}
	out, err := readRecords(ctx, c, tip, "revocations", "image", image, revocationPath, c.decodeRevocations)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Revoke implements store.Promotions: one commit appending r to the
// image's revocation file, authored by r.By, with the reason in its
// message.
func (c *Catalog) Revoke(ctx context.Context, r store.Revocation) error {
	verb := "revoking"
	if r.Undo {
		verb = "undoing the revocation of"
	}
	what := fmt.Sprintf("%s %s %s in %s", verb, r.Image, r.Version, c.Location())
	if err := r.Check(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	name, email, err := author(orImagectl(r.By))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if r.At.IsZero() {
		r.At = c.now()
	}
	r.At = r.At.UTC()
	p := revocationPath(r.Image)
	subject := fmt.Sprintf("revoke %s %s", r.Image, r.Version)
	if r.Undo {
		subject = fmt.Sprintf("undo the revocation of %s %s", r.Image, r.Version)
	}
	return c.update(ctx, &change{
		what: what, msg: subject + "\n\n" + oneLine(r.Reason) + "\n", name: name, email: email, at: r.At,
		apply: func(ctx context.Context, t *tree) error {
			return rewrite(ctx, t, p, func(b []byte) ([]store.Revocation, error) { return c.decodeRevocations(r.Image, b) },
				func(had []store.Revocation) any {
					return revocationFile{SchemaVersion: schemaVersion, Image: r.Image, Revocations: append(append([]store.Revocation{}, had...), r)}
				})
		},
	})
}

// decodeRackProofs decodes a version's rack proof file strictly: the
// schema version this package writes, and the site, image and version of
// its path, in the file and in every proof.
func (c *Catalog) decodeRackProofs(site, image, version string, b []byte) ([]store.RackProof, error) {
	p := rackProofPath(site, image, version)
	var f rackProofFile
	if err := c.decodeVersionFile(p, site, image, version, b, &f); err != nil {
		return nil, err
	}
	if err := store.CheckRackProofFile(p+" in "+c.Location(), site, image, version, f.RackProofs); err != nil {
		return nil, err
	}
	return f.RackProofs, nil
}

// RackProofs implements store.Promotions: it fetches and reads the
// version's file from the remote branch, oldest proof first.
func (c *Catalog) RackProofs(ctx context.Context, site, image, version string) ([]store.RackProof, error) {
	what := fmt.Sprintf("reading the rack proofs of %s %s at site %s in %s", image, version, site, c.Location())
	if err := errors.Join(store.CheckKey("site", site), store.CheckKey("image", image), store.CheckKey("version", version)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	tip, err := c.lockedFetch(ctx)
	if err != nil {
		return nil, err
	}
	out, err := readRecords(ctx, c, tip, "", "version", version,
		func(v string) string { return rackProofPath(site, image, v) },
		func(v string, b []byte) ([]store.RackProof, error) { return c.decodeRackProofs(site, image, v, b) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// AddRackProofs implements store.Promotions: one commit appending one
// check's verdicts to its site, image and version's file
// (store.AppendRackProofs).
func (c *Catalog) AddRackProofs(ctx context.Context, ps []store.RackProof) error {
	if len(ps) == 0 {
		return nil
	}
	what := fmt.Sprintf("recording %d rack proofs in %s", len(ps), c.Location())
	if err := store.CheckRackProofs(ps); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ps = append([]store.RackProof{}, ps...)
	var lines []string
	for i := range ps {
		if ps[i].At.IsZero() {
			ps[i].At = c.now()
		}
		ps[i].At = ps[i].At.UTC()
		lines = append(lines, fmt.Sprintf("%s: %s", oneLine(ps[i].Rack), oneLine(ps[i].Verdict)))
	}
	name, email, err := author(orImagectl(ps[0].By))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	site, image, version := ps[0].Site, ps[0].Image, ps[0].Version
	p := rackProofPath(site, image, version)
	msg := fmt.Sprintf("record the racks of site %s serving %s %s\n\n%s\n", site, image, version, strings.Join(lines, "\n"))
	return c.update(ctx, &change{
		what: what, msg: msg, name: name, email: email, at: ps[0].At,
		apply: func(ctx context.Context, t *tree) error {
			return rewrite(ctx, t, p, func(b []byte) ([]store.RackProof, error) { return c.decodeRackProofs(site, image, version, b) },
				func(had []store.RackProof) any {
					return rackProofFile{versionFile: versionFile{SchemaVersion: schemaVersion, Site: site, Image: image, Version: version},
						RackProofs: store.AppendRackProofs(had, ps)}
				})
		},
	})
}

// decodeBootComparisons decodes a version's comparison file strictly: the
// schema version this package writes, the image and version of its path
// (and no site) in the file and in every comparison, each whole.
func (c *Catalog) decodeBootComparisons(image, version string, b []byte) ([]store.BootComparison, error) {
	p := comparisonPath(image, version)
	var f comparisonFile
	if err := c.decodeVersionFile(p, "", image, version, b, &f); err != nil {
		return nil, err
	}
	if err := store.CheckBootComparisons(p+" in "+c.Location(), image, version, f.BootComparisons); err != nil {
		return nil, err
	}
	return f.BootComparisons, nil
}

// BootComparisons implements store.Promotions: it fetches and reads the
// version's file from the remote branch, oldest measured first.
func (c *Catalog) BootComparisons(ctx context.Context, image, version string) ([]store.BootComparison, error) {
	what := fmt.Sprintf("reading the boot comparisons of %s %s in %s", image, version, c.Location())
	if err := errors.Join(store.CheckKey("image", image), store.CheckKey("version", version)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	tip, err := c.lockedFetch(ctx)
	if err != nil {
		return nil, err
	}
	out, err := readRecords(ctx, c, tip, "", "version", version,
		func(v string) string { return comparisonPath(image, v) },
		func(v string, b []byte) ([]store.BootComparison, error) { return c.decodeBootComparisons(image, v, b) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].MeasuredAt.Before(out[j].MeasuredAt) })
	return out, nil
}

// AddBootComparison implements store.Promotions: one commit adding the
// comparison to its version's file (store.AppendBootComparisons), authored
// by its RecordedBy, its outcome in the message.
func (c *Catalog) AddBootComparison(ctx context.Context, bc store.BootComparison) error {
	what := fmt.Sprintf("recording a boot comparison of %s %s in %s", bc.Image, bc.Version, c.Location())
	if err := bc.Settle(c.now()); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	name, email, err := author(orImagectl(bc.RecordedBy))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	p := comparisonPath(bc.Image, bc.Version)
	return c.update(ctx, &change{
		what: what, msg: comparisonMessage(bc), name: name, email: email, at: bc.RecordedAt,
		apply: func(ctx context.Context, t *tree) error {
			return rewrite(ctx, t, p, func(b []byte) ([]store.BootComparison, error) {
				return c.decodeBootComparisons(bc.Image, bc.Version, b)
			},
				func(had []store.BootComparison) any {
					return comparisonFile{versionFile: versionFile{SchemaVersion: schemaVersion, Image: bc.Image, Version: bc.Version},
						BootComparisons: store.AppendBootComparisons(had, []store.BootComparison{bc})}
				})
		},
	})
}

// comparisonMessage says what AddBootComparison records: the version and
// its key, then its one line (store.BootComparison.Summary), escaped: what
// the paths' failures say came from a console.
func comparisonMessage(bc store.BootComparison) string {
	return fmt.Sprintf("record a boot comparison of %s %s (%s/%s, %s)\n\n%s\n",
		bc.Image, bc.Version, bc.Profile, bc.Stage, bc.Accelerator, textsafe.Terminal(oneLine(bc.Summary())))
}
