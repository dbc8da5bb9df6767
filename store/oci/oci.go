// Package oci owns the OCI registry store: a store.Versions (and
// store.Channels) that keeps each image version in an OCI registry, talking
// to it through oras-go, and a local content-addressed cache of what it
// fetched.
//
// Layout, under a registry REGISTRY and a repository prefix PREFIX (the
// CLI's --store oci://REGISTRY/PREFIX):
//
//	REGISTRY/PREFIX/IMAGE:VERSION       an OCI image manifest (v1.1), artifactType
//	                                    application/vnd.gpuaas.imagectl.image.v1+json, whose
//	                                    layers are the version's files (the tgz, the build
//	                                    manifest, the validation script, the .sig and
//	                                    .sigstore.json signatures), each titled with its
//	                                    file name as a directory store names it
//	REGISTRY/PREFIX/IMAGE:site-SITE     the site's channel (store.Channels)
//	REGISTRY/PREFIX/IMAGE:sha256-HEX.sig the version manifest's cosign signature, when
//	                                    published with a signer: `cosign verify --key`
//	                                    accepts it
//	REGISTRY/PREFIX/IMAGE:sha256-HEX.att the SBOMs' (SPDX, CycloneDX) and provenance's
//	                                    attestations, in cosign's format
//	                                    (`cosign verify-attestation`)
//	REGISTRY/PREFIX/imagectl.index:IMAGE the store's index: one tag per image, so that
//	                                    the images are listed where the registry has
//	                                    no catalog (/v2/_catalog: Docker Hub, GHCR, ECR)
//
// Versions are immutable. Publish resolves the version's tag before tagging:
// a tag already there with the same tgz, build manifest and validation
// script is the same version (Version.Existed), other content is
// store.ErrExists. On a plain registry this check-then-tag is racy: two
// publishers of one version at the same moment can both see no tag, and the
// later tag wins (each tag still names one complete manifest, so a version
// is never a mix of two). Registries with server-side tag immutability
// (Harbor's immutable tag rules, ECR's IMMUTABLE repositories, Artifact
// Registry and ACR tag locking) make it airtight: the second PUT of the tag
// is refused by the server, and Publish maps that refusal to
// store.ErrExists too.
//
// Reading a version fetches its manifest and small files into the cache
// (CacheDir/blobs/sha256/HEX, each verified against its digest before it
// gets its name) and links them into a version directory
// (CacheDir/versions/REGISTRY/REPO/VERSION), so that signatures are beside
// the files they sign. The tgz stays remote until asked for: read at
// offsets through HTTP range requests (Version.OpenTarball), or fetched
// into the cache (Version.LocalTarball). Readers hold the cache's lock
// (CacheDir/lock) shared while they place files and mark the version's
// directory used; Cache lists the versions, and removes them with the
// blobs no other version links, under the lock held exclusive (the cache
// package prunes it with the layer cache).
//
// Credentials come from $IMAGECTL_REGISTRY_USERNAME and
// $IMAGECTL_REGISTRY_PASSWORD when set (CI), else from the Docker/ORAS
// credential store (~/.docker/config.json, $DOCKER_CONFIG, credential
// helpers).
package oci

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
	"oras.land/oras-go/v2/registry/remote/retry"

	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/environ"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/internal/redact"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store"
)

// maxCAFile is the largest --registry-ca read: the system's whole bundle
// of CAs is about 200 KB.
const maxCAFile = 4 << 20

// Environment variables that override the credential store.
const (
	UsernameEnv = "IMAGECTL_REGISTRY_USERNAME"
	PasswordEnv = "IMAGECTL_REGISTRY_PASSWORD"
)

// Options adjust a Store.
type Options struct {
	// CacheDir is the root of the content-addressed cache; default the
	// oci folder of the cache directory Env names (internal/cachedir).
	CacheDir string
	// Env is the environment (KEY=value) the credentials overrides,
	// $DOCKER_CONFIG and the cache directory are read from; os.Environ()
	// when nil.
	Env []string
	// DockerConfig is the Docker config.json (or the directory holding
	// it) to take credentials from; default the Docker/ORAS credential
	// store ($DOCKER_CONFIG, ~/.docker/config.json, credential helpers).
	DockerConfig string
	// CAFile is a PEM file of CA certificates trusted besides the
	// system's.
	CAFile string
	// PlainHTTP talks HTTP instead of HTTPS; only to a loopback registry.
	PlainHTTP bool
	// Signer, when set, has Publish sign each version's manifest as cosign
	// signs an image (the sha256-HEX.sig tag).
	Signer *signing.Signer
	// HTTPClient replaces the HTTP client (then CAFile is not used).
	HTTPClient *http.Client
}

// Store is an OCI registry store.
type Store struct {
	registry, prefix string
	cacheDir         string
	plainHTTP        bool
	signer           *signing.Signer
	client           *auth.Client
	// credSources says where credentials were looked for, for messages.
	credSources string
}

var (
	_ store.Versions = (*Store)(nil)
	_ store.Lister   = (*Store)(nil)
	_ store.Channels = (*Store)(nil)
	_ store.Remote   = (*remoteTarball)(nil)
)

// Open opens the store at ref, REGISTRY/PREFIX (PREFIX may be empty or
// have several segments). Nothing is contacted until it is used.
func Open(ref string, opts Options) (*Store, error) {
	shown := redact.URL(ref) // what messages quote
	if shown != ref {
		return nil, fmt.Errorf("opening OCI store %q: a store location carries no credentials: give them in $%s and $%s or a Docker config", shown, UsernameEnv, PasswordEnv)
	}
	reg, prefix, _ := strings.Cut(strings.TrimSuffix(ref, "/"), "/")
	if reg == "" {
		return nil, fmt.Errorf("opening OCI store %q: no registry (want REGISTRY/PREFIX)", shown)
	}
	check := registry.Reference{Registry: reg, Repository: strings.TrimPrefix(prefix+"/x", "/")}
	if err := check.Validate(); err != nil {
		return nil, fmt.Errorf("opening OCI store %q: %w", shown, err)
	}
	if opts.PlainHTTP && !loopback(reg) {
		return nil, fmt.Errorf("opening OCI store %q: plain HTTP is only allowed to a loopback registry (localhost, 127.0.0.0/8, ::1), not %s: use HTTPS (with a CA file if it has a private CA)", shown, reg)
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	s := &Store{registry: reg, prefix: prefix, cacheDir: opts.CacheDir, plainHTTP: opts.PlainHTTP, signer: opts.Signer}
	if s.cacheDir == "" {
		dir, err := cachedir.Default(env)
		if err != nil {
			return nil, fmt.Errorf("opening OCI store %q: %w", shown, err)
		}
		s.cacheDir = filepath.Join(dir, cachedir.Registry)
	}

	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// HTTP/1.1 only: Go's HTTP/2 client moves multi-GB blobs at a
		// quarter of the speed (its flow-control window).
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP1(true)
		if opts.CAFile != "" {
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			pem, err := readlimit.File(opts.CAFile, maxCAFile)
			if err != nil {
				return nil, fmt.Errorf("opening OCI store %q: reading the CA file: %w", shown, err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("opening OCI store %q: CA file %s holds no PEM certificate", shown, opts.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		// Retries 5xx and 429 answers with backoff (requests whose body
		// cannot be rewound, a streamed blob, are not retried).
		hc = &http.Client{Transport: retry.NewTransport(tr)}
	}

	credStore, where, err := credentialStore(opts.DockerConfig, env)
	if err != nil {
		return nil, fmt.Errorf("opening OCI store %q: %w", shown, err)
	}
	user, pass := environ.Get(env, UsernameEnv), environ.Get(env, PasswordEnv)
	redact.Register(pass)
	override := "not set"
	if user != "" || pass != "" {
		override = "set"
	}
	s.credSources = fmt.Sprintf("$%s/$%s (%s), then %s", UsernameEnv, PasswordEnv, override, where)
	storeCred := credentials.Credential(credStore)
	s.client = &auth.Client{
		Client: hc,
		Cache:  auth.NewCache(),
		Header: http.Header{"User-Agent": {"imagectl"}},
		Credential: func(ctx context.Context, hostport string) (auth.Credential, error) {
			if user != "" || pass != "" {
				return auth.Credential{Username: user, Password: pass}, nil
			}
			cred, err := storeCred(ctx, hostport)
			redact.Register(cred.Password, cred.RefreshToken, cred.AccessToken)
			return cred, err
		},
	}
	return s, nil
}

// credentialStore is the Docker credential store to read: the given config
// (a file or its directory), $DOCKER_CONFIG's, or Docker's default.
func credentialStore(dockerConfig string, env []string) (credentials.Store, string, error) {
	path := cmp.Or(dockerConfig, environ.Get(env, "DOCKER_CONFIG"))
	if path == "" {
		cs, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("reading the Docker credential store: %w", err)
		}
		return cs, "the Docker credential store (~/.docker/config.json and its credential helpers)", nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	cs, err := credentials.NewStore(path, credentials.StoreOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("reading Docker config %s: %w", path, err)
	}
	return cs, "Docker config " + path + " (and its credential helpers)", nil
}

// loopback reports whether a registry host (with or without a port) is
// this machine.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Location implements store.Versions: REGISTRY/PREFIX.
func (s *Store) Location() string {
	if s.prefix == "" {
		return s.registry
	}
	return s.registry + "/" + s.prefix
}

// repoName is an image's repository path in the registry.
func (s *Store) repoName(image string) string {
	if s.prefix == "" {
		return image
	}
	return s.prefix + "/" + image
}

// repo is an image's repository.
func (s *Store) repo(image string) *remote.Repository {
	return &remote.Repository{
		Client:    s.client,
		Reference: registry.Reference{Registry: s.registry, Repository: s.repoName(image)},
		PlainHTTP: s.plainHTTP,
	}
}

// ref is REGISTRY/REPO:TAG, for messages and Version.Ref.
func (s *Store) ref(image, tag string) string {
	return s.registry + "/" + s.repoName(image) + ":" + tag
}

// explain wraps a registry error with what was being done, turning an
// authentication refusal into a message naming the credentials tried and
// a certificate failure into one naming the CA option.
func (s *Store) explain(what string, err error) error {
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%s: the registry %s refused access (%d %s); credentials tried: %s: %w",
			what, s.registry, resp.StatusCode, http.StatusText(resp.StatusCode), s.credSources, err)
	}
	var unknownCA x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	if errors.As(err, &unknownCA) || errors.As(err, &verify) {
		return fmt.Errorf("%s: the registry %s's TLS certificate is not trusted (give its CA as a CA file): %w", what, s.registry, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isNotFound reports whether a registry answered that a tag, manifest,
// blob or repository does not exist.
func isNotFound(err error) bool {
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound {
		return true
	}
	return errors.Is(err, errNotFound)
}
