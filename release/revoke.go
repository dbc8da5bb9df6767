package release

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/store"
)

// ErrRevoked is what promote and rollouts return (wrapped in a
// *RevokedError) for a version revoked in the store: store.ErrRevoked,
// which the store's Record returns for a version revoked while it was
// being promoted.
var ErrRevoked = store.ErrRevoked

// RevokedError is a refusal of a revoked version, naming its revocation.
type RevokedError struct {
	Revocation store.Revocation
}

func (e *RevokedError) Error() string {
	r := e.Revocation
	return fmt.Sprintf("%s %s is revoked (%s): imagectl revoke --undo %s %s --reason WHY allows it again",
		r.Image, r.Version, describeRevocation(r), r.Image, r.Version)
}

// Is makes errors.Is(err, ErrRevoked) true.
func (e *RevokedError) Is(target error) bool { return target == ErrRevoked }

// describeRevocation says who revoked a version, when and why.
func describeRevocation(r store.Revocation) string {
	return fmt.Sprintf("by %s at %s: %s", r.By, r.At.UTC().Format(time.RFC3339), r.Reason)
}

// revokedVersions reads the versions of image revoked now.
func revokedVersions(ctx context.Context, s store.Promotions, image string) (map[string]store.Revocation, error) {
	h, err := s.Revocations(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("reading the revocations of %s: %w", image, err)
	}
	return store.Revoked(h, image), nil
}

// refuseRevoked is a *RevokedError when version is one of revoked.
func refuseRevoked(revoked map[string]store.Revocation, version string) error {
	if r, ok := revoked[version]; ok {
		return &RevokedError{Revocation: r}
	}
	return nil
}

// rollbackTarget is the version a rollback of the stack (store.Stack)
// returns to: the nearest below the top that is not revoked, with the
// revoked ones it skips; "" when there is none.
func rollbackTarget(stack []string, revoked map[string]store.Revocation) (back string, skipped []string) {
	for i := len(stack) - 2; i >= 0; i-- {
		if _, ok := revoked[stack[i]]; !ok {
			return stack[i], skipped
		}
		skipped = append(skipped, stack[i])
	}
	return "", skipped
}

// channelWant is the version the image's channel for a site should point
// at: the one the site runs, or when that is revoked the one a rollback
// would return to, "" when there is none (a channel never points at a
// revoked version).
func channelWant(h []store.Promotion, revoked map[string]store.Revocation) string {
	stack := store.Stack(h)
	if len(stack) == 0 {
		return ""
	}
	if cur := stack[len(stack)-1]; revoked[cur].Version == "" {
		return cur
	}
	back, _ := rollbackTarget(stack, revoked)
	return back
}

// RevokeOptions adjust Revoke.
type RevokeOptions struct {
	// Reason is required: why the version must not run (or may again).
	Reason string
	// By is who revokes; $USER of Env when empty.
	By  string
	Env []string
	// Undo records that the version may run again.
	Undo bool
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Sites are the sites whose channels (when the store has channels) are
	// checked: a channel pointing at the revoked version is pointed at the
	// version a rollback of the site would return to; after an undo, a
	// channel moved so is pointed back at the version the site runs.
	Sites []string
}

// RevokeResult is what Revoke recorded and did to the channels.
type RevokeResult struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	// Revocation is what was recorded, or when Unchanged the revocation in
	// force (nil when the version was not revoked).
	Revocation *store.Revocation `json:"revocation,omitempty"`
	// Unchanged: nothing was recorded, the version was already revoked
	// (or, for an undo, was not).
	Unchanged bool `json:"unchanged,omitempty"`
	// Channels are the channels moved.
	Channels []ChannelMove `json:"channels,omitempty"`
	// Warnings are channels that could not be set right; the revocation
	// stands.
	Warnings []string `json:"warnings,omitempty"`
}

// ChannelMove is a site's channel pointed elsewhere.
type ChannelMove struct {
	Site string `json:"site"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Revoke records, for every site, that version of image must not run
// (promote and rollouts refuse it, rollback skips it, status fails where
// it runs or is selected), or with o.Undo that it may again. The version
// must be in the store. Revoking a revoked version, or undoing what is not
// revoked, records nothing. Then the channels of o.Sites are set right.
func Revoke(ctx context.Context, st store.Store, image, version string, o RevokeOptions) (*RevokeResult, error) {
	verb := "revoking"
	if o.Undo {
		verb = "undoing the revocation of"
	}
	if strings.TrimSpace(o.Reason) == "" {
		return nil, fmt.Errorf("%s %s %s: --reason is required, it is what every refusal of the version shows", verb, image, version)
	}
	if _, err := st.Version(ctx, image, version); err != nil {
		return nil, fmt.Errorf("%s %s %s: %w", verb, image, version, err)
	}
	revoked, err := revokedVersions(ctx, st, image)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %w", verb, image, version, err)
	}
	res := &RevokeResult{Image: image, Version: version}
	if cur, ok := revoked[version]; ok == !o.Undo {
		res.Unchanged = true
		if ok {
			res.Revocation = &cur
		}
	} else {
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		r := store.Revocation{Image: image, Version: version, Reason: o.Reason, Undo: o.Undo,
			By: cmp.Or(o.By, environ.Get(o.Env, "USER"), "unknown"), At: now().UTC()}
		if err := st.Revoke(ctx, r); err != nil {
			return nil, err
		}
		res.Revocation = &r
		if o.Undo {
			delete(revoked, version)
		} else {
			revoked[version] = r
		}
	}
	syncChannels(ctx, st, image, version, revoked, o.Sites, res)
	return res, nil
}

// syncChannels points each site's channel of image that points at version
// (revoked) or should (undone) at channelWant, when the store has
// channels; other channels are left as they are (status reports one
// that is wrong). What it cannot do is a warning.
func syncChannels(ctx context.Context, st store.Store, image, version string, revoked map[string]store.Revocation, sites []string, res *RevokeResult) {
	ch, ok := store.ChannelsOf(st)
	if !ok {
		return
	}
	if len(sites) == 0 {
		res.Warnings = append(res.Warnings, "the store has channels, but no sites file named its sites: no channel was checked (imagectl status --site SITE shows one that is wrong)")
		return
	}
	for _, site := range sites {
		got, err := ch.Channel(ctx, site, image)
		if err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("reading the channel of %s for site %s: %v", image, site, err))
			continue
		}
		h, err := st.History(ctx, site, image)
		if err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("reading the history of %s at site %s: %v", image, site, err))
			continue
		}
		want := channelWant(h, revoked)
		switch {
		case got == want || got != version && want != version:
		case want == "":
			if _, bad := revoked[got]; bad {
				res.Warnings = append(res.Warnings, fmt.Sprintf("the channel of %s for site %s points at the revoked %s, and the site ran no version before it that is not revoked: promote one there", image, site, got))
			}
		default:
			if err := ch.SetChannel(ctx, site, image, want); err != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("pointing the channel of %s for site %s at %s: %v (run the same command again to retry)", image, site, want, err))
				continue
			}
			res.Channels = append(res.Channels, ChannelMove{Site: site, From: got, To: want})
		}
	}
}

// ListedImage is an image of the store with its versions, each marked
// with its revocation when it is revoked.
type ListedImage struct {
	Name     string          `json:"name"`
	Versions []ListedVersion `json:"versions"`
}

// ListedVersion is a stored version and its revocation (nil when it may
// run).
type ListedVersion struct {
	*store.Version
	Revoked *store.Revocation `json:"revoked,omitempty"`
}

// Images lists the store's images and versions, oldest first, marking the
// revoked ones by the revocations p keeps (imagectl images); nil p (a
// registry store opened without a catalog) marks none.
func Images(ctx context.Context, st store.Versions, p store.Promotions) ([]ListedImage, error) {
	imgs, err := st.Images(ctx)
	if err != nil {
		return nil, err
	}
	var all []store.Revocation
	if p != nil {
		if all, err = p.Revocations(ctx, ""); err != nil {
			return nil, fmt.Errorf("reading the revocations: %w", err)
		}
	}
	out := []ListedImage{}
	for _, img := range imgs {
		revoked := store.Revoked(all, img.Name)
		li := ListedImage{Name: img.Name, Versions: []ListedVersion{}}
		for _, v := range img.Versions {
			lv := ListedVersion{Version: v}
			if r, ok := revoked[v.Version]; ok {
				lv.Revoked = &r
			}
			li.Versions = append(li.Versions, lv)
		}
		out = append(out, li)
	}
	return out, nil
}

// Revocation is the revocation in force of a version, nil when it may
// run or p is nil (imagectl show).
func Revocation(ctx context.Context, p store.Promotions, image, version string) (*store.Revocation, error) {
	if p == nil {
		return nil, nil
	}
	revoked, err := revokedVersions(ctx, p, image)
	if err != nil {
		return nil, err
	}
	if r, ok := revoked[version]; ok {
		return &r, nil
	}
	return nil, nil
}
