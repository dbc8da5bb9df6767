package oci

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/gpuaas/imagectl/store"
)

// The store's index of its images: the repository PREFIX/imagectl.index
// has one tag per image, so that listing the images needs no registry
// catalog (/v2/_catalog is missing or restricted on Docker Hub, GHCR, ECR
// and others; listing one repository's tags works everywhere).
const (
	// IndexRepository is the index's repository under the prefix; no image
	// of the store may have its name.
	IndexRepository = "imagectl.index"
	// ArtifactTypeIndexEntry is the artifact type of an index tag's
	// manifest, which has no layers and names the image in AnnotationImage.
	ArtifactTypeIndexEntry = "application/vnd.gpuaas.imagectl.index-entry.v1+json"
	// maxTag is the longest tag a registry takes: a longer image name is
	// not indexed, and is listed only where the catalog lists it.
	maxTag = 128
)

// indexImage records image in the index, unless it is there.
func (s *Store) indexImage(ctx context.Context, image string) error {
	if len(image) > maxTag {
		return nil
	}
	repo := s.repo(IndexRepository)
	what := "recording " + image + " in the store's index " + s.ref(IndexRepository, image)
	if _, err := repo.Resolve(ctx, image); err == nil {
		return nil
	} else if !isNotFound(err) {
		return s.explain(what, err)
	}
	desc, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, ArtifactTypeIndexEntry,
		oras.PackManifestOptions{ManifestAnnotations: map[string]string{AnnotationImage: image}})
	if err == nil {
		err = repo.Tag(ctx, desc, image)
	}
	if err == nil {
		return nil
	}
	// Another publisher of the image may have tagged it first (and a
	// registry with immutable tags refuses the second): it is there.
	if _, rerr := repo.Resolve(ctx, image); rerr == nil {
		return nil
	}
	return fmt.Errorf("%w (the index lists the images where the registry has no catalog: create the repository %s, or allow pushing to it)",
		s.explain(what, err), s.indexLocation())
}

// imageNames are the store's images: those its index names and those the
// registry's catalog lists under the prefix, sorted. A registry without a
// catalog is listed from the index alone; one that has neither is an
// error.
func (s *Store) imageNames(ctx context.Context) ([]string, error) {
	names := map[string]bool{}
	indexErr := s.repo(IndexRepository).Tags(ctx, "", func(tags []string) error {
		for _, t := range tags {
			if store.CheckKey("image", t) == nil && t != IndexRepository {
				names[t] = true
			}
		}
		return nil
	})
	if isNotFound(indexErr) {
		indexErr = nil
	}
	catalogErr := s.catalog(ctx, names)
	switch {
	case indexErr != nil && catalogErr != nil:
		return nil, fmt.Errorf("listing the images of %s: %w", s.Location(),
			errors.Join(s.explain("listing the store's index "+s.indexLocation(), indexErr), catalogErr))
	case catalogErr != nil && len(names) == 0:
		return nil, fmt.Errorf("listing the images of %s: its index %s names none, and %w", s.Location(), s.indexLocation(), catalogErr)
	case indexErr != nil && len(names) == 0:
		return nil, s.explain("listing the store's index "+s.indexLocation(), indexErr)
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

func (s *Store) indexLocation() string { return s.registry + "/" + s.repoName(IndexRepository) }

// catalog adds the images the registry's catalog lists under the prefix.
func (s *Store) catalog(ctx context.Context, names map[string]bool) error {
	reg := &remote.Registry{RepositoryOptions: remote.RepositoryOptions{Client: s.client, Reference: s.repo("x").Reference, PlainHTTP: s.plainHTTP}}
	reg.Reference.Repository = ""
	prefix := ""
	if s.prefix != "" {
		prefix = s.prefix + "/"
	}
	err := reg.Repositories(ctx, "", func(repos []string) error {
		for _, r := range repos {
			if name, ok := strings.CutPrefix(r, prefix); ok && !strings.Contains(name, "/") && name != IndexRepository && store.CheckKey("image", name) == nil {
				names[name] = true
			}
		}
		return nil
	})
	if err != nil {
		return s.explain("reading the registry's catalog (/v2/_catalog)", err)
	}
	return nil
}
