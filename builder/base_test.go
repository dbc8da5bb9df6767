package builder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBaseCache(t *testing.T) {
	content := []byte(strings.Repeat("base image bytes ", 100000))
	sum := sha256.Sum256(content)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write(content)
	}))
	defer srv.Close()
	ctx := context.Background()
	cache := BaseCache{Dir: t.TempDir()}

	p, err := cache.Resolve(ctx, BaseRef{Source: srv.URL + "/img", Checksum: digest}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != string(content) {
		t.Fatal("cached content differs")
	}
	if _, err := cache.Resolve(ctx, BaseRef{Source: srv.URL + "/img", Checksum: digest}, "", nil); err != nil || hits != 1 {
		t.Errorf("second resolve: %v, %d downloads", err, hits)
	}

	wrong := "sha256:" + strings.Repeat("0", 64)
	_, err = cache.Resolve(ctx, BaseRef{Source: srv.URL + "/img", Checksum: wrong}, "", nil)
	if !errors.Is(err, ErrChecksum) {
		t.Errorf("bad checksum: %v", err)
	}
	if _, err := cache.Resolve(ctx, BaseRef{Source: srv.URL + "/missing", Checksum: wrong}, "", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing: %v", err)
	}
	entries, _ := os.ReadDir(cache.Dir)
	if len(entries) != 1 {
		t.Errorf("failed downloads left files: %v", entries)
	}

	local := filepath.Join(t.TempDir(), "base.qcow2")
	os.WriteFile(local, content, 0o644)
	if _, err := cache.Resolve(ctx, BaseRef{Source: local, Checksum: digest}, local, nil); err != nil {
		t.Error(err)
	}
	if _, err := cache.Resolve(ctx, BaseRef{Source: local, Checksum: wrong}, local, nil); !errors.Is(err, ErrChecksum) {
		t.Errorf("local bad checksum: %v", err)
	}
	if _, err := cache.Resolve(ctx, BaseRef{Source: "nope", Checksum: digest}, filepath.Join(t.TempDir(), "nope"), nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing local: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cache.Resolve(cctx, BaseRef{Source: local, Checksum: digest}, local, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
