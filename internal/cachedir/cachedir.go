// Package cachedir owns where imagectl's cache directory is and how it is
// laid out: $IMAGECTL_CACHE_DIR, else imagectl/ in the user's cache
// directory, holding one folder per user of it. Every user (the builder's
// base images, layer cache and package cache, the registry store's cache,
// the git catalogs' clones, the hash records of racks checks and uploads,
// the cache package's listing and pruning) takes its folder from here, so
// that one setting moves them all.
package cachedir

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuaas/imagectl/internal/environ"
)

// Env is the variable that places the cache directory.
const Env = "IMAGECTL_CACHE_DIR"

// The folders of the cache directory.
const (
	// Base holds the downloaded base images, one per recipe base.
	Base = "base"
	// Layers is the layer cache (builder/layercache).
	Layers = "layers"
	// Registry is the registry store's cache (store/oci).
	Registry = "oci"
	// Catalogs holds the git catalogs' working clones (store/gitcatalog).
	Catalogs = "catalogs"
	// Packages is the package cache (builder/debcache): the .deb files
	// builds fetched on the host, by sha256.
	Packages = "packages"
	// Hashed holds the records of the store tgzs that a racks check or
	// promote's upload hashed (internal/hashstamp): a small file a
	// version, pruned once its tgz is gone or changed (cache).
	Hashed = "hashed"
)

// Default is the cache directory env names: $IMAGECTL_CACHE_DIR, else
// $XDG_CACHE_HOME/imagectl, else the user's cache directory's imagectl
// (os.UserCacheDir: ~/.cache/imagectl).
func Default(env []string) (string, error) {
	if dir := environ.Get(env, Env); dir != "" {
		return dir, nil
	}
	if dir := environ.Get(env, "XDG_CACHE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "imagectl"), nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	return filepath.Join(dir, "imagectl"), nil
}
