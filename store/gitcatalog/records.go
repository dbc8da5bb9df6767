package gitcatalog

import (
	"context"
	"errors"

	"github.com/gpuaas/imagectl/store"
)

// errRecordsPending: FOUNDATION PLACEHOLDER, replaced by the catalog work
// of issue 22 before this branch reaches main.
var errRecordsPending = errors.New("the git catalog does not keep evidence or revocations yet")

// Evidence implements store.Promotions.
func (c *Catalog) Evidence(ctx context.Context, site, image, version string) ([]store.Evidence, error) {
	return nil, errRecordsPending
}

// AddEvidence implements store.Promotions.
func (c *Catalog) AddEvidence(ctx context.Context, evs []store.Evidence) error {
	return errRecordsPending
}

// Revocations implements store.Promotions: none, since Revoke records
// none yet (promote, rollback and status read them at every site).
func (c *Catalog) Revocations(ctx context.Context, image string) ([]store.Revocation, error) {
	return []store.Revocation{}, nil
}

// Revoke implements store.Promotions.
func (c *Catalog) Revoke(ctx context.Context, r store.Revocation) error { return errRecordsPending }
