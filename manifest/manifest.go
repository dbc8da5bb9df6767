// Package manifest owns the build manifest: the JSON record of what an
// image contains and where it came from (packages with versions, layers and
// their digests, files, bundles, kernel args, Netdata, the artifact's hash,
// timings, lineage). The builder writes it beside the tgz and, without the
// artifact section and the build's times, into the image as its build
// marker; diff, sign and upload read it.
//
// The package also names the files of a build beside its tgz (files.go),
// an image's MAAS names (maasname.go) and holds the one rule for what an
// image name and a version may be (names.go).
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpuaas/imagectl/internal/readlimit"
)

// SchemaVersion is the version of the manifest's JSON form.
const SchemaVersion = 1

// Manifest describes one built image.
type Manifest struct {
	SchemaVersion int   `json:"schema_version"`
	Image         Image `json:"image"`
	// MAAS is the boot resource the image becomes, from the recipe's maas
	// block: upload and promote read the name and base image from it.
	MAAS     *MAAS     `json:"maas,omitempty"`
	Recipe   Recipe    `json:"recipe"`
	Builder  Builder   `json:"builder"`
	Base     Base      `json:"base"`
	Layers   []Layer   `json:"layers"`
	Packages []Package `json:"packages"`
	// RequiredPackages are the packages the recipe requires, as it names
	// them; Packages says at which version each was installed.
	RequiredPackages []string `json:"required_packages"`
	// MissingOptional are optional packages the archive did not have.
	MissingOptional []string   `json:"missing_optional_packages"`
	AptKeys         []AptKey   `json:"apt_keys,omitempty"`
	Files           []File     `json:"files"`
	Bundles         []Bundle   `json:"bundles"`
	Services        Services   `json:"services"`
	KernelArgs      []string   `json:"kernel_args"`
	Netdata         *Netdata   `json:"netdata,omitempty"`
	Network         *Network   `json:"network,omitempty"`
	Validation      Validation `json:"validation"`
	Build           Build      `json:"build"`
	// Deploy are the deployability check's findings on the artifact.
	Deploy []DeployFinding `json:"deploy_findings"`
	// DeployWaivers are the checks the recipe waives, with reasons.
	DeployWaivers []Waiver `json:"deploy_waivers,omitempty"`
	Lineage       Lineage  `json:"lineage"`
	// Artifact is absent in the build marker inside the image, which cannot
	// contain its own hash.
	Artifact *Artifact `json:"artifact,omitempty"`
	// SBOM and Provenance are the documents beside the tgz that describe
	// it (made from it, so also absent in the build marker): the signed
	// manifest vouches for them by digest. CycloneDX is the SBOM in
	// CycloneDX, absent from builds before it was made.
	SBOM       *Document `json:"sbom,omitempty"`
	Provenance *Document `json:"provenance,omitempty"`
	CycloneDX  *Document `json:"cyclonedx,omitempty"`
}

// Document is a file beside the tgz that describes it: an SBOM or a
// provenance statement.
type Document struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Format is the document's standard: "SPDX-2.3", "CycloneDX-1.6", or
	// the in-toto predicate type of a statement.
	Format string `json:"format"`
}

// Image names the image.
type Image struct {
	Name         string `json:"name"`
	Title        string `json:"title"`
	Version      string `json:"version"`
	Architecture string `json:"architecture"`
}

// Check says what is wrong with the image's name and version (names.go),
// naming the field. An absent one (a manifest written by hand) is left to
// what needs it: a store refuses it as a key.
func (i Image) Check() error {
	if i.Name != "" {
		if err := CheckImageName(i.Name); err != nil {
			return fmt.Errorf("image.name: %w", err)
		}
	}
	if i.Version != "" {
		if err := CheckVersion(i.Version); err != nil {
			return fmt.Errorf("image.version: %w", err)
		}
	}
	return nil
}

// MAAS is the custom boot resource the image is uploaded as.
type MAAS struct {
	// Name is the recipe's MAAS name (custom/<image>); VersionedName the
	// immutable name this version is uploaded under, DistroSeries what a
	// deploy selects it with.
	Name          string `json:"name"`
	VersionedName string `json:"versioned_name"`
	DistroSeries  string `json:"distro_series"`
	// Title is the boot resource's title, with the version.
	Title    string `json:"title"`
	Filetype string `json:"filetype"`
	// BaseImage is the <os>/<series> MAAS requires of a custom image.
	BaseImage string `json:"base_image"`
	// Site is the recipe's default site, if any.
	Site string `json:"site,omitempty"`
}

// Recipe identifies the recipe the image was built from.
type Recipe struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

// Builder identifies the imagectl that built it.
type Builder struct {
	Version string `json:"version"`
	// Accelerator is "kvm" or "tcg": how the appliance ran.
	Accelerator string `json:"accelerator,omitempty"`
	// AptProxy is the proxy the recipe had the guest's apt use during
	// the build (apt_proxy), without credentials.
	AptProxy string `json:"apt_proxy,omitempty"`
}

// Base is the base image.
type Base struct {
	Source string `json:"source"`
	SHA256 string `json:"sha256"`
	Format string `json:"format"`
	// Size is the size the disk was grown to, in bytes (0: unchanged).
	Size int64 `json:"size,omitempty"`
}

// Layer is an applied (or disabled) layer with its steps' timings.
type Layer struct {
	Name       string `json:"name"`
	File       string `json:"file,omitempty"`
	FileDigest string `json:"file_digest,omitempty"`
	Enabled    bool   `json:"enabled"`
	Digest     string `json:"digest,omitempty"`
	Key        string `json:"key,omitempty"`
	Steps      []Step `json:"steps,omitempty"`
	// CachedAt is set when the layer's disk state came from the layer
	// cache: when that snapshot was made (its steps are the ones that ran
	// then).
	CachedAt *time.Time `json:"cached_at,omitempty"`
	// Timings is where the layer's time went (nil for a cached layer).
	Timings *Timings `json:"timings,omitempty"`
}

// Step is one executed step.
type Step struct {
	Kind    string  `json:"kind"`
	Summary string  `json:"summary"`
	Seconds float64 `json:"seconds,omitzero"`
}

// Package is an installed Debian package, from the image's dpkg database.
type Package struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	Architecture string `json:"architecture"`
}

// AptKey is a repository signing key as installed.
type AptKey struct {
	Repository string `json:"repository"`
	Source     string `json:"source"`
	SHA256     string `json:"sha256"`
}

// File is a file the recipe wrote.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Mode   string `json:"mode"`
	Owner  string `json:"owner"`
	Layer  string `json:"layer"`
}

// Bundle is a staged bundle and what it holds.
type Bundle struct {
	Name        string `json:"name"`
	Destination string `json:"destination"`
	// Entrypoint is the bundle's executable, relative to Destination.
	Entrypoint string        `json:"entrypoint,omitempty"`
	Digest     string        `json:"digest"`
	Entries    []BundleEntry `json:"entries"`
}

// BundleEntry is one staged entry.
type BundleEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Mode   string `json:"mode"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Target string `json:"target,omitempty"`
}

// Netdata is the Netdata configuration baked in.
type Netdata struct {
	Enabled     bool     `json:"enabled"`
	Bind        string   `json:"bind"`
	RetentionMB int      `json:"retention_mb"`
	UpdateEvery int      `json:"update_every"`
	Collectors  []string `json:"collectors"`
}

// Network is the systemd-networkd-wait-online bound.
type Network struct {
	WaitOnlineTimeoutSeconds int  `json:"wait_online_timeout_seconds"`
	WaitOnlineAny            bool `json:"wait_online_any"`
}

// Services are the systemd units the recipe enabled and disabled.
type Services struct {
	Enabled  []string `json:"enabled"`
	Disabled []string `json:"disabled"`
}

// Validation is where the on-host validation script is and what it checks
// beyond what the build derives: the recipe's validation block. The script
// checks one profile (bare-metal or slice) at one stage (image: what the
// image guarantees right after deploy; converged: after the site bootstrap,
// the gate before a host is schedulable).
type Validation struct {
	Script string `json:"script"`
	// Marker is where the image carries its build marker.
	Marker         string   `json:"marker"`
	ServicesActive []string `json:"services_active"`
	FilesExist     []string `json:"files_exist"`
	Checks         []Check  `json:"checks"`
	// DefaultProfile and DefaultStage are what the script checks when run
	// without --profile and --stage.
	DefaultProfile string `json:"default_profile,omitempty"`
	DefaultStage   string `json:"default_stage,omitempty"`
	// CollectorWaitSeconds bounds how long the script waits for the
	// Netdata collectors' charts to appear (one bound for all of them).
	CollectorWaitSeconds int `json:"collector_wait_seconds,omitempty"`
	// GPU is what the host's GPUs must be, read with nvidia-smi.
	GPU *GPU `json:"gpu,omitempty"`
	// Profiles are the deploy profiles the image serves, in recipe order.
	Profiles []Profile `json:"profiles,omitempty"`
}

// Validation profiles and stages.
const (
	ProfileBareMetal = "bare-metal"
	ProfileSlice     = "slice"
	StageImage       = "image"
	StageConverged   = "converged"
)

// Profiles and Stages are the profile and stage names, in order.
var (
	Profiles = []string{ProfileBareMetal, ProfileSlice}
	Stages   = []string{StageImage, StageConverged}
)

// GPU is the recipe's gpu block: what nvidia-smi must report.
type GPU struct {
	// Model must be contained in every GPU's name ("H200").
	Model string `json:"model"`
	// Count is how many GPUs the host has.
	Count int `json:"count"`
	// DriverBranch is the driver's major version ("580"); empty: any.
	DriverBranch    string `json:"driver_branch,omitempty"`
	PersistenceMode bool   `json:"persistence_mode"`
	ECC             bool   `json:"ecc"`
	// PCIeGen and PCIeWidth are the link each GPU must have; 0 means the
	// GPU's own maximum.
	PCIeGen   int `json:"pcie_gen,omitempty"`
	PCIeWidth int `json:"pcie_width,omitempty"`
	// NVSwitch hosts need nvidia-fabricmanager active.
	NVSwitch bool `json:"nvswitch"`
}

// Profile is one deploy profile the image serves (bare-metal or slice).
type Profile struct {
	Name string `json:"name"`
	// ServicesActive are units that must be active at stage image on this
	// profile, beyond the validation block's own.
	ServicesActive []string `json:"services_active,omitempty"`
	// VFIOModules must be loaded or loadable (slice).
	VFIOModules []string `json:"vfio_modules,omitempty"`
	// Bootstrap is the bundle whose entrypoint converges a host of this
	// profile, run with BootstrapEnv (as MAAS deploy user-data would).
	Bootstrap    string            `json:"bootstrap,omitempty"`
	BootstrapEnv map[string]string `json:"bootstrap_env,omitempty"`
	// Converged is what stage converged checks on this profile.
	Converged *Converged `json:"converged,omitempty"`
}

// Converged is the runtime baseline a profile's host must reach after the
// site bootstrap. Every value comes from the recipe.
type Converged struct {
	ServicesActive []string `json:"services_active,omitempty"`
	FilesExist     []string `json:"files_exist,omitempty"`
	// DoneMarkers are the bootstrap done-markers: one absent means the
	// baseline is incomplete, whatever else passed.
	DoneMarkers []string `json:"done_markers,omitempty"`
	Fabric      *Fabric  `json:"fabric,omitempty"`
	Bridges     []Bridge `json:"bridges,omitempty"`
	DHCP        *DHCP    `json:"dhcp,omitempty"`
}

// Fabric is the IPoIB fabric network: a netplan file, interfaces matching a
// shell pattern with an address in a subnet, and a route into it.
type Fabric struct {
	Netplan   string `json:"netplan,omitempty"`
	Interface string `json:"interface"`
	Subnet    string `json:"subnet"`
}

// Bridge is a bridge (Open vSwitch or Linux) that must own an address.
type Bridge struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// DHCP is the slice network's DHCP server: a unit active with its subnet
// configuration file.
type DHCP struct {
	Service    string `json:"service"`
	SubnetFile string `json:"subnet_file"`
}

// Check is a named command that must succeed on the host: the recipe's
// check block, as the plan's JSON (imagectl build --dry-run --output json)
// and the manifest carry it.
type Check struct {
	Name    string `json:"name"`
	Command string `json:"command"`
}

// Build records when the build ran, and its source date. The build
// marker keeps only the source date: the image holds no wall-clock time.
type Build struct {
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	Seconds  float64   `json:"seconds,omitzero"`
	// Timings is where the build's time went, all layers together.
	Timings *Timings `json:"timings,omitempty"`
	// SourceDate is the time the tgz's newer modification times are
	// clamped to; absent when none was chosen.
	SourceDate *SourceDate `json:"source_date,omitempty"`
}

// SourceDate is a build's source date E (SOURCE_DATE_EPOCH): every
// modification time in the tgz newer than E is E, and the appliance's
// package steps and commands ran with SOURCE_DATE_EPOCH=E.
type SourceDate struct {
	Epoch int64 `json:"epoch"`
	// From is "base image" (the newest time in the base image's root
	// filesystem before the build started) or "SOURCE_DATE_EPOCH" (the
	// builder's environment).
	From string `json:"from"`
}

// Timings says where a build's, or one layer's, time went, in seconds,
// and how many package bytes it fetched. Parts that did not happen are
// zero (and left out of the JSON).
type Timings struct {
	// Base is verifying and copying the base image; Launch the
	// appliance's launch.
	Base   float64 `json:"base,omitempty"`
	Launch float64 `json:"launch,omitempty"`
	// Resolve is apt's work in the guest before a packages step
	// downloads: updating its lists (apt-get update, which fetches the
	// indexes through the appliance's network) and resolving what the
	// step installs and each archive's index record. Download is
	// fetching the archives (on the host into the package cache, or by
	// the guest's apt) and handing them to the guest; Install apt and
	// dpkg unpacking and configuring them.
	Resolve  float64 `json:"resolve,omitempty"`
	Download float64 `json:"download,omitempty"`
	Install  float64 `json:"install,omitempty"`
	// Commands is every other step: files, commands, services, bundles.
	Commands float64 `json:"commands,omitempty"`
	// Snapshot is the layer cache: restoring and writing snapshots.
	Snapshot float64 `json:"snapshot,omitempty"`
	// Pack is packing the tgz, SBOM making the SBOMs.
	Pack float64 `json:"pack,omitempty"`
	SBOM float64 `json:"sbom,omitempty"`
	// DownloadBytes are the package bytes fetched from the network,
	// CachedBytes those the package cache served instead.
	DownloadBytes int64 `json:"download_bytes,omitempty"`
	CachedBytes   int64 `json:"cached_bytes,omitempty"`
}

// Add adds u's figures to t's.
func (t *Timings) Add(u Timings) {
	t.Base += u.Base
	t.Launch += u.Launch
	t.Resolve += u.Resolve
	t.Download += u.Download
	t.Install += u.Install
	t.Commands += u.Commands
	t.Snapshot += u.Snapshot
	t.Pack += u.Pack
	t.SBOM += u.SBOM
	t.DownloadBytes += u.DownloadBytes
	t.CachedBytes += u.CachedBytes
}

// Lineage ties the image to everything it came from.
type Lineage struct {
	BaseDigest   string `json:"base_digest"`
	RecipeDigest string `json:"recipe_digest"`
	// TopKey is the key of the last layer: equal keys, equal image content.
	TopKey        string `json:"top_key"`
	ParentVersion string `json:"parent_version,omitempty"`
	// SourceRevision is the git commit of the recipe's checkout, with
	// "-dirty" when it had uncommitted changes.
	SourceRevision string `json:"source_revision,omitempty"`
}

// DeployFinding is one finding of the deployability check (imagectl check).
type DeployFinding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	// Waived is set when the recipe waives the check; WaiverReason says why.
	Waived       bool   `json:"waived,omitempty"`
	WaiverReason string `json:"waiver_reason,omitempty"`
}

// Waiver is a deployability check the recipe waives, with its reason.
type Waiver struct {
	Check  string `json:"check"`
	Reason string `json:"reason"`
}

// DeployErrors are the findings that make the artifact undeployable: errors
// the recipe does not waive.
func (m *Manifest) DeployErrors() []DeployFinding {
	var out []DeployFinding
	for _, f := range m.Deploy {
		if f.Severity == "error" && !f.Waived {
			out = append(out, f)
		}
	}
	return out
}

// Artifact is the tgz the manifest describes.
type Artifact struct {
	File             string `json:"file"`
	SHA256           string `json:"sha256"`
	Size             int64  `json:"size"`
	Compression      string `json:"compression"`
	CompressionLevel int    `json:"compression_level"`
	Entries          int    `json:"entries"`
	// Packer is how the root filesystem was read: "host" (from the disk
	// image, after the appliance shut down) or "appliance" (its tar-out).
	Packer string `json:"packer,omitempty"`
}

// Marshal encodes a manifest as indented JSON with a final newline.
func (m *Manifest) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Marker is the manifest as the image carries it: without the artifact
// and the documents made from it, and without anything that says when or
// how fast the build ran (its times, the steps' and layers' timings, when
// a cached layer was made, the accelerator), so that the same inputs give
// the same image: of the build section it keeps the source date.
func (m *Manifest) Marker() ([]byte, error) {
	c := *m
	c.Artifact, c.SBOM, c.Provenance, c.CycloneDX = nil, nil, nil, nil
	c.Build = Build{SourceDate: m.Build.SourceDate}
	c.Builder.Accelerator = ""
	c.Layers = make([]Layer, len(m.Layers))
	for i, l := range m.Layers {
		l.CachedAt, l.Timings = nil, nil
		steps := make([]Step, len(l.Steps))
		for j, st := range l.Steps {
			st.Seconds = 0
			steps[j] = st
		}
		if l.Steps == nil {
			steps = nil
		}
		l.Steps = steps
		c.Layers[i] = l
	}
	return c.Marshal()
}

// MaxSize is the largest manifest file Read reads: an image's manifest is
// tens of kilobytes (thousands of packages fit in a few MiB), and decoding
// one costs about ten times its size in memory.
const MaxSize = 16 << 20

// Read loads a manifest file, refusing schema versions it does not know,
// image names or versions the name rule refuses, a file larger than
// MaxSize and one that is not a regular file.
func Read(path string) (*Manifest, error) {
	b, err := readlimit.File(path, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	m, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", path, err)
	}
	return m, nil
}

// Parse decodes a manifest, refusing schema versions it does not know
// and image names or versions the name rule refuses (names.go): a
// manifest read back names files and store paths after them.
func Parse(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&m); err != nil {
		return nil, err
	}
	if m.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("schema version %d, this imagectl reads %d", m.SchemaVersion, SchemaVersion)
	}
	if err := m.Image.Check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Clone is a deep copy of m: a plan's manifest is the start of each build's
// and of each generated validation script's, none of which may change it.
func (m *Manifest) Clone() *Manifest {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("manifest: cloning: %v", err)) // every field encodes
	}
	var c Manifest
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("manifest: cloning: %v", err))
	}
	return &c
}
