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
	"time"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

// maxRecords bounds one records file of the directory store: an image
// version's evidence at a site (a few KiB a host), or an image's
// revocations.
const maxRecords = 64 << 20

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

func (d *Dir) evidencePath(site, image, version string) string {
	return filepath.Join(d.Root, ".evidence", site, image, version+".json")
}

func (d *Dir) revocationPath(image string) string {
	return filepath.Join(d.Root, ".revocations", image+".json")
}

// readRecords decodes a records file strictly into v; a missing file
// leaves v as it is.
func readRecords(path string, v any, schema *int) error {
	b, err := readlimit.File(path, maxRecords)
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
	for i, e := range f.Evidence {
		if e.Site != site || e.Result.Image != image || e.Result.Version != version {
			return fmt.Errorf("reading %s: result %d is of %s %s at site %q", p, i+1, e.Result.Image, e.Result.Version, e.Site)
		}
	}
	return nil
}

// readRevocations reads an image's revocation file into f, refusing a
// revocation of another image than its path's.
func (d *Dir) readRevocations(image string, f *revocationFile) error {
	p := d.revocationPath(image)
	if err := readRecords(p, f, &f.SchemaVersion); err != nil {
		return err
	}
	for i, r := range f.Revocations {
		if r.Image != image {
			return fmt.Errorf("reading %s: revocation %d is of image %q", p, i+1, r.Image)
		}
	}
	return nil
}

func writeRecords(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

// Evidence implements Promotions.
func (d *Dir) Evidence(ctx context.Context, site, image, version string) ([]Evidence, error) {
	what := fmt.Sprintf("reading the evidence of %s at site %s in %s", image, site, d.Root)
	if err := errors.Join(checkKey("site", site), checkKey("image", image)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	versions := []string{version}
	if version == "" {
		entries, err := os.ReadDir(filepath.Dir(d.evidencePath(site, image, "v")))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		versions = versions[:0]
		for _, e := range entries {
			if v, ok := cutJSON(e.Name()); ok && checkKey("version", v) == nil {
				versions = append(versions, v)
			}
		}
		sort.Strings(versions)
	} else if err := checkKey("version", version); err != nil {
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

func cutJSON(name string) (string, bool) {
	if len(name) > len(".json") && name[len(name)-len(".json"):] == ".json" {
		return name[:len(name)-len(".json")], true
	}
	return "", false
}

// AddEvidence implements Promotions: every file it changes is replaced
// atomically under the store's lock.
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
	// Every file is read before any is written: one that cannot be read
	// leaves them all as they were.
	files := make([]evidenceFile, len(paths))
	for i, p := range paths {
		first := byFile[p][0]
		if err := d.readEvidence(first.Site, first.Result.Image, first.Result.Version, &files[i]); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		files[i].Evidence = append(files[i].Evidence, byFile[p]...)
	}
	for i, p := range paths {
		if err := writeRecords(p, files[i]); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// Revocations implements Promotions.
func (d *Dir) Revocations(ctx context.Context, image string) ([]Revocation, error) {
	what := fmt.Sprintf("reading the revocations in %s", d.Root)
	images := []string{image}
	if image == "" {
		entries, err := os.ReadDir(filepath.Dir(d.revocationPath("i")))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		images = images[:0]
		for _, e := range entries {
			if i, ok := cutJSON(e.Name()); ok && checkKey("image", i) == nil {
				images = append(images, i)
			}
		}
	} else if err := checkKey("image", image); err != nil {
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
