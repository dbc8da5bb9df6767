package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/readlimit"
)

const catalogVersion = 1

// maxCatalog is the largest catalog read: a promotion is a few hundred
// bytes, and a site's history of tens of thousands fits.
const maxCatalog = 16 << 20

// catalog is a site's promotion history, one file per site.
type catalog struct {
	SchemaVersion int                    `json:"schema_version"`
	Site          string                 `json:"site"`
	Images        map[string][]Promotion `json:"images"`
}

func (d *Dir) catalogPath(site string) string {
	return filepath.Join(d.Root, ".sites", site+".json")
}

func (d *Dir) readCatalog(site string) (*catalog, error) {
	if err := CheckKey("site", site); err != nil {
		return nil, err
	}
	path := d.catalogPath(site)
	b, err := readlimit.File(path, maxCatalog)
	if errors.Is(err, fs.ErrNotExist) {
		return &catalog{SchemaVersion: catalogVersion, Site: site, Images: map[string][]Promotion{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading site %s's catalog: %w", site, err)
	}
	var c catalog
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("reading site %s's catalog %s: %w", site, path, err)
	}
	if c.SchemaVersion != catalogVersion {
		return nil, fmt.Errorf("reading site %s's catalog %s: schema version %d, this imagectl reads %d", site, path, c.SchemaVersion, catalogVersion)
	}
	if c.Images == nil {
		c.Images = map[string][]Promotion{}
	}
	return &c, nil
}

// History implements Store.
func (d *Dir) History(ctx context.Context, site, image string) ([]Promotion, error) {
	if err := CheckKey("image", image); err != nil {
		return nil, err
	}
	c, err := d.readCatalog(site)
	if err != nil {
		return nil, err
	}
	h := c.Images[image]
	if h == nil {
		h = []Promotion{}
	}
	return h, nil
}

// Catalog implements Store.
func (d *Dir) Catalog(ctx context.Context, site string) (map[string][]Promotion, error) {
	c, err := d.readCatalog(site)
	if err != nil {
		return nil, err
	}
	return c.Images, nil
}

// Record implements Store: under the store's lock it reads the site's
// catalog, checks p.Previous is still the current version and p.Version
// is not revoked (ErrConflict, ErrRevoked), appends p and
// replaces the file atomically (a reader sees the old or the new catalog,
// never a torn one).
func (d *Dir) Record(ctx context.Context, site string, p Promotion) error {
	if err := errors.Join(CheckKey("site", site), CheckKey("image", p.Image), CheckKey("version", p.Version)); err != nil {
		return fmt.Errorf("recording a promotion: %w", err)
	}
	what := fmt.Sprintf("recording %s %s at site %s", p.Image, p.Version, site)
	unlock, err := d.lock(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer unlock()
	c, err := d.readCatalog(site)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if cur, _ := State(c.Images[p.Image]); cur != p.Previous {
		return fmt.Errorf("%s: %w: it runs %q now, not %q", what, ErrConflict, cur, p.Previous)
	}
	var revs revocationFile
	if err := d.readRevocations(p.Image, &revs); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := RefuseRevoked(revs.Revocations, p.Image, p.Version); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if p.At.IsZero() {
		p.At = time.Now()
	}
	p.At = p.At.UTC()
	c.Images[p.Image] = append(c.Images[p.Image], p)
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(d.catalogPath(site)), 0o755); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := atomicfile.WriteFile(d.catalogPath(site), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
