package release

import (
	"context"
	"time"

	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/store"
)

// BuildOptions say what is about to be built into a store.
type BuildOptions struct {
	// Image is the image's name.
	Image string
	// Version is the version asked for (--version, else the recipe's);
	// "" has the store generate the next one (date and sequence).
	Version string
	// DryRun plans only: nothing is created, and a version already in the
	// store is not refused.
	DryRun bool
	// OutputDir is where the build was asked to write (--output-dir); ""
	// has it write into a staging directory the store publishes from
	// (inside a directory store, so that publishing renames its files).
	OutputDir string
	// Now is the clock of a generated version; time.Now when zero.
	Now time.Time
}

// Build is what happens between a build and a store: the version the
// build makes, the version it follows, where it writes, and publishing
// what it wrote. A nil *Build is a build without a store: its methods keep
// the build's own choices and Publish does nothing.
type Build struct {
	b  *store.Build
	st store.Versions
}

// StartBuild prepares a build of an image into st (see store.StartBuild):
// with a nil st, there is no store and it returns nil. Close the build
// when done with it.
func StartBuild(ctx context.Context, st store.Versions, o BuildOptions) (*Build, error) {
	if st == nil {
		return nil, nil
	}
	b, err := store.StartBuild(ctx, st, store.BuildOptions{Image: o.Image, Version: o.Version, DryRun: o.DryRun,
		Stage: o.OutputDir == "", Now: o.Now})
	if err != nil {
		return nil, err
	}
	return &Build{b: b, st: st}, nil
}

// Close removes the staging directory and whatever is left in it.
func (b *Build) Close() {
	if b != nil {
		b.b.Close()
	}
}

// Version is the version to build: the store's generated one, else
// asked (the version the build was asked for).
func (b *Build) Version(asked string) string {
	if b == nil || !b.b.Generated {
		return asked
	}
	return b.b.Version
}

// VersionFrom says where a store-generated version came from, for the
// plan ("generated"); "" when the store chose none.
func (b *Build) VersionFrom() string {
	if b == nil || !b.b.Generated {
		return ""
	}
	return "generated"
}

// OutputDir is where the build writes: the staging directory, else dir
// (--output-dir, or "" for the recipe's artifact directory).
func (b *Build) OutputDir(dir string) string {
	if b == nil || b.b.OutputDir == "" {
		return dir
	}
	return b.b.OutputDir
}

// Parent is the image's latest version in the store before this one, ""
// for none (or no store).
func (b *Build) Parent() string {
	if b == nil {
		return ""
	}
	return b.b.Parent
}

// Published is a build's outputs once in the store.
type Published struct {
	// Version is the stored version.
	Version *store.Version
	// Files are the build's files where the store keeps them: Tarball is
	// "" when the tgz stays in a registry (Version.Ref names it).
	Files manifest.Files
	// Signatures are the signature files, where the store keeps them.
	Signatures []string
}

// Publish puts the build's outputs (files, and the signature files sigs)
// into the store, and says where they are now. Without a store it returns
// them as they are.
func (b *Build) Publish(ctx context.Context, files manifest.Files, sigs []string) (*Published, error) {
	if b == nil {
		return &Published{Files: files, Signatures: sigs}, nil
	}
	v, err := b.b.Publish(ctx, files)
	if err != nil {
		return nil, err
	}
	out := &Published{Version: v, Files: files.Map(v.Path), Signatures: make([]string, len(sigs))}
	out.Files.Tarball, out.Files.Manifest, out.Files.ValidationScript = v.Tarball, v.Manifest, v.ValidationScript
	for i, s := range sigs {
		out.Signatures[i] = v.Path(s)
	}
	return out, nil
}

// Location names the store in messages.
func (b *Build) Location() string {
	if b == nil {
		return ""
	}
	return b.st.Location()
}
