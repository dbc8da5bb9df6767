package builder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/gpuaas/imagectl/internal/atomicfile"
	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/signing"
)

// TestPublishSigned: the outputs are signed before they appear, published
// with their signatures (which the verifier accepts), or not at all when
// signing or publishing one of them fails; a build without a key removes
// stale signatures.
func TestPublishSigned(t *testing.T) {
	priv, pub, err := signing.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signing.LoadPrivateKey(priv, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signing.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	arts := Artifacts{Tarball: "demo-1.tgz", Manifest: "demo-1.manifest.json", ValidationScript: "demo-1-validate.sh",
		Signature: "demo-1.tgz.sig", SigstoreBundle: "demo-1.tgz.sigstore.json",
		ManifestSignature: "demo-1.manifest.json.sig", ManifestSigstoreBundle: "demo-1.manifest.json.sigstore.json"}
	hook := func(tarball string, sum []byte, size int64, manifestPath string, m []byte) (map[string][]byte, error) {
		_, files, err := signer.SignBuilt(tarball, sum, size, manifestPath, m)
		return files, err
	}
	publishOnce := func(t *testing.T, dir string, sign func(string, []byte, int64, string, []byte) (map[string][]byte, error)) (*Result, error) {
		t.Helper()
		tgz, err := atomicfile.Create(filepath.Join(dir, arts.Tarball), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer tgz.Abort()
		content := []byte("not really a tgz, but bytes with a digest")
		tgz.Write(content)
		m := &manifest.Manifest{SchemaVersion: manifest.SchemaVersion, Image: manifest.Image{Name: "demo", Version: "1"},
			Artifact: &manifest.Artifact{File: arts.Tarball, SHA256: digest.Bytes(content).Hex(), Size: int64(len(content))}}
		return publish(context.Background(), m, tgz, dir, arts, sign)
	}
	files := func(dir string) []string {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return names
	}

	dir := t.TempDir()
	res, err := publishOnce(t, dir, hook)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Signatures) != 4 || len(files(dir)) != 7 {
		t.Fatalf("published %v with signatures %v", files(dir), res.Signatures)
	}
	r, err := signing.VerifyArtifact(context.Background(), verifier, res.Tarball, res.ManifestPath)
	if err != nil || r.Err() != nil {
		t.Fatalf("the published artifact does not verify: %v %v", err, r.Err())
	}

	// Without a key, the new artifact replaces the old one and its
	// signatures go: they would not match.
	if _, err := publishOnce(t, dir, nil); err != nil {
		t.Fatal(err)
	}
	if got := files(dir); len(got) != 3 {
		t.Errorf("after an unsigned rebuild: %v", got)
	}

	// A signing failure publishes nothing.
	empty := t.TempDir()
	_, err = publishOnce(t, empty, func(string, []byte, int64, string, []byte) (map[string][]byte, error) {
		return nil, errors.New("the key is gone")
	})
	if err == nil || len(files(empty)) != 0 {
		t.Errorf("failed signing: %v, left %v", err, files(empty))
	}

	// The manifest, published last, cannot take its name (a directory
	// holds it): the script, the signatures and the tgz, published by
	// then, are taken back.
	blocked := t.TempDir()
	if err := os.MkdirAll(filepath.Join(blocked, arts.Manifest, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = publishOnce(t, blocked, hook)
	if got := files(blocked); err == nil || len(got) != 1 || got[0] != arts.Manifest {
		t.Errorf("failed publish: %v, left %v", err, got)
	}
}
