// Package steps owns the closed set of customization steps a build applies
// to an image: plain data, with no knowledge of how they are executed. The
// layer compiler (package compile) and the planner (package plan) produce
// them; executors (the libguestfs one, and the dry-run printer) consume the
// same values, so a plan and a build cannot disagree. For the same reason
// it says what an apt repository's key becomes (Keyring), which the build
// and the first-boot script both write.
//
// Every step serializes to JSON with a "kind" field; the JSON of a layer's
// steps, with file contents replaced by their digests, is what the layer's
// digest is computed from.
package steps

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/fsmode"
)

// Step is one customization step.
type Step interface {
	// Kind names the step type in JSON and in plans.
	Kind() string
	// Summary is a one-line description for plans and progress.
	Summary() string
}

// AptRepository adds an apt source (deb822 .sources file) and its signing
// key. A key given by URL is fetched at build time and its fingerprint goes
// into the manifest; a key file's digest is known now.
type AptRepository struct {
	Name        string   `json:"name"`
	URI         string   `json:"uri"`
	Suite       string   `json:"suite"`
	Components  []string `json:"components,omitempty"`
	KeyURL      string   `json:"key_url,omitempty"`
	KeyFile     string   `json:"key_file,omitempty"`
	KeySHA256   string   `json:"key_sha256,omitempty"`
	KeyContent  []byte   `json:"-"`
	KeyringPath string   `json:"keyring_path"`
	SourcesPath string   `json:"sources_path"`
	// Sources is the deb822 file written to SourcesPath.
	Sources string `json:"sources"`
}

// Packages installs packages with apt-get. Required packages fail the build
// with apt's own error; optional ones are installed one by one where the
// archive has them and recorded as missing where it does not.
type Packages struct {
	Packages []string `json:"packages"`
	Optional bool     `json:"optional"`
	// NoRecommends leaves out the packages' Recommends.
	NoRecommends bool `json:"no_recommends,omitempty"`
}

// WriteFile writes a file into the image.
type WriteFile struct {
	Path    string      `json:"path"`
	Mode    fs.FileMode `json:"-"`
	Owner   string      `json:"owner"`
	Origin  string      `json:"origin,omitempty"`
	SHA256  string      `json:"sha256"`
	Size    int         `json:"size"`
	Content []byte      `json:"-"`
}

// Run runs a shell command inside the image (chroot, never booted).
type Run struct {
	Command string `json:"command"`
}

// Services enables and disables systemd units (systemctl enable/disable in
// the image, which only creates or removes symlinks).
type Services struct {
	Enable  []string `json:"enable,omitempty"`
	Disable []string `json:"disable,omitempty"`
}

// KernelArgs appends arguments to GRUB_CMDLINE_LINUX in /etc/default/grub,
// where curtin never writes (it rewrites GRUB_CMDLINE_LINUX_DEFAULT at
// deploy). The drop-in with the same arguments is a WriteFile step beside it.
type KernelArgs struct {
	Args []string `json:"args"`
}

// BundleEntry is one entry of a staged bundle, as reading the recipe's
// bundle lists it.
type BundleEntry struct {
	// Path is relative to the bundle's root, with forward slashes.
	Path string `json:"path"`
	// Type is "file", "dir" or "symlink".
	Type   string      `json:"type"`
	Mode   fs.FileMode `json:"-"`
	Size   int64       `json:"size,omitempty"`
	SHA256 string      `json:"sha256,omitempty"`
	Target string      `json:"target,omitempty"`
}

// StageBundle copies a bundle (directory or tarball) under Destination,
// owned by root, with its modes. The builder re-hashes what it copies and
// fails when it differs from Entries.
//
// In a dry run's plan a bundle may be Unresolved (Reason says why: its
// source needs a variable without a value): it has no digest and no
// entries, and no build runs it.
type StageBundle struct {
	Name        string        `json:"name"`
	Source      string        `json:"source"`
	SourcePath  string        `json:"-"`
	Archive     bool          `json:"archive"`
	Destination string        `json:"destination"`
	Entrypoint  string        `json:"entrypoint,omitempty"`
	Digest      string        `json:"digest,omitempty"`
	Entries     []BundleEntry `json:"entries"`
	Unresolved  bool          `json:"unresolved,omitempty"`
	Reason      string        `json:"reason,omitempty"`
}

// InstallValidationScript writes the on-host validation script generated
// from the recipe and the build's manifest.
type InstallValidationScript struct {
	Path string `json:"path"`
}

// WriteBuildMarker writes the build marker: the manifest without the
// artifact's own hash, which cannot be known inside the artifact.
type WriteBuildMarker struct {
	Path string `json:"path"`
}

// Cleanup removes what a deployable image must not carry.
type Cleanup struct {
	Actions []string `json:"actions"`
}

// The clean-up actions, in the order the builder runs them.
const (
	CleanAptCache      = "apt-cache"          // apt-get clean, /var/lib/apt/lists
	CleanMachineID     = "machine-id"         // empty /etc/machine-id, remove the dbus copy
	CleanCloudInit     = "cloud-init-state"   // cloud-init clean --logs --seed
	CleanSSHHostKeys   = "ssh-host-keys"      // /etc/ssh/ssh_host_*
	CleanLogs          = "logs"               // truncate /var/log, drop journal files
	CleanPolicyRCD     = "policy-rc.d"        // curtin leaves it and services never start
	CleanCloudInitNet  = "stale-netplan"      // /etc/netplan/50-cloud-init.yaml
	CleanInstallerCfgs = "installer-cloudcfg" // 99-installer.cfg, subiquity-disable-cloudinit-networking.cfg
	CleanPerBuild      = "per-build-state"    // ldconfig's aux-cache, dpkg's and debconf's *-old, systemd's random seed
)

// DefaultCleanup is the clean-up every image gets.
var DefaultCleanup = []string{CleanAptCache, CleanMachineID, CleanCloudInit, CleanSSHHostKeys, CleanLogs, CleanPolicyRCD, CleanCloudInitNet, CleanInstallerCfgs, CleanPerBuild}

func (AptRepository) Kind() string           { return "apt-repository" }
func (Packages) Kind() string                { return "packages" }
func (WriteFile) Kind() string               { return "file" }
func (Run) Kind() string                     { return "run" }
func (Services) Kind() string                { return "services" }
func (KernelArgs) Kind() string              { return "kernel-args" }
func (StageBundle) Kind() string             { return "bundle" }
func (InstallValidationScript) Kind() string { return "validation-script" }
func (WriteBuildMarker) Kind() string        { return "build-marker" }
func (Cleanup) Kind() string                 { return "cleanup" }

func (s AptRepository) Summary() string {
	key := s.KeyURL
	if key == "" {
		key = s.KeyFile
	}
	return fmt.Sprintf("add apt repository %s: %s %s %s (key %s)", s.Name, s.URI, s.Suite, strings.Join(s.Components, " "), key)
}

func (s Packages) Summary() string {
	how := "install: "
	if s.Optional {
		how = "install if available: "
	}
	if s.NoRecommends {
		how = strings.TrimSuffix(how, ": ") + " (no recommends): "
	}
	return how + strings.Join(s.Packages, " ")
}

func (s WriteFile) Summary() string {
	return fmt.Sprintf("write %s (%s %s, %d bytes, sha256:%s)", s.Path, ModeString(s.Mode), s.Owner, s.Size, short(s.SHA256))
}

func (s Run) Summary() string { return "run: " + s.Command }

func (s Services) Summary() string {
	var parts []string
	if len(s.Enable) > 0 {
		parts = append(parts, "enable "+strings.Join(s.Enable, " "))
	}
	if len(s.Disable) > 0 {
		parts = append(parts, "disable "+strings.Join(s.Disable, " "))
	}
	return "services: " + strings.Join(parts, "; ")
}

func (s KernelArgs) Summary() string {
	return "kernel args in GRUB_CMDLINE_LINUX of /etc/default/grub: " + strings.Join(s.Args, " ")
}

func (s StageBundle) Summary() string {
	files := 0
	var size int64
	for _, e := range s.Entries {
		if e.Type == "file" {
			files++
			size += e.Size
		}
	}
	if s.Unresolved {
		return fmt.Sprintf("stage bundle %s from %s to %s (unresolved: %s)", s.Name, s.Source, s.Destination, s.Reason)
	}
	return fmt.Sprintf("stage bundle %s from %s to %s (%d files, %d bytes, %s)", s.Name, s.Source, s.Destination, files, size, s.Digest)
}

func (s InstallValidationScript) Summary() string {
	return "install the validation script at " + s.Path
}

func (s WriteBuildMarker) Summary() string { return "write the build marker " + s.Path }

func (s Cleanup) Summary() string { return "clean up: " + strings.Join(s.Actions, ", ") }

func short(hex string) string {
	if len(hex) > 12 {
		return hex[:12]
	}
	return hex
}

// ModeString prints a mode as four octal digits, "0644".
func ModeString(m fs.FileMode) string { return fsmode.String(m) }

// MarshalJSON-friendly forms: modes are printed as octal strings.
func (s WriteFile) MarshalJSON() ([]byte, error) {
	type alias WriteFile
	return json.Marshal(struct {
		Kind string `json:"kind"`
		alias
		Mode string `json:"mode"`
	}{s.Kind(), alias(s), ModeString(s.Mode)})
}

func (e BundleEntry) MarshalJSON() ([]byte, error) {
	type alias BundleEntry
	return json.Marshal(struct {
		alias
		Mode string `json:"mode"`
	}{alias(e), ModeString(e.Mode)})
}

// Encode returns a step as JSON with its kind first.
func Encode(s Step) (json.RawMessage, error) {
	if wf, ok := s.(WriteFile); ok {
		return wf.MarshalJSON()
	}
	body, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	kind, _ := json.Marshal(s.Kind())
	if string(body) == "{}" {
		return json.RawMessage(`{"kind":` + string(kind) + `}`), nil
	}
	return json.RawMessage(`{"kind":` + string(kind) + `,` + string(body[1:])), nil
}

// Digest is the digest of a list of steps: sha256 over their JSON, in which
// file contents appear as their sha256. It is what a layer's digest, its
// cache key and the manifest's lineage are built from.
func Digest(list []Step) (string, error) {
	h := digest.NewWriter(nil)
	for _, s := range list {
		b, err := Encode(s)
		if err != nil {
			return "", fmt.Errorf("encoding %s step: %w", s.Kind(), err)
		}
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return h.Digest().String(), nil
}
