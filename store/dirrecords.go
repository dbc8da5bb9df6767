package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// evidenceFile is one site, image and version's evidence, oldest first.
type evidenceFile struct {
	SchemaVersion int        `json:"schema_version"`
	Evidence      []Evidence `json:"evidence"`
}

// revocationFile is one image's revocation history, oldest first.
type revocationFile struct {
	SchemaVersion int          `json:"schema_version"`
	Revocations   []Revocation `json:"revocations"`
}

// rackProofFile is one site, image and version's rack proofs, oldest
// first.
type rackProofFile struct {
	SchemaVersion int         `json:"schema_version"`
	RackProofs    []RackProof `json:"rack_proofs"`
}

// comparisonFile is one image version's boot comparisons, oldest
// recorded first.
type comparisonFile struct {
	SchemaVersion   int              `json:"schema_version"`
	BootComparisons []BootComparison `json:"boot_comparisons"`
}

func (d *Dir) comparisonPath(image, version string) string {
	return filepath.Join(d.Root, ".comparisons", image, version+".json")
}

func (d *Dir) rackProofPath(site, image, version string) string {
	return filepath.Join(d.Root, ".rackproofs", site, image, version+".json")
}

func (d *Dir) evidencePath(site, image, version string) string {
	return filepath.Join(d.Root, ".evidence", site, image, version+".json")
}

func (d *Dir) revocationPath(image string) string {
	return filepath.Join(d.Root, ".revocations", image+".json")
}

// readRecords decodes a records file strictly into v; a missing file
// leaves v as it is.
func readRecords(path string, v any, schema *int) error {
	b, err := readlimit.File(path, MaxRecords)
	if errors.Is(err, fs.ErrNotExist) {
		*schema = catalogVersion
		return nil
	}
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return fmt.Errorf("reading %s: more than one JSON value", path)
	}
	if *schema != catalogVersion {
		return fmt.Errorf("reading %s: schema version %d, this imagectl reads %d", path, *schema, catalogVersion)
	}
	return nil
}

// readEvidence reads a site, image and version's evidence file into f,
// refusing a result of another site, image or version than its path's.
func (d *Dir) readEvidence(site, image, version string, f *evidenceFile) error {
	p := d.evidencePath(site, image, version)
	if err := readRecords(p, f, &f.SchemaVersion); err != nil {
		return err
	}
	return CheckEvidenceFile(p, site, image, version, f.Evidence)
}

// readRevocations reads an image's revocation file into f, refusing a
// revocation of another image than its path's.
func (d *Dir) readRevocations(image string, f *revocationFile) error {
	p := d.revocationPath(image)
	if err := readRecords(p, f, &f.SchemaVersion); err != nil {
		return err
	}
	return CheckRevocationFile(p, image, f.Revocations)
}

// createRecords starts writing a records file atomically (published by
// the File's Commit): v encoded by EncodeRecords, refused over MaxRecords
// before anything is created.
func createRecords(path string, v any) (*atomicfile.File, error) {
	b, err := EncodeRecords(path, v)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Abort()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return f, nil
}

// writeRecords replaces a records file atomically (createRecords).
func writeRecords(path string, v any) error {
	f, err := createRecords(path, v)
	if err != nil {
		return err
	}
	return f.Commit()
}

// Evidence implements Promotions.
func (d *Dir) Evidence(ctx context.Context, site, image, version string) ([]Evidence, error) {
	what := fmt.Sprintf("reading the evidence of %s at site %s in %s", image, site, d.Root)
	if err := errors.Join(CheckKey("site", site), CheckKey("image", image)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	versions, err := keysOr(filepath.Dir(d.evidencePath(site, image, "v")), "version", version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := []Evidence{}
	for _, v := range versions {
		var f evidenceFile
		if err := d.readEvidence(site, image, v, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, f.Evidence...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].RecordedAt.Before(out[j].RecordedAt) })
	return out, nil
}

// keysOr is key alone when it is given (and a valid key of its kind),
// else every key of that kind in dir (listKeys).
func keysOr(dir, kind, key string) ([]string, error) {
	if key == "" {
		return listKeys(dir, kind)
	}
	if err := CheckKey(kind, key); err != nil {
		return nil, err
	}
	return []string{key}, nil
}

// listKeys lists the store keys of a kind ("image", "version") that name
// the KEY.json files of dir, sorted; none when dir does not exist.
func listKeys(dir, kind string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var keys []string
	for _, e := range entries {
		if k, ok := strings.CutSuffix(e.Name(), ".json"); ok && CheckKey(kind, k) == nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// AddEvidence implements Promotions: under the store's lock, every file
// it changes is read, and written in full to a temporary file beside it,
// before any is renamed into place, so that a file that cannot be read or
// written (or would be over MaxRecords) leaves them all as they were.
func (d *Dir) AddEvidence(ctx context.Context, evs []Evidence) error {
	what := fmt.Sprintf("recording %d host results in %s", len(evs), d.Root)
	for i := range evs {
		if err := evs[i].Check(); err != nil {
			return fmt.Errorf("%s: result %d: %w", what, i+1, err)
		}
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	byFile := map[string][]Evidence{}
	var paths []string
	for _, e := range evs {
		if e.RecordedAt.IsZero() {
			e.RecordedAt = time.Now()
		}
		e.RecordedAt = e.RecordedAt.UTC()
		p := d.evidencePath(e.Site, e.Result.Image, e.Result.Version)
		if _, ok := byFile[p]; !ok {
			paths = append(paths, p)
		}
		byFile[p] = append(byFile[p], e)
	}
	sort.Strings(paths)
	var pending []*atomicfile.File
	defer func() {
		for _, f := range pending {
			f.Abort() // nothing once committed
		}
	}()
	for _, p := range paths {
		first := byFile[p][0]
		var f evidenceFile
		if err := d.readEvidence(first.Site, first.Result.Image, first.Result.Version, &f); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		f.Evidence = AppendEvidence(f.Evidence, byFile[p])
		tmp, err := createRecords(p, f)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		pending = append(pending, tmp)
	}
	// Only a rename failing (the name taken by what is not a file since)
	// can leave some of them published.
	for _, f := range pending {
		if err := f.Commit(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// Revocations implements Promotions.
func (d *Dir) Revocations(ctx context.Context, image string) ([]Revocation, error) {
	what := fmt.Sprintf("reading the revocations in %s", d.Root)
	images, err := keysOr(filepath.Dir(d.revocationPath("i")), "image", image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := []Revocation{}
	for _, i := range images {
		var f revocationFile
		if err := d.readRevocations(i, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, f.Revocations...)
	}
	return out, nil
}

// Revoke implements Promotions.
func (d *Dir) Revoke(ctx context.Context, r Revocation) error {
	verb := "revoking"
	if r.Undo {
		verb = "undoing the revocation of"
	}
	what := fmt.Sprintf("%s %s %s in %s", verb, r.Image, r.Version, d.Root)
	if err := r.Check(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if r.At.IsZero() {
		r.At = time.Now()
	}
	r.At = r.At.UTC()
	unlock, err := d.lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	var f revocationFile
	if err := d.readRevocations(r.Image, &f); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	f.Revocations = append(f.Revocations, r)
	if err := writeRecords(d.revocationPath(r.Image), f); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// readRackProofs reads a site, image and version's rack proofs into f,
// refusing one of another site, image or version than its path's.
func (d *Dir) readRackProofs(site, image, version string, f *rackProofFile) error {
	p := d.rackProofPath(site, image, version)
	if err := readRecords(p, f, &f.SchemaVersion); err != nil {
		return err
	}
	return CheckRackProofFile(p, site, image, version, f.RackProofs)
}

// RackProofs implements Promotions.
func (d *Dir) RackProofs(ctx context.Context, site, image, version string) ([]RackProof, error) {
	what := fmt.Sprintf("reading the rack proofs of %s %s at site %s in %s", image, version, site, d.Root)
	if err := errors.Join(CheckKey("site", site), CheckKey("image", image), CheckKey("version", version)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var f rackProofFile
	if err := d.readRackProofs(site, image, version, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := append([]RackProof{}, f.RackProofs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}

// AddRackProofs implements Promotions, under the store's lock.
func (d *Dir) AddRackProofs(ctx context.Context, ps []RackProof) error {
	if len(ps) == 0 {
		return nil
	}
	what := fmt.Sprintf("recording %d rack proofs in %s", len(ps), d.Root)
	if err := CheckRackProofs(ps); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ps = append([]RackProof{}, ps...)
	for i := range ps {
		if ps[i].At.IsZero() {
			ps[i].At = time.Now()
		}
		ps[i].At = ps[i].At.UTC()
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	var f rackProofFile
	if err := d.readRackProofs(ps[0].Site, ps[0].Image, ps[0].Version, &f); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	f.RackProofs = AppendRackProofs(f.RackProofs, ps)
	if err := writeRecords(d.rackProofPath(ps[0].Site, ps[0].Image, ps[0].Version), f); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// readBootComparisons reads an image version's comparison file into f,
// refusing one of another version than its path's, or not whole.
func (d *Dir) readBootComparisons(image, version string, f *comparisonFile) error {
	p := d.comparisonPath(image, version)
	if err := readRecords(p, f, &f.SchemaVersion); err != nil {
		return err
	}
	return CheckBootComparisons(p, image, version, f.BootComparisons)
}

// BootComparisons implements Promotions.
func (d *Dir) BootComparisons(ctx context.Context, image, version string) ([]BootComparison, error) {
	what := fmt.Sprintf("reading the boot comparisons of %s %s in %s", image, version, d.Root)
	if err := errors.Join(CheckKey("image", image), CheckKey("version", version)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var f comparisonFile
	if err := d.readBootComparisons(image, version, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := append([]BootComparison{}, f.BootComparisons...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].MeasuredAt.Before(out[j].MeasuredAt) })
	return out, nil
}

// AddBootComparison implements Promotions, under the store's lock.
func (d *Dir) AddBootComparison(ctx context.Context, c BootComparison) error {
	what := fmt.Sprintf("recording a boot comparison of %s %s in %s", c.Image, c.Version, d.Root)
	if err := c.Settle(time.Now()); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	unlock, err := d.lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	var f comparisonFile
	if err := d.readBootComparisons(c.Image, c.Version, &f); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	f.BootComparisons = AppendBootComparisons(f.BootComparisons, []BootComparison{c})
	if err := writeRecords(d.comparisonPath(c.Image, c.Version), f); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
