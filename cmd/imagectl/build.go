package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/imagectl/builder"
	"github.com/gpuaas/imagectl/builder/plan"
	"github.com/gpuaas/imagectl/internal/cachedir"
	"github.com/gpuaas/imagectl/internal/textsafe"
	"github.com/gpuaas/imagectl/manifest"
	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing"
	"github.com/gpuaas/imagectl/store/storeopen"
)

type buildFlags struct {
	recipe    recipeFlags
	dryRun    bool
	version   string
	cacheDir  string
	workDir   string
	outputDir string
	accel     string
	packer    string
	noCache   bool
	noPkgs    bool
	refresh   bool
	maxAge    time.Duration
	signKey   string
	store     storeFlags
}

func newBuildCmd(env []string) *cobra.Command {
	cmd, f := command(env, runBuild, &cobra.Command{
		Use:   "build RECIPE",
		Short: "Build an image from a recipe (--dry-run prints the plan)",
		Long: `Build resolves a recipe's variables and layers into the ordered steps a
build executes. With --dry-run it prints that plan - base image and checksum,
each layer with its steps and digest, kernel args, Netdata, bundles with their
file hashes, artifact names and the MAAS target - and touches nothing. A
bundle whose source needs a variable without a value is shown unresolved,
with one warning naming what a build needs; a build refuses it.

Without --dry-run it runs the plan: verifies the base image's checksum
(downloading it once into the cache), customizes a raw working copy of it
in one libguestfs appliance (KVM when it works, TCG otherwise), and writes
<name>-<version>.tgz, .manifest.json and -validate.sh into the artifact
directory, all or none of them. Ctrl-C stops the build and cleans up.

The layer cache keeps the disk after each layer, keyed by the layer's
definition chained with everything before it: a rebuild restores the deepest
unchanged layer and applies only the rest (with nothing changed, it repacks
the cached result: the same tgz bytes). Layers that install packages or run
commands are reused up to --cache-max-age; --refresh rebuilds them all;
imagectl cache ls|prune shows and bounds it.

Packages steps fetch the .deb archives the guest's apt resolves on the host,
in parallel, into the package cache (packages/ in the cache directory, by
the signed index's sha256; through $http_proxy, $https_proxy, $no_proxy),
and hand them to the guest's apt; what the host cannot fetch the guest
downloads itself, said in the log. --no-package-cache leaves every download
to the guest.

With --sign-key (or the recipe's artifact sign_key) it signs the tgz and the
manifest as imagectl sign does. The key is decrypted (password from
$COSIGN_PASSWORD) before the build starts; the outputs are signed before they
are published and appear with their signatures, or not at all.

With --store (or $IMAGECTL_STORE) it publishes the outputs into that image
store, a directory (as <image>/<version>/) or an OCI registry
(oci://REGISTRY/PREFIX: PREFIX/<image>:<version>, its OCI manifest signed in
cosign's format with the build's key), immutable; without a version from the recipe or
--version, the version is the UTC date and the store's next sequence number
for the day (20261122.1). The manifest's lineage.parent_version is the
store's latest version of the image.`,
		Example: `  imagectl build recipes/h200.hcl --dry-run
  imagectl build recipes/h200.hcl --dry-run --output json > plan.json
  imagectl build recipes/h200.hcl --dry-run -var version=1.4.0 -var-file site.hcl`,
		Args: cobra.ExactArgs(1),
	})
	f.recipe.register(cmd)
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "print the plan and touch nothing")
	cmd.Flags().StringVar(&f.version, "version", "", "image version (overrides the recipe's)")
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", "", "where downloaded base images, the layer cache (layers/) and the package cache (packages/) are kept (default: $IMAGECTL_CACHE_DIR, else $XDG_CACHE_HOME/imagectl)")
	cmd.Flags().StringVar(&f.workDir, "work-dir", "", "where the temporary working disk goes, as large as the data in the image (default: $TMPDIR)")
	f.store.registerVersions(cmd, "publish the build into this image store: a directory or "+storeopen.Scheme+"REGISTRY/PREFIX (default: $IMAGECTL_STORE; with neither, no store)")
	cmd.Flags().StringVar(&f.outputDir, "output-dir", "", "write artifacts here instead of the recipe's artifact directory")
	cmd.Flags().StringVar(&f.signKey, "sign-key", "", "sign with this cosign private key (overrides the recipe's sign_key; password from $COSIGN_PASSWORD)")
	cmd.Flags().StringVar(&f.accel, "accel", "auto", "appliance accelerator: auto (KVM when it works, else TCG), kvm or tcg")
	cmd.Flags().BoolVar(&f.noCache, "no-cache", false, "build every layer without the layer cache (neither reading nor writing it)")
	cmd.Flags().BoolVar(&f.noPkgs, "no-package-cache", false, "let the appliance's apt download every package itself, without fetching them on the host into the package cache (packages/)")
	cmd.Flags().BoolVar(&f.refresh, "refresh", false, "rebuild every layer and replace what the layer cache holds for them")
	cmd.Flags().DurationVar(&f.maxAge, "cache-max-age", builder.DefaultCacheMaxAge, "reuse cached layers that install packages or run commands only up to this age")
	cmd.Flags().StringVar(&f.packer, "packer", "auto", "how the root filesystem is read for the tgz: host (from the disk image, fast), appliance (tar-out), or auto (host when supported, else appliance)")
	return cmd
}

func runBuild(ctx context.Context, f *buildFlags, args []string, s streams, env []string) error {
	f.recipe.dryRun = f.dryRun
	r, err := f.recipe.loadAt(ctx, s, args[0], f.version, env)
	if err != nil {
		return err
	}
	// The key is decrypted before anything starts, and a
	// registry store signs what it publishes with it.
	var signer *signing.Signer
	if key := signing.BuildKeyPath(f.signKey, r.Image.Artifact.SignKey, r.Path); key != "" && !f.dryRun {
		if signer, err = loadSigner(key, env); err != nil {
			return err
		}
	}
	sb, err := startStoreBuild(ctx, &f.store, env, signer, release.BuildOptions{Image: r.Image.Name,
		Version: cmp.Or(f.version, r.Image.Version), DryRun: f.dryRun, OutputDir: f.outputDir})
	if err != nil {
		return err
	}
	defer sb.Close()
	p, err := plan.New(r, plan.Options{Version: sb.Version(f.version), SignKey: f.signKey})
	if err != nil {
		return err
	}
	if from := sb.VersionFrom(); from != "" {
		p.VersionFrom = from
	}
	if f.dryRun {
		if f.recipe.output.json() {
			return p.WriteJSON(s.out)
		}
		return p.WriteText(s.out)
	}
	cacheDir := f.cacheDir
	if cacheDir == "" {
		if cacheDir, err = defaultCacheDir(env); err != nil {
			return err
		}
	}
	events := progress(s.err, false, isTerminal(s.err, env))
	if f.recipe.output.json() {
		events = progress(s.out, true, false)
	}
	res, err := builder.Build(ctx, p, builder.BuildOptions{
		Executor:      newExecutor(),
		CacheDir:      cacheDir,
		WorkDir:       f.workDir,
		OutputDir:     sb.OutputDir(f.outputDir),
		ParentVersion: sb.Parent(),
		Accel:         f.accel,
		Packer:        f.packer,
		Events:        events,
		LayerCache:    layerCacheDir(cacheDir, f.noCache),
		PackageCache:  packageCacheDir(cacheDir, f.noPkgs),
		Env:           env,
		Refresh:       f.refresh,
		CacheMaxAge:   f.maxAge,
		Sign:          buildSigner(ctx, signer),
	})
	if err != nil {
		return err
	}
	sigs, ref, err := publishBuild(ctx, sb, res, s.err)
	if err != nil {
		return err
	}
	return buildResult(s.out, f.recipe.output.json(), res, sigs, ref)
}

// buildResult prints what a build wrote: with --output json one object
// on a line, like the events before it.
func buildResult(w io.Writer, jsonOut bool, res *builder.Result, sigs []string, ref string) error {
	f := res.Files
	if jsonOut {
		result := map[string]any{"type": "result", "tarball": f.Tarball,
			"manifest": f.Manifest, "validation_script": f.ValidationScript, "sbom": f.SBOM, "cyclonedx": f.CycloneDX, "provenance": f.Provenance,
			"sha256": res.Manifest.Artifact.SHA256,
			"size":   res.Manifest.Artifact.Size, "signatures": sigs}
		if ref != "" {
			result["ref"] = ref
		}
		return json.NewEncoder(w).Encode(result)
	}
	tgz := f.Tarball
	if tgz == "" { // pushed to a registry store, not kept here
		tgz = ref
	}
	fmt.Fprintf(w, "%s\n  sha256 %s, %d bytes\n%s\n%s\n%s\n%s\n%s\n", tgz, res.Manifest.Artifact.SHA256,
		res.Manifest.Artifact.Size, f.Manifest, f.ValidationScript, f.SBOM, f.CycloneDX, f.Provenance)
	for _, sig := range sigs {
		fmt.Fprintln(w, sig)
	}
	writeTimings(w, res.Manifest)
	return nil
}

// writeTimings prints where a build's time went, in seconds: a row per
// layer (a cached one says so) and one for the whole build, then the
// package bytes fetched and served by the package cache.
func writeTimings(w io.Writer, m *manifest.Manifest) {
	t := m.Build.Timings
	if t == nil {
		return
	}
	fmt.Fprintf(w, "where the time went (seconds, %.1f in all):\n", m.Build.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  \tbase\tlaunch\tresolve\tdownload\tinstall\tcommands\tsnapshot\tpack\tsbom")
	secs := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for _, l := range m.Layers {
		switch {
		case l.Timings != nil:
			lt := l.Timings
			textsafe.Fprintf(tw, "  layer %s\t-\t-\t%s\t%s\t%s\t%s\t%s\t-\t-\n", l.Name, secs(lt.Resolve), secs(lt.Download), secs(lt.Install), secs(lt.Commands), secs(lt.Snapshot))
		case l.CachedAt != nil:
			textsafe.Fprintf(tw, "  layer %s\tcached\n", l.Name)
		}
	}
	fmt.Fprintf(tw, "  total\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", secs(t.Base), secs(t.Launch), secs(t.Resolve), secs(t.Download), secs(t.Install),
		secs(t.Commands), secs(t.Snapshot), secs(t.Pack), secs(t.SBOM))
	tw.Flush()
	if t.DownloadBytes > 0 || t.CachedBytes > 0 {
		fmt.Fprintf(w, "packages: %s downloaded, %s from the package cache\n", humanBytes(t.DownloadBytes), humanBytes(t.CachedBytes))
	}
}

// layerCacheDir is where the layer cache lives: beside the base images.
func layerCacheDir(cacheDir string, disabled bool) string {
	if disabled {
		return ""
	}
	return filepath.Join(cacheDir, cachedir.Layers)
}

// packageCacheDir is the package cache of the cache directory, "" when
// --no-package-cache turned it off.
func packageCacheDir(cacheDir string, disabled bool) string {
	if disabled {
		return ""
	}
	return filepath.Join(cacheDir, cachedir.Packages)
}

// defaultCacheDir is the cache directory without --cache-dir.
func defaultCacheDir(env []string) (string, error) {
	dir, err := cachedir.Default(env)
	if err != nil {
		return "", fmt.Errorf("%w (pass --cache-dir)", err)
	}
	return dir, nil
}
