package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuaas/imagectl/internal/atomicfile"
)

// BaseCache holds downloaded base images by digest: <dir>/sha256-<hex>.
// An image is stored only after its sha256 matched, under a name derived
// from that sha256, so a file in the cache is verified by its name.
type BaseCache struct {
	Dir    string
	Client *http.Client
}

// ErrChecksum reports a base image whose content does not match its checksum.
var ErrChecksum = errors.New("checksum mismatch")

// Resolve returns a local, verified copy of the base image: the file itself
// for a local source (hashed now), or the cached download for a URL
// (downloaded and hashed in one pass when missing). Nothing else happens
// before this succeeds.
func (c BaseCache) Resolve(ctx context.Context, b BaseRef, localPath string, progress func(done, total int64)) (string, error) {
	want := strings.TrimPrefix(b.Checksum, "sha256:")
	if localPath != "" {
		if err := verifyFile(ctx, localPath, want, progress); err != nil {
			return "", fmt.Errorf("base image %s: %w", b.Source, err)
		}
		return localPath, nil
	}
	cached := filepath.Join(c.Dir, "sha256-"+want)
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("base image cache: %w", err)
	}
	if err := c.download(ctx, b.Source, cached, want, progress); err != nil {
		return "", fmt.Errorf("downloading base image %s: %w", b.Source, err)
	}
	return cached, nil
}

func (c BaseCache) download(ctx context.Context, url, dest, want string, progress func(done, total int64)) error {
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
	h := sha256.New()
	if _, err := copyWithProgress(ctx, io.MultiWriter(f, h), resp.Body, resp.ContentLength, progress); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: got sha256:%s, the recipe expects sha256:%s", ErrChecksum, got, want)
	}
	return f.Commit()
}

func verifyFile(ctx context.Context, path, want string, progress func(done, total int64)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	if _, err := copyWithProgress(ctx, h, f, st.Size(), progress); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: %s has sha256:%s, the recipe expects sha256:%s", ErrChecksum, path, got, want)
	}
	return nil
}

// copyWithProgress copies in 1 MiB pieces, checking ctx between them.
func copyWithProgress(ctx context.Context, w io.Writer, r io.Reader, total int64, progress func(done, total int64)) (int64, error) {
	buf := make([]byte, 1<<20)
	var done, reported int64
	for {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return done, werr
			}
			done += int64(n)
			if progress != nil && (done-reported >= 64<<20 || done == total) {
				progress(done, total)
				reported = done
			}
		}
		if err == io.EOF {
			return done, nil
		}
		if err != nil {
			return done, err
		}
	}
}
