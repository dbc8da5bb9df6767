package base

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
)

func TestCache(t *testing.T) {
	content := []byte(strings.Repeat("base image bytes ", 100000))
	sum := digest.Bytes(content).String()
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
	cache := Cache{Dir: t.TempDir()}

	p, err := cache.Resolve(ctx, manifest.Base{Source: srv.URL + "/img", SHA256: sum}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != string(content) {
		t.Fatal("cached content differs")
	}
	if _, err := cache.Resolve(ctx, manifest.Base{Source: srv.URL + "/img", SHA256: sum}, "", nil); err != nil || hits != 1 {
		t.Errorf("second resolve: %v, %d downloads", err, hits)
	}

	wrong := "sha256:" + strings.Repeat("0", 64)
	_, err = cache.Resolve(ctx, manifest.Base{Source: srv.URL + "/img", SHA256: wrong}, "", nil)
	if !errors.Is(err, ErrChecksum) {
		t.Errorf("bad checksum: %v", err)
	}
	if _, err := cache.Resolve(ctx, manifest.Base{Source: srv.URL + "/missing", SHA256: wrong}, "", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing: %v", err)
	}
	entries, _ := os.ReadDir(cache.Dir)
	if len(entries) != 1 {
		t.Errorf("failed downloads left files: %v", entries)
	}

	local := filepath.Join(t.TempDir(), "base.qcow2")
	os.WriteFile(local, content, 0o644)
	if _, err := cache.Resolve(ctx, manifest.Base{Source: local, SHA256: sum}, local, nil); err != nil {
		t.Error(err)
	}
	if _, err := cache.Resolve(ctx, manifest.Base{Source: local, SHA256: wrong}, local, nil); !errors.Is(err, ErrChecksum) {
		t.Errorf("local bad checksum: %v", err)
	}
	if _, err := cache.Resolve(ctx, manifest.Base{Source: "nope", SHA256: sum}, filepath.Join(t.TempDir(), "nope"), nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing local: %v", err)
	}
	if _, err := cache.Resolve(ctx, manifest.Base{Source: local, SHA256: "md5:" + strings.Repeat("0", 32)}, local, nil); err == nil || !strings.Contains(err.Error(), "is not a sha256") {
		t.Errorf("malformed checksum: %v", err)
	}
	if _, err := cache.Resolve(ctx, manifest.Base{Source: "dir", SHA256: sum}, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("directory: %v", err)
	}
	var calls [][2]int64
	if _, err := cache.Resolve(ctx, manifest.Base{Source: local, SHA256: sum}, local, func(done, total int64) { calls = append(calls, [2]int64{done, total}) }); err != nil ||
		len(calls) == 0 || calls[len(calls)-1] != [2]int64{int64(len(content)), int64(len(content))} {
		t.Errorf("progress %v, %v", calls, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cache.Resolve(cctx, manifest.Base{Source: local, SHA256: sum}, local, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// A base URL's credentials are in no error of Resolve's.
func TestResolveHidesCredentials(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	src := strings.Replace(srv.URL, "http://", "http://builder:s3cret-pw@", 1) + "/img"
	sum := "sha256:" + strings.Repeat("0", 64)
	presigned := srv.URL + "/img?X-Amz-Credential=builder&X-Amz-Signature=s3cret-pw"
	for _, b := range []manifest.Base{{Source: src, SHA256: sum}, {Source: src, SHA256: "sha256:nothex"}, {Source: presigned, SHA256: sum}} {
		_, err := Cache{Dir: t.TempDir()}.Resolve(context.Background(), b, "", nil)
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(err.Error(), "builder") {
			t.Errorf("got %v, want an error without the URL's credentials", err)
		}
	}
	// Refused at the connection: net/http's error names the URL too.
	dead := strings.Replace(srv.URL, "http://", "http://builder:s3cret-pw@", 1) + "/img"
	srv.Close()
	_, err := Cache{Dir: t.TempDir()}.Resolve(context.Background(), manifest.Base{Source: dead, SHA256: sum}, "", nil)
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(err.Error(), "builder") {
		t.Errorf("refused: got %v, want an error without the URL's credentials", err)
	}
}
