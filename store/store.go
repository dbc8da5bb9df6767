package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/readlimit"
	"github.com/gpuaas/imagectl/manifest"
)

// Versions keeps published image versions: Dir, a local directory, or
// store/oci, an OCI registry.
type Versions interface {
	// Publish adds the files of a build as the version its manifest
	// names: a.Tarball and a.Manifest, and the others Sources finds. The
	// version appears complete or not at all; publishing other bytes under
	// an existing version fails with ErrExists, the same bytes again is a
	// no-op (Version.Existed is set).
	Publish(ctx context.Context, a manifest.Files, opts PublishOptions) (*Version, error)
	// Images lists every image with its versions, oldest first.
	Images(ctx context.Context) ([]Image, error)
	// Version returns one version, with local paths to its manifest,
	// validation script and signatures (the tgz may stay remote: see
	// Version.OpenTarball and Version.LocalTarball); a missing one is an
	// error wrapping ErrNotFound.
	Version(ctx context.Context, image, version string) (*Version, error)
	// Latest is the most recently published version of an image, nil when
	// there is none.
	Latest(ctx context.Context, image string) (*Version, error)
	// NextVersion generates a version for an image: the UTC date of now and
	// the next free sequence number of that day, such as 20261122.1.
	NextVersion(ctx context.Context, image string, now time.Time) (string, error)
	// Location names the store in messages: a directory or a registry
	// reference.
	Location() string
}

// Promotions keeps each site's promotion catalog: Dir's catalog files, or
// store/gitcatalog, a git repository.
type Promotions interface {
	// History is an image's promotion history at a site, oldest first.
	History(ctx context.Context, site, image string) ([]Promotion, error)
	// Catalog is every image's promotion history at a site.
	Catalog(ctx context.Context, site string) (map[string][]Promotion, error)
	// Record appends a promotion to the site's catalog. p.Previous must be
	// the image's current version at the site (ErrConflict otherwise, when
	// another promotion got there first), and p.Version not revoked at that
	// moment, read in the same update (ErrRevoked otherwise, a rollback's
	// too): a revocation that lands while a promotion uploads stops it.
	Record(ctx context.Context, site string, p Promotion) error
	// Evidence is the host results recorded for an image at a site,
	// oldest first: of one version, or of every version when version is "".
	Evidence(ctx context.Context, site, image, version string) ([]Evidence, error)
	// AddEvidence records host results, of any sites and images, in one
	// update of the catalog (one commit of a git catalog), all or none:
	// each file keeps the latest KeepPerHost results of a host
	// (AppendEvidence), and one that would grow over MaxRecords is refused.
	AddEvidence(ctx context.Context, evs []Evidence) error
	// Revocations is an image's revocation history, oldest first, for
	// every site (see Revoked); every image's when image is "".
	Revocations(ctx context.Context, image string) ([]Revocation, error)
	// Revoke records a revocation, or its undo (r.Undo).
	Revoke(ctx context.Context, r Revocation) error
	// RackProofs is the racks checks recorded for an image version at a
	// site, oldest first (LatestRackProofs: each rack's latest).
	RackProofs(ctx context.Context, site, image, version string) ([]RackProof, error)
	// AddRackProofs records the verdicts of one racks check, all of one
	// site, image and version, in one update: the file keeps each rack's
	// KeepPerRack latest (AppendRackProofs).
	AddRackProofs(ctx context.Context, ps []RackProof) error
	// BootComparisons is the boot comparisons recorded with an image
	// version (of no site), oldest measured first (LatestBootComparisons:
	// each profile, stage and accelerator's latest).
	BootComparisons(ctx context.Context, image, version string) ([]BootComparison, error)
	// AddBootComparison records a comparison with its version, as Settle
	// makes it, in one update: the version's file keeps each profile,
	// stage and accelerator's KeepPerComparison latest
	// (AppendBootComparisons).
	AddBootComparison(ctx context.Context, c BootComparison) error
}

// Store keeps image versions and the sites' promotion catalogs.
type Store interface {
	Versions
	Promotions
}

// Compose is the store of versions kept by v and promotions kept by p.
func Compose(v Versions, p Promotions) Store { return composed{v, p} }

type composed struct {
	Versions
	Promotions
}

// Channels is what a version store that can follow promotions does: after
// the catalog records a promotion, the site's channel (the OCI store's
// IMAGE:site-SITE tag) points at the version. The catalog stays the source
// of truth; a channel is a convenience for mirrors and operators.
type Channels interface {
	// SetChannel points the image's channel for the site at version.
	SetChannel(ctx context.Context, site, image, version string) error
	// Channel is the version the image's channel for the site points at,
	// "" when there is none.
	Channel(ctx context.Context, site, image string) (string, error)
}

// ChannelsOf returns the channels of s's version store, when it has them.
func ChannelsOf(s Versions) (Channels, bool) {
	ch, ok := versionsOf(s).(Channels)
	return ch, ok
}

// versionsOf is the version store inside a composed store.
func versionsOf(s Versions) Versions {
	if c, ok := s.(composed); ok {
		return c.Versions
	}
	return s
}

// Remote is where a version's tgz comes from when it is not on the local
// disk (the OCI store's blob).
type Remote interface {
	// OpenTarball opens the tgz for reads at offsets, checked against its
	// sha256 as they go (see digest.NewCheckedReaderAt).
	OpenTarball(ctx context.Context) (Blob, error)
	// FetchTarball makes the tgz a local file, verified against its sha256,
	// in a content-addressed cache, and returns its path.
	FetchTarball(ctx context.Context) (string, error)
}

// Blob is a version's tgz open for reading at offsets.
type Blob interface {
	io.ReaderAt
	io.Closer
}

// Errors callers may test for with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already published with other content")
	ErrConflict = errors.New("the site's catalog changed meanwhile")
	// ErrRevoked is a promotion refused because its version is revoked
	// (release.ErrRevoked is the same error).
	ErrRevoked = errors.New("the version is revoked")
)

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
	// Ref is the version's registry reference (REGISTRY/REPO:VERSION) in
	// an OCI store, "" in a directory store.
	Ref string `json:"ref,omitempty"`
	// Remote fetches the tgz when Tarball is "" (it is not on the local
	// disk yet).
	Remote Remote `json:"-"`
}

// OpenTarball opens the version's tgz for reads at offsets, each checked
// against the version's sha256 as the reads go from start to end: from
// the local file, or streamed from the registry.
func (v *Version) OpenTarball(ctx context.Context) (Blob, error) {
	if v.Tarball == "" && v.Remote != nil {
		return v.Remote.OpenTarball(ctx)
	}
	f, err := readlimit.Open(v.Tarball)
	if err != nil {
		return nil, fmt.Errorf("opening %s %s's tgz: %w", v.Image, v.Version, err)
	}
	r, err := digest.NewCheckedReaderAt(f, v.Size, v.SHA256)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening %s %s's tgz: %w", v.Image, v.Version, err)
	}
	return struct {
		io.ReaderAt
		io.Closer
	}{r, f}, nil
}

// LocalTarball is a local path to the version's tgz, fetching it (once,
// verified, into the cache) when it is remote, for what must read a file:
// smoke's appliance, check.
func (v *Version) LocalTarball(ctx context.Context) (string, error) {
	if v.Tarball == "" && v.Remote != nil {
		p, err := v.Remote.FetchTarball(ctx)
		if err != nil {
			return "", err
		}
		v.Tarball = p
	}
	return v.Tarball, nil
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
	RoleSBOM             = "sbom"
	RoleProvenance       = "provenance"
	// RoleCycloneDX is the SBOM as CycloneDX.
	RoleCycloneDX = "cyclonedx"
	// RoleAttestation is a DSSE envelope signing an SBOM or the
	// provenance for the tgz.
	RoleAttestation = "attestation"
)

// ContentRoles are the roles of a version's content, one file each: a
// version published again must have the same file in each (signatures
// and attestations may differ, signed anew).
var ContentRoles = []string{RoleTarball, RoleManifest, RoleValidationScript, RoleSBOM, RoleCycloneDX, RoleProvenance}

// Source is one file of an artifact: where it is, and its name and role
// in a version.
type Source struct {
	Path, Name, Role string
}

// MaxDocument is the largest file of a version other than its tgz (the
// manifest, the validation script, SBOMs, provenance, signatures): other
// tools' SBOMs run to a hundred MiB, and the rest are far smaller.
const MaxDocument = 256 << 20

// CheckSources refuses, before anything is copied or hashed, a source
// that is not a regular file, a tgz whose size is not tgzSize (its
// manifest's), and a file other than the tgz larger than MaxDocument.
func CheckSources(srcs []Source, tgzSize int64) error {
	for _, s := range srcs {
		f, err := readlimit.Open(s.Path)
		if err != nil {
			return fmt.Errorf("the %s: %w", s.Role, err)
		}
		st, err := f.Stat()
		f.Close()
		if err != nil {
			return fmt.Errorf("the %s: %w", s.Role, err)
		}
		if s.Role == RoleTarball && st.Size() != tgzSize {
			return fmt.Errorf("%s (%d bytes) is not the tgz its manifest describes (%d bytes)", s.Path, st.Size(), tgzSize)
		}
		if s.Role != RoleTarball && st.Size() > MaxDocument {
			return fmt.Errorf("the %s %s has %d bytes, more than the %s a version's %s may have", s.Role, s.Path, st.Size(), readlimit.Size(MaxDocument), s.Role)
		}
	}
	return nil
}

// Sources lists the files of a build under their names in a version of
// image: the tgz and the manifest, then those of the validation script,
// the SBOMs (SPDX, CycloneDX), the provenance, the signatures of the tgz
// and the manifest and the attestations that exist, where a names them,
// else beside the tgz. A validation script a names must exist; the one
// beside the tgz is taken when it does. Every store holds these and no
// others.
func Sources(a manifest.Files, image, version string) []Source {
	names := manifest.FilesFor(image, version)
	// The signatures of the tgz and of the manifest are beside each,
	// wherever the manifest is.
	var signed manifest.Files
	signed.TarballSignature, signed.TarballBundle = manifest.Signatures(a.Tarball)
	signed.ManifestSignature, signed.ManifestBundle = manifest.Signatures(a.Manifest)
	beside := a.Or(signed.Or(manifest.FilesBeside(a.Tarball)))
	out := []Source{{a.Tarball, names.Tarball, RoleTarball}, {a.Manifest, names.Manifest, RoleManifest}}
	script := a.ValidationScript
	if script == "" && exists(beside.ValidationScript) {
		script = beside.ValidationScript
	}
	if script != "" {
		out = append(out, Source{script, names.ValidationScript, RoleValidationScript})
	}
	optional := []Source{{beside.SBOM, names.SBOM, RoleSBOM}, {beside.CycloneDX, names.CycloneDX, RoleCycloneDX}, {beside.Provenance, names.Provenance, RoleProvenance},
		{beside.TarballSignature, names.TarballSignature, RoleSignature}, {beside.TarballBundle, names.TarballBundle, RoleSignature},
		{beside.ManifestSignature, names.ManifestSignature, RoleSignature}, {beside.ManifestBundle, names.ManifestBundle, RoleSignature}}
	attestationNames := names.Attestations()
	for i, a := range beside.Attestations() {
		optional = append(optional, Source{a, attestationNames[i], RoleAttestation})
	}
	for _, f := range optional {
		if exists(f.Path) {
			out = append(out, f)
		}
	}
	return out
}

// VersionFiles are the names a version of image may hold, with their
// roles (Sources' names).
func VersionFiles(image, version string) map[string]string {
	n := manifest.FilesFor(image, version)
	m := map[string]string{n.Tarball: RoleTarball, n.Manifest: RoleManifest, n.ValidationScript: RoleValidationScript,
		n.TarballSignature: RoleSignature, n.TarballBundle: RoleSignature, n.ManifestSignature: RoleSignature, n.ManifestBundle: RoleSignature,
		n.SBOM: RoleSBOM, n.CycloneDX: RoleCycloneDX, n.Provenance: RoleProvenance}
	for _, a := range n.Attestations() {
		m[a] = RoleAttestation
	}
	return m
}

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
	// Gate is what the site's promotion policy said at the promotion; nil
	// when the site has no policy (and for a rollback, always allowed).
	Gate *Gate `json:"gate,omitempty"`
}

// Gate is a promotion policy's verdict, kept with the promotion it let
// through: met, or overridden (by the promotion's By, for Override) with
// what was missing.
type Gate struct {
	Met bool `json:"met"`
	// Missing says what the policy lacked, one line per condition.
	Missing []string `json:"missing,omitempty"`
	// Override is the reason given to promote anyway; set only when the
	// policy was not met.
	Override string `json:"override,omitempty"`
}

// State replays an image's history: the version the site runs now and
// the one a rollback returns to ("" for none). Promotions stack up and a
// rollback takes the top one off, so rolling back twice goes two versions
// back rather than returning to the version rolled back from.
func State(history []Promotion) (current, rollbackTo string) {
	stack := Stack(history)
	switch n := len(stack); n {
	case 0:
		return "", ""
	case 1:
		return stack[0], ""
	default:
		return stack[n-1], stack[n-2]
	}
}

// Stack replays an image's history into the stack State reads: the
// version the site runs last, the ones a rollback returns to below it. A
// rollback takes the versions above its own off: the top one, or several
// when it skipped revoked versions to an earlier one.
func Stack(history []Promotion) []string {
	var stack []string
	for _, p := range history {
		n := len(stack)
		if p.Rollback {
			if i := lastIndex(stack[:max(n-1, 0)], p.Version); i >= 0 {
				stack = stack[:i+1]
				continue
			}
		}
		if n == 0 || stack[n-1] != p.Version {
			stack = append(stack, p.Version)
		}
	}
	return stack
}

// lastIndex is the index of v's last occurrence in s, -1 when none.
func lastIndex(s []string, v string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == v {
			return i
		}
	}
	return -1
}

// CheckKey says what is wrong with an image name, version or site name
// (kind "image", "version" or "site") as a store key, nil when it is valid;
// every store keeps to the same keys. Image names and versions follow the
// manifest's one rule for them (manifest.CheckImageName, CheckVersion),
// site names the one rule for names (manifest.ValidName), at most 200 bytes.
func CheckKey(kind, s string) error {
	switch kind {
	case "image":
		return manifest.CheckImageName(s)
	case "version":
		return manifest.CheckVersion(s)
	}
	if len(s) > 200 || !manifest.ValidName(s) || s == "." || s == ".." {
		return fmt.Errorf("%q is not a valid %s name for the store", s, kind)
	}
	return nil
}
