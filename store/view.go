package store

import (
	"context"
	"sync"
)

// OneView returns a context under which a remote catalog's reads share
// one view of it: the first read (or the catalog's opening) fetches the
// remote, and every later read under the context reads what that fetch
// brought, so that a command reading several records of one version (show:
// its revocation and its boot comparisons) fetches once and shows one
// consistent state. For reads only: a write fetches the tip itself. A
// context that already has a view keeps it.
func OneView(ctx context.Context) context.Context {
	if viewOf(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, viewKey{}, &view{tips: map[string]string{}})
}

type viewKey struct{}

// view is what OneView's reads fetched: each remote's commit, by a key
// the catalog chooses (its remote and branch).
type view struct {
	mu   sync.Mutex
	tips map[string]string
}

func viewOf(ctx context.Context) *view {
	v, _ := ctx.Value(viewKey{}).(*view)
	return v
}

// ViewFetch is a catalog's fetch under OneView's view: the commit fetched
// for key earlier under ctx, else fetch's (kept for the next read when it
// succeeded). Without a view it is fetch's, every time.
func ViewFetch(ctx context.Context, key string, fetch func() (string, error)) (string, error) {
	v := viewOf(ctx)
	if v == nil {
		return fetch()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if tip, ok := v.tips[key]; ok {
		return tip, nil
	}
	tip, err := fetch()
	if err == nil {
		v.tips[key] = tip
	}
	return tip, err
}
