package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Store keeps image versions and the sites' promotion catalogs.
type Store interface {
	// Publish adds an artifact as the version its manifest names. The
	// version appears complete or not at all; publishing other bytes under
	// an existing version fails with ErrExists, the same bytes again is a
	// no-op (Version.Existed is set).
	Publish(ctx context.Context, a Artifact, opts PublishOptions) (*Version, error)
	// Images lists every image with its versions, oldest first.
	Images(ctx context.Context) ([]Image, error)
	// Version returns one version, with local paths to its files; a
	// missing one is an error wrapping ErrNotFound.
	Version(ctx context.Context, image, version string) (*Version, error)
	// Latest is the most recently published version of an image, nil when
	// there is none.
	Latest(ctx context.Context, image string) (*Version, error)
	// NextVersion generates a version for an image: the UTC date of now and
	// the next free sequence number of that day, such as 20261122.1.
	NextVersion(ctx context.Context, image string, now time.Time) (string, error)
	// History is an image's promotion history at a site, oldest first.
	History(ctx context.Context, site, image string) ([]Promotion, error)
	// Catalog is every image's promotion history at a site.
	Catalog(ctx context.Context, site string) (map[string][]Promotion, error)
	// Record appends a promotion to the site's catalog. p.Previous must be
	// the image's current version at the site (ErrConflict otherwise, when
	// another promotion got there first).
	Record(ctx context.Context, site string, p Promotion) error
}

// Errors callers may test for with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already published with other content")
	ErrConflict = errors.New("the site's catalog changed meanwhile")
)

// Artifact is what Publish takes: a built tgz and its manifest, and
// optionally the validation script. The signatures beside each (.sig,
// .sigstore.json) go with them when they exist.
type Artifact struct {
	Tarball  string
	Manifest string
	// ValidationScript defaults to <name>-<version>-validate.sh beside the
	// tgz when that exists.
	ValidationScript string
}

// PublishOptions adjust Publish.
type PublishOptions struct {
	// Move renames the files into the store instead of copying them (a
	// build that staged its outputs inside the store); across file systems
	// it copies and removes them.
	Move bool
	// Now is the clock for Version.Published; time.Now when nil.
	Now func() time.Time
}

// Image is an image and its versions, oldest first.
type Image struct {
	Name     string     `json:"name"`
	Versions []*Version `json:"versions"`
}

// Version is a published image version.
type Version struct {
	Image     string    `json:"image"`
	Version   string    `json:"version"`
	Published time.Time `json:"published"`
	// SHA256 and Size are the tgz's.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Files  []File `json:"files"`
	// Dir is the version's directory, and Tarball, Manifest and
	// ValidationScript ("" when absent) its files, on the local disk.
	Dir              string `json:"dir"`
	Tarball          string `json:"tarball"`
	Manifest         string `json:"manifest"`
	ValidationScript string `json:"validation_script,omitempty"`
	// Existed is set by Publish when the same content was already there.
	Existed bool `json:"existed,omitempty"`
}

// Signed reports whether the version carries signatures.
func (v *Version) Signed() bool {
	for _, f := range v.Files {
		if f.Role == RoleSignature {
			return true
		}
	}
	return false
}

// File is one file of a version.
type File struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// File roles.
const (
	RoleTarball          = "tarball"
	RoleManifest         = "manifest"
	RoleValidationScript = "validation-script"
	RoleSignature        = "signature"
)

// Promotion is one entry of a site's history for an image: the site runs
// Version from At on, instead of Previous.
type Promotion struct {
	Image    string    `json:"image"`
	Version  string    `json:"version"`
	Previous string    `json:"previous_version,omitempty"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
	Reason   string    `json:"reason,omitempty"`
	// Rollback marks a return to the version before Previous.
	Rollback bool `json:"rollback,omitempty"`
	// SHA256 is the tgz promoted; DistroSeries what the site's profile
	// deploys it with.
	SHA256       string `json:"sha256,omitempty"`
	DistroSeries string `json:"distro_series,omitempty"`
}

// State replays an image's history: the version the site runs now and
// the one a rollback returns to ("" for none). Promotions stack up and a
// rollback takes the top one off, so rolling back twice goes two versions
// back rather than returning to the version rolled back from.
func State(history []Promotion) (current, rollbackTo string) {
	var stack []string
	for _, p := range history {
		n := len(stack)
		switch {
		case p.Rollback && n >= 2 && stack[n-2] == p.Version:
			stack = stack[:n-1]
		case n == 0 || stack[n-1] != p.Version:
			stack = append(stack, p.Version)
		}
	}
	switch n := len(stack); n {
	case 0:
		return "", ""
	case 1:
		return stack[0], ""
	default:
		return stack[n-1], stack[n-2]
	}
}

var (
	reImage   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	reVersion = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+~-]*$`)
	reSite    = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
)

// checkKey says what is wrong with an image name, version or site name
// as a store key, nil when it is valid.
func checkKey(kind, s string) error {
	re := map[string]*regexp.Regexp{"image": reImage, "version": reVersion, "site": reSite}[kind]
	if len(s) > 200 || !re.MatchString(s) || s == "." || s == ".." {
		return fmt.Errorf("%q is not a valid %s name for the store", s, kind)
	}
	return nil
}
