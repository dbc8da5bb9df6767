package release_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/store"
)

func revoke(t *testing.T, st store.Store, version string, undo bool, sites ...string) *release.RevokeResult {
	t.Helper()
	res, err := release.Revoke(ctx, st, "demo", version, release.RevokeOptions{Reason: "NCCL hangs", By: "rita", Undo: undo, Sites: sites,
		Now: func() time.Time { return time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatalf("revoke %s (undo %v): %v", version, undo, err)
	}
	return res
}

// Revoking the version a site runs: status fails there naming it, promote
// refuses it, rollback skips every revoked version to the one before;
// undoing it lets promote take it again.
func TestRevokeStatusPromoteRollback(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0", "1.2.0")
	ps := f.withProfile(t, "demo")
	f.promote(t, "1.0.0", "1.1.0", "1.2.0")
	if st, err := release.Status(ctx, f.opts); err != nil || st.Drift {
		t.Fatalf("status before: %v %+v", err, st)
	}
	res := revoke(t, f.store, "1.2.0", false)
	if res.Unchanged || res.Revocation == nil || res.Revocation.By != "rita" || res.Revocation.Undo {
		t.Fatalf("revoke: %+v", res)
	}
	if again := revoke(t, f.store, "1.2.0", false); !again.Unchanged || again.Revocation.By != "rita" {
		t.Errorf("revoking again: %+v", again)
	}
	revoke(t, f.store, "1.1.0", false)
	st, err := release.Status(ctx, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	// The site runs it and its profile selects it: both are said.
	if got := kinds(st); got != "demo:revoked demo:revoked" || !st.Drift || st.Images[0].Revoked == nil ||
		!strings.Contains(st.Images[0].Drift[0].Message, "revoked (by rita at 2026-11-26T12:00:00Z: NCCL hangs)") {
		t.Fatalf("status after revoke: %s %+v", got, st.Images)
	}
	for _, h := range st.Images[0].MAAS {
		if h.Revoked != (h.Version != "1.0.0") {
			t.Errorf("boot resource %s: revoked %v", h.Name, h.Revoked)
		}
	}
	_, err = release.Promote(ctx, "demo", "1.1.0", f.opts)
	var re *release.RevokedError
	if !errors.Is(err, release.ErrRevoked) || !errors.As(err, &re) || re.Revocation.Reason != "NCCL hangs" ||
		!strings.Contains(err.Error(), "by rita at 2026-11-26T12:00:00Z: NCCL hangs") {
		t.Errorf("promoting a revoked version: %v", err)
	}
	// Even the current one: promote would point drifted profiles back at it.
	if _, err := release.Promote(ctx, "demo", "1.2.0", f.opts); !errors.Is(err, release.ErrRevoked) {
		t.Errorf("promoting the revoked current version: %v", err)
	}
	rb, err := release.Rollback(ctx, "demo", f.opts)
	if err != nil || rb.Version != "1.0.0" || strings.Join(rb.SkippedRevoked, " ") != "1.1.0" || rb.Promotion.Previous != "1.2.0" ||
		selects(t, ps) != "demo-1-0-0" {
		t.Fatalf("rollback: %+v %v, profile %s", rb, err, selects(t, ps))
	}
	if st, err := release.Status(ctx, f.opts); err != nil || st.Drift {
		t.Fatalf("status after the rollback: %v %s", err, kinds(st))
	}
	// Someone points the deploy profile at the revoked version by hand.
	ps.SetProfile("7", "bm", "demo-1-2-0")
	if st, err := release.Status(ctx, f.opts); err != nil || kinds(st) != "demo:profile demo:revoked" ||
		!strings.Contains(st.Images[0].Drift[0].Message, "deploy profile bm of admin site 7 selects demo-1-2-0, the revoked demo 1.2.0 (by rita") {
		t.Fatalf("status with a profile selecting a revoked version: %v %s %+v", err, kinds(st), st)
	}
	ps.SetProfile("7", "bm", "demo-1-0-0")
	h, _ := f.store.History(ctx, "sim", "demo")
	if stack := store.Stack(h); strings.Join(stack, " ") != "1.0.0" {
		t.Errorf("stack after the rollback %v", stack)
	}
	if _, err := release.Rollback(ctx, "demo", f.opts); err == nil || !strings.Contains(err.Error(), "first version promoted there") {
		t.Errorf("second rollback: %v", err)
	}
	// Undone: promotable again.
	if res := revoke(t, f.store, "1.1.0", true); res.Unchanged || !res.Revocation.Undo {
		t.Fatalf("undo: %+v", res)
	}
	if res := revoke(t, f.store, "1.1.0", true); !res.Unchanged || res.Revocation != nil {
		t.Errorf("undoing what is not revoked: %+v", res)
	}
	if _, err := release.Promote(ctx, "demo", "1.1.0", f.opts); err != nil {
		t.Fatalf("promote after undo: %v", err)
	}
	revs, _ := f.store.Revocations(ctx, "demo")
	if len(revs) != 3 || !revs[2].Undo {
		t.Errorf("revocation history %+v", revs)
	}
}

// Rollback refuses when every version before the current one is revoked.
func TestRollbackAllRevoked(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	f.promote(t, "1.0.0", "1.1.0")
	revoke(t, f.store, "1.0.0", false)
	if _, err := release.Rollback(ctx, "demo", f.opts); err == nil || !strings.Contains(err.Error(), "every version it ran before 1.1.0 is revoked (1.0.0)") {
		t.Errorf("rollback onto revoked versions only: %v", err)
	}
	if h, _ := f.store.History(ctx, "sim", "demo"); len(h) != 2 {
		t.Errorf("something was recorded: %+v", h)
	}
}

// Revoke wants a reason and a version the store holds.
func TestRevokeRefuses(t *testing.T) {
	f := newFixture(t, "1.0.0")
	if _, err := release.Revoke(ctx, f.store, "demo", "9.9.9", release.RevokeOptions{Reason: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking a version not in the store: %v", err)
	}
	if _, err := release.Revoke(ctx, f.store, "demo", "1.0.0", release.RevokeOptions{Reason: " "}); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Errorf("revoking without a reason: %v", err)
	}
	if revs, _ := f.store.Revocations(ctx, ""); len(revs) != 0 {
		t.Errorf("recorded %+v", revs)
	}
}

// A rollout of a revoked version is refused before any site starts.
func TestRolloutRefusesRevoked(t *testing.T) {
	f := newFleet(t, 3, 0)
	if _, err := release.Revoke(ctx, f.store, "demo", "1.0.0", release.RevokeOptions{Reason: "bad NIC firmware", By: "rita"}); err != nil {
		t.Fatal(err)
	}
	res, err := release.Rollout(ctx, "demo", "1.0.0", f.opts)
	if !errors.Is(err, release.ErrRevoked) || res != nil || !strings.Contains(err.Error(), "bad NIC firmware") {
		t.Fatalf("rollout of a revoked version: %v %+v", err, res)
	}
	for name, sim := range f.sims {
		if n := len(names(sim)); n != 0 {
			t.Errorf("site %s got %d uploads", name, n)
		}
	}
}

// The channel of a site running the revoked version is pointed where a
// rollback takes it, never at the revoked version; the undo points it
// back; the rollback agrees with it.
func TestRevokeMovesChannels(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0")
	cs := &channelStore{Dir: f.store, channels: map[string]string{}}
	o := f.opts
	o.Store = cs
	for _, v := range []string{"1.0.0", "1.1.0"} {
		if _, err := release.Promote(ctx, "demo", v, o); err != nil {
			t.Fatal(err)
		}
	}
	if res := revoke(t, cs, "1.1.0", false); len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "no sites file") || cs.channels["sim/demo"] != "1.1.0" {
		t.Fatalf("revoke without sites: %+v %v", res, cs.channels)
	}
	res := revoke(t, cs, "1.1.0", false, "sim", "other")
	if len(res.Channels) != 1 || res.Channels[0] != (release.ChannelMove{Site: "sim", From: "1.1.0", To: "1.0.0"}) || len(res.Warnings) != 0 ||
		cs.channels["sim/demo"] != "1.0.0" {
		t.Fatalf("revoke with sites: %+v %v", res, cs.channels)
	}
	// Status fails for the revoked version, not for the channel.
	if st, err := release.Status(ctx, o); err != nil || kinds(st) != "demo:revoked" {
		t.Fatalf("status: %v %s", err, kinds(st))
	}
	res = revoke(t, cs, "1.1.0", true, "sim")
	if len(res.Channels) != 1 || cs.channels["sim/demo"] != "1.1.0" {
		t.Fatalf("undo: %+v %v", res, cs.channels)
	}
	revoke(t, cs, "1.1.0", false, "sim")
	if _, err := release.Rollback(ctx, "demo", o); err != nil || cs.channels["sim/demo"] != "1.0.0" {
		t.Fatalf("rollback: %v %v", err, cs.channels)
	}
	if st, err := release.Status(ctx, o); err != nil || st.Drift {
		t.Fatalf("status after the rollback: %v %s", err, kinds(st))
	}
	// Nothing to point at: a warning, the channel left.
	revoke(t, cs, "1.0.0", false)
	if res := revoke(t, cs, "1.0.0", false, "sim"); len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "no version before it that is not revoked") {
		t.Errorf("revoking the only version: %+v", res)
	}
}

// gc deletes revoked versions first: they do not count among the newest
// kept, unless the site needs them.
func TestGCRevokedFirst(t *testing.T) {
	f := newFixture(t, "1.0.0", "1.1.0", "1.2.0", "1.3.0")
	f.promote(t, "1.0.0", "1.1.0", "1.2.0", "1.3.0")
	if _, err := release.Rollback(ctx, "demo", f.opts); err != nil { // runs 1.2.0, back 1.1.0
		t.Fatal(err)
	}
	revoke(t, f.store, "1.1.0", false)
	revoke(t, f.store, "1.3.0", false)
	// keep 1: 1.3.0 is the newest but revoked, 1.2.0 promoted, 1.1.0 the
	// rollback's but revoked, 1.0.0 then what a rollback returns to.
	res, err := release.GC(ctx, 1, false, f.opts)
	if err != nil {
		t.Fatal(err)
	}
	del, kept := gcLists(res, func(k release.Kept) string { return k.Version + ":" + k.Why })
	if strings.Join(del, " ") != "1.3.0 1.1.0" || strings.Join(kept, ",") != "1.2.0:promoted,1.0.0:what a rollback would promote" {
		t.Fatalf("gc deletes %v, keeps %v", del, kept)
	}
}
