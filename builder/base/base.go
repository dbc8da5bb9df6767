// Package base owns the base images a build starts from: a local file
// verified against the recipe's checksum, or a download verified as it is
// written and kept by digest, so a cached file is verified by its name;
// and their conversion to a raw disk (ToRaw), for a build and for the
// smoke comparison.
package base

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/manifest"
)

// Cache holds downloaded base images by digest: <dir>/sha256-<hex>.
// An image is stored only after its sha256 matched, under a name derived
// from that sha256, so a file in the cache is verified by its name.
type Cache struct {
	Dir    string
	Client *http.Client
}

// ErrChecksum reports a base image whose content does not match its checksum.
var ErrChecksum = errors.New("checksum mismatch")

// Resolve returns a local, verified copy of the base image: the file itself
// for a local source (hashed now), or the cached download for a URL
// (downloaded and hashed in one pass when missing). Nothing else happens
// before this succeeds.
func (c Cache) Resolve(ctx context.Context, b manifest.Base, localPath string, progress func(done, total int64)) (string, error) {
	sum, err := digest.Parse(b.SHA256)
	if err != nil {
		return "", fmt.Errorf("base image %s: checksum: %w", Shown(b.Source), err)
	}
	want := digest.Digest{Sum: sum}
	if localPath != "" {
		if err := verifyFile(ctx, localPath, want, progress); err != nil {
			return "", fmt.Errorf("base image %s: %w", Shown(b.Source), err)
		}
		return localPath, nil
	}
	cached := filepath.Join(c.Dir, "sha256-"+want.Hex())
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("base image cache: %w", err)
	}
	if err := c.download(ctx, b.Source, cached, want, progress); err != nil {
		// The client's own errors name the URL too: its password masked
		// by net/http, its user not.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			ue.URL = Shown(ue.URL)
		}
		return "", fmt.Errorf("downloading base image %s: %w", Shown(b.Source), err)
	}
	return cached, nil
}

// Shown is a base image's source as imagectl shows it (errors, events,
// summaries): without a URL's user and password, and with a presigned
// URL's signature or token masked.
func Shown(source string) string { return redact.URL(redact.Userinfo(source)) }

// download fetches url into dest, hashing it on the way, and keeps it only
// when its sha256 is want's.
func (c Cache) download(ctx context.Context, url, dest string, want digest.Digest, progress func(done, total int64)) error {
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	f, err := atomicfile.Create(dest, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	var report func(int64)
	if progress != nil {
		report = func(done int64) { progress(done, resp.ContentLength) }
	}
	got, err := digest.Copy(ctx, f, resp.Body, report)
	if err != nil {
		return err
	}
	if got.Sum != want.Sum {
		return fmt.Errorf("%w: got %s, the recipe expects %s", ErrChecksum, got, want)
	}
	return f.Commit()
}

// verifyFile checks that the local base image at path is a regular file
// whose sha256 is want's.
func verifyFile(ctx context.Context, path string, want digest.Digest, progress func(done, total int64)) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	got, err := digest.FileProgress(ctx, path, progress)
	if err != nil {
		return err
	}
	if got.Sum != want.Sum {
		return fmt.Errorf("%w: %s has %s, the recipe expects %s", ErrChecksum, path, got, want)
	}
	return nil
}
