// Package storeopen owns how a store is named: --store is a directory (the
// directory store, store.Dir) or oci://REGISTRY/PREFIX (an OCI registry,
// store/oci), and --catalog a git remote holding the promotion catalog
// (store/gitcatalog). A directory store keeps its own catalog when no git
// remote is given; a registry keeps none, so promotions through one need
// --catalog. Open joins the two into one store.Store.
package storeopen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/gitcatalog"
	"github.com/gpuaas/imagectl/store/oci"
)

// Scheme starts a store location that names an OCI registry.
const Scheme = "oci://"

// The variables that name a store where the flags do not.
const (
	// StoreEnv is the store location: a directory or oci://REGISTRY/PREFIX.
	StoreEnv = "IMAGECTL_STORE"
	// CatalogEnv is the git remote of the promotion catalog.
	CatalogEnv = "IMAGECTL_CATALOG"
	// RegistryCAEnv is the PEM CA bundle a registry is checked against.
	RegistryCAEnv = "IMAGECTL_REGISTRY_CA"
)

// IsRegistry is whether a store location names an OCI registry.
func IsRegistry(location string) bool { return strings.HasPrefix(location, Scheme) }

// Location is the store a command uses: given (--store), else
// $IMAGECTL_STORE, else ./imagectl-store.
func Location(given string, env []string) string {
	return cmp.Or(given, environ.Get(env, StoreEnv), store.DefaultDir)
}

// Configured is whether a store is named at all (given or $IMAGECTL_STORE):
// a build publishes into none otherwise.
func Configured(given string, env []string) bool {
	return given != "" || environ.Get(env, StoreEnv) != ""
}

// Resolve fills what opts leaves empty from opts.Env: the store
// (Location), the catalog ($IMAGECTL_CATALOG), for a registry the CA
// bundle ($IMAGECTL_REGISTRY_CA; a directory store ignores the variable,
// the flag given with one is Open's error) and the cache directory
// (cachedir.Default; none when there is no default).
func Resolve(opts Options) Options {
	opts.Store = Location(opts.Store, opts.Env)
	opts.Catalog = cmp.Or(opts.Catalog, environ.Get(opts.Env, CatalogEnv))
	if IsRegistry(opts.Store) {
		opts.CAFile = cmp.Or(opts.CAFile, environ.Get(opts.Env, RegistryCAEnv))
	}
	if opts.CacheDir == "" {
		if dir, err := cachedir.Default(opts.Env); err == nil {
			opts.CacheDir = dir
		}
	}
	return opts
}

// Options name a store.
type Options struct {
	// Store is a directory or oci://REGISTRY/PREFIX.
	Store string
	// Catalog is the git remote (ssh, https, git or file URL, or a path)
	// of the promotion catalog; "" keeps a directory store's own catalog.
	Catalog string
	// CAFile is a PEM CA bundle the registry's TLS certificate is checked
	// against, besides the system's.
	CAFile string
	// PlainHTTP talks to the registry without TLS: loopback only.
	PlainHTTP bool
	// Env supplies credentials overrides (IMAGECTL_REGISTRY_USERNAME,
	// IMAGECTL_REGISTRY_PASSWORD) and git's environment.
	Env []string
	// CacheDir is imagectl's cache directory: a registry's blobs are kept
	// under oci/, the git catalog's working clone under catalogs/; ""
	// leaves each package its default.
	CacheDir string
	// Signer signs what is published to a registry (its OCI manifest, in
	// cosign's format); nil signs nothing there.
	Signer *signing.Signer
}

// Open opens the version store and the promotion catalog opts names. The
// git catalog is cloned or fetched when it is first used, so commands that
// only read versions never touch it.
func Open(ctx context.Context, opts Options) (store.Store, error) {
	var versions store.Versions
	ref, isOCI := strings.CutPrefix(opts.Store, Scheme)
	// Store locations are quoted without credentials (redact.URL): a
	// location that carries any is refused, and they are kept out of
	// every output.
	shown := redact.URL(opts.Store)
	switch {
	case shown != opts.Store:
		// A directory named so is a mistyped URL.
		redact.RegisterURL(opts.Store)
		return nil, fmt.Errorf("opening the store %s: a store location carries no credentials: give a registry's in $%s and $%s or a Docker config (docker login)", shown, oci.UsernameEnv, oci.PasswordEnv)
	case isOCI:
		s, err := oci.Open(ref, oci.Options{CacheDir: sub(opts.CacheDir, cachedir.Registry), Env: opts.Env, CAFile: opts.CAFile, PlainHTTP: opts.PlainHTTP, Signer: opts.Signer})
		if err != nil {
			return nil, fmt.Errorf("opening the registry store %s: %w", shown, err)
		}
		versions = s
	case opts.CAFile != "" || opts.PlainHTTP:
		return nil, fmt.Errorf("--registry-ca and --plain-http apply to a registry store (%sREGISTRY/PREFIX), not to the directory %s", Scheme, shown)
	case strings.Contains(opts.Store, "://"):
		redact.RegisterURL(opts.Store)
		return nil, fmt.Errorf("store %q: a store is a directory or %sREGISTRY/PREFIX", shown, Scheme)
	default:
		versions = store.NewDir(opts.Store)
	}
	var promotions store.Promotions
	switch dir, isDir := versions.(*store.Dir); {
	case opts.Catalog != "":
		promotions = &lazyCatalog{remote: opts.Catalog, opts: gitcatalog.Options{Env: opts.Env, Now: time.Now}}
		if opts.CacheDir != "" {
			promotions.(*lazyCatalog).opts.CacheDir = gitcatalog.CloneDir(opts.CacheDir, opts.Catalog)
		}
	case isDir:
		promotions = dir
	default:
		promotions = noCatalog{versions.Location()}
	}
	return store.Compose(versions, promotions), nil
}

func sub(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// lazyCatalog opens the git catalog on first use.
type lazyCatalog struct {
	remote string
	opts   gitcatalog.Options

	mu sync.Mutex // a rollout reads and records from many goroutines
	c  *gitcatalog.Catalog
}

func (l *lazyCatalog) open(ctx context.Context) (*gitcatalog.Catalog, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		c, err := gitcatalog.Open(ctx, l.remote, l.opts)
		if err != nil {
			return nil, err
		}
		l.c = c
	}
	return l.c, nil
}

func (l *lazyCatalog) History(ctx context.Context, site, image string) ([]store.Promotion, error) {
	c, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return c.History(ctx, site, image)
}

func (l *lazyCatalog) Catalog(ctx context.Context, site string) (map[string][]store.Promotion, error) {
	c, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return c.Catalog(ctx, site)
}

func (l *lazyCatalog) Record(ctx context.Context, site string, p store.Promotion) error {
	c, err := l.open(ctx)
	if err != nil {
		return err
	}
	return c.Record(ctx, site, p)
}

// ErrNoCatalog is returned by promotion reads and writes through a registry
// store opened without a catalog.
var ErrNoCatalog = errors.New("no promotion catalog")

// noCatalog is the catalog of a registry store opened without --catalog.
type noCatalog struct{ store string }

func (n noCatalog) err() error {
	return fmt.Errorf("%w: the registry store %s%s keeps image versions only; promotions are kept in git: give --catalog GIT-REMOTE (or $IMAGECTL_CATALOG)", ErrNoCatalog, Scheme, n.store)
}

func (n noCatalog) History(context.Context, string, string) ([]store.Promotion, error) {
	return nil, n.err()
}

func (n noCatalog) Catalog(context.Context, string) (map[string][]store.Promotion, error) {
	return nil, n.err()
}

func (n noCatalog) Record(context.Context, string, store.Promotion) error { return n.err() }

func (l *lazyCatalog) Evidence(ctx context.Context, site, image, version string) ([]store.Evidence, error) {
	c, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return c.Evidence(ctx, site, image, version)
}

func (l *lazyCatalog) AddEvidence(ctx context.Context, evs []store.Evidence) error {
	c, err := l.open(ctx)
	if err != nil {
		return err
	}
	return c.AddEvidence(ctx, evs)
}

func (l *lazyCatalog) Revocations(ctx context.Context, image string) ([]store.Revocation, error) {
	c, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return c.Revocations(ctx, image)
}

func (l *lazyCatalog) Revoke(ctx context.Context, r store.Revocation) error {
	c, err := l.open(ctx)
	if err != nil {
		return err
	}
	return c.Revoke(ctx, r)
}

func (l *lazyCatalog) RackProofs(ctx context.Context, site, image, version string) ([]store.RackProof, error) {
	c, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return c.RackProofs(ctx, site, image, version)
}

func (l *lazyCatalog) AddRackProofs(ctx context.Context, ps []store.RackProof) error {
	c, err := l.open(ctx)
	if err != nil {
		return err
	}
	return c.AddRackProofs(ctx, ps)
}

func (n noCatalog) Evidence(context.Context, string, string, string) ([]store.Evidence, error) {
	return nil, n.err()
}

func (n noCatalog) AddEvidence(context.Context, []store.Evidence) error { return n.err() }

func (n noCatalog) Revocations(context.Context, string) ([]store.Revocation, error) {
	return nil, n.err()
}

func (n noCatalog) Revoke(context.Context, store.Revocation) error { return n.err() }

func (n noCatalog) RackProofs(context.Context, string, string, string) ([]store.RackProof, error) {
	return nil, n.err()
}

func (n noCatalog) AddRackProofs(context.Context, []store.RackProof) error { return n.err() }

func (l *lazyCatalog) BootComparisons(ctx context.Context, image, version string) ([]store.BootComparison, error) {
	c, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return c.BootComparisons(ctx, image, version)
}

func (l *lazyCatalog) AddBootComparison(ctx context.Context, bc store.BootComparison) error {
	c, err := l.open(ctx)
	if err != nil {
		return err
	}
	return c.AddBootComparison(ctx, bc)
}

func (n noCatalog) BootComparisons(context.Context, string, string) ([]store.BootComparison, error) {
	return nil, n.err()
}

func (n noCatalog) AddBootComparison(context.Context, store.BootComparison) error { return n.err() }
