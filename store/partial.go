package store

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// Lister is the small core a version store implements so that Latest and
// NextVersion are written once, on top of it (LatestOf, NextVersionOf), as
// go-containerregistry's partial package builds an image from a few
// methods.
type Lister interface {
	// ListVersions lists an image's published versions, in any order, as
	// cheaply as the store can: each with at least its Version and
	// Published. None is not an error.
	ListVersions(ctx context.Context, image string) ([]*Version, error)
	// ListNames lists the names an image's versions take in the store
	// (directory entries, tags), versions or not: a generated version
	// takes none of them. None is not an error.
	ListNames(ctx context.Context, image string) ([]string, error)
	// Version returns one version in full, as Versions.Version does.
	Version(ctx context.Context, image, version string) (*Version, error)
}

// SortVersions sorts versions oldest first: by the time they were
// published, then by name.
func SortVersions(vs []*Version) {
	sort.SliceStable(vs, func(i, j int) bool {
		if !vs[i].Published.Equal(vs[j].Published) {
			return vs[i].Published.Before(vs[j].Published)
		}
		return vs[i].Version < vs[j].Version
	})
}

// LatestOf is Versions.Latest over l: the most recently published version
// of image, in full; nil when there is none.
func LatestOf(ctx context.Context, l Lister, image string) (*Version, error) {
	if err := CheckKey("image", image); err != nil {
		return nil, err
	}
	vs, err := l.ListVersions(ctx, image)
	if err != nil || len(vs) == 0 {
		return nil, err
	}
	SortVersions(vs)
	return l.Version(ctx, image, vs[len(vs)-1].Version)
}

var reDated = regexp.MustCompile(`^([0-9]{8})\.([0-9]+)$`)

// NextVersionOf is Versions.NextVersion over l: the UTC date of now and
// the day's next sequence number no name of the image takes, such as
// 20261122.1.
func NextVersionOf(ctx context.Context, l Lister, image string, now time.Time) (string, error) {
	if err := CheckKey("image", image); err != nil {
		return "", err
	}
	names, err := l.ListNames(ctx, image)
	if err != nil {
		return "", err
	}
	day := now.UTC().Format("20060102")
	next := 1
	for _, name := range names {
		if m := reDated.FindStringSubmatch(name); m != nil && m[1] == day {
			if n, err := strconv.Atoi(m[2]); err == nil && n >= next {
				next = n + 1
			}
		}
	}
	return fmt.Sprintf("%s.%d", day, next), nil
}
