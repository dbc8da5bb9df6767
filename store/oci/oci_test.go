package oci_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/manifest/manifesttest"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/signing/signingtest"
	"github.com/gpuaas/imagectl/store"
	"github.com/gpuaas/imagectl/store/oci"
	"github.com/gpuaas/imagectl/store/oci/ocitest"
	"github.com/gpuaas/imagectl/store/storetest"
	godigest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
)

// open opens a store under prefix with the registry's CA and credentials
// (the environment override).
func open(t testing.TB, reg *ocitest.Registry, prefix string, opts oci.Options) *oci.Store {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = t.TempDir()
	}
	if opts.CAFile == "" {
		opts.CAFile = reg.CAFile
	}
	if opts.Env == nil {
		opts.Env = []string{oci.UsernameEnv + "=" + reg.Username, oci.PasswordEnv + "=" + reg.Password}
	}
	s, err := oci.Open(reg.Host+"/"+prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func artifact(t testing.TB, image, version string, signer *signing.Signer) manifest.Files {
	tgz, m := storetest.Artifact(t, t.TempDir(), image, version, storetest.Options{Signer: signer})
	return manifest.Files{Tarball: tgz, Manifest: m}
}

// published starts a registry, opens a store on it under prefix and
// publishes version of image "img" there.
func published(t testing.TB, prefix, version string) (*ocitest.Registry, *oci.Store, manifest.Files) {
	t.Helper()
	reg := ocitest.Start(t)
	s := open(t, reg, prefix, oci.Options{})
	a := artifact(t, "img", version, nil)
	if _, err := s.Publish(context.Background(), a, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	return reg, s, a
}

func readAll(t testing.TB, b store.Blob, size int64) ([]byte, error) {
	t.Helper()
	defer b.Close()
	return io.ReadAll(io.NewSectionReader(b, 0, size))
}

func TestPublishAndRead(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Start(t)
	signer, pub := storetest.Keys(t, t.TempDir())
	s := open(t, reg, "team/images", oci.Options{Signer: signer})
	a := artifact(t, "gpu-node", "1.0", signer)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	v, err := s.Publish(ctx, a, store.PublishOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if v.Existed || !v.Published.Equal(now) || v.Ref != reg.Host+"/team/images/gpu-node:1.0" {
		t.Errorf("published %+v", v)
	}

	// The manifest as other tools see it.
	m := fetchManifest(t, reg, "team/images/gpu-node", "1.0")
	ann := m["annotations"].(map[string]any)
	if m["artifactType"] != oci.ArtifactType || ann["org.opencontainers.image.version"] != "1.0" ||
		ann["org.opencontainers.image.created"] != "2026-11-22T10:00:00Z" || ann[oci.AnnotationImage] != "gpu-node" ||
		ann["org.opencontainers.image.revision"] != "7d4602d0f2b949ae8816d767b78cfd7b91dbccb3" {
		t.Errorf("manifest %v", m)
	}
	if l := m["layers"].([]any)[0].(map[string]any); l["mediaType"] != oci.MediaTypeTarball ||
		l["annotations"].(map[string]any)["org.opencontainers.image.title"] != "gpu-node-1.0.tgz" {
		t.Errorf("first layer %v", l)
	}

	// Read back through a store with an empty cache.
	r := open(t, reg, "team/images", oci.Options{})
	got, err := r.Version(ctx, "gpu-node", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := os.ReadFile(a.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	d := digest.Bytes(tgz)
	if got.SHA256 != d.Hex() || got.Size != d.Size || got.Tarball != "" || got.Remote == nil {
		t.Errorf("version %+v, want the tgz's sha256 %s, remote", got, d.Hex())
	}
	names := manifest.FilesFor("gpu-node", "1.0")
	roles := map[string]string{}
	for _, f := range got.Files {
		roles[f.Name] = f.Role
	}
	for name, role := range map[string]string{names.Tarball: store.RoleTarball, names.Manifest: store.RoleManifest,
		names.ValidationScript: store.RoleValidationScript, names.TarballSignature: store.RoleSignature,
		names.TarballBundle: store.RoleSignature, names.ManifestSignature: store.RoleSignature, names.ManifestBundle: store.RoleSignature} {
		if roles[name] != role {
			t.Errorf("file %s has role %q, want %q (files %+v)", name, roles[name], role, got.Files)
		}
	}
	for _, p := range []string{got.Manifest, got.ValidationScript, filepath.Join(got.Dir, names.TarballSignature)} {
		if filepath.Dir(p) != got.Dir {
			t.Errorf("%s is not in the version directory %s", p, got.Dir)
		}
	}
	want, _ := os.ReadFile(a.Manifest)
	if b, err := os.ReadFile(got.Manifest); err != nil || !bytes.Equal(b, want) {
		t.Errorf("manifest %s: %v, differs from what was published", got.Manifest, err)
	}
	if !got.Signed() {
		t.Error("the version is not signed")
	}

	// Streamed and fetched give the same bytes.
	blob, err := got.OpenTarball(ctx)
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := readAll(t, blob, got.Size)
	if err != nil || !bytes.Equal(streamed, tgz) {
		t.Fatalf("OpenTarball: %v, same bytes %v", err, bytes.Equal(streamed, tgz))
	}
	local, err := got.LocalTarball(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(local) != got.Dir {
		t.Errorf("LocalTarball %s is not in %s", local, got.Dir)
	}
	if b, _ := os.ReadFile(local); !bytes.Equal(b, tgz) {
		t.Error("LocalTarball differs from the published tgz")
	}
	// The signatures beside the files verify as a directory store's do.
	verifier, err := signing.LoadPublicKeyFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := signing.VerifyArtifact(ctx, verifier, local, got.Manifest)
	if err != nil || !rep.Verified {
		t.Fatalf("VerifyArtifact: %v %v", err, rep.Err())
	}
	if err := r.VerifySignature(ctx, "gpu-node", "1.0", verifier); err != nil {
		t.Errorf("VerifySignature: %v", err)
	}
	other, _ := storetest.Keys(t, t.TempDir())
	ov, _ := other.Verifier()
	if err := r.VerifySignature(ctx, "gpu-node", "1.0", ov); err == nil {
		t.Error("VerifySignature accepted another key")
	}

	// A second call uses the cache.
	again, err := got.Remote.FetchTarball(ctx)
	if err != nil || again != local {
		t.Fatalf("FetchTarball again: %s, %v", again, err)
	}
	if _, err := r.Version(ctx, "gpu-node", "9.9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing version: %v, want ErrNotFound", err)
	}
}

func TestOpenTarballRefusesOtherContent(t *testing.T) {
	ctx := context.Background()
	_, s, _ := published(t, "p", "1")
	v, err := s.Version(ctx, "img", "1")
	if err != nil {
		t.Fatal(err)
	}
	// Streamed from the registry, checked against the descriptor.
	blob, err := v.OpenTarball(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, blob, v.Size); err != nil {
		t.Fatalf("streaming the tgz: %v", err)
	}
	// Corrupt the cached blob: the last bytes are refused.
	local, err := v.LocalTarball(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(local)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(local, b, 0o644); err != nil { // the blob: a hard link
		t.Fatal(err)
	}
	blob, err = v.Remote.OpenTarball(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, blob, v.Size); err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "removed") {
		t.Errorf("a corrupted cached tgz read as %v, want a sha256 mismatch and the copy removed", err)
	}
	// The corrupted copy is gone from the cache: the next read streams the
	// tgz from the registry again, whole and checked.
	blob, err = v.Remote.OpenTarball(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(t, blob, v.Size); err != nil || !digest.Bytes(got).Matches(v.SHA256) {
		t.Errorf("reading the tgz after its cached copy was dropped: %v", err)
	}
	// A cached copy corrupted before a fetch is downloaded again.
	local, err = v.Remote.FetchTarball(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(local)
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(local, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if local, err = v.Remote.FetchTarball(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := digest.File(ctx, local); err != nil || !d.Matches(v.SHA256) {
		t.Errorf("fetching the tgz over a corrupted cached copy: %s is %v, %v; want sha256 %s", local, d, err, v.SHA256)
	}

	// A tgz that is not the one its manifest describes is not pushed.
	a2 := artifact(t, "img", "2", nil)
	if err := os.WriteFile(a2.Tarball, []byte("other bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(ctx, a2, store.PublishOptions{}); err == nil || !strings.Contains(err.Error(), "is not the tgz its manifest describes") {
		t.Errorf("publishing a tgz its manifest does not describe: %v", err)
	}
}

func TestImmutable(t *testing.T) {
	ctx := context.Background()
	reg, s, a := published(t, "imm", "1.0")
	v, err := s.Publish(ctx, a, store.PublishOptions{})
	if err != nil || !v.Existed {
		t.Fatalf("publishing the same bytes again: %v, existed %v", err, v != nil && v.Existed)
	}
	// Other bytes under the same version (another content's tgz).
	other := artifact(t, "img", "1.0", nil)
	tgz := []byte("not the same tgz")
	d := digest.Bytes(tgz)
	rewrite(t, other, tgz, d)
	if _, err := s.Publish(ctx, other, store.PublishOptions{}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("publishing other bytes: %v, want ErrExists", err)
	}
	// Refused before anything was pushed: the registry never got the bytes.
	if has, err := testRepo(t, reg, "imm/img").Exists(ctx, ocispec.Descriptor{Digest: godigest.Digest(d.String()), Size: d.Size}); err != nil || has {
		t.Errorf("the refused tgz's blob is in the registry: %v, %v", has, err)
	}

	// Concurrent publishers of one version: each succeeds or gets
	// ErrExists, and the version is one of the two, whole.
	x, y := artifact(t, "img", "2.0", nil), artifact(t, "img", "2.0", nil)
	rewrite(t, y, tgz, d)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, art := range []manifest.Files{x, y} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = open(t, reg, "imm", oci.Options{}).Publish(ctx, art, store.PublishOptions{})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, store.ErrExists) {
			t.Errorf("concurrent publish: %v", err)
		}
	}
	got, err := s.Version(ctx, "img", "2.0")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := os.ReadFile(got.Manifest)
	m, err := manifest.Parse(mb)
	if err != nil {
		t.Fatal(err)
	}
	if !digest.Equal(m.Artifact.SHA256, got.SHA256) {
		t.Errorf("mixed version: manifest names tgz %s, the version's tgz is %s", m.Artifact.SHA256, got.SHA256)
	}
}

// rewrite replaces an artifact's tgz and its manifest's description of it.
func rewrite(t testing.TB, a manifest.Files, tgz []byte, d digest.Digest) {
	t.Helper()
	if err := os.WriteFile(a.Tarball, tgz, 0o644); err != nil {
		t.Fatal(err)
	}
	manifesttest.Edit(t, a.Manifest, func(m *manifest.Manifest) { m.Artifact.SHA256, m.Artifact.Size = d.Hex(), d.Size })
}

func TestCredentials(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Start(t)
	a := artifact(t, "img", "1", nil)

	// The Docker config, from $DOCKER_CONFIG.
	dc := reg.DockerConfig(t, t.TempDir())
	s := open(t, reg, "creds", oci.Options{Env: []string{"DOCKER_CONFIG=" + dc}})
	if _, err := s.Publish(ctx, a, store.PublishOptions{}); err != nil {
		t.Fatalf("with DOCKER_CONFIG: %v", err)
	}
	// The same, given as an option.
	s = open(t, reg, "creds", oci.Options{Env: []string{}, DockerConfig: dc})
	if _, err := s.Version(ctx, "img", "1"); err != nil {
		t.Fatalf("with DockerConfig: %v", err)
	}
	// The environment overrides the Docker config.
	s = open(t, reg, "creds", oci.Options{DockerConfig: t.TempDir(),
		Env: []string{oci.UsernameEnv + "=" + reg.Username, oci.PasswordEnv + "=" + reg.Password}})
	if _, err := s.Version(ctx, "img", "1"); err != nil {
		t.Fatalf("with the environment: %v", err)
	}
	// A wrong password says what was tried.
	s = open(t, reg, "creds", oci.Options{DockerConfig: dc,
		Env: []string{oci.UsernameEnv + "=" + reg.Username, oci.PasswordEnv + "=wrong"}})
	_, err := s.Version(ctx, "img", "1")
	if err == nil || !strings.Contains(err.Error(), "refused access (401") || !strings.Contains(err.Error(), oci.UsernameEnv) {
		t.Errorf("wrong password: %v", err)
	}
	t.Log(err)
	// Without the CA.
	s, err = oci.Open(reg.Host+"/creds", oci.Options{CacheDir: t.TempDir(), DockerConfig: dc, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Version(ctx, "img", "1"); err == nil || !strings.Contains(err.Error(), "TLS certificate is not trusted") {
		t.Errorf("without the CA: %v", err)
	}
	// Plain HTTP only to loopback.
	if _, err := oci.Open("registry.example.com/x", oci.Options{PlainHTTP: true}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("plain HTTP to a remote host: %v", err)
	}
	for _, host := range []string{"localhost:5000", "127.0.0.2:5000", "[::1]:5000"} {
		if _, err := oci.Open(host+"/x", oci.Options{PlainHTTP: true, CacheDir: t.TempDir()}); err != nil {
			t.Errorf("plain HTTP to %s: %v", host, err)
		}
	}
}

func TestChannelsAndListing(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Start(t)
	s := open(t, reg, "", oci.Options{}) // no prefix
	day := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	if v, err := s.NextVersion(ctx, "img", day); err != nil || v != "20261122.1" {
		t.Fatalf("NextVersion of a new image: %q, %v", v, err)
	}
	if v, err := s.Latest(ctx, "img"); err != nil || v != nil {
		t.Fatalf("Latest of a new image: %v, %v", v, err)
	}
	for i, ver := range []string{"20261122.1", "20261122.2", "20261121.5"} {
		at := day.Add(time.Duration(i) * time.Minute)
		if _, err := s.Publish(ctx, artifact(t, "img", ver, nil), store.PublishOptions{Now: func() time.Time { return at }}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Publish(ctx, artifact(t, "other", "1", nil), store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if v, err := s.NextVersion(ctx, "img", day); err != nil || v != "20261122.3" {
		t.Errorf("NextVersion: %q, %v", v, err)
	}
	if v, err := s.Latest(ctx, "img"); err != nil || v.Version != "20261121.5" || v.Manifest == "" {
		t.Errorf("Latest: %+v, %v", v, err)
	}

	if ch, err := s.Channel(ctx, "lab", "img"); err != nil || ch != "" {
		t.Errorf("channel before any: %q, %v", ch, err)
	}
	if err := s.SetChannel(ctx, "lab", "img", "20261122.2"); err != nil {
		t.Fatal(err)
	}
	if ch, err := s.Channel(ctx, "lab", "img"); err != nil || ch != "20261122.2" {
		t.Errorf("channel: %q, %v", ch, err)
	}
	if err := s.SetChannel(ctx, "lab", "img", "404"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("channel to a missing version: %v", err)
	}
	if ch, ok := store.ChannelsOf(s); !ok || ch == nil {
		t.Error("the store has no channels")
	}

	imgs, err := s.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listed(imgs), "img:20261122.1 img:20261122.2 img:20261121.5 other:1"; got != want {
		t.Errorf("Images: %s, want %s (oldest first, no channel tags)", got, want)
	}

	// Another tool's artifact tagged like a version in the repository is
	// not listed, and does not break the listing; asked for by name, it is
	// refused as not a version.
	pushForeign(t, reg, "img", "9.9")
	imgs, err = s.Images(ctx)
	if err != nil {
		t.Fatalf("listing with another tool's tag: %v", err)
	}
	if len(imgs) != 2 || len(imgs[0].Versions) != 3 {
		t.Errorf("Images with another tool's tag: %+v", imgs)
	}
	if v, err := s.Latest(ctx, "img"); err != nil || v.Version != "20261121.5" {
		t.Errorf("Latest with another tool's tag: %+v, %v", v, err)
	}
	if _, err := s.Version(ctx, "img", "9.9"); err == nil || !strings.Contains(err.Error(), "not an imagectl version") {
		t.Errorf("Version of another tool's tag: %v", err)
	}
}

// listed is IMAGE:VERSION of each version listed, in order.
func listed(imgs []store.Image) string {
	var out []string
	for _, im := range imgs {
		for _, v := range im.Versions {
			out = append(out, im.Name+":"+v.Version)
		}
	}
	return strings.Join(out, " ")
}

// pushForeign tags an empty artifact of another type as image:tag, as
// another tool sharing the registry would.
func pushForeign(t *testing.T, reg *ocitest.Registry, image, tag string) {
	t.Helper()
	repo := testRepo(t, reg, image)
	ctx := context.Background()
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, "application/vnd.example.other+type", oras.PackManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Tag(ctx, desc, tag); err != nil {
		t.Fatal(err)
	}
}

// TestCosignVerify: the real cosign verifies the version's signature and,
// for a version with SBOMs and provenance, the three attestations
// (cosign's .att tag: distribution 2.8 has no referrers API), each of its
// type only, and none under another key.
func TestCosignVerify(t *testing.T) {
	cosign := signingtest.Cosign(t)
	ctx := context.Background()
	reg := ocitest.Start(t)
	signer, pub := storetest.Keys(t, t.TempDir())
	s := open(t, reg, "signed/x", oci.Options{Signer: signer})
	tgz, m := storetest.Artifact(t, t.TempDir(), "img", "1.0", storetest.Options{Documents: true})
	v, err := s.Publish(ctx, manifest.Files{Tarball: tgz, Manifest: m}, store.PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dc := reg.DockerConfig(t, t.TempDir())
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, cosign, append(args, "--insecure-ignore-tlog=true", v.Ref)...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "DOCKER_CONFIG=" + dc, "SSL_CERT_FILE=" + reg.CAFile, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	_, otherPub := storetest.Keys(t, t.TempDir())
	for _, args := range [][]string{{"verify"}, {"verify-attestation", "--type", "slsaprovenance1"}, {"verify-attestation", "--type", "spdxjson"},
		{"verify-attestation", "--type", "cyclonedx"}} {
		out, err := run(append(args, "--key", pub)...)
		if err != nil {
			t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "verify-attestation" && !strings.Contains(out, `"payloadType":"application/vnd.in-toto+json"`) {
			t.Errorf("cosign %s printed no attestation:\n%s", strings.Join(args, " "), out)
		}
		if out, err := run(append(args, "--key", otherPub)...); err == nil {
			t.Fatalf("cosign %s accepted another key:\n%s", strings.Join(args, " "), out)
		}
	}
	if out, err := run("verify-attestation", "--type", "vuln", "--key", pub); err == nil {
		t.Fatalf("cosign verify-attestation found a vulnerability attestation imagectl never made:\n%s", out)
	}
	// The version carries the documents, and imagectl's own verification
	// checks them from the registry.
	got, err := s.Version(ctx, "img", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]int{}
	for _, f := range got.Files {
		roles[f.Role]++
	}
	if roles[store.RoleSBOM] != 1 || roles[store.RoleCycloneDX] != 1 || roles[store.RoleProvenance] != 1 || roles[store.RoleAttestation] != 0 {
		t.Errorf("version files by role %v: want the SBOMs and provenance (published unattested: the store signs them for the registry)", roles)
	}
	// Other tools find the CycloneDX SBOM by its media type.
	var cdxLayers int
	for _, l := range fetchManifest(t, reg, "signed/x/img", "1.0")["layers"].([]any) {
		l := l.(map[string]any)
		if l["mediaType"] == "application/vnd.cyclonedx+json" && l["annotations"].(map[string]any)["org.opencontainers.image.title"] == "img-1.0.cdx.json" {
			cdxLayers++
		}
	}
	if cdxLayers != 1 {
		t.Errorf("%d CycloneDX layers titled img-1.0.cdx.json, want 1", cdxLayers)
	}
}

// fetchManifest GETs a manifest with net/http, as any client would.
func fetchManifest(t testing.TB, reg *ocitest.Registry, repo, tag string) map[string]any {
	t.Helper()
	c := &http.Client{Transport: reg.Transport(t)}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+reg.Host+"/v2/"+repo+"/manifests/"+tag, nil)
	req.SetBasicAuth(reg.Username, reg.Password)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET manifest %s:%s: %s: %v", repo, tag, resp.Status, err)
	}
	return m
}

// TestConcurrentReaders reads one version from many goroutines at once, as
// a rollout does, into one empty cache: each gets the version's files, and
// its tgz, complete.
func TestConcurrentReaders(t *testing.T) {
	ctx := context.Background()
	reg, _, _ := published(t, "many", "1.0")
	reader := open(t, reg, "many", oci.Options{})
	const readers, reads = 16, 8
	var wg sync.WaitGroup
	for range readers * reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := reader.Version(ctx, "img", "1.0")
			if err == nil {
				_, err = os.Stat(v.Manifest)
			}
			if err == nil {
				var p string
				if p, err = v.LocalTarball(ctx); err == nil {
					_, err = os.Stat(p)
				}
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// A tgz streamed from the registry survives responses cut short: each read
// resumes with a range request from where the response stopped, up to its
// attempts; past them, the read fails and says how far it got.
func TestOpenTarballResumesCutResponses(t *testing.T) {
	ctx := context.Background()
	reg, _, a := published(t, "resume", "1")
	want, err := os.ReadFile(a.Tarball)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cuts  int32
		after int64
		ok    bool
	}{
		{cuts: 2, after: int64(len(want) / 3), ok: true},
		{cuts: 10, after: 1, ok: false}, // a byte a response: a read gives up after its tries
	} {
		proxy, cut := cuttingProxy(t, reg, digest.Bytes(want).String(), c.cuts, c.after)
		v, err := openProxied(t, reg, proxy, "resume").Version(ctx, "img", "1")
		if err != nil {
			t.Fatal(err)
		}
		blob, err := v.OpenTarball(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, blob, v.Size)
		switch {
		case c.ok && (err != nil || !bytes.Equal(got, want)):
			t.Errorf("%d cut responses: read %d of %d bytes, %v", c.cuts, len(got), len(want), err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "tries")):
			t.Errorf("every response cut: %v, want an error after its tries", err)
		}
		if n := cut.Load(); n < 2 {
			t.Errorf("the proxy cut %d responses: the test did not test", n)
		}
	}
}

// cuttingProxy forwards plain HTTP on loopback to the registry and cuts
// the first cuts responses carrying the blob's bytes after `after` bytes,
// as a dropped connection would. It returns its host and the count of cuts.
func cuttingProxy(t *testing.T, reg *ocitest.Registry, blob string, cuts int32, after int64) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	host := registryProxy(t, reg, nil, func(resp *http.Response) error {
		if resp.Request.Method == http.MethodGet && strings.HasSuffix(resp.Request.URL.Path, "/blobs/"+blob) &&
			n.Add(1) <= cuts {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(io.LimitReader(resp.Body, after), errReader{}), resp.Body}
		}
		return nil
	})
	return host, &n
}

// openProxied opens a store under prefix through a registryProxy's host,
// with the registry's credentials and a cache of its own.
func openProxied(t *testing.T, reg *ocitest.Registry, host, prefix string) *oci.Store {
	t.Helper()
	s, err := oci.Open(host+"/"+prefix, oci.Options{PlainHTTP: true, CacheDir: t.TempDir(),
		Env: []string{oci.UsernameEnv + "=" + reg.Username, oci.PasswordEnv + "=" + reg.Password}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// registryProxy forwards plain HTTP on loopback to the registry, through
// refuse (a request it answers itself when it returns true) and modify (a
// response's changes), either nil. It returns its host.
func registryProxy(t *testing.T, reg *ocitest.Registry, refuse func(http.ResponseWriter, *http.Request) bool, modify func(*http.Response) error) string {
	t.Helper()
	var self string // the proxy's host, once it listens
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "https", reg.Host, reg.Host
		},
		Transport: reg.Transport(t),
		ModifyResponse: func(resp *http.Response) error {
			// The registry's upload locations name it: they name the proxy.
			if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, "https://"+reg.Host) {
				resp.Header.Set("Location", "http://"+self+strings.TrimPrefix(loc, "https://"+reg.Host))
			}
			if modify != nil {
				return modify(resp)
			}
			return nil
		},
		ErrorLog:      log.New(io.Discard, "", 0),
		FlushInterval: -1, // the headers and the bytes before a cut reach the client
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse != nil && refuse(w, r) {
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	self = srv.Listener.Addr().String()
	srv.Start()
	t.Cleanup(srv.Close)
	return self
}

// A registry without a catalog (Docker Hub, GHCR, ECR): the store lists
// its images from its own index; one with neither says so.
func TestImagesWithoutCatalog(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Start(t)
	s := open(t, reg, "team", oci.Options{})
	for _, img := range []string{"gpu-node", "cpu-node"} {
		if _, err := s.Publish(ctx, artifact(t, img, "1.0", nil), store.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	noCatalog := func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v2/_catalog" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"errors":[{"code":"UNSUPPORTED","message":"the operation is unsupported"}]}`)
			return true
		}
		return false
	}
	host := registryProxy(t, reg, noCatalog, nil)
	imgs, err := openProxied(t, reg, host, "team").Images(ctx)
	if err != nil {
		t.Fatalf("listing without a catalog: %v", err)
	}
	if got, want := listed(imgs), "cpu-node:1.0 gpu-node:1.0"; got != want {
		t.Errorf("Images without a catalog: %s, want %s", got, want)
	}
	// The index is not an image, with a catalog either.
	if imgs, err := s.Images(ctx); err != nil || len(imgs) != 2 {
		t.Errorf("Images with a catalog: %+v, %v", imgs, err)
	}
	// Under another prefix nothing is indexed: the catalog's refusal is the error.
	if _, err := openProxied(t, reg, host, "empty").Images(ctx); err == nil || !strings.Contains(err.Error(), "names none") || !strings.Contains(err.Error(), "_catalog") {
		t.Errorf("listing with neither index nor catalog: %v", err)
	}
	// The index's name is not an image's.
	if _, err := s.Publish(ctx, artifact(t, oci.IndexRepository, "1.0", nil), store.PublishOptions{}); err == nil || !strings.Contains(err.Error(), "is the registry store's index") {
		t.Errorf("publishing an image named as the index: %v", err)
	}
}

// testRepo is a repository of the test registry as another client sees it.
func testRepo(t *testing.T, reg *ocitest.Registry, name string) *remote.Repository {
	t.Helper()
	repo, err := remote.NewRepository(reg.Host + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	repo.Client = &auth.Client{
		Client:     &http.Client{Transport: reg.Transport(t)},
		Credential: auth.StaticCredential(reg.Host, auth.Credential{Username: reg.Username, Password: reg.Password}),
	}
	return repo
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection cut by the test proxy") }

// Publishing a version again with the same content pushes nothing: no
// blob, no manifest (an untagged one would be left behind each time).
func TestRepublishPushesNothing(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Start(t)
	var puts atomic.Int32
	host := registryProxy(t, reg, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodPatch {
			puts.Add(1)
		}
		return false
	}, nil)
	s := openProxied(t, reg, host, "again")
	a := artifact(t, "img", "1.0", nil)
	if _, err := s.Publish(ctx, a, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if puts.Load() == 0 {
		t.Fatal("the first publish pushed nothing through the proxy: the test does not test")
	}
	puts.Store(0)
	v, err := s.Publish(ctx, a, store.PublishOptions{})
	if err != nil || !v.Existed {
		t.Fatalf("publishing again: %+v, %v", v, err)
	}
	if n := puts.Load(); n != 0 {
		t.Errorf("publishing the same version again made %d writes to the registry", n)
	}
}

// A version with a file of a kind this imagectl does not know (one a later
// imagectl publishes) is read without it; a known kind under a name no
// version has is still refused.
func TestReadsFilesOfLaterKinds(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Start(t)
	if _, err := open(t, reg, "fwd", oci.Options{}).Publish(ctx, artifact(t, "img", "1", nil), store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	repo := testRepo(t, reg, "fwd/img")
	_, rc, err := repo.FetchReference(ctx, "1")
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	err = json.NewDecoder(rc).Decode(&m)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	retag := func(mediaType, title string) {
		t.Helper()
		data := []byte("a file " + title)
		d := ocispec.Descriptor{MediaType: mediaType, Digest: godigest.FromBytes(data), Size: int64(len(data)),
			Annotations: map[string]string{ocispec.AnnotationTitle: title}}
		if err := repo.Blobs().Push(ctx, d, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		m2 := m
		m2.Layers = append(append([]ocispec.Descriptor{}, m.Layers...), d)
		mb, _ := json.Marshal(m2)
		md := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: godigest.FromBytes(mb), Size: int64(len(mb))}
		if err := repo.PushReference(ctx, md, bytes.NewReader(mb), "1"); err != nil {
			t.Fatal(err)
		}
	}
	retag("application/vnd.example.later+json", "img-1.later.json")
	v, err := open(t, reg, "fwd", oci.Options{}).Version(ctx, "img", "1")
	if err != nil {
		t.Fatalf("reading a version with a file of a later kind: %v", err)
	}
	for _, f := range v.Files {
		if f.Name == "img-1.later.json" {
			t.Errorf("the unknown file was read: %+v", f)
		}
	}
	// An attestation of a kind this imagectl does not make: skipped too.
	retag(oci.MediaTypeDSSE, "img-1.later.dsse.json")
	if v, err = open(t, reg, "fwd", oci.Options{}).Version(ctx, "img", "1"); err != nil {
		t.Fatalf("reading a version with an attestation of a later kind: %v", err)
	}
	for _, f := range v.Files {
		if f.Name == "img-1.later.dsse.json" {
			t.Errorf("the unknown attestation was read: %+v", f)
		}
	}
	retag(oci.MediaTypeSPDX, "../../evil.json")
	if _, err := open(t, reg, "fwd", oci.Options{}).Version(ctx, "img", "1"); err == nil || !strings.Contains(err.Error(), "unexpected layer") {
		t.Errorf("an SBOM under a name no version has: %v", err)
	}
}

// TestOpenHidesCredentials: a location with credentials is refused
// without quoting them.
func TestOpenHidesCredentials(t *testing.T) {
	for _, ref := range []string{"user:0ciPassw0rd@registry.example/x", "registry.example/x?token=0ciPassw0rd"} {
		_, err := oci.Open(ref, oci.Options{CacheDir: t.TempDir()})
		if err == nil || strings.Contains(err.Error(), "0ciPassw0rd") {
			t.Errorf("Open(%q): %v", ref, err)
		}
	}
}

// TestCacheDirFromEnvironment: without CacheDir, the registry cache is the
// oci folder of the cache directory $IMAGECTL_CACHE_DIR names, as the
// layer cache's is, before $XDG_CACHE_HOME's.
func TestCacheDirFromEnvironment(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.Start(t)
	a := artifact(t, "gpu-node", "1.0", nil)
	if _, err := open(t, reg, "env", oci.Options{}).Publish(ctx, a, store.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, xdg := t.TempDir(), t.TempDir()
	s, err := oci.Open(reg.Host+"/env", oci.Options{CAFile: reg.CAFile, Env: []string{
		oci.UsernameEnv + "=" + reg.Username, oci.PasswordEnv + "=" + reg.Password,
		"XDG_CACHE_HOME=" + xdg, "IMAGECTL_CACHE_DIR=" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Version(ctx, "gpu-node", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "oci")
	if !strings.HasPrefix(v.Dir, cache+string(filepath.Separator)) {
		t.Errorf("the version was read into %s, not under %s", v.Dir, cache)
	}
	if vs, err := (oci.Cache{Dir: cache}).List(); err != nil || len(vs) != 1 {
		t.Errorf("the cache under $IMAGECTL_CACHE_DIR lists %v, %v; want the version read", vs, err)
	}
	if entries, _ := os.ReadDir(xdg); len(entries) != 0 {
		t.Errorf("$XDG_CACHE_HOME got %v", entries)
	}
}
