package recipes

import (
	"io/fs"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuaas/imagectl/manifest"
)

// Recipe is a decoded, fully evaluated recipe: every expression has been
// evaluated and every check has passed. Paths shown to people (Display
// fields) are relative to the recipe's directory; the absolute ones are for
// reading.
type Recipe struct {
	// Path is the recipe file as the caller named it.
	Path string
	// Dir is the absolute directory of the recipe file.
	Dir string
	// Digest is "sha256:<hex>" of the recipe file's bytes.
	Digest    string
	Variables []*Variable
	Image     *Image
}

// Variable is a declared input variable and the value it resolved to.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type
	Sensitive   bool
	// LegacyEnv is the environment variable the old shell pipeline read
	// for this setting; imagectl warns when it is set (see legacyEnv).
	LegacyEnv string
	Value     cty.Value
	// Source says where Value came from: "default", "env IMAGECTL_VAR_x",
	// "var-file f.hcl" or "-var"; "unset" in a dry run's recipe
	// (Options.DryRun), where Value is unknown and the bundles that need
	// it are unresolved.
	Source    string
	DeclRange hcl.Range

	broken bool // its block has errors: already reported
	// origin is Value with the marks of where its parts came from
	// (origin.go), as expressions see it; cty.NilVal when it has none.
	origin      cty.Value
	hasDefault  bool
	defaultVal  cty.Value
	validations []*variableValidation
}

type variableValidation struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

// Image is the one image block of a recipe.
type Image struct {
	Name         string
	Title        string
	Version      string
	Architecture string
	// BuildMarker is the path in the image where the build writes its
	// marker (the manifest without the artifact's own hash).
	BuildMarker string
	Base        Base
	Layers      []*Layer
	Kernel      Kernel
	Netdata     *Netdata
	Bundles     []*Bundle
	Network     *Network
	Artifact    Artifact
	MAAS        *MAAS
	Validation  Validation
	// Waivers are the deployability checks the recipe waives.
	Waivers   []Waiver
	DeclRange hcl.Range

	// AptProxy is the HTTP proxy (or apt-cacher-ng) the guest's apt goes
	// through during the build's packages steps, never written into the
	// image; "" when none.
	AptProxy string
}

// Waiver waives a named deployability check (imagectl check) with a reason
// that lands in the manifest.
type Waiver struct {
	Check  string
	Reason string
}

// Base is the cloud image a build starts from.
type Base struct {
	// Source is the URL or the path as written in the recipe.
	Source string
	// URL is true when Source is an http(s) URL; otherwise Path is the
	// absolute path of the local image.
	URL  bool
	Path string
	// Checksum is "sha256:<64 lowercase hex>".
	Checksum string
	// Format is the disk format: qcow2 or raw.
	Format string
	// Size is the size the disk is grown to, in bytes (0: keep the base's
	// size); SizeText is the size as written.
	Size     int64
	SizeText string
}

// Layer is one package layer, inline or from a layer file.
type Layer struct {
	Name        string
	Description string
	Enabled     bool
	// File is the layer file relative to the recipe directory, or "" for an
	// inline layer; FileDigest is the sha256 of its bytes.
	File             string
	FileDigest       string
	Packages         []string
	OptionalPackages []string
	// NoRecommends installs the packages without their Recommends
	// (install_recommends = false on the layer block).
	NoRecommends bool
	Repositories []*AptRepository
	Files        []*File
	Run          []string
	Services     Services
	DeclRange    hcl.Range
}

// AptRepository is an apt source with the key that signs it.
type AptRepository struct {
	Name       string
	URI        string
	Suite      string
	Components []string
	Enabled    bool
	Key        Key
}

// Key is an apt signing key, from a URL (fetched at build time) or from a
// file (read now).
type Key struct {
	URL string
	// Display is the file as written in the recipe; Content its bytes.
	Display string
	Content []byte
}

// File is a file written into the image.
type File struct {
	Path  string
	Mode  fs.FileMode
	Owner string
	// Origin says where the content came from: "content", "source <path>"
	// or "template <path>".
	Origin  string
	Content []byte
}

// Services lists systemd units to enable and disable.
type Services struct {
	Enable  []string
	Disable []string
}

// Kernel holds the kernel command-line arguments baked into the image.
type Kernel struct {
	Args []string
}

// Netdata configures the Netdata agent baked into the image.
type Netdata struct {
	Enabled     bool
	Bind        string
	RetentionMB int
	UpdateEvery int
	Collectors  []string
}

// Bundle is a directory or a tarball staged into the image.
type Bundle struct {
	Name string
	// Source is the path as written; Path the absolute path.
	Source      string
	Path        string
	Archive     bool
	Destination string
	// Entrypoint is the bundle's executable, relative to its root (the
	// site bootstrap runs it on the host).
	Entrypoint string
	// Checksum, when set, is the expected "sha256:<hex>" of the tarball, or
	// of the bundle's listing for a directory (see listingDigest).
	Checksum string
	// Digest is the bundle's actual digest, Entries what it holds.
	Digest  string
	Entries []BundleEntry
	// Unresolved, in a dry run's recipe only (Options.DryRun), says why
	// the bundle could not be read: its source needs a variable without a
	// value. Source is then the expression as written; Path, Digest and
	// Entries are empty.
	Unresolved string
}

// Network configures the bounded systemd-networkd-wait-online.
type Network struct {
	WaitOnlineTimeout time.Duration
	WaitOnlineAny     bool
}

// Artifact says where and how the build writes its outputs.
type Artifact struct {
	Directory        string
	CompressionLevel int
	SignKey          string
}

// MAAS names the boot resource the image becomes in MAAS.
type MAAS struct {
	Name      string
	Title     string
	Filetype  string
	BaseImage string
	Site      string
}

// Validation lists on-host checks beyond those derived from the recipe.
type Validation struct {
	// Script is where the validation script is installed in the image.
	Script         string
	ServicesActive []string
	FilesExist     []string
	Commands       []manifest.Check
	// DefaultProfile and DefaultStage are what the script checks without
	// --profile and --stage (manifest.Profiles, manifest.Stages).
	DefaultProfile string
	DefaultStage   string
	// CollectorWait bounds the wait for the Netdata collectors' charts.
	CollectorWait time.Duration
	// GPU is the gpu block; Profiles the profile blocks, in order. The
	// manifest's types (Check, GPU, Profile) are the recipe's: the build
	// copies them as they are.
	GPU      *manifest.GPU
	Profiles []manifest.Profile
}

// EnabledLayers returns the layers whose enabled attribute is true, in order.
func (img *Image) EnabledLayers() []*Layer {
	var out []*Layer
	for _, l := range img.Layers {
		if l.Enabled {
			out = append(out, l)
		}
	}
	return out
}
