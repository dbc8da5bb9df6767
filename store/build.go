package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuaas/imagectl/manifest"
)

// BuildOptions say what is about to be built into a store.
type BuildOptions struct {
	// Image is the image's name.
	Image string
	// Version is the version to build; "" has the store generate one
	// (NextVersion).
	Version string
	// DryRun plans only: nothing is created, and a version already in the
	// store is not refused.
	DryRun bool
	// Stage has the build write its outputs into a staging directory
	// (Build.OutputDir): inside a directory store, so that publishing them
	// renames rather than copies them; a temporary directory for a remote
	// store, which Publish pushes from.
	Stage bool
	// Now is the clock of a generated version; time.Now when zero.
	Now time.Time
}

// Build is a build on its way into the store: the version it builds, the
// version it follows, and where it writes its outputs.
type Build struct {
	// Version is the version being built; Generated is set when the store
	// chose it.
	Version   string
	Generated bool
	// Parent is the image's latest version in the store before this one,
	// "" for none.
	Parent string
	// OutputDir is the staging directory the build writes into, "" when
	// it writes elsewhere (and Publish copies).
	OutputDir string

	store  Versions
	move   bool
	remove func()
}

// StartBuild prepares a build of an image into the store: it generates the
// version when none is given, refuses a version already published (versions
// are immutable: better said before an hour of building than after), finds
// the parent version and, with opts.Stage, makes the staging directory.
// Close the build when done with it.
func StartBuild(ctx context.Context, d Versions, opts BuildOptions) (*Build, error) {
	if err := CheckKey("image", opts.Image); err != nil {
		return nil, fmt.Errorf("starting a build into the store %s: %w", d.Location(), err)
	}
	if opts.Version != "" {
		if err := CheckKey("version", opts.Version); err != nil {
			return nil, fmt.Errorf("starting a build of %s into the store %s: %w", opts.Image, d.Location(), err)
		}
	}
	b := &Build{Version: opts.Version, store: d}
	if b.Version == "" {
		now := opts.Now
		if now.IsZero() {
			now = time.Now()
		}
		v, err := d.NextVersion(ctx, opts.Image, now)
		if err != nil {
			return nil, err
		}
		b.Version, b.Generated = v, true
	}
	latest, err := d.Latest(ctx, opts.Image)
	if err != nil {
		return nil, err
	}
	if !opts.DryRun {
		if v, err := d.Version(ctx, opts.Image, b.Version); err == nil {
			return nil, fmt.Errorf("%s %s is already in the store %s (published %s): versions are immutable; give another with --version, or none for a generated one",
				opts.Image, b.Version, d.Location(), v.Published.Format(time.RFC3339))
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	if latest != nil && latest.Version != b.Version {
		b.Parent = latest.Version
	}
	if !opts.DryRun && opts.Stage {
		if dir, ok := versionsOf(d).(*Dir); ok {
			b.OutputDir, b.remove, err = dir.Staging()
			b.move = true
		} else {
			b.OutputDir, err = os.MkdirTemp("", "imagectl-build-")
			b.remove = func() { os.RemoveAll(b.OutputDir) }
		}
		if err != nil {
			return nil, fmt.Errorf("staging a build of %s: %w", opts.Image, err)
		}
	}
	return b, nil
}

// Publish publishes the build's outputs (moved from the staging directory,
// or copied from where the build wrote them).
func (b *Build) Publish(ctx context.Context, a manifest.Files) (*Version, error) {
	return b.store.Publish(ctx, a, PublishOptions{Move: b.move})
}

// Close removes the staging directory and whatever is left in it.
func (b *Build) Close() {
	if b != nil && b.remove != nil {
		b.remove()
	}
}

// Path is where a file of the artifact, named as published, is in the
// version's directory.
func (v *Version) Path(file string) string {
	return filepath.Join(v.Dir, filepath.Base(file))
}
