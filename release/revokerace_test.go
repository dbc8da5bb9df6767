package release_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
)

// racingStore is a store with channels on which another operator's
// revocation of a version lands at a chosen moment of a promotion of it:
// while it uploads (before its record), or right after its record.
type racingStore struct {
	*channelStore
	revoke string // the version revoked
	after  bool   // after the record, not before
}

func (r *racingStore) Record(ctx context.Context, site string, p store.Promotion) error {
	revoke := func() error {
		if p.Version != r.revoke {
			return nil
		}
		return r.Dir.Revoke(ctx, store.Revocation{Image: p.Image, Version: p.Version, Reason: "NCCL hangs", By: "rita"})
	}
	if !r.after {
		if err := revoke(); err != nil {
			return err
		}
	}
	if err := r.Dir.Record(ctx, site, p); err != nil {
		return err
	}
	if r.after {
		return revoke()
	}
	return nil
}

// A revocation that lands while a promotion uploads stops it: the store
// refuses the record (release.ErrRevoked), and the channel stays.
func TestRevokedWhileUploading(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	f.withProfile(t, "demo")
	rs := &racingStore{channelStore: &channelStore{Dir: f.store, channels: map[string]string{}}, revoke: "1.1.0"}
	o := f.opts
	o.Store = rs
	if _, err := release.Promote(ctx, "demo", "1.0.0", o); err != nil {
		t.Fatal(err)
	}
	_, err := release.Promote(ctx, "demo", "1.1.0", o)
	if !errors.Is(err, release.ErrRevoked) || !strings.Contains(err.Error(), "NCCL hangs") ||
		!strings.Contains(err.Error(), "nothing is recorded: promote 1.0.0 (what the catalog says it runs)") {
		t.Fatalf("promoting a version revoked while it uploads: %v", err)
	}
	if h, err := f.store.History(ctx, "sim", "demo"); err != nil || len(h) != 1 {
		t.Errorf("history %+v %v", h, err)
	}
	if got := rs.channels["sim/demo"]; got != "1.0.0" {
		t.Errorf("the channel points at %s", got)
	}
}

// A revocation that lands right after a promotion is recorded: the
// channel is not pointed at the revoked version, and the result says so.
func TestRevokedAfterRecord(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	rs := &racingStore{channelStore: &channelStore{Dir: f.store, channels: map[string]string{}}, revoke: "1.1.0", after: true}
	o := f.opts
	o.Store = rs
	if _, err := release.Promote(ctx, "demo", "1.0.0", o); err != nil {
		t.Fatal(err)
	}
	res, err := release.Promote(ctx, "demo", "1.1.0", o)
	if err != nil || res.Promotion == nil {
		t.Fatalf("promote: %+v %v", res, err)
	}
	if got := rs.channels["sim/demo"]; got != "1.0.0" || res.Channel != "1.0.0" || len(res.Warnings) != 1 ||
		!strings.Contains(res.Warnings[0], "demo 1.1.0 was revoked after the promotion was recorded") {
		t.Errorf("the channel points at %s, the result says %s: %q", got, res.Channel, res.Warnings)
	}
}
