package release_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
)

// channelStore is a directory store with channels, as an OCI store has.
type channelStore struct {
	*store.Dir
	mu       sync.Mutex
	channels map[string]string
	fail     error
}

func (c *channelStore) SetChannel(ctx context.Context, site, image, version string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return c.fail
	}
	c.channels[site+"/"+image] = version
	return nil
}

func (c *channelStore) Channel(ctx context.Context, site, image string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.channels[site+"/"+image], nil
}

func TestChannelFollowsPromotions(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	cs := &channelStore{Dir: f.store, channels: map[string]string{}}
	o := f.opts
	o.Store = cs
	res, err := release.Promote(ctx, "demo", "1.0.0", o)
	if err != nil || res.Channel != "1.0.0" || len(res.Warnings) != 0 || cs.channels["sim/demo"] != "1.0.0" {
		t.Fatalf("promote: %+v %v, channels %v", res, err, cs.channels)
	}
	// The channel fails: the promotion stands, with a warning.
	cs.fail = errors.New("registry down")
	res, err = release.Promote(ctx, "demo", "1.1.0", o)
	if err != nil || res.Promotion == nil || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "registry down") {
		t.Fatalf("promote with the channel failing: %+v %v", res, err)
	}
	st, err := release.Status(ctx, o)
	if err != nil || !st.Drift || !strings.Contains(kinds(st), "channel") {
		t.Fatalf("status: %v %+v", err, st)
	}
	// Run again: recorded already, the channel is repaired.
	cs.fail = nil
	res, err = release.Promote(ctx, "demo", "1.1.0", o)
	if err != nil || !res.AlreadyCurrent || res.Channel != "1.1.0" || cs.channels["sim/demo"] != "1.1.0" {
		t.Fatalf("again: %+v %v", res, err)
	}
	if st, err := release.Status(ctx, o); err != nil || st.Drift {
		t.Fatalf("status after repair: %v %+v", err, st)
	}
	res, err = release.Rollback(ctx, "demo", o)
	if err != nil || cs.channels["sim/demo"] != "1.0.0" {
		t.Fatalf("rollback: %+v %v, channels %v", res, err, cs.channels)
	}
	// A channel missing altogether is drift too.
	delete(cs.channels, "sim/demo")
	if st, err := release.Status(ctx, o); err != nil || !strings.Contains(kinds(st), "channel") {
		t.Fatalf("status without a channel: %v %+v", err, st)
	}
}
